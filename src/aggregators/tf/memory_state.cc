#include "aggregators/tf/memory_state.h"

#include <boost/unordered/unordered_flat_map.hpp>

#include "aggregators/tf/memory_state_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

namespace liveprof {

using memory_internal::HistAdd;
using memory_internal::kDenseNames;
using memory_internal::kUnknown;

namespace {

constexpr std::string_view kCounterPrefix = "memory/";

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  const uint64_t s = a + b;
  return s < a ? ~uint64_t{0} : s;
}

// docs/semantics-tf.md §8.1 approximated over the live allocations' address span (see header).
double FragmentationPct(const LiveMap& live, bool has_reserved, uint64_t reserved,
                        std::vector<std::pair<uint64_t, uint64_t>>* ranges) {
  ranges->clear();
  for (const auto& [address, a] : live) ranges->emplace_back(address, a.bytes);
  if (ranges->empty()) return 0;
  std::sort(ranges->begin(), ranges->end());
  const uint64_t lowest = ranges->front().first;
  uint64_t end = lowest;
  uint64_t free = 0;
  uint64_t largest = 0;
  for (const auto& [address, bytes] : *ranges) {
    if (address > end) {
      const uint64_t gap = address - end;
      free += gap;
      largest = std::max(largest, gap);
    }
    end = std::max(end, SaturatingAdd(address, bytes));
  }
  if (has_reserved) {
    const uint64_t region_end = SaturatingAdd(lowest, reserved);
    if (region_end > end) {
      const uint64_t gap = region_end - end;
      free += gap;
      largest = std::max(largest, gap);
    }
  }
  if (free == 0) return 0;
  return 100.0 * static_cast<double>(free - largest) / static_cast<double>(free);
}

uint64_t CounterBytes(double v) {
  if (!(v > 0)) return 0;  // negative, zero, NaN.
  if (v >= 18446744073709549568.0) return ~uint64_t{0};
  return static_cast<uint64_t>(v);
}

std::string IdString(bool host, uint8_t device, std::string_view allocator) {
  std::string id = host ? std::string("Host ") : "GPU:" + std::to_string(device) + " ";
  id += allocator;
  return id;
}

}  // namespace

MemoryState::MemoryState(const Catalog* catalog, Diagnostics* diagnostics, Options options)
    : catalog_(catalog), diagnostics_(diagnostics), options_(options) {
  options_.bucket_ns = std::max<uint64_t>(options_.bucket_ns, 1);
  options_.max_buckets = std::max<size_t>(options_.max_buckets, 1);
  options_.max_points = std::clamp<size_t>(options_.max_points, 1, size_t{1} << 30);
}

MemoryState::~MemoryState() = default;
MemoryState::MemoryState(MemoryState&&) noexcept = default;
MemoryState& MemoryState::operator=(MemoryState&&) noexcept = default;

std::string MemoryState::AllocatorName(NameId id) const {
  if (catalog_ == nullptr) return "#" + std::to_string(id);
  return catalog_->DisplayName(id);
}

void MemoryState::RefreshConfig(Memory& m) {
  const std::string_view name = catalog_ != nullptr ? catalog_->Name(m.allocator_id) : std::string_view();
  if (name.empty() ? m.allocator_name != AllocatorName(m.allocator_id) : m.allocator_name != name) {
    m.allocator_name = AllocatorName(m.allocator_id);
    m.setting = -1;
  }
  if (m.setting < 0) {
    for (size_t i = 0; i < settings_.size(); ++i) {
      if (settings_[i].device == m.device && settings_[i].allocator == m.allocator_name) {
        m.setting = static_cast<int32_t>(i);
        break;
      }
    }
  }
  const CounterSetting* s = m.setting >= 0 ? &settings_[static_cast<size_t>(m.setting)] : nullptr;
  m.stack = s != nullptr ? s->stack : 0;
  m.has_reserved = s != nullptr && s->has_reserved;
  m.reserved = s != nullptr ? s->reserved : 0;
  m.capacity = 0;
  if (s != nullptr && s->capacity > 0) {
    m.capacity = s->capacity;
  } else if (!m.host && catalog_ != nullptr) {
    if (const DeviceDef* d = catalog_->Device(m.device)) m.capacity = d->memory_bytes;
  }
}

