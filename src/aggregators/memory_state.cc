#include "aggregators/memory_state.h"

#include <boost/unordered/unordered_flat_map.hpp>

#include "base/flat_map.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

namespace liveprof {

namespace {

constexpr size_t kDenseNames = size_t{1} << 16;
constexpr size_t kMinLogEntries = 4096;
constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
constexpr std::string_view kCounterPrefix = "memory/";

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  const uint64_t s = a + b;
  return s < a ? ~uint64_t{0} : s;
}

// The state after one alloc/free. seq = the event's index among this memory
// id's alloc/free events: ties between equal in-use go to the larger seq.
struct Sample {
  uint64_t ts = 0;
  uint64_t seq = 0;
  uint64_t stack = 0;
  uint64_t heap = 0;
  uint64_t free_bytes = 0;
  double fragmentation_pct = kUnknown;
  uint64_t in_use() const { return stack + heap; }
};

// One window bucket: counts and the highest in-use sample (latest on ties).
struct Bucket {
  uint64_t index = 0;  // the bucket number; for "older", the largest merged.
  bool used = false;
  bool has_peak = false;
  uint64_t allocs = 0;
  uint64_t frees = 0;
  Sample peak;

  void Offer(const Sample& s) {
    if (!has_peak || s.in_use() >= peak.in_use()) {
      peak = s;
      has_peak = true;
    }
  }
  void Combine(const Bucket& o) {
    if (!o.used) return;
    index = used ? std::max(index, o.index) : o.index;
    used = true;
    allocs += o.allocs;
    frees += o.frees;
    if (o.has_peak &&
        (!has_peak || o.peak.in_use() > peak.in_use() ||
         (o.peak.in_use() == peak.in_use() && o.peak.seq >= peak.seq))) {
      peak = o.peak;
      has_peak = true;
    }
  }
};

struct SizeDelta {
  uint64_t bytes;
  bool add;
};

// Address -> bytes of the live allocations. boost::unordered_flat_map is
// faster than U64Map on this churn; U64Map is faster on the small, hot
// size histograms (bench/RESULTS.md).
using LiveMap = boost::unordered_flat_map<uint64_t, uint64_t>;

void HistAdd(U64Map& h, uint64_t bytes) { ++*h.Insert(bytes).first; }

void HistRemove(U64Map& h, uint64_t bytes) {
  uint64_t* count = h.Find(bytes);
  if (count == nullptr) return;
  if (--*count == 0) {
    uint64_t unused;
    h.Erase(bytes, &unused);
  }
}

// §8.1 approximated over the live allocations' address span (see header).
double FragmentationPct(const LiveMap& live, bool has_reserved, uint64_t reserved,
                        std::vector<std::pair<uint64_t, uint64_t>>* ranges) {
  ranges->assign(live.begin(), live.end());
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

struct MemoryState::Memory {
  NameId allocator_id = 0;
  bool host = true;
  uint8_t device = 0;  // ordinal; 0 for host.
  std::string allocator_name;
  int32_t setting = -1;  // index into settings_, -1 none.
  // Configuration (counters and Catalog).
  uint64_t capacity = 0;
  bool has_reserved = false;
  uint64_t reserved = 0;
  uint64_t stack = 0;
  // Live allocations.
  LiveMap live;
  uint64_t heap = 0;
  // Size → count of the live allocations; its copy at the peak; the deltas
  // since the peak (valid unless it outgrew its cap).
  U64Map hist;
  U64Map peak_hist;
  std::vector<SizeDelta> log;
  bool log_valid = true;
  bool incomplete = false;
  uint64_t unattributed_count = 0;  // unknown frees since the peak.
  uint64_t unattributed_bytes = 0;
  // Samples.
  uint64_t next_seq = 0;
  bool has_last = false;
  Sample last;
  bool has_peak = false;
  Sample peak;  // lifetime stack + heap peak.
  bool has_lifetime = false;
  uint64_t lifetime_peak_heap = 0;
  uint64_t lifetime_peak_heap_ts = 0;
  // Fragmentation at peaks (rate-limited).
  bool frag_computed = false;
  uint64_t frag_last_ts = 0;
  double peak_frag = 0;
  uint64_t peak_frag_ts = 0;
  // Timeline max-pyramid: points of 2^level events, plus a partial one.
  std::vector<Sample> points;
  Sample partial;
  uint64_t partial_count = 0;
  uint32_t level = 0;
  // Window buckets.
  std::vector<Bucket> ring;
  Bucket older;
  Bucket* cur = nullptr;
  uint64_t cur_index = 0;

  void LogDelta(uint64_t bytes, bool add) {
    if (!log_valid) return;
    if (log.size() >= std::max(kMinLogEntries, 2 * hist.size())) {
      log_valid = false;  // the next peak copies the histogram instead.
      log.clear();
      return;
    }
    log.push_back({bytes, add});
  }
  void AddLive(uint64_t bytes) {
    heap += bytes;
    HistAdd(hist, bytes);
    LogDelta(bytes, true);
  }
  void RemoveLive(uint64_t bytes) {
    heap -= bytes;
    HistRemove(hist, bytes);
    LogDelta(bytes, false);
  }
  uint64_t FreeBytes() const {
    if (capacity > 0) {
      const uint64_t used = stack + heap;
      return capacity > used ? capacity - used : 0;
    }
    if (has_reserved) return reserved > heap ? reserved - heap : 0;
    return 0;
  }
  Bucket& BucketFor(uint64_t index, size_t max_buckets) {
    if (cur != nullptr && cur_index == index) return *cur;
    if (ring.empty()) ring.resize(max_buckets);
    Bucket& slot = ring[index % max_buckets];
    if (slot.used && slot.index == index) {
      cur = &slot;
      cur_index = index;
      return slot;
    }
    if (slot.used && slot.index > index) {  // older than the ring: a late event.
      older.index = older.used ? std::max(older.index, index) : index;
      older.used = true;
      return older;
    }
    older.Combine(slot);
    slot = Bucket{};
    slot.used = true;
    slot.index = index;
    if (has_last) {  // the level carried into the bucket.
      slot.has_peak = true;
      slot.peak = last;
    }
    cur = &slot;
    cur_index = index;
    return slot;
  }
  void PushPoint(const Sample& s, size_t max_points) {
    if (partial_count == 0 || s.in_use() > partial.in_use()) partial = s;
    if (++partial_count < (uint64_t{1} << level)) return;
    points.push_back(partial);
    partial_count = 0;
    if (points.size() < 2 * max_points) return;
    for (size_t i = 0; i < max_points; ++i) {
      const Sample& a = points[2 * i];
      const Sample& b = points[2 * i + 1];
      points[i] = b.in_use() > a.in_use() ? b : a;  // earliest on ties.
    }
    points.resize(max_points);
    ++level;
  }
};

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
  const std::string_view name =
      catalog_ != nullptr ? catalog_->Name(m.allocator_id) : std::string_view();
  if (name.empty() ? m.allocator_name != AllocatorName(m.allocator_id)
                   : m.allocator_name != name) {
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

MemoryState::Memory& MemoryState::Create(NameId allocator, bool host, uint8_t device,
                                         uint64_t key) {
  auto m = std::make_unique<Memory>();
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
    const uint64_t bytes = e.payload.memory.bytes;
    const auto [it, inserted] = m.live.try_emplace(address, 0);
    uint64_t* const value = &it->second;
    uint32_t frees = 0;
    if (!inserted) {  // still live: the earlier allocation is taken as freed.
      if (diagnostics_ != nullptr) diagnostics_->Add(Diag::alloc_address_reused);
      m.RemoveLive(*value);
      frees = 1;
    }
    *value = bytes;
    m.AddLive(bytes);
    Record(m, e, 1, frees);
    return;
  }
  const auto it = m.live.find(address);
  if (it == m.live.end()) {
    if (diagnostics_ != nullptr) diagnostics_->Add(Diag::free_unknown_address);
    m.incomplete = true;
    ++m.unattributed_count;
    m.unattributed_bytes += e.payload.memory.bytes;
    m.BucketFor(BucketIndex(e.ts + e.dur), options_.max_buckets).frees += 1;
    return;
  }
  const uint64_t bytes = it->second;
  m.live.erase(it);
  m.RemoveLive(bytes);
  Record(m, e, 0, 1);
}

void MemoryState::Record(Memory& m, const Event& e, uint32_t allocs, uint32_t frees) {
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
    for (const SizeDelta& d : m.log) {
      if (d.add) {
        HistAdd(m.peak_hist, d.bytes);
      } else {
        HistRemove(m.peak_hist, d.bytes);
      }
    }
  } else {
    m.peak_hist = m.hist;
  }
  m.log.clear();
  m.log_valid = true;
  m.unattributed_count = 0;
  m.unattributed_bytes = 0;
  if (!m.frag_computed ||
      (ts >= m.frag_last_ts && ts - m.frag_last_ts >= options_.peak_detail_interval_ns)) {
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
          allocator.assign(name.substr(kCounterPrefix.size(),
                                       name.size() - kCounterPrefix.size() - suffix.size()));
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
Bucket WindowBucket(const Bucket& older, const std::vector<Bucket>& ring, uint64_t window_ns,
                    uint64_t first_index) {
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
      if (lifetime_peak) {
        out.breakdown_at_peak = true;
        m.peak_hist.ForEach([&](uint64_t bytes, uint64_t count) {
          out.breakdown.push_back({bytes, count, bytes * count, false});
        });
        auto by_total = [](const auto& a, const auto& b) {
          return a.total_bytes != b.total_bytes ? a.total_bytes > b.total_bytes
                                                : a.bytes > b.bytes;
        };
        const size_t keep = std::min(out.breakdown.size(), options_.breakdown_rows);
        std::partial_sort(out.breakdown.begin(), out.breakdown.begin() + keep,
                          out.breakdown.end(), by_total);
        out.breakdown.resize(keep);
        if (m.incomplete) {
          out.breakdown.push_back({0, m.unattributed_count, m.unattributed_bytes, true});
        }
      }
    }

    // Timeline: stored points in the window, then §8.3's box rule.
    stored.clear();
    auto in_window = [&](const Sample& s) {
      return window_ns == 0 || s.ts / options_.bucket_ns >= first_index;
    };
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
  std::sort(snap.memories.begin(), snap.memories.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  return snap;
}

}  // namespace liveprof
