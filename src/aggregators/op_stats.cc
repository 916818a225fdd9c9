#include "aggregators/op_stats.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "base/top_n.h"

namespace liveprof {

namespace {

constexpr std::string_view kDatasetType = "Dataset";

// ---------------------------------------------------------------------------
// Snapshot helpers.

constexpr std::string_view kDeviceSide = "Device";
constexpr std::string_view kHostSide = "Host";
constexpr std::string_view kIdle = "IDLE";

// Device-op name of a copy / memset kind (the documented deviation).
std::string_view CopyOpName(EventKind kind) {
  switch (kind) {
    case EventKind::kMemcpyHtoD: return "MemcpyHtoD";
    case EventKind::kMemcpyDtoH: return "MemcpyDtoH";
    case EventKind::kMemcpyDtoD: return "MemcpyDtoD";
    case EventKind::kMemcpyHtoH: return "MemcpyHtoH";
    case EventKind::kMemcpyPtoP: return "MemcpyPtoP";
    case EventKind::kMemcpyOther: return "Memcpy";
    case EventKind::kMemset: return "Memset";
    default: return "Unknown";
  }
}

// A table row before ranking: its names point into the row tables.
struct Group {
  std::string_view name;
  std::string_view type;
  uint64_t occurrences = 0;
  uint64_t time_ns = 0;
  uint64_t self_ns = 0;
};

// Sums by row id, with the rows touched; `max_occurrences` is the device
// roll-up rule (§6.3), else occurrences add up.
class RowSums {
 public:
  RowSums(bool max_occurrences, size_t rows) : max_occurrences_(max_occurrences), sums_(rows) {}
  void Add(uint32_t row, uint64_t occurrences, uint64_t time_ns, uint64_t self_ns) {
    if (row >= sums_.size()) sums_.resize(std::max<size_t>(row + 1, sums_.size() * 2));
    Sum& s = sums_[row];
    if (!s.seen) {
      s.seen = true;
      touched_.push_back(row);
    }
    s.occurrences = max_occurrences_ ? std::max(s.occurrences, occurrences)
                                     : s.occurrences + occurrences;
    s.time_ns += time_ns;
    s.self_ns += self_ns;
  }
  // The top `n` rows (plus `idle`, if given, as one more candidate) as
  // Groups, self time descending, then name and type ascending. `order[row]`
  // is the row's rank in (name, type) order and `idle_order` IDLE's, so
  // ranking compares integers only; `name_of(row)` -> {name, type}.
  template <class NameOf>
  std::vector<Group> Top(size_t n, const std::vector<uint32_t>& order, NameOf name_of,
                         const Group* idle, uint32_t idle_order) const {
    constexpr uint32_t kIdleRow = UINT32_MAX;
    struct Ranked {
      uint64_t self_ns;
      uint32_t order;
      uint32_t row;
    };
    std::vector<Ranked> ranked;
    ranked.reserve(touched_.size() + 1);
    for (const uint32_t row : touched_) ranked.push_back({sums_[row].self_ns, order[row], row});
    if (idle != nullptr) ranked.push_back({idle->self_ns, idle_order, kIdleRow});
    KeepTopN(&ranked, n, [](const Ranked& a, const Ranked& b) {
      if (a.self_ns != b.self_ns) return a.self_ns > b.self_ns;
      return a.order < b.order;
    });
    std::vector<Group> out;
    out.reserve(ranked.size());
    for (const Ranked& r : ranked) {
      if (r.row == kIdleRow) {
        out.push_back(*idle);
        continue;
      }
      const Sum& s = sums_[r.row];
      const auto [name, type] = name_of(r.row);
      out.push_back(Group{name, type, s.occurrences, s.time_ns, s.self_ns});
    }
    return out;
  }

