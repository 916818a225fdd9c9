#include "aggregators/steps/device_utilization.h"

#include <algorithm>
#include <iterator>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "stream/diagnostics.h"

namespace liveprof {

// ---------------------------------------------------------------------------
// Snapshot value.

const DeviceUtilizationSnapshot::Device* DeviceUtilizationSnapshot::Find(uint8_t ordinal) const {
  for (const Device& d : devices) {
    if (d.ordinal == ordinal) return &d;
  }
  return nullptr;
}

void DeviceUtilizationSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.KV("window_ns", window_ns);
  w.Key("devices");
  w.BeginArray();
  for (const Device& d : devices) {
    w.BeginObject();
    w.KV("device", uint32_t{d.ordinal});
    w.KV("name", d.name);
    w.KV("busy_ns", d.busy_ns);
    w.KV("kernel_busy_ns", d.kernel_busy_ns);
    w.KV("first_ns", d.first_ns);
    w.KV("last_ns", d.last_ns);
    w.KV("span_ns", d.span_ns);
    w.KV("utilization_pct", d.utilization_pct);
    w.KV("kernel_utilization_pct", d.kernel_utilization_pct);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

std::string DeviceUtilizationSnapshot::ToCsv() const {
  std::string out =
      "device,name,busy_ns,kernel_busy_ns,first_ns,last_ns,span_ns,utilization_pct,"
      "kernel_utilization_pct\n";
  for (const Device& d : devices) {
    out += std::to_string(d.ordinal);
    out += ',';
    AppendCsvField(&out, d.name);
    for (uint64_t v : {d.busy_ns, d.kernel_busy_ns, d.first_ns, d.last_ns, d.span_ns}) {
      out += ',';
      out += std::to_string(v);
    }
    out += ',';
    AppendCsvNumber(&out, d.utilization_pct);
    out += ',';
    AppendCsvNumber(&out, d.kernel_utilization_pct);
    out += '\n';
  }
  return out;
}

// ---------------------------------------------------------------------------
// Pieces.

void DeviceUtilization::IntervalSet::Prune(uint64_t floor) {
  while (!v.empty() && v.front().end <= floor) v.pop_front();
}

void DeviceUtilization::DevBucket::Combine(const DevBucket& o) {
  busy += o.busy;
  kernel_busy += o.kernel_busy;
  first = std::min(first, o.first);
  last = std::max(last, o.last);
}

void DeviceUtilization::Bucket::Reset(int64_t new_index) {
  index = new_index;
  dev.clear();
}

void DeviceUtilization::Bucket::Combine(const Bucket& o) {
  if (dev.size() < o.dev.size()) dev.resize(o.dev.size());
  for (size_t i = 0; i < o.dev.size(); ++i) dev[i].Combine(o.dev[i]);
}

// ---------------------------------------------------------------------------
// DeviceUtilization.

DeviceUtilization::DeviceUtilization(const Catalog* catalog, Diagnostics* diagnostics, Options options)
    : catalog_(catalog), diagnostics_(diagnostics), options_(options) {
  if (options_.bucket_ns == 0) options_.bucket_ns = 1;
  if (options_.max_buckets == 0) options_.max_buckets = 1;
  history_buckets_ = (options_.history_ns + options_.bucket_ns - 1) / options_.bucket_ns;
  slot_of_.fill(-1);
  ring_.resize(options_.max_buckets);
}

uint32_t DeviceUtilization::AddDevice(uint8_t ordinal) {
  const auto slot = static_cast<uint32_t>(devices_.size());
  devices_.emplace_back();
  devices_.back().ordinal = ordinal;
  slot_of_[ordinal] = static_cast<int16_t>(slot);
  return slot;
}

void DeviceUtilization::Advance(int64_t k) {
  const int64_t n = static_cast<int64_t>(options_.max_buckets);
  for (int64_t j = std::max(newest_ + 1, k - n + 1); j <= k; ++j) {
    Bucket& slot = ring_[static_cast<size_t>(j % n)];
    if (slot.index >= 0) older_.Combine(slot);
    slot.Reset(j);
  }
  newest_ = k;
  cur_ = &ring_[static_cast<size_t>(k % n)];
  cur_begin_ = static_cast<uint64_t>(k) * options_.bucket_ns;
  cur_len_ = options_.bucket_ns;
  // Drop merged intervals that ended before the history floor.
  if (static_cast<uint64_t>(k) >= history_buckets_) {
    const uint64_t floor = (static_cast<uint64_t>(k) - history_buckets_) * options_.bucket_ns;
    if (floor > floor_) {
      floor_ = floor;
      for (DeviceState& d : devices_) {
        d.all.Prune(floor_);
        d.kernels.Prune(floor_);
      }
    }
  }
}

DeviceUtilization::Bucket* DeviceUtilization::BucketAt(int64_t k) {
  const int64_t n = static_cast<int64_t>(options_.max_buckets);
  if (k <= newest_ - n) return &older_;
  Bucket& b = ring_[static_cast<size_t>(k % n)];
  if (b.index != k) b.Reset(k);  // unreachable: the advance indexes every slot.
  return &b;
}

inline void DeviceUtilization::AddPiece(Bucket* bucket, uint32_t slot, bool kernel_union, uint64_t s, uint64_t t,
                                        uint64_t len) {
  DevBucket& d = bucket->Dev(slot);
  if (kernel_union) {
    d.kernel_busy += len;
  } else {
    d.busy += len;
    d.first = std::min(d.first, s);
    d.last = std::max(d.last, t);
  }
}

inline void DeviceUtilization::AddCoverage(uint32_t slot, bool kernel_union, uint64_t s, uint64_t t) {
  if (s >= cur_begin_ && t - cur_begin_ <= cur_len_) {
    AddPiece(cur_, slot, kernel_union, s, t, t - s);
    return;
  }
  AddCoverageSlow(slot, kernel_union, s, t);
}

void DeviceUtilization::AddCoverageSlow(uint32_t slot, bool kernel_union, uint64_t s, uint64_t t) {
  // Split at bucket boundaries; what lies before the ring goes to "older".
  const uint64_t bucket_ns = options_.bucket_ns;
  const int64_t n = static_cast<int64_t>(options_.max_buckets);
  const uint64_t ring_begin = newest_ >= n ? static_cast<uint64_t>(newest_ - n + 1) * bucket_ns : 0;
  if (s < ring_begin) {
    const uint64_t pt = std::min(t, ring_begin);
    AddPiece(&older_, slot, kernel_union, s, pt, pt - s);
    s = pt;
  }
  while (s < t) {
    const uint64_t k = s / bucket_ns;
    const uint64_t pt = std::min(t, (k + 1) * bucket_ns);
    AddPiece(BucketAt(static_cast<int64_t>(k)), slot, kernel_union, s, pt, pt - s);
    s = pt;
  }
}

void DeviceUtilization::EstimateBehindFloor(uint32_t slot, bool kernel_union, uint64_t b, uint64_t e) {
  // The merged intervals behind floor_ are gone; only the bucket totals are
  // left. A whole bucket covered by [b, e) becomes fully busy (exact); a
  // partly covered one gets max(0, piece - already counted), the lower bound.
  // Before the ring only the extent is known.
  const uint64_t bucket_ns = options_.bucket_ns;
  const int64_t n = static_cast<int64_t>(options_.max_buckets);
  const uint64_t ring_begin = newest_ >= n ? static_cast<uint64_t>(newest_ - n + 1) * bucket_ns : 0;
  if (b < ring_begin) {
    const uint64_t pt = std::min(e, ring_begin);
    AddPiece(&older_, slot, kernel_union, b, pt, 0);
    b = pt;
  }
  while (b < e) {
    const uint64_t k = b / bucket_ns;
    const uint64_t pt = std::min(e, (k + 1) * bucket_ns);
    Bucket* bucket = BucketAt(static_cast<int64_t>(k));
    const DevBucket& d = bucket->Dev(slot);
    const uint64_t counted = kernel_union ? d.kernel_busy : d.busy;
    const uint64_t len = pt - b;
    AddPiece(bucket, slot, kernel_union, b, pt, len > counted ? len - counted : 0);
    b = pt;
  }
}

bool DeviceUtilization::Insert(uint32_t slot, bool kernel_union, uint64_t b, uint64_t e) {
  bool behind = false;
  if (b < floor_) [[unlikely]] {
    behind = true;
    EstimateBehindFloor(slot, kernel_union, b, std::min(e, floor_));
    b = floor_;
    if (b >= e) return true;
  }
  IntervalSet& set = kernel_union ? devices_[slot].kernels : devices_[slot].all;
  std::deque<Interval>& v = set.v;
  // (back() and front() here, not size() and []: a deque's size and index
  // take node arithmetic: ~40 instructions an insert on this path.)
  if (v.empty() || v.back().end < b) {  // disjoint from everything: the common case.
    v.push_back({b, e});
    AddCoverage(slot, kernel_union, b, e);
    return behind;
  }
  Interval& tail = v.back();
  if (e >= tail.end && (&tail == &v.front() || std::prev(v.end(), 2)->end < b)) {
    // Overlaps or touches the tail interval only: the other common case.
    if (b < tail.begin) {
      AddCoverage(slot, kernel_union, b, tail.begin);
      tail.begin = b;
    }
    if (e > tail.end) {
      AddCoverage(slot, kernel_union, tail.end, e);
      tail.end = e;
    }
    return behind;
  }
  // [i, j) = the intervals that overlap or touch [b, e).
  const size_t n = v.size();
  size_t i = n - 1;
  size_t j = n;
  if (e >= v[n - 1].end) {
    // In end order: the overlapped intervals are the tail.
    while (i > 0 && v[i - 1].end >= b) --i;
  } else {
    // Late: anywhere.
    const auto first = v.begin();
    i = static_cast<size_t>(
        std::lower_bound(first, v.end(), b, [](const Interval& x, uint64_t t) { return x.end < t; }) - v.begin());
    j = static_cast<size_t>(std::upper_bound(v.begin() + static_cast<ptrdiff_t>(i), v.end(), e,
                                             [](uint64_t t, const Interval& x) { return t < x.begin; }) -
                            v.begin());
  }
  // New coverage = [b, e) minus those intervals.
  uint64_t cur = b;
  for (size_t k = i; k < j; ++k) {
    if (v[k].begin > cur) AddCoverage(slot, kernel_union, cur, v[k].begin);
    cur = std::max(cur, v[k].end);
  }
  if (cur < e) AddCoverage(slot, kernel_union, cur, e);
  if (i == j) {
    v.insert(v.begin() + static_cast<ptrdiff_t>(i), Interval{b, e});
  } else {
    v[i] = Interval{std::min(b, v[i].begin), std::max(e, v[j - 1].end)};
    v.erase(v.begin() + static_cast<ptrdiff_t>(i + 1), v.begin() + static_cast<ptrdiff_t>(j));
  }
  return behind;
}

// Flattened: Insert, twice per kernel, and the interval lists' appends inline.
[[gnu::flatten]] void DeviceUtilization::Consume(std::span<const Event> events) {
  for (const Event& e : events) {
    if (!IsDeviceKind(e.kind)) continue;
    const uint64_t dur = e.dur;
    if (dur == 0) continue;  // covers nothing.
    if (dur > kMaxEventDurationNs || e.ts > UINT64_MAX - dur) [[unlikely]] {
      if (diagnostics_ != nullptr) diagnostics_->Add(Diag::bad_duration);
      continue;
    }
    const uint64_t end = e.ts + dur;
    if (end > last_end_) {
      last_end_ = end;
      if (end - cur_begin_ > cur_len_) {
        Advance(static_cast<int64_t>((end - 1) / options_.bucket_ns));
      }
    }
    const uint32_t slot = SlotFor(e.device);
    bool behind = Insert(slot, /*kernel_union=*/false, e.ts, end);
    if (e.kind == EventKind::kKernel) behind |= Insert(slot, /*kernel_union=*/true, e.ts, end);
    if (behind && diagnostics_ != nullptr) diagnostics_->Add(Diag::device_interval_beyond_history);
  }
}

DeviceUtilizationSnapshot DeviceUtilization::Snapshot(uint64_t window_ns) const {
  DeviceUtilizationSnapshot s;
  s.window_ns = window_ns;
  if (newest_ < 0) return s;
  Bucket acc;
  int64_t first = 0;
  if (window_ns == 0 || window_ns >= last_end_) {
    acc.Combine(older_);  // the window covers all time.
  } else {
    first = static_cast<int64_t>((last_end_ - window_ns) / options_.bucket_ns);
  }
  const int64_t n = static_cast<int64_t>(options_.max_buckets);
  for (int64_t k = std::max(first, newest_ - n + 1); k <= newest_; ++k) {
    const Bucket& b = ring_[static_cast<size_t>(k % n)];
    if (b.index == k) acc.Combine(b);
  }
  for (uint32_t slot = 0; slot < acc.dev.size(); ++slot) {
    const DevBucket& d = acc.dev[slot];
    if (d.first == UINT64_MAX) continue;  // nothing in the window.
    DeviceUtilizationSnapshot::Device out;
    out.ordinal = devices_[slot].ordinal;
    if (catalog_ != nullptr) {
      if (const DeviceDef* def = catalog_->Device(out.ordinal)) out.name = def->name;
    }
    out.busy_ns = d.busy;
    out.kernel_busy_ns = d.kernel_busy;
    out.first_ns = d.first;
    out.last_ns = d.last;
    out.span_ns = d.last - d.first;
    if (out.span_ns != 0) {
      out.utilization_pct = 100.0 * static_cast<double>(d.busy) / static_cast<double>(out.span_ns);
      out.kernel_utilization_pct = 100.0 * static_cast<double>(d.kernel_busy) / static_cast<double>(out.span_ns);
    }
    s.devices.push_back(std::move(out));
  }
  std::sort(s.devices.begin(), s.devices.end(), [](const auto& a, const auto& b) { return a.ordinal < b.ordinal; });
  return s;
}

}  // namespace liveprof
