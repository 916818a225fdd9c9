#include "aggregators/tf/kernel_stats.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <tuple>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "base/top_n.h"
#include "stream/diagnostics.h"

namespace liveprof {

namespace {

// Kernel NameIds below this index a dense vector; larger ones (a foreign
// producer's ids) go to a hash map so a bogus id cannot allocate gigabytes.
constexpr NameId kMaxDenseNameId = NameId{1} << 22;

std::string DimsText(const std::array<uint32_t, 3>& d) {
  std::string s = std::to_string(d[0]);
  s += ',';
  s += std::to_string(d[1]);
  s += ',';
  s += std::to_string(d[2]);
  return s;
}

// The row key of docs/semantics-tf.md §7, in xprof's comparison order.
struct RowKey {
  std::string_view kernel;
  const KernelDetails* details;
  bool uses_tc;
  bool eligible;
  std::string_view op;

  auto Tuple() const {
    return std::tie(kernel, details->grid[0], details->grid[1], details->grid[2], details->block[0], details->block[1],
                    details->block[2], details->registers_per_thread, details->static_shared_bytes,
                    details->dynamic_shared_bytes, uses_tc, eligible, op);
  }
  bool operator<(const RowKey& o) const { return Tuple() < o.Tuple(); }
};

// Estimated `p` quantile (0 < p <= 1) of a full histogram with `n` samples.
double EstimatePercentile(const std::vector<uint64_t>& bins, uint64_t n, double p, uint64_t min_ns, uint64_t max_ns) {
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
  w.KV("tensor_core_ns", tensor_core_ns);
  w.KV("tensor_core_pct", tensor_core_pct());
  w.KV("tensor_core_definition", kTensorCoresByFamilyDefinition);
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
    w.KV("tc_family", TensorCoreFamily(r.kernel_name));
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

KernelStats::TripleInfo KernelStats::Resolve(const Triple& tr, const KernelDetails* details,
                                             const TripleInfo* same_kernel) const {
  TripleInfo info;
  const std::string_view kernel = Name(tr.kernel);
  const std::string_view op = Name(tr.op);
  info.details = details != nullptr ? *details : ParseKernelDetails(Name(tr.details));
  info.uses_tc = same_kernel != nullptr ? same_kernel->uses_tc : KernelUsesTensorCore(kernel);
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
  // The kernel's Tensor Core family is matched once per kernel name, not per
  // triple (~40 substring searches each).
  const TripleInfo* same_kernel = nullptr;
  if (*head != kNone) {
    tr.name_slot = triples_[*head].name_slot;
    if (triple_info_[*head].resolved) same_kernel = &triple_info_[*head];
  } else {
    tr.name_slot = static_cast<uint32_t>(slot_names_.size());
    slot_names_.push_back(kernel);
  }
  *head = t;
  // Each details id is parsed once (unless its name is not defined yet).
  const bool details_known = details == 0 || !Name(details).empty();
  const TripleInfo info = Resolve(tr, details_known ? &CachedDetails(details) : nullptr, same_kernel);
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

uint32_t KernelStats::RowOf(uint32_t t) const {
  if (t < row_of_triple_.size() && row_of_triple_[t] != kNone) return row_of_triple_[t];
  const Triple& tr = triples_[t];
  TripleInfo& info = triple_info_[t];
  if (!info.resolved) info = Resolve(tr, nullptr);
  const std::string_view kernel = Name(tr.kernel);
  const std::string_view op = Name(tr.op);
  // The §7 tuple, serialized: names (NUL-separated), the numbers, the flags.
  const KernelDetails& d = info.details;
  const uint32_t numbers[] = {d.grid[0],
                              d.grid[1],
                              d.grid[2],
                              d.block[0],
                              d.block[1],
                              d.block[2],
                              d.registers_per_thread,
                              d.static_shared_bytes,
                              d.dynamic_shared_bytes};
  std::string key;
  key.reserve(kernel.size() + op.size() + sizeof(numbers) + 4);
  key.append(kernel).push_back('\0');
  key.append(op).push_back('\0');
  key.append(reinterpret_cast<const char*>(numbers), sizeof(numbers));
  key.push_back(static_cast<char>((info.uses_tc ? 1 : 0) | (info.eligible ? 2 : 0)));
  const uint32_t row = row_keys_.Id(key);
  if (row == rows_.size()) {
    RowInfo r;
    r.kernel_name = kernel_names_.Id(kernel);
    r.op_name = op_names_.Id(op);
    r.details = d;
    r.details.occupancy_pct = 0;
    r.uses_tc = info.uses_tc;
    r.eligible = info.eligible;
    rows_.push_back(r);
  }
  if (info.resolved) {
    if (row_of_triple_.size() < triples_.size()) row_of_triple_.resize(triples_.size(), kNone);
    row_of_triple_[t] = row;
  }
  return row;
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

  // The triples with data and their rows (RowOf may grow the tables).
  struct Live {
    uint32_t triple;
    uint32_t row;
  };
  std::vector<Live> live;
  for (uint32_t t = 0; t < triples_.size(); ++t) {
    if (agg[t].count != 0) live.push_back({t, RowOf(t)});
  }

  // Rows and the per-op roll-up, accumulated by id.
  struct RowAcc {
    RowStats stats;
    double occupancy_pct = 0;  // not part of the key: the largest is shown.
  };
  std::vector<RowAcc> row_acc(rows_.size());
  struct OpAcc {  // a KernelOpRollup without its name.
    uint64_t occurrences = 0;
    uint64_t kernel_ns = 0;
    uint64_t tensor_core_ns = 0;
    bool op_tc_eligible = false;
  };
  std::vector<OpAcc> op_acc(op_names_.size());
  std::vector<uint32_t> row_ids;
  std::vector<uint32_t> op_ids;
  for (const Live& l : live) {
    const RowStats& st = agg[l.triple];
    const RowInfo& row = rows_[l.row];
    const TripleInfo& info = triple_info_[l.triple];
    RowAcc& ra = row_acc[l.row];
    if (ra.stats.count == 0) row_ids.push_back(l.row);
    ra.stats.Combine(st);
    ra.occupancy_pct = std::max(ra.occupancy_pct, info.details.occupancy_pct);
    OpAcc& op = op_acc[row.op_name];
    if (op.occurrences == 0) op_ids.push_back(row.op_name);
    op.occurrences += st.count;
    op.kernel_ns += st.total;
    if (row.uses_tc) op.tensor_core_ns += st.total;
    op.op_tc_eligible = op.op_tc_eligible || row.eligible;
    s.kernel_count += st.count;
    s.kernel_ns += st.total;
    if (row.uses_tc) s.tensor_core_ns += st.total;
  }
  s.distinct_rows = row_ids.size();

  // Ranking works on (time, id) pairs; names are compared only on ties.
  struct Ranked {
    uint64_t ns;
    uint32_t id;
  };
  // Top ops: kernel time descending, then name ascending.
  std::vector<Ranked> top_ops;
  top_ops.reserve(op_ids.size());
  for (const uint32_t id : op_ids) top_ops.push_back({op_acc[id].kernel_ns, id});
  KeepTopN(&top_ops, query.top_ops, [&](const Ranked& a, const Ranked& b) {
    if (a.ns != b.ns) return a.ns > b.ns;
    return op_names_[a.id] < op_names_[b.id];
  });
  s.ops.reserve(top_ops.size());
  for (const Ranked& r : top_ops) {
    const OpAcc& a = op_acc[r.id];
    KernelOpRollup op;
    op.op_name = op_names_[r.id];
    op.occurrences = a.occurrences;
    op.kernel_ns = a.kernel_ns;
    op.tensor_core_ns = a.tensor_core_ns;
    op.op_tc_eligible = a.op_tc_eligible;
    s.ops.push_back(std::move(op));
  }

  // Top rows: total descending, then the §7 key ascending.
  auto key_of = [&](uint32_t r) {
    const RowInfo& row = rows_[r];
    return RowKey{kernel_names_[row.kernel_name], &row.details, row.uses_tc, row.eligible, op_names_[row.op_name]};
  };
  std::vector<Ranked> top_rows;
  top_rows.reserve(row_ids.size());
  for (const uint32_t id : row_ids) top_rows.push_back({row_acc[id].stats.total, id});
  KeepTopN(&top_rows, query.top_n, [&](const Ranked& a, const Ranked& b) {
    if (a.ns != b.ns) return a.ns > b.ns;
    return key_of(a.id) < key_of(b.id);
  });
  s.rows.reserve(top_rows.size());
  for (const Ranked& ranked : top_rows) {
    const RowInfo& row = rows_[ranked.id];
    const RowAcc& ra = row_acc[ranked.id];
    KernelStatsRow r;
    r.rank = static_cast<uint32_t>(s.rows.size() + 1);
    r.kernel_name = kernel_names_[row.kernel_name];
    r.details = row.details;
    r.details.occupancy_pct = ra.occupancy_pct;
    r.op_tc_eligible = row.eligible;
    r.kernel_uses_tc = row.uses_tc;
    r.op_name = op_names_[row.op_name];
    r.occurrences = ra.stats.count;
    r.total_ns = ra.stats.total;
    r.min_ns = ra.stats.min;
    r.max_ns = ra.stats.max;
    s.rows.push_back(std::move(r));
  }

  // Histograms: of the asked name, or of the first distinct names of the top rows.
  std::vector<uint32_t> names;
  if (query.histogram_for.has_value()) {
    const uint32_t id = kernel_names_.Find(*query.histogram_for);
    if (id != StringIds::kAbsent) names.push_back(id);
  } else {
    for (size_t i = 0; i < top_rows.size() && names.size() < query.histogram_names; ++i) {
      const uint32_t id = rows_[top_rows[i].id].kernel_name;
      if (std::find(names.begin(), names.end(), id) == names.end()) names.push_back(id);
    }
  }
  // One pass over the live triples finds each name's totals and name slots
  // (normally one slot a name).
  std::vector<uint32_t> name_index(kernel_names_.size(), kNone);
  for (uint32_t i = 0; i < names.size(); ++i) name_index[names[i]] = i;
  std::vector<RowStats> name_stats(names.size());
  std::vector<std::vector<uint32_t>> name_slots(names.size());
  for (const Live& l : live) {
    const uint32_t i = name_index[rows_[l.row].kernel_name];
    if (i == kNone) continue;
    name_stats[i].Combine(agg[l.triple]);
    std::vector<uint32_t>& slots = name_slots[i];
    const uint32_t slot = triples_[l.triple].name_slot;
    if (std::find(slots.begin(), slots.end(), slot) == slots.end()) slots.push_back(slot);
  }
  std::vector<uint64_t> bins(kDurationBinCount);
  for (uint32_t i = 0; i < names.size(); ++i) {
    const uint32_t name = names[i];
    const RowStats& st = name_stats[i];
    const std::vector<uint32_t>& slots = name_slots[i];
    if (st.count == 0) continue;
    std::fill(bins.begin(), bins.end(), 0);
    for (const Bucket* b : buckets) {
      for (uint32_t slot : slots) {
        if (slot >= b->hists.size()) continue;
        const HistRef& ref = b->hists[slot];
        for (uint32_t k = 0; k < ref.len; ++k) bins[ref.lo + k] += b->pool[ref.offset + k];
      }
    }
    KernelDurationHistogram h;
    h.kernel_name = kernel_names_[name];
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
