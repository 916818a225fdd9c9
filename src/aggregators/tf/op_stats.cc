#include "aggregators/tf/op_stats.h"

#include <algorithm>
#include <string>

#include "aggregators/pytorch/pytorch_names.h"

namespace liveprof {

namespace {

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

// Dense tables of every kind of statistics, for this file and the snapshot's
// (op_stats_snapshot.cc).
template struct OpStats::Dense<OpStats::HostStats>;
template struct OpStats::Dense<OpStats::InputStats>;
template struct OpStats::Dense<OpStats::DeviceOpStats>;
template struct OpStats::Dense<OpStats::SpanStats>;

// ---------------------------------------------------------------------------
// The aggregator.

OpStats::OpStats(const Catalog* catalog, Diagnostics* diagnostics, Options options)
    : catalog_(catalog), diagnostics_(diagnostics), options_(options) {
  if (options_.bucket_ns == 0) options_.bucket_ns = OpStatsOptions{}.bucket_ns;
  if (options_.max_buckets == 0) options_.max_buckets = 1;
  if (options_.max_unclaimed_per_track < 2) options_.max_unclaimed_per_track = 2;
  idle_row_ = InternRow(kIdleName, kIdleName);  // ranked by name with the others.
  // Ids 0..kCopyKinds-1: the copy and memset kinds, in EventKind order.
  for (uint32_t i = 0; i < kCopyKinds; ++i) {
    NewDeviceOp(0, 0, static_cast<EventKind>(static_cast<uint32_t>(EventKind::kMemcpyHtoD) + i));
  }
}

void OpStats::Count(Diag d, uint64_t n) {
  if (diagnostics_ != nullptr) diagnostics_->Add(d, n);
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

OpStats::HostSpanRole OpStats::RoleOfHostSpan(NameId name) {
  if (name < host_span_roles_.size() && host_span_roles_[name] != HostSpanRole::kUnknown) {
    return host_span_roles_[name];
  }
  const std::string_view s = Name(name);
  if (s.empty()) return HostSpanRole::kIgnored;  // may be defined later: not cached.
  const HostSpanRole role = pytorch::IsDataLoaderName(s)                        ? HostSpanRole::kInputWait
                            : ParseTfOpName(s).category != OpCategory::kUnknown ? HostSpanRole::kOp
                                                                                : HostSpanRole::kIgnored;
  if (name >= host_span_roles_.size()) {
    host_span_roles_.resize(std::max<size_t>(name + 1, 2 * host_span_roles_.size()));
  }
  host_span_roles_[name] = role;
  return role;
}

bool OpStats::SelectBucket(uint64_t end) {
  if (end > newest_end_) newest_end_ = end;
  if (end >= current_begin_ && end < current_end_) [[likely]]
    return true;
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

void OpStats::ConsumeHostOp(const Event& e, bool input) {
  const uint64_t begin = e.ts;
  const uint64_t end = e.ts + e.dur;
  if (e.track >= tracks_.size()) tracks_.resize(std::max<size_t>(e.track + 1, 2 * tracks_.size()));
  std::vector<Interval>& unclaimed = tracks_[e.track].unclaimed;

  // Claim the unclaimed ops this one contains (its direct children).
  // Waits (stage kWait) inside it, at any depth: each interval carries the
  // time and count of the waits it is or holds.
  const bool wait = input && e.sub == static_cast<uint8_t>(InputStage::kWait);
  uint64_t children_ns = 0;
  uint64_t nested_wait_ns = 0;
  uint32_t nested_waits = 0;
  if (unclaimed.empty() || unclaimed.back().end <= end) [[likely]] {
    while (!unclaimed.empty()) {
      const Interval& top = unclaimed.back();
      if (top.begin >= begin) {  // top.end <= end: completion order.
        children_ns += top.end - top.begin;
        nested_wait_ns += top.wait_ns;
        nested_waits += top.waits;
        unclaimed.pop_back();
        continue;
      }
      if (top.end > begin) Count(Diag::span_misnested);
      break;
    }
    if (unclaimed.size() >= options_.max_unclaimed_per_track) {
      unclaimed.erase(unclaimed.begin(), unclaimed.begin() + static_cast<ptrdiff_t>(unclaimed.size() / 2));
    }
    unclaimed.push_back(Interval{begin, end, wait ? e.dur : nested_wait_ns, wait ? 1u : nested_waits});
  }  // else: out of order (late): claims nothing, not claimable.
  if (wait && nested_waits > 0) Count(Diag::input_wait_nested, nested_waits);
  const uint64_t self = e.dur > children_ns ? e.dur - children_ns : 0;

  InputStats input_delta;
  if (input) {
    input_delta.occurrences = 1;
    input_delta.time_ns = e.dur;
    input_delta.self_ns = self;
    input_delta.nested_wait_ns = wait ? nested_wait_ns : 0;
    input_delta.nested_waits = wait ? nested_waits : 0;
    input_delta.seq = ++input_seq_;
    input_delta.stage =
        e.sub <= static_cast<uint8_t>(InputStage::kWait) ? static_cast<InputStage>(e.sub) : InputStage::kUnknown;
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
    if (begin < t.first_ns) t.first_ns = begin;
    if (end > t.last_ns) t.last_ns = end;
    t.self_ns += self;
    return;
  }
  if (input) {
    late_.input_ops.emplace_back(e.name, input_delta);
  } else {
    late_.host_ops.emplace_back(e.name, HostStats{1, e.dur, self});
  }
  late_.tracks.emplace_back(e.track, SpanStats{begin, end, self});
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
        switch (RoleOfHostSpan(e.name)) {
          case HostSpanRole::kOp: break;
          case HostSpanRole::kInputWait: {  // a DataLoader's wait: an input op, stage wait.
            Event wait = e;
            wait.sub = static_cast<uint8_t>(InputStage::kWait);
            ConsumeCheckedHostOp(wait, /*input=*/true);
            continue;
          }
          default: continue;
        }
        break;
      case EventKind::kInputSpan: input = true; break;
      case EventKind::kFrameworkOp: break;
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
      default: continue;
    }
    ConsumeCheckedHostOp(e, input);  // a counted host op.
  }
}

void OpStats::ConsumeCheckedHostOp(const Event& e, bool input) {
  if (e.dur > kMaxEventDurationNs) [[unlikely]] {
    Count(Diag::bad_duration);
    return;
  }
  if (e.name >= kMaxId || e.track >= kMaxId) [[unlikely]] {
    Count(Diag::id_out_of_range);
    return;
  }
  ConsumeHostOp(e, input);
}

// ---------------------------------------------------------------------------
// Snapshot.

}  // namespace liveprof