MemoryState::Memory& MemoryState::Create(NameId allocator, bool host, uint8_t device, uint64_t key) {
  auto m = std::make_unique<Memory>();
  m->index = static_cast<uint32_t>(memories_.size());
  m->allocator_id = allocator;
  m->host = host;
  m->device = host ? 0 : device;
  m->allocator_name = AllocatorName(allocator);
  RefreshConfig(*m);
  const auto index = static_cast<uint32_t>(memories_.size());
  if (allocator < kDenseNames) {
    if (allocator >= by_name_.size()) by_name_.resize(allocator + 1);
    by_name_[allocator].emplace_back(static_cast<uint16_t>(key & 511), index);
  } else {
    by_key_.emplace(key, index);
  }
  memories_.push_back(std::move(m));
  return *memories_.back();
}

MemoryState::Memory& MemoryState::Lookup(NameId allocator, uint8_t memory_kind, uint8_t device) {
  const auto kind = static_cast<MemoryKind>(memory_kind);
  const bool host = !(kind == MemoryKind::kDevice || kind == MemoryKind::kManaged);
  const uint64_t tag = host ? 0 : 1 + uint64_t{device};
  const uint64_t key = uint64_t{allocator} << 9 | tag;
  if (key == last_key_) return *last_;
  Memory* found = nullptr;
  if (allocator < kDenseNames) {
    if (allocator < by_name_.size()) {
      for (const auto& [t, index] : by_name_[allocator]) {
        if (t == tag) {
          found = memories_[index].get();
          break;
        }
      }
    }
  } else if (auto it = by_key_.find(key); it != by_key_.end()) {
    found = memories_[it->second].get();
  }
  if (found == nullptr) found = &Create(allocator, host, device, key);
  last_key_ = key;
  last_ = found;
  return *found;
}

uint64_t MemoryState::BucketIndex(uint64_t end) {
  if (end >= bucket_start_ && end < bucket_end_) return bucket_index_;
  bucket_index_ = end / options_.bucket_ns;
  bucket_start_ = bucket_index_ * options_.bucket_ns;
  bucket_end_ = SaturatingAdd(bucket_start_, options_.bucket_ns);
  return bucket_index_;
}

void MemoryState::Consume(std::span<const Event> events) {
  // The Catalog absorbed this batch's definitions: pick up device capacities
  // and allocator names defined since the last batch.
  for (auto& m : memories_) RefreshConfig(*m);
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::kAlloc:
      case EventKind::kFree:
      case EventKind::kCounter:
        if (e.dur > kMaxEventDurationNs) {
          if (diagnostics_ != nullptr) diagnostics_->Add(Diag::bad_duration);
          continue;
        }
        now_ = std::max(now_, e.ts + e.dur);
        if (e.kind == EventKind::kCounter) {
          OnCounter(e);
        } else {
          OnMemoryEvent(e);
        }
        break;
      case EventKind::kFrameworkOp:
      case EventKind::kHostSpan:
      case EventKind::kInputSpan:
        if (e.dur > kMaxEventDurationNs) continue;
        now_ = std::max(now_, e.ts + e.dur);
        if (!pending_.empty()) OnSpan(e);
        break;
      default:
        if (e.dur <= kMaxEventDurationNs) now_ = std::max(now_, e.ts + e.dur);
        break;
    }
  }
}