 private:
  struct Sum {
    uint64_t occurrences = 0;
    uint64_t time_ns = 0;
    uint64_t self_ns = 0;
    bool seen = false;
  };
  bool max_occurrences_;
  std::vector<Sum> sums_;
  std::vector<uint32_t> touched_;
};

double SafeDivide(double a, double b) { return b == 0 ? 0.0 : a / b; }

// Ranks, cuts and fills one side's rows; `rank` runs on across sides.
template <class NameOf>
void FillSide(const RowSums& sums, const std::vector<uint32_t>& order, uint32_t idle_row,
              NameOf name_of, uint64_t op_ns, uint64_t idle_ns, bool include_idle, size_t top_n,
              std::string_view side_name, int* rank, OpStatsSide* side) {
  side->op_ns = op_ns;
  side->idle_ns = idle_ns;
  side->total_ns = op_ns + idle_ns;
  const Group idle{kIdle, kIdle, 0, idle_ns, idle_ns};
  const bool with_idle = include_idle && side->total_ns > 0;
  const std::vector<Group> groups =
      sums.Top(top_n, order, name_of, with_idle ? &idle : nullptr, order[idle_row]);
  const double denominator_us =
      static_cast<double>(include_idle ? side->total_ns : side->op_ns) / 1e3;
  double cumulative = 0;
  side->rows.reserve(groups.size());
  for (const Group& g : groups) {
    OpStatsRow r;
    r.rank = ++*rank;
    r.side = side_name;
    r.type.assign(g.type);
    r.name.assign(g.name);
    r.occurrences = g.occurrences;
    r.total_ns = g.time_ns;
    r.self_ns = g.self_ns;
    r.total_us = static_cast<double>(g.time_ns) / 1e3;
    r.self_us = static_cast<double>(g.self_ns) / 1e3;
    r.avg_us = SafeDivide(r.total_us, static_cast<double>(g.occurrences));
    r.avg_self_us = SafeDivide(r.self_us, static_cast<double>(g.occurrences));
    r.self_pct = 100.0 * SafeDivide(r.self_us, denominator_us);
    cumulative += r.self_pct;
    r.cumulative_pct = cumulative;
    side->rows.push_back(std::move(r));
  }
}

template <class S>
void MergeSparse(OpStats::Sparse<S>* into, const OpStats::Sparse<S>& from) {
  if (from.empty()) return;
  OpStats::Sparse<S> out;
  out.reserve(into->size() + from.size());
  auto a = into->begin();
  auto b = from.begin();
  while (a != into->end() || b != from.end()) {
    if (b == from.end() || (a != into->end() && a->first < b->first)) {
      out.push_back(*a++);
    } else if (a == into->end() || b->first < a->first) {
      out.push_back(*b++);
    } else {
      out.push_back(*a++);
      out.back().second.Add(b->second);
      ++b;
    }
  }
  into->swap(out);
}

}  // namespace

// ---------------------------------------------------------------------------
// Buckets.

void OpStats::Bucket::Combine(const Bucket& other) {
  MergeSparse(&host_ops, other.host_ops);
  MergeSparse(&input_ops, other.input_ops);
  MergeSparse(&device_ops, other.device_ops);
  MergeSparse(&tracks, other.tracks);
  MergeSparse(&devices, other.devices);
}

template <class S>
void OpStats::Dense<S>::Grow(uint32_t key) {
  size_t n = std::max<size_t>(64, values.size());
  while (n <= key) n *= 2;
  values.resize(n);
}

template <class S>
void OpStats::Dense<S>::AddSparse(const Sparse<S>& sparse) {
  for (const auto& [key, s] : sparse) At(key).Add(s);
}

template <class S>
void OpStats::Dense<S>::Drain(Sparse<S>* out) {
  std::sort(touched.begin(), touched.end());
  out->clear();
  out->reserve(touched.size());
  for (const uint32_t key : touched) {
    out->emplace_back(key, values[key]);
    values[key] = S{};
  }
  touched.clear();
}

void OpStats::DenseBucket::AddBucket(const Bucket& b) {
  host_ops.AddSparse(b.host_ops);
  input_ops.AddSparse(b.input_ops);
  device_ops.AddSparse(b.device_ops);
  tracks.AddSparse(b.tracks);
  devices.AddSparse(b.devices);
}

void OpStats::DenseBucket::AddDense(const DenseBucket& d) {
  auto add = [](auto* into, const auto& from) {
    for (const uint32_t key : from.touched) into->At(key).Add(from.values[key]);
  };
  add(&host_ops, d.host_ops);
  add(&input_ops, d.input_ops);
  add(&device_ops, d.device_ops);
  add(&tracks, d.tracks);
  add(&devices, d.devices);
}

// ---------------------------------------------------------------------------
// The aggregator.

OpStats::OpStats(const Catalog* catalog, Diagnostics* diagnostics, Options options)
    : catalog_(catalog), diagnostics_(diagnostics), options_(options) {
  if (options_.bucket_ns == 0) options_.bucket_ns = OpStatsOptions{}.bucket_ns;
  if (options_.max_buckets == 0) options_.max_buckets = 1;
  if (options_.max_unclaimed_per_track < 2) options_.max_unclaimed_per_track = 2;
  idle_row_ = InternRow(kIdle, kIdle);  // ranked by name with the others.
  // Ids 0..kCopyKinds-1: the copy and memset kinds, in EventKind order.
  for (uint32_t i = 0; i < kCopyKinds; ++i) {
    NewDeviceOp(0, 0,
                static_cast<EventKind>(static_cast<uint32_t>(EventKind::kMemcpyHtoD) + i));
  }
}

void OpStats::Count(Diag d) {
  if (diagnostics_ != nullptr) diagnostics_->Add(d);
}

uint32_t OpStats::NewDeviceOp(NameId op, NameId kernel, EventKind kind) {
  device_ops_.push_back(DeviceOp{op, kernel, kind});
  return static_cast<uint32_t>(device_ops_.size() - 1);
}

uint32_t OpStats::KernelOpId(NameId kernel, NameId op) {
  if (op == 0) {
    if (kernel >= unattributed_kernel_id_.size()) {
      unattributed_kernel_id_.resize(std::max<size_t>(kernel + 1, 2 * unattributed_kernel_id_.size()));
    }
    uint32_t& id = unattributed_kernel_id_[kernel];
    if (id == 0) id = NewDeviceOp(0, kernel, EventKind::kKernel);
    return id;
  }
  if (kernel >= attributed_cache_.size()) {
    attributed_cache_.resize(std::max<size_t>(kernel + 1, 2 * attributed_cache_.size()));
  }
  KernelCacheEntry& cache = attributed_cache_[kernel];
  if (cache.id != 0 && cache.op == op) return cache.id;
  const uint64_t key = (static_cast<uint64_t>(op) << 32) | kernel;
  if (2 * (attributed_count_ + 1) > attributed_ids_.size()) GrowPairTable();
  const size_t mask = attributed_ids_.size() - 1;
  size_t i = PairHash(key) & mask;
  while (attributed_ids_[i].key != 0 && attributed_ids_[i].key != key) i = (i + 1) & mask;
  PairSlot& slot = attributed_ids_[i];
  if (slot.key == 0) {
    slot.key = key;
    slot.id = NewDeviceOp(op, kernel, EventKind::kKernel);
    ++attributed_count_;
  }
  cache = KernelCacheEntry{op, slot.id};
  return slot.id;
}

size_t OpStats::PairHash(uint64_t key) {
  key *= 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: the high bits are mixed.
  return static_cast<size_t>(key ^ (key >> 32));
}

void OpStats::GrowPairTable() {
  std::vector<PairSlot> old = std::move(attributed_ids_);
  attributed_ids_.assign(std::max<size_t>(1024, 2 * old.size()), PairSlot{});
  const size_t mask = attributed_ids_.size() - 1;
  for (const PairSlot& s : old) {
    if (s.key == 0) continue;
    size_t i = PairHash(s.key) & mask;
    while (attributed_ids_[i].key != 0) i = (i + 1) & mask;
    attributed_ids_[i] = s;
  }
}

bool OpStats::HostSpanCounts(NameId name) {
  if (name < host_span_counts_.size() && host_span_counts_[name] != 0) {
    return host_span_counts_[name] == 2;
  }
  const std::string_view s = Name(name);
  const bool known = !s.empty() && ParseTfOpName(s).category != OpCategory::kUnknown;
  if (!s.empty()) {  // an undefined name may be defined later: do not cache it.
    if (name >= host_span_counts_.size()) {
      host_span_counts_.resize(std::max<size_t>(name + 1, 2 * host_span_counts_.size()));
    }
    host_span_counts_[name] = known ? 2 : 1;
  }
  return known;
}

bool OpStats::SelectBucket(uint64_t end) {
  if (end > newest_end_) newest_end_ = end;
  if (end >= current_begin_ && end < current_end_) [[likely]] return true;
  const uint64_t index = end / options_.bucket_ns;
  if (!has_current_ || index > current_index_) {
    if (has_current_) FreezeCurrent();
    has_current_ = true;
    current_index_ = index;
    current_begin_ = index * options_.bucket_ns;
    current_end_ = current_begin_ + options_.bucket_ns;
    if (current_end_ < current_begin_) current_end_ = std::numeric_limits<uint64_t>::max();
    while (!ring_.empty() && ring_.front().index + options_.max_buckets <= current_index_) {
      ring_.pop_front();  // already in totals_: it becomes part of "older".
    }
    return true;
  }
  late_index_ = index;
  return false;
}

void OpStats::FreezeCurrent() {
  Bucket b;
  b.index = current_index_;
  current_.host_ops.Drain(&b.host_ops);
  current_.input_ops.Drain(&b.input_ops);
  current_.device_ops.Drain(&b.device_ops);
  current_.tracks.Drain(&b.tracks);
  current_.devices.Drain(&b.devices);
  if (b.empty()) return;
  totals_.AddBucket(b);
  ring_.push_back(std::move(b));
}

void OpStats::ApplyLate() {
  totals_.AddBucket(late_);
  if (late_index_ + options_.max_buckets > current_index_) {  // still inside the ring.
    auto it = std::lower_bound(ring_.begin(), ring_.end(), late_index_,
                               [](const Bucket& b, uint64_t index) { return b.index < index; });
    if (it != ring_.end() && it->index == late_index_) {
      it->Combine(late_);
    } else {
      Bucket b = late_;
      b.index = late_index_;
      ring_.insert(it, std::move(b));
    }
  }
  late_.host_ops.clear();
  late_.input_ops.clear();
  late_.device_ops.clear();
  late_.tracks.clear();
  late_.devices.clear();
}

void OpStats::ConsumeHostOp(const Event& e, bool input, bool host_time) {
  const uint64_t begin = e.ts;
  const uint64_t end = e.ts + e.dur;
  if (e.track >= tracks_.size()) tracks_.resize(std::max<size_t>(e.track + 1, 2 * tracks_.size()));
  std::vector<Interval>& unclaimed = tracks_[e.track].unclaimed;

  // Claim the unclaimed ops this one contains (its direct children).
  uint64_t children_ns = 0;
  if (unclaimed.empty() || unclaimed.back().end <= end) [[likely]] {
    while (!unclaimed.empty()) {
      const Interval& top = unclaimed.back();
      if (top.begin >= begin) {  // top.end <= end: completion order.
        children_ns += top.end - top.begin;
        unclaimed.pop_back();
        continue;
      }
      if (top.end > begin) Count(Diag::span_misnested);
      break;
    }
    if (unclaimed.size() >= options_.max_unclaimed_per_track) {
      unclaimed.erase(unclaimed.begin(),
                      unclaimed.begin() + static_cast<ptrdiff_t>(unclaimed.size() / 2));
    }
    unclaimed.push_back(Interval{begin, end});
  }  // else: out of order (late): claims nothing, not claimable.
  const uint64_t self = e.dur > children_ns ? e.dur - children_ns : 0;

  InputStats input_delta;
  if (input) {
    input_delta.occurrences = 1;
    input_delta.time_ns = e.dur;
    input_delta.self_ns = self;
    input_delta.seq = ++input_seq_;
    input_delta.stage = e.sub <= static_cast<uint8_t>(InputStage::kWait)
                            ? static_cast<InputStage>(e.sub)
                            : InputStage::kUnknown;
  }
  if (SelectBucket(end)) [[likely]] {
    if (input) {
      current_.input_ops.At(e.name).Add(input_delta);
    } else {
      HostStats& s = current_.host_ops.At(e.name);
      ++s.occurrences;
      s.time_ns += e.dur;
      s.self_ns += self;
    }
    SpanStats& t = current_.tracks.At(e.track);
    if (host_time) {
      if (begin < t.first_ns) t.first_ns = begin;
      if (end > t.last_ns) t.last_ns = end;
    } else {
      t.first_ns = t.last_ns = 0;  // (a helper's track: its busy time, an extent of 0, so no IDLE)
    }
    t.self_ns += self;
    return;
  }
  if (input) {
    late_.input_ops.emplace_back(e.name, input_delta);
  } else {
    late_.host_ops.emplace_back(e.name, HostStats{1, e.dur, self});
  }
  late_.tracks.emplace_back(e.track, host_time ? SpanStats{begin, end, self} : SpanStats{0, 0, self});
  ApplyLate();
}

void OpStats::ConsumeDevice(const Event& e, uint32_t device_op) {
  const uint64_t end = e.ts + e.dur;
  if (SelectBucket(end)) [[likely]] {
    DeviceOpStats& s = current_.device_ops.At(device_op);
    ++s.occurrences;
    s.time_ns += e.dur;
    SpanStats& d = current_.devices.At(e.device);
    if (e.ts < d.first_ns) d.first_ns = e.ts;
    if (end > d.last_ns) d.last_ns = end;
    d.self_ns += e.dur;
    return;
  }
  late_.device_ops.emplace_back(device_op, DeviceOpStats{1, e.dur});
  late_.devices.emplace_back(e.device, SpanStats{e.ts, end, e.dur});
  ApplyLate();
}

void OpStats::Consume(std::span<const Event> events) {
  for (const Event& e : events) {
    bool input = false;
    switch (e.kind) {
      case EventKind::kHostSpan:
        if (e.name >= kMaxId) {
          Count(Diag::id_out_of_range);
          continue;
        }
        if (!HostSpanCounts(e.name)) continue;
        break;
      case EventKind::kInputSpan:
        input = true;
        break;
      case EventKind::kFrameworkOp:
        break;
      case EventKind::kKernel:
      case EventKind::kMemcpyHtoD:
      case EventKind::kMemcpyDtoH:
      case EventKind::kMemcpyDtoD:
      case EventKind::kMemcpyHtoH:
      case EventKind::kMemcpyPtoP:
      case EventKind::kMemcpyOther:
      case EventKind::kMemset: {
        if (e.dur > kMaxEventDurationNs) [[unlikely]] {
          Count(Diag::bad_duration);
          continue;
        }
        uint32_t id;
        if (e.kind == EventKind::kKernel) {
          if (e.name >= kMaxId || e.payload.kernel.op >= kMaxId) [[unlikely]] {
            Count(Diag::id_out_of_range);
            continue;
          }
          id = KernelOpId(e.name, e.payload.kernel.op);
        } else {
          id = static_cast<uint32_t>(e.kind) - static_cast<uint32_t>(EventKind::kMemcpyHtoD);
        }
        ConsumeDevice(e, id);
        continue;
      }
      default:
        continue;
    }
    ConsumeCheckedHostOp(e, input, /*host_time=*/true);  // a counted host op.
  }
}

void OpStats::ConsumeHelpers(std::span<const Event> events) {
  for (const Event& e : events) {
    if (e.kind == EventKind::kInputSpan) ConsumeCheckedHostOp(e, /*input=*/true, /*host_time=*/false);
  }
}

void OpStats::ConsumeCheckedHostOp(const Event& e, bool input, bool host_time) {
  if (e.dur > kMaxEventDurationNs) [[unlikely]] {
    Count(Diag::bad_duration);
    return;
  }
  if (e.name >= kMaxId || e.track >= kMaxId) [[unlikely]] {
    Count(Diag::id_out_of_range);
    return;
  }
  ConsumeHostOp(e, input, host_time);
}

// ---------------------------------------------------------------------------
// Snapshot.

std::string OpStats::DisplayName(NameId id) const {
  if (catalog_ == nullptr) return "#" + std::to_string(id);
  return catalog_->DisplayName(id);
}

uint32_t OpStats::InternRow(std::string_view name, std::string_view type) const {
  std::string key(name);
  key.push_back('\0');
  key.append(type);
  const uint32_t row = row_keys_.Id(key);
  if (row == rows_.size()) rows_.push_back(RowName{row_strings_.Id(name), row_strings_.Id(type)});
  return row;
}

uint32_t OpStats::RowOf(RowSource source, uint32_t id) const {
  std::vector<uint32_t>& cache = row_cache_[static_cast<size_t>(source)];
  if (id < cache.size() && cache[id] != kNoRow) return cache[id];
  // The name the row is made of, and whether it is final.
  uint32_t row = kNoRow;
  NameId named = 0;  // the id whose definition the row depends on (0: none).
  if (source == RowSource::kDevice) {
    const DeviceOp& d = device_ops_[id];
    if (d.kind != EventKind::kKernel) {
      const std::string_view name = CopyOpName(d.kind);
      row = InternRow(name, name);
    } else if (d.op == 0) {
      row = InternRow(DisplayName(d.kernel), "Unknown");
      named = d.kernel;
    } else {
      named = d.op;
    }
  } else {
    named = id;
  }
  if (row == kNoRow) {
    const std::string full = DisplayName(named);
    const ParsedOp p = ParseTfOpName(full);
    if (source == RowSource::kInput) {
      row = InternRow(full, p.category == OpCategory::kDataset ? kDatasetType
                                                               : std::string_view("Input"));
    } else if (p.category != OpCategory::kUnknown) {
      row = InternRow(p.name, p.type);
    } else {
      row = InternRow(full, full);
    }
  }
  if (named == 0 || catalog_ == nullptr || catalog_->Defined(named)) {
    if (id >= cache.size()) cache.resize(std::max<size_t>(id + 1, cache.size() * 2), kNoRow);
    cache[id] = row;
  }
  return row;
}

const std::vector<uint32_t>& OpStats::RowOrder() const {
  const uint32_t n = static_cast<uint32_t>(rows_.size());
  const uint32_t old = static_cast<uint32_t>(sorted_rows_.size());
  if (old == n) return row_order_;
  // Sort the new rows, merge them into the sorted list, renumber: string
  // comparisons only when rows appear, never on a render without new ones.
  auto before = [this](uint32_t a, uint32_t b) {
    const std::string_view an = row_strings_[rows_[a].name], bn = row_strings_[rows_[b].name];
    if (an != bn) return an < bn;
    return row_strings_[rows_[a].type] < row_strings_[rows_[b].type];
  };
  for (uint32_t row = old; row < n; ++row) sorted_rows_.push_back(row);
  std::sort(sorted_rows_.begin() + old, sorted_rows_.end(), before);
  std::inplace_merge(sorted_rows_.begin(), sorted_rows_.begin() + old, sorted_rows_.end(), before);
  row_order_.resize(n);
  for (uint32_t i = 0; i < n; ++i) row_order_[sorted_rows_[i]] = i;
  return row_order_;
}

OpStatsSnapshot OpStats::Snapshot(const OpStatsSnapshotOptions& options) const {
  OpStatsSnapshot snap;
  snap.window_ns = options.window_ns;
  snap.include_idle = options.include_idle;

  // The sums over the window: the running totals (or the window's buckets)
  // and the current bucket, each read in place.
  DenseBucket window;
  if (options.window_ns != 0) {
    const uint64_t from = newest_end_ > options.window_ns ? newest_end_ - options.window_ns : 0;
    for (const Bucket& b : ring_) {
      if ((b.index + 1) * options_.bucket_ns > from) window.AddBucket(b);
    }
  }
  const DenseBucket* parts[] = {options.window_ns == 0 ? &totals_ : &window, &current_};
  // Per track and per device the parts are merged first: IDLE is not additive.
  Dense<SpanStats> tracks;
  Dense<SpanStats> devices;
  for (const DenseBucket* part : parts) {
    for (const uint32_t key : part->tracks.touched) tracks.At(key).Add(part->tracks.values[key]);
    for (const uint32_t key : part->devices.touched) {
      devices.At(key).Add(part->devices.values[key]);
    }
  }
  auto names_of = [this](uint32_t row) {
    return std::pair<std::string_view, std::string_view>(row_strings_[rows_[row].name],
                                                         row_strings_[rows_[row].type]);
  };

  // Device side.
  // A device op's occurrences add up over the parts; a row takes the max
  // over its device ops (§6.3), so the parts are merged per op first.
  Dense<DeviceOpStats> device_ops;
  for (const DenseBucket* part : parts) {
    for (const uint32_t id : part->device_ops.touched) {
      device_ops.At(id).Add(part->device_ops.values[id]);
    }
  }
  RowSums device(/*max_occurrences=*/true, rows_.size());
  for (const uint32_t id : device_ops.touched) {
    const DeviceOpStats& s = device_ops.values[id];
    device.Add(RowOf(RowSource::kDevice, id), s.occurrences, s.time_ns, s.time_ns);
  }
  uint64_t device_op_ns = 0;
  uint64_t device_idle_ns = 0;
  for (const uint32_t key : devices.touched) {
    device_op_ns += devices.values[key].self_ns;
    device_idle_ns += devices.values[key].idle_ns();
  }
  int rank = 0;
  const std::vector<uint32_t>& order = RowOrder();
  FillSide(device, order, idle_row_, names_of, device_op_ns, device_idle_ns, options.include_idle,
           options.top_n, kDeviceSide, &rank, &snap.device);

  // Host side: counted host ops and input spans; the input spans also make
  // the input-op table (every one of them, merged by name).
  RowSums host(/*max_occurrences=*/false, rows_.size());
  for (const DenseBucket* part : parts) {
    for (const uint32_t id : part->host_ops.touched) {
      const HostStats& s = part->host_ops.values[id];
      host.Add(RowOf(RowSource::kHost, id), s.occurrences, s.time_ns, s.self_ns);
    }
  }
  Dense<InputStats> inputs;  // by row.
  for (const DenseBucket* part : parts) {
    for (const uint32_t id : part->input_ops.touched) {
      const InputStats& s = part->input_ops.values[id];
      const uint32_t row = RowOf(RowSource::kInput, id);
      host.Add(row, s.occurrences, s.time_ns, s.self_ns);
      inputs.At(row).Add(s);
    }
  }
  snap.host_input_ops.reserve(inputs.touched.size());
  for (const uint32_t row : inputs.touched) {
    const InputStats& s = inputs.values[row];
    InputOpStats in;
    in.name = row_strings_[rows_[row].name];
    in.stage = s.stage;
    in.occurrences = s.occurrences;
    in.total_ns = s.time_ns;
    in.self_ns = s.self_ns;
    snap.host_input_ops.push_back(std::move(in));
  }
  std::sort(snap.host_input_ops.begin(), snap.host_input_ops.end(),
            [](const InputOpStats& a, const InputOpStats& b) {
              if (a.self_ns != b.self_ns) return a.self_ns > b.self_ns;
              return a.name < b.name;
            });
  uint64_t host_op_ns = 0;
  uint64_t host_idle_ns = 0;
  for (const uint32_t key : tracks.touched) {
    host_op_ns += tracks.values[key].self_ns;
    host_idle_ns += tracks.values[key].idle_ns();
  }
  RowOrder();  // the host side may have added rows.
  FillSide(host, order, idle_row_, names_of, host_op_ns, host_idle_ns, options.include_idle,
           options.top_n, kHostSide, &rank, &snap.host);
  return snap;
}

}  // namespace liveprof
