#include "aggregators/kernel_stats.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>

#include "aggregators/catalog.h"
#include "aggregators/json_writer.h"
#include "stream/diagnostics.h"

namespace liveprof {

namespace {

// Kernel NameIds below this index a dense vector; larger ones (a foreign
// producer's ids) go to a hash map so a bogus id cannot allocate gigabytes.
constexpr NameId kMaxDenseNameId = NameId{1} << 22;

// §7, from xprof's kernel_stats_utils.cc.
constexpr std::string_view kTensorCorePatterns[] = {
    "16816",
    "c1688",
    "conv1x1",
    "conv2d_c1_k1",
    "dgrad_1x1_stride_2x2",
    "direct_group",
    "first_layer_wgrad_kernel",
    "h1688",
    "h884",
    "hmma",
    "i16832",
    "i8816",
    "s884",
    "s1688",
    "xmma_gemm",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_sparse_gemm",
    "xmma_warp_specialized_implicit_gemm",
};

constexpr std::string_view kEligibleSuffixes[] = {
    "Conv2D",
    "Conv2DBackpropFilter",
    "Conv2DBackpropInput",
    "Conv3D",
    "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropFilter",
    "DepthwiseConv2dNativeBackpropInput",
    "/MatMul",
    "FusedMatMul",
    "/CudnnRNN",
    "XlaDot",
    "XlaDotV2",
};

constexpr std::string_view kEligibleInfixes[] = {
    "BatchMatMul",
    "CudnnRNNV",
    "CudnnRNNForward",
    "CudnnRNNBackprop",
};

// absl::SimpleAtoi-like: surrounding ASCII whitespace allowed, optional '+',
// decimal digits, must fit in uint32.
std::string_view TrimAscii(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

bool ParseU32(std::string_view s, uint32_t* out) {
  s = TrimAscii(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() < '0' || s.front() > '9') return false;
  uint32_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return false;
  *out = v;
  return true;
}

bool ParseFiniteDouble(std::string_view s, double* out) {
  s = TrimAscii(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseDims(std::string_view s, std::array<uint32_t, 3>* out) {
  std::array<uint32_t, 3> v{};
  for (int i = 0; i < 3; ++i) {
    const size_t comma = s.find(',');
    if ((i < 2) != (comma != std::string_view::npos)) return false;  // exactly 3 parts.
    if (!ParseU32(s.substr(0, comma), &v[i])) return false;
    if (i < 2) s.remove_prefix(comma + 1);
  }
  *out = v;
  return true;
}

std::string DimsText(const std::array<uint32_t, 3>& d) {
  std::string s = std::to_string(d[0]);
  s += ',';
  s += std::to_string(d[1]);
  s += ',';
  s += std::to_string(d[2]);
  return s;
}

// The row key of §7, in xprof's comparison order.
struct RowKey {
  std::string_view kernel;
  const KernelDetails* details;
  bool uses_tc;
  bool eligible;
  std::string_view op;

  auto Tuple() const {
    return std::tie(kernel, details->grid[0], details->grid[1], details->grid[2],
                    details->block[0], details->block[1], details->block[2],
                    details->registers_per_thread, details->static_shared_bytes,
                    details->dynamic_shared_bytes, uses_tc, eligible, op);
  }
  bool operator<(const RowKey& o) const { return Tuple() < o.Tuple(); }
  bool operator==(const RowKey& o) const { return Tuple() == o.Tuple(); }
};

// Estimated `p` quantile (0 < p <= 1) of a full histogram with `n` samples.
double EstimatePercentile(const std::vector<uint64_t>& bins, uint64_t n, double p,
                          uint64_t min_ns, uint64_t max_ns) {
  if (n == 0) return 0;
  uint64_t rank = static_cast<uint64_t>(std::ceil(p * static_cast<double>(n)));
  rank = std::clamp<uint64_t>(rank, 1, n);
  uint64_t before = 0;
  for (uint32_t b = 0; b < bins.size(); ++b) {
    if (bins[b] == 0) continue;
    if (before + bins[b] >= rank) {
      const double lo = static_cast<double>(DurationBinLowerNs(b));
      const double hi = static_cast<double>(DurationBinUpperNs(b));
      const double frac = (static_cast<double>(rank - before) - 0.5) / static_cast<double>(bins[b]);
      const double v = lo + (hi - lo) * frac;
      return std::clamp(v, static_cast<double>(min_ns), static_cast<double>(max_ns));
    }
    before += bins[b];
  }
  return static_cast<double>(max_ns);
}

}  // namespace

KernelDetails ParseKernelDetails(std::string_view details) {
  KernelDetails d;
  while (!details.empty()) {
    const size_t sep = details.find_first_of(" \n");
    const std::string_view token = details.substr(0, sep);
    details.remove_prefix(sep == std::string_view::npos ? details.size() : sep + 1);
    const size_t colon = token.find(':');
    if (colon == std::string_view::npos || token.find(':', colon + 1) != std::string_view::npos) {
      continue;  // not exactly `key:value`.
    }
    const std::string_view key = token.substr(0, colon);
    const std::string_view value = token.substr(colon + 1);
    uint32_t v = 0;
    double pct = 0;
    if (key == "regs") {
      if (ParseU32(value, &v)) d.registers_per_thread = v;
    } else if (key == "static_shared") {
      if (ParseU32(value, &v)) d.static_shared_bytes = v;
    } else if (key == "dynamic_shared") {
      if (ParseU32(value, &v)) d.dynamic_shared_bytes = v;
    } else if (key == "block") {
      ParseDims(value, &d.block);
    } else if (key == "grid") {
      ParseDims(value, &d.grid);
    } else if (key == "occ_pct") {
      if (ParseFiniteDouble(value, &pct)) d.occupancy_pct = pct;
    }
  }
  return d;
}

bool KernelUsesTensorCore(std::string_view kernel_name) {
  for (std::string_view p : kTensorCorePatterns) {
    if (kernel_name.find(p) != std::string_view::npos) return true;
  }
  return false;
}

bool IsOpTensorCoreEligible(std::string_view op_name) {
  for (std::string_view s : kEligibleSuffixes) {
    if (op_name.ends_with(s)) return true;
  }
  for (std::string_view s : kEligibleInfixes) {
    if (op_name.find(s) != std::string_view::npos) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Snapshot value.

const KernelOpRollup* KernelStatsSnapshot::Op(std::string_view op_name) const {
  for (const KernelOpRollup& op : ops) {
    if (op.op_name == op_name) return &op;
  }
  return nullptr;
}

void KernelStatsSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.KV("window_ns", window_ns);
  w.KV("kernel_count", kernel_count);
  w.KV("kernel_ns", kernel_ns);
  w.KV("distinct_rows", distinct_rows);
  w.Key("rows");
  w.BeginArray();
  for (const KernelStatsRow& r : rows) {
    w.BeginObject();
    w.KV("rank", r.rank);
    w.KV("kernel_name", r.kernel_name);
    w.KV("registers_per_thread", r.details.registers_per_thread);
    w.KV("shared_mem_bytes", r.shared_mem_bytes());
    w.KV("block", DimsText(r.details.block));
    w.KV("grid", DimsText(r.details.grid));
    w.KV("occupancy_pct", r.details.occupancy_pct);
    w.KV("op_tc_eligible", r.op_tc_eligible);
    w.KV("kernel_uses_tc", r.kernel_uses_tc);
    w.KV("op_name", r.op_name);
    w.KV("occurrences", r.occurrences);
    w.KV("total_us", r.total_us());
    w.KV("avg_us", r.avg_us());
    w.KV("min_us", r.min_us());
    w.KV("max_us", r.max_us());
    w.EndObject();
  }
  w.EndArray();
  w.Key("ops");
  w.BeginArray();
  for (const KernelOpRollup& op : ops) {
    w.BeginObject();
    w.KV("op_name", op.op_name);
    w.KV("occurrences", op.occurrences);
    w.KV("kernel_ns", op.kernel_ns);
    w.KV("tensor_core_ns", op.tensor_core_ns);
    w.KV("tensor_core_pct", op.tensor_core_pct());
    w.KV("op_tc_eligible", op.op_tc_eligible);
    w.EndObject();
  }
  w.EndArray();
  w.Key("histograms");
  w.BeginArray();
  for (const KernelDurationHistogram& h : histograms) {
    w.BeginObject();
    w.KV("kernel_name", h.kernel_name);
    w.KV("count", h.count);
    w.KV("min_ns", h.min_ns);
    w.KV("max_ns", h.max_ns);
    w.KV("p50_ns", h.p50_ns);
    w.KV("p90_ns", h.p90_ns);
    w.KV("p99_ns", h.p99_ns);
    w.Key("buckets");
    w.BeginArray();
    for (const KernelDurationHistogram::Bucket& b : h.buckets) {
      w.BeginObject();
      w.KV("lo_ns", b.lo_ns);
      w.KV("hi_ns", b.hi_ns);
      w.KV("count", b.count);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

std::string KernelStatsSnapshot::ToCsv() const {
  std::string out =
      "rank,kernel_name,registers_per_thread,shared_mem_bytes,block,grid,occupancy_pct,"
      "op_tc_eligible,kernel_uses_tc,op_name,occurrences,total_us,avg_us,min_us,max_us\n";
  for (const KernelStatsRow& r : rows) {
    out += std::to_string(r.rank);
    out += ',';
    AppendCsvField(&out, r.kernel_name);
    out += ',';
    out += std::to_string(r.details.registers_per_thread);
    out += ',';
    out += std::to_string(r.shared_mem_bytes());
    out += ',';
    AppendCsvField(&out, DimsText(r.details.block));
    out += ',';
    AppendCsvField(&out, DimsText(r.details.grid));
    out += ',';
    AppendCsvNumber(&out, r.details.occupancy_pct);
    out += r.op_tc_eligible ? ",true," : ",false,";
    out += r.kernel_uses_tc ? "true," : "false,";
    AppendCsvField(&out, r.op_name);
    out += ',';
    out += std::to_string(r.occurrences);
    out += ',';
    AppendCsvNumber(&out, r.total_us());
    out += ',';
    AppendCsvNumber(&out, r.avg_us());
    out += ',';
    AppendCsvNumber(&out, r.min_us());
    out += ',';
    AppendCsvNumber(&out, r.max_us());
    out += '\n';
  }
  return out;
}

// ---------------------------------------------------------------------------
// Buckets.

void KernelStats::RowStats::Combine(const RowStats& o) {
  count += o.count;
  total += o.total;
  min = std::min(min, o.min);
  max = std::max(max, o.max);
}

void KernelStats::Bucket::Reset(int64_t new_index) {
  index = new_index;
  rows.clear();
  hists.clear();
  pool.clear();
}

void KernelStats::Bucket::AddHistSlow(uint32_t slot, uint32_t bin, uint64_t n) {
  if (slot >= hists.size()) hists.resize(slot + 1);
  HistRef& h = hists[slot];
  // Grow to whole 8-bin groups, at least doubling, so the pool wastes at most
  // as much as it holds.
  const uint32_t group = bin & ~7u;
  uint32_t lo = h.len == 0 ? group : std::min<uint32_t>(h.lo, group);
  uint32_t hi = h.len == 0 ? group + 8 : std::max<uint32_t>(h.lo + h.len, group + 8);
  while (h.len != 0 && hi - lo < 2u * h.len) {
    if (bin < h.lo && lo >= 8) {
      lo -= 8;
    } else if (hi + 8 <= kDurationBinCount) {
      hi += 8;
    } else if (lo >= 8) {
      lo -= 8;
    } else {
      break;
    }
  }
  hi = std::min(hi, kDurationBinCount);
  const uint32_t offset = static_cast<uint32_t>(pool.size());
  pool.resize(pool.size() + (hi - lo), 0);
  for (uint32_t i = 0; i < h.len; ++i) pool[offset + (h.lo - lo) + i] = pool[h.offset + i];
  h.offset = offset;
  h.lo = static_cast<uint16_t>(lo);
  h.len = static_cast<uint16_t>(hi - lo);
  pool[h.offset + (bin - lo)] += n;
}

void KernelStats::Bucket::Combine(const Bucket& o) {
  if (rows.size() < o.rows.size()) rows.resize(o.rows.size());
  for (size_t t = 0; t < o.rows.size(); ++t) {
    if (o.rows[t].count != 0) rows[t].Combine(o.rows[t]);
  }
  for (uint32_t slot = 0; slot < o.hists.size(); ++slot) {
    const HistRef& h = o.hists[slot];
    for (uint32_t i = 0; i < h.len; ++i) {
      const uint64_t n = o.pool[h.offset + i];
      if (n != 0) AddHist(slot, h.lo + i, n);
    }
  }
}

// ---------------------------------------------------------------------------
// KernelStats.

KernelStats::KernelStats(const Catalog* catalog, Diagnostics* diagnostics, Options options)
    : catalog_(catalog), diagnostics_(diagnostics), options_(options) {
  if (options_.bucket_ns == 0) options_.bucket_ns = 1;
  if (options_.max_buckets == 0) options_.max_buckets = 1;
  ring_.resize(options_.max_buckets);
}

std::string_view KernelStats::Name(NameId id) const {
  return catalog_ == nullptr ? std::string_view() : catalog_->Name(id);
}

uint32_t KernelStats::HeadSlow(NameId kernel) const {
  if (kernel < kMaxDenseNameId) return kNone;  // a dense id not seen yet.
  const auto it = far_heads_.find(kernel);
  return it == far_heads_.end() ? kNone : it->second;
}

const KernelDetails& KernelStats::CachedDetails(NameId details) {
  auto it = details_cache_.find(details);
  if (it == details_cache_.end()) {
    it = details_cache_.emplace(details, ParseKernelDetails(Name(details))).first;
  }
  return it->second;
}

KernelStats::TripleInfo KernelStats::Resolve(const Triple& tr,
                                             const KernelDetails* details) const {
  TripleInfo info;
  const std::string_view kernel = Name(tr.kernel);
  const std::string_view op = Name(tr.op);
  info.details = details != nullptr ? *details : ParseKernelDetails(Name(tr.details));
  info.uses_tc = KernelUsesTensorCore(kernel);
  // xprof sets eligibility only for kernels with a framework op.
  info.eligible = tr.op != 0 && (IsOpTensorCoreEligible(op) || info.uses_tc);
  info.resolved = (tr.kernel == 0 || !kernel.empty()) && (tr.op == 0 || !op.empty()) &&
                  (tr.details == 0 || !Name(tr.details).empty());
  return info;
}

uint32_t KernelStats::AddTriple(NameId kernel, NameId details, NameId op) {
  const uint32_t t = static_cast<uint32_t>(triples_.size());
  uint32_t* head = nullptr;
  if (kernel < kMaxDenseNameId) {
    if (kernel >= heads_.size()) {
      heads_.resize(std::max<size_t>(size_t{kernel} + 1, heads_.size() * 2), kNone);
    }
    head = &heads_[kernel];
  } else {
    head = &far_heads_.try_emplace(kernel, kNone).first->second;
  }
  Triple tr;
  tr.kernel = kernel;
  tr.details = details;
  tr.op = op;
  tr.next = *head;
  if (*head != kNone) {
    tr.name_slot = triples_[*head].name_slot;
  } else {
    tr.name_slot = static_cast<uint32_t>(slot_names_.size());
    slot_names_.push_back(kernel);
  }
  *head = t;
  // Each details id is parsed once (unless its name is not defined yet).
  const bool details_known = details == 0 || !Name(details).empty();
  const TripleInfo info = Resolve(tr, details_known ? &CachedDetails(details) : nullptr);
  triples_.push_back(tr);
  triple_info_.push_back(info);
  return t;
}

KernelStats::Bucket* KernelStats::BucketForEnd(uint64_t end) {
  const uint64_t bucket_ns = options_.bucket_ns;
  const int64_t n = static_cast<int64_t>(options_.max_buckets);
  const int64_t k = static_cast<int64_t>(end / bucket_ns);
  if (k > newest_) {
    // Advance the ring: every slot reused for a newer index hands its
    // contents to the older accumulator first.
    for (int64_t j = std::max(newest_ + 1, k - n + 1); j <= k; ++j) {
      Bucket& slot = ring_[static_cast<size_t>(j % n)];
      if (slot.index >= 0) older_.Combine(slot);
      slot.Reset(j);
    }
    newest_ = k;
    cur_ = &ring_[static_cast<size_t>(k % n)];
    cur_begin_ = static_cast<uint64_t>(k) * bucket_ns;
    cur_len_ = bucket_ns;
    return cur_;
  }
  if (k <= newest_ - n) return &older_;  // fell out of the ring already.
  Bucket& b = ring_[static_cast<size_t>(k % n)];
  if (b.index != k) b.Reset(k);  // unreachable: the advance indexes every slot.
  return &b;
}

void KernelStats::Consume(std::span<const Event> events) {
  for (const Event& e : events) {
    if (e.kind != EventKind::kKernel) continue;
    const uint64_t dur = e.dur;
    if (dur == 0) continue;  // xprof: kernels need a non-zero duration.
    if (dur > kMaxEventDurationNs || e.ts > UINT64_MAX - dur) [[unlikely]] {
      if (diagnostics_ != nullptr) diagnostics_->Add(Diag::bad_duration);
      continue;
    }
    const uint64_t end = e.ts + dur;
    Bucket* b = end - cur_begin_ < cur_len_ ? cur_ : BucketForEnd(end);
    if (end > last_end_) last_end_ = end;
    const uint32_t t = FindOrAddTriple(e.name, e.payload.kernel.details, e.payload.kernel.op);
    if (t >= b->rows.size()) b->rows.resize(triples_.size());
    b->rows[t].Add(dur);
    b->AddHist(triples_[t].name_slot, DurationBin(dur), 1);
  }
}

void KernelStats::WindowBuckets(uint64_t window_ns, std::vector<const Bucket*>* out) const {
  out->clear();
  if (newest_ < 0) return;
  const uint64_t bucket_ns = options_.bucket_ns;
  int64_t first = 0;
  if (window_ns == 0 || window_ns >= last_end_) {
    out->push_back(&older_);  // the window covers all time.
  } else {
    // Buckets whose interval ends after (newest end - window).
    first = static_cast<int64_t>((last_end_ - window_ns) / bucket_ns);
  }
  const int64_t n = static_cast<int64_t>(options_.max_buckets);
  for (int64_t k = std::max(first, newest_ - n + 1); k <= newest_; ++k) {
    const Bucket& b = ring_[static_cast<size_t>(k % n)];
    if (b.index == k) out->push_back(&b);
  }
}

KernelStatsSnapshot KernelStats::Snapshot(const Query& query) const {
  KernelStatsSnapshot s;
  s.window_ns = query.window_ns;
  std::vector<const Bucket*> buckets;
  WindowBuckets(query.window_ns, &buckets);

  // Per triple totals over the window.
  std::vector<RowStats> agg(triples_.size());
  for (const Bucket* b : buckets) {
    for (size_t t = 0; t < b->rows.size(); ++t) {
      if (b->rows[t].count != 0) agg[t].Combine(b->rows[t]);
    }
  }

  // Triples -> rows keyed by the §7 tuple (distinct ids may share a key,
  // e.g. details strings that differ only in occupancy or token order).
  std::vector<TripleInfo> live_info;  // for triples whose names were unknown at first sight.
  struct Entry {
    RowKey key;
    RowStats stats;
    double occupancy_pct;
  };
  std::vector<Entry> entries;
  live_info.reserve(triples_.size());
  for (uint32_t t = 0; t < triples_.size(); ++t) {
    if (agg[t].count == 0) continue;
    const TripleInfo* info = &triple_info_[t];
    if (!info->resolved) {
      live_info.push_back(Resolve(triples_[t], nullptr));
      info = &live_info.back();
    }
    entries.push_back({RowKey{Name(triples_[t].kernel), &info->details, info->uses_tc,
                              info->eligible, Name(triples_[t].op)},
                       agg[t], info->details.occupancy_pct});
    s.kernel_count += agg[t].count;
    s.kernel_ns += agg[t].total;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.key < b.key; });
  size_t kept = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (kept > 0 && entries[kept - 1].key == entries[i].key) {
      entries[kept - 1].stats.Combine(entries[i].stats);
      // Occupancy is not part of the key; the largest one is shown.
      entries[kept - 1].occupancy_pct =
          std::max(entries[kept - 1].occupancy_pct, entries[i].occupancy_pct);
    } else {
      entries[kept++] = entries[i];
    }
  }
  entries.resize(kept);
  s.distinct_rows = entries.size();

  // Per-op roll-up over every row of the window.
  std::map<std::string_view, KernelOpRollup> ops;
  for (const Entry& en : entries) {
    KernelOpRollup& op = ops[en.key.op];
    op.occurrences += en.stats.count;
    op.kernel_ns += en.stats.total;
    if (en.key.uses_tc) op.tensor_core_ns += en.stats.total;
    op.op_tc_eligible = op.op_tc_eligible || en.key.eligible;
  }
  s.ops.reserve(ops.size());
  for (auto& [name, op] : ops) {
    op.op_name.assign(name);
    s.ops.push_back(std::move(op));
  }
  std::stable_sort(s.ops.begin(), s.ops.end(),
                   [](const KernelOpRollup& a, const KernelOpRollup& b) {
                     return a.kernel_ns > b.kernel_ns;  // names already ascending (map order).
                   });
  if (s.ops.size() > query.top_ops) s.ops.resize(query.top_ops);

  // Top rows: total descending, then the key ascending (entries are in key
  // order, so a stable sort on the total alone gives that).
  const size_t top = std::min(query.top_n, entries.size());
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.stats.total > b.stats.total;
  });
  s.rows.reserve(top);
  for (size_t i = 0; i < top; ++i) {
    const Entry& en = entries[i];
    KernelStatsRow r;
    r.rank = static_cast<uint32_t>(i + 1);
    r.kernel_name.assign(en.key.kernel);
    r.details = *en.key.details;
    r.details.occupancy_pct = en.occupancy_pct;
    r.op_tc_eligible = en.key.eligible;
    r.kernel_uses_tc = en.key.uses_tc;
    r.op_name.assign(en.key.op);
    r.occurrences = en.stats.count;
    r.total_ns = en.stats.total;
    r.min_ns = en.stats.min;
    r.max_ns = en.stats.max;
    s.rows.push_back(std::move(r));
  }

  // Histograms.
  std::vector<std::string_view> names;
  if (query.histogram_for.has_value()) {
    names.push_back(*query.histogram_for);
  } else {
    for (const KernelStatsRow& r : s.rows) {
      if (names.size() >= query.histogram_names) break;
      if (std::find(names.begin(), names.end(), r.kernel_name) == names.end()) {
        names.push_back(r.kernel_name);
      }
    }
  }
  for (std::string_view name : names) {
    KernelDurationHistogram h;
    h.kernel_name.assign(name);
    // Every name slot and triple spelled `name` (normally one slot).
    std::vector<uint32_t> slots;
    for (uint32_t slot = 0; slot < slot_names_.size(); ++slot) {
      if (Name(slot_names_[slot]) == name) slots.push_back(slot);
    }
    RowStats st;
    for (uint32_t t = 0; t < triples_.size(); ++t) {
      if (agg[t].count != 0 && Name(triples_[t].kernel) == name) st.Combine(agg[t]);
    }
    if (st.count == 0) continue;
    std::vector<uint64_t> bins(kDurationBinCount, 0);
    for (const Bucket* b : buckets) {
      for (uint32_t slot : slots) {
        if (slot >= b->hists.size()) continue;
        const HistRef& ref = b->hists[slot];
        for (uint32_t i = 0; i < ref.len; ++i) bins[ref.lo + i] += b->pool[ref.offset + i];
      }
    }
    h.count = st.count;
    h.min_ns = st.min;
    h.max_ns = st.max;
    for (uint32_t bin = 0; bin < kDurationBinCount; ++bin) {
      if (bins[bin] != 0) {
        h.buckets.push_back({DurationBinLowerNs(bin), DurationBinUpperNs(bin), bins[bin]});
      }
    }
    h.p50_ns = EstimatePercentile(bins, h.count, 0.50, h.min_ns, h.max_ns);
    h.p90_ns = EstimatePercentile(bins, h.count, 0.90, h.min_ns, h.max_ns);
    h.p99_ns = EstimatePercentile(bins, h.count, 0.99, h.min_ns, h.max_ns);
    s.histograms.push_back(std::move(h));
  }
  return s;
}

}  // namespace liveprof