void MemoryState::OnMemoryEvent(const Event& e) {
  Memory& m = Lookup(e.name, e.sub, e.device);
  const uint64_t address = e.payload.memory.address;
  if (e.kind == EventKind::kAlloc) {
    // What the framework said of it (XPlane's tf_op, shape...) is its row:
    // no span to wait for.
    const bool annotated = (e.flags & kFlagAllocAnnotation) != 0 && e.corr != 0;
    TrackQueue* t = annotated ? nullptr : &QueueOf(e.track);
    const LiveAlloc a{e.payload.memory.bytes, m.next_seq, annotated ? e.corr : 0, !annotated && !t->spanless};
    const auto [it, inserted] = m.live.try_emplace(address, a);
    uint32_t frees = 0;
    if (!inserted) {  // still live: the earlier allocation is taken as freed.
      if (diagnostics_ != nullptr) diagnostics_->Add(Diag::alloc_address_reused);
      m.RemoveLive(it->second);
      it->second = a;
      frees = 1;
    }
    m.AddLive(a);
    Record(m, e, 1, frees);
    if (annotated || t->spanless) return;
    std::deque<Pending>& q = t->q;
    q.push_back({e.ts, address, a.bytes, a.seq, m.index});
    ++pending_count_;
    // Bounded wait: the oldest give up on a span past the horizon or the cap;
    // all of them on a track that looks like one without spans.
    const bool spanless = !t->seen_span && q.size() > options_.spanless_after;
    while (!q.empty() && (spanless || q.size() > options_.max_pending_per_track ||
                          q.front().ts + options_.attribution_horizon_ns < e.ts)) {
      Unpend(q.front());
      q.pop_front();
      --pending_count_;
    }
    t->spanless = spanless;
    return;
  }
  const auto it = m.live.find(address);
  if (it == m.live.end()) {
    if (diagnostics_ != nullptr) diagnostics_->Add(Diag::free_unknown_address);
    m.incomplete = true;
    ++m.unseen_count;
    m.unseen_bytes += e.payload.memory.bytes;
    m.BucketFor(BucketIndex(e.ts + e.dur), options_.max_buckets).frees += 1;
    return;
  }
  const LiveAlloc a = it->second;
  m.live.erase(it);
  m.RemoveLive(a);
  Record(m, e, 0, 1);
}

// Inline in OnMemoryEvent, per allocation and free.
[[gnu::always_inline]] inline void MemoryState::Record(Memory& m, const Event& e, uint32_t allocs, uint32_t frees) {
  Sample s;
  s.ts = e.ts;
  s.seq = m.next_seq++;
  s.stack = m.stack;
  s.heap = m.heap;
  s.free_bytes = m.FreeBytes();
  if (!m.has_lifetime || s.heap >= m.lifetime_peak_heap) {
    m.has_lifetime = true;
    m.lifetime_peak_heap = s.heap;
    m.lifetime_peak_heap_ts = s.ts;
  }
  if (!m.has_peak || s.in_use() >= m.peak.in_use()) {
    OnNewPeak(m, s.ts, &s.fragmentation_pct);
    m.peak = s;
    m.has_peak = true;
  }
  m.PushPoint(s, options_.max_points);
  Bucket& b = m.BucketFor(BucketIndex(e.ts + e.dur), options_.max_buckets);
  b.allocs += allocs;
  b.frees += frees;
  b.Offer(s);
  m.last = s;
  m.has_last = true;
}

void MemoryState::OnNewPeak(Memory& m, uint64_t ts, double* fragmentation_pct) {
  if (m.log_valid) {
    for (const RowDelta& d : m.log) HistAdd(m.peak_hist, d.key, d.add);
  } else {
    m.peak_hist = m.hist;
  }
  m.log.clear();
  m.log_valid = true;
  if (!m.freed_pending.empty()) m.freed_pending.clear();  // clear() is O(capacity).
  m.unseen_count = 0;
  m.unseen_bytes = 0;
  if (!m.frag_computed || (ts >= m.frag_last_ts && ts - m.frag_last_ts >= options_.peak_detail_interval_ns)) {
    *fragmentation_pct = FragmentationPct(m.live, m.has_reserved, m.reserved, &scratch_);
    m.frag_computed = true;
    m.frag_last_ts = ts;
    m.peak_frag = *fragmentation_pct;
    m.peak_frag_ts = ts;
  }
}

void MemoryState::OnCounter(const Event& e) {
  if (catalog_ == nullptr) return;
  CounterField field = CounterField::kUnparsed;
  std::string allocator;
  const bool dense = e.name < kDenseNames;
  if (dense && e.name < counter_field_.size()) field = counter_field_[e.name];
  if (field == CounterField::kNotMemory) return;
  if (field == CounterField::kUnparsed) {
    const std::string_view name = catalog_->Name(e.name);
    if (name.empty()) return;  // not defined yet: parse when it is.
    field = CounterField::kNotMemory;
    if (name.starts_with(kCounterPrefix)) {
      static constexpr std::pair<std::string_view, CounterField> kSuffixes[] = {
          {"/capacity_bytes", CounterField::kCapacity},
          {"/reserved_bytes", CounterField::kReserved},
          {"/stack_bytes", CounterField::kStack},
      };
      for (const auto& [suffix, f] : kSuffixes) {
        if (name.size() > kCounterPrefix.size() + suffix.size() && name.ends_with(suffix)) {
          field = f;
          allocator.assign(name.substr(kCounterPrefix.size(), name.size() - kCounterPrefix.size() - suffix.size()));
          break;
        }
      }
    }
    if (dense) {
      if (e.name >= counter_field_.size()) {
        counter_field_.resize(e.name + 1, CounterField::kUnparsed);
        counter_allocator_.resize(e.name + 1);
      }
      counter_field_[e.name] = field;
      counter_allocator_[e.name] = allocator;
    }
    if (field == CounterField::kNotMemory) return;
  } else {
    allocator = counter_allocator_[e.name];
  }
  size_t index = 0;
  while (index < settings_.size() &&
         !(settings_[index].device == e.device && settings_[index].allocator == allocator)) {
    ++index;
  }
  if (index == settings_.size()) {
    settings_.push_back({});
    settings_.back().allocator = allocator;
    settings_.back().device = e.device;
  }
  CounterSetting& s = settings_[index];
  const uint64_t value = CounterBytes(e.payload.counter.value);
  switch (field) {
    case CounterField::kCapacity: s.capacity = value; break;
    case CounterField::kReserved:
      s.has_reserved = true;
      s.reserved = value;
      break;
    case CounterField::kStack: s.stack = value; break;
    default: break;
  }
  for (auto& m : memories_) {
    if (m->device == e.device && m->allocator_name == allocator) {
      m->setting = static_cast<int32_t>(index);
      RefreshConfig(*m);
    }
  }
}

namespace {

// The buckets (`older` and the ring) that the window starting at bucket
// `first_index` covers, combined (window_ns == 0: all of them).
Bucket WindowBucket(const Bucket& older, const std::vector<Bucket>& ring, uint64_t window_ns, uint64_t first_index) {
  Bucket acc;
  if (window_ns == 0 || (older.used && older.index >= first_index)) acc.Combine(older);
  for (const Bucket& b : ring) {
    if (b.used && (window_ns == 0 || b.index >= first_index)) acc.Combine(b);
  }
  return acc;
}

}  // namespace

std::optional<double> MemoryState::MaxUsedPct(uint64_t window_ns) const {
  const uint64_t cutoff = window_ns == 0 || now_ <= window_ns ? 0 : now_ - window_ns;
  const uint64_t first_index = cutoff / options_.bucket_ns;
  std::optional<double> best;
  for (const auto& mp : memories_) {
    const Memory& m = *mp;
    if (m.capacity == 0) continue;
    const Bucket acc = WindowBucket(m.older, m.ring, window_ns, first_index);
    const Sample* peak = acc.has_peak ? &acc.peak : (m.has_last ? &m.last : nullptr);
    if (peak == nullptr) continue;
    const double pct = 100.0 * static_cast<double>(peak->in_use()) / static_cast<double>(m.capacity);
    if (!best || pct > *best) best = pct;
  }
  return best;
}

MemoryStateSnapshot MemoryState::Snapshot(uint64_t window_ns) const {
  MemoryStateSnapshot snap;
  snap.window_ns = window_ns;
  snap.now_ns = now_;
  const uint64_t cutoff = window_ns == 0 || now_ <= window_ns ? 0 : now_ - window_ns;
  const uint64_t first_index = cutoff / options_.bucket_ns;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<Sample> stored;
  for (const auto& mp : memories_) {
    const Memory& m = *mp;
    MemoryStateSnapshot::Memory out;
    out.allocator = m.allocator_name;
    out.host = m.host;
    out.device = m.device;
    out.id = IdString(m.host, m.device, m.allocator_name);
    out.capacity_bytes = m.capacity;
    if (m.has_reserved) out.reserved_bytes = m.reserved;
    out.lifetime_peak_heap_bytes = m.lifetime_peak_heap;
    out.lifetime_peak_heap_ts_ns = m.lifetime_peak_heap_ts;
    out.live_allocations = m.live.size();
    out.stack_bytes = m.stack;
    out.heap_bytes = m.heap;
    out.free_bytes = m.FreeBytes();
    out.fragmentation_pct = FragmentationPct(m.live, m.has_reserved, m.reserved, &ranges);
    out.live_map_incomplete = m.incomplete;

    // Window: counts and peak over the buckets it covers.
    const Bucket acc = WindowBucket(m.older, m.ring, window_ns, first_index);
    out.num_allocations = acc.allocs;
    out.num_deallocations = acc.frees;
    const Sample* peak = acc.has_peak ? &acc.peak : (m.has_last ? &m.last : nullptr);
    if (peak != nullptr) {
      out.has_peak = true;
      out.peak_bytes = peak->in_use();
      out.peak_ts_ns = peak->ts;
      out.peak_stack_bytes = peak->stack;
      out.peak_heap_bytes = peak->heap;
      out.peak_free_bytes = peak->free_bytes;
      const bool lifetime_peak = m.has_peak && peak->seq == m.peak.seq;
      if (!std::isnan(peak->fragmentation_pct)) {
        out.peak_fragmentation_pct = peak->fragmentation_pct;
        out.peak_fragmentation_ts_ns = peak->ts;
      } else if (lifetime_peak && m.last.seq == m.peak.seq) {
        out.peak_fragmentation_pct = out.fragmentation_pct;  // unchanged since.
        out.peak_fragmentation_ts_ns = peak->ts;
      } else if (lifetime_peak && m.frag_computed) {
        out.peak_fragmentation_pct = m.peak_frag;  // an earlier peak's value.
        out.peak_fragmentation_ts_ns = m.peak_frag_ts;
      }
      if (lifetime_peak) BreakdownAtPeak(m, &out);
    }

    // Timeline: stored points in the window, then §8.3's box rule.
    stored.clear();
    auto in_window = [&](const Sample& s) { return window_ns == 0 || s.ts / options_.bucket_ns >= first_index; };
    for (const Sample& s : m.points) {
      if (in_window(s)) stored.push_back(s);
    }
    if (m.partial_count > 0 && in_window(m.partial)) stored.push_back(m.partial);
    auto emit = [&](const Sample& s) {
      MemoryStateSnapshot::Point p;
      p.ts_ns = s.ts;
      p.stack_bytes = s.stack;
      p.heap_bytes = s.heap;
      p.free_bytes = s.free_bytes;
      if (!std::isnan(s.fragmentation_pct)) p.fragmentation_pct = s.fragmentation_pct;
      out.timeline.push_back(p);
    };
    const size_t n = stored.size();
    const size_t max = options_.max_points;
    if (n <= max) {
      for (const Sample& s : stored) emit(s);
    } else {
      const size_t width = n / max;
      const size_t count1 = max * (width + 1) - n;  // boxes of `width`, then of width + 1.
      size_t begin = 0;
      for (size_t box = 0; box < max; ++box) {
        const size_t end = begin + (box < count1 ? width : width + 1);
        size_t best = begin;
        for (size_t i = begin + 1; i < end; ++i) {
          if (stored[i].in_use() > stored[best].in_use()) best = i;
        }
        emit(stored[best]);
        begin = end;
      }
    }
    snap.memories.push_back(std::move(out));
  }
  std::sort(snap.memories.begin(), snap.memories.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return snap;
}

}  // namespace liveprof
