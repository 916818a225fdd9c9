// DeviceUtilization: how busy each GPU was. Per device ordinal: busy time =
// length of the union of its kernel, memcpy and memset intervals (streams
// overlap, so a plain sum would exceed the wall time); kernel busy = the
// union of kernels alone; span = first device event begin to last device
// event end; utilization = busy / span. Rolling windows are time buckets over
// the time of the busy intervals themselves (an interval that crosses a
// bucket boundary is split).
//
// Events arrive by end time, so the union is built incrementally: per device
// a short sorted list of disjoint merged intervals, where a new interval
// merges with the tail. Intervals that ended more than Options::history_ns
// before the newest bucket are dropped at bucket changes; a late (kFlagLate)
// or very long interval that reaches behind that point is still counted, the
// part behind estimated from the bucket totals (Diag::
// device_interval_beyond_history).
//
// Pure: Consume() and Snapshot(), no I/O, no locks, no threads.
#ifndef LIVEPROF_AGGREGATORS_STEPS_DEVICE_UTILIZATION_H_
#define LIVEPROF_AGGREGATORS_STEPS_DEVICE_UTILIZATION_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "stream/event.h"

namespace liveprof {

class Catalog;
class Diagnostics;
class JsonWriter;

struct DeviceUtilizationSnapshot {
  struct Device {
    uint8_t ordinal = 0;
    std::string name;                   // from the stream's kDeviceInfo, or "".
    uint64_t busy_ns = 0;               // union of kernels, copies and memsets.
    uint64_t kernel_busy_ns = 0;        // union of kernels only.
    uint64_t first_ns = 0;              // first device activity in the window.
    uint64_t last_ns = 0;               // last device activity end in the window.
    uint64_t span_ns = 0;               // last_ns - first_ns.
    double utilization_pct = 0;         // busy / span.
    double kernel_utilization_pct = 0;  // kernel busy / span.
  };
  uint64_t window_ns = 0;       // 0 = since start.
  std::vector<Device> devices;  // devices active in the window, by ordinal.

  // The entry of device `ordinal`, or null.
  const Device* Find(uint8_t ordinal) const;
  // One JSON object: {"window_ns", "devices": [...]}.
  void WriteJson(JsonWriter& w) const;
  // One line per device with a header line.
  std::string ToCsv() const;
};

struct DeviceUtilizationOptions {
  uint64_t bucket_ns = 1'000'000'000;  // time bucket width.
  size_t max_buckets = 600;            // ring size; older buckets merge into "older".
  // Merged intervals are kept this long behind the newest bucket's start, so
  // late or long intervals within it are merged exactly.
  uint64_t history_ns = 2'000'000'000;
};

class DeviceUtilization {
 public:
  using Options = DeviceUtilizationOptions;

  // `catalog` names devices (may be null); `diagnostics` may be null.
  // Pipeline thread.
  DeviceUtilization(const Catalog* catalog, Diagnostics* diagnostics, Options options = Options());

  // Adds the device events (kKernel, kMemcpy*, kMemset) of a batch in stream
  // order; kFlagLate events may come in any order. Zero-length events add
  // nothing; dur > 2^62 counts bad_duration. Pipeline thread.
  void Consume(std::span<const Event> events);

  // Per device busy, span and utilization over the last `window_ns` (0 =
  // since start). A window reaches back at most max_buckets buckets.
  // Pipeline thread; the result is a plain value any thread may read.
  DeviceUtilizationSnapshot Snapshot(uint64_t window_ns = 0) const;

 private:
  struct Interval {
    uint64_t begin;
    uint64_t end;
  };
  // Disjoint, non-touching intervals sorted by begin (hence by end). A
  // deque: hundreds of thousands live at 1 M events/s (2 s of history), and
  // a vector's doubling and its compaction after the oldest went held the
  // pipeline thread up to 50 ms (bench/RESULTS.md, "Soak").
  struct IntervalSet {
    std::deque<Interval> v;
    void Prune(uint64_t floor);
  };
  struct DevBucket {
    uint64_t busy = 0;
    uint64_t kernel_busy = 0;
    uint64_t first = UINT64_MAX;  // first covered instant.
    uint64_t last = 0;            // last covered end.
    void Combine(const DevBucket& o);
  };
  struct Bucket {
    int64_t index = -1;          // absolute bucket number; -1 = unused.
    std::vector<DevBucket> dev;  // by device slot.
    DevBucket& Dev(uint32_t slot) {
      if (slot >= dev.size()) dev.resize(slot + 1);
      return dev[slot];
    }
    void Reset(int64_t new_index);
    void Combine(const Bucket& o);
  };
  struct DeviceState {
    uint8_t ordinal = 0;
    IntervalSet all;
    IntervalSet kernels;
  };

  uint32_t SlotFor(uint8_t ordinal) {
    const int16_t s = slot_of_[ordinal];
    return s >= 0 ? static_cast<uint32_t>(s) : AddDevice(ordinal);
  }
  uint32_t AddDevice(uint8_t ordinal);
  void Advance(int64_t k);
  Bucket* BucketAt(int64_t k);
  // Merges [b, e) into the union; new coverage goes to the buckets.
  // Returns true if part of it lay behind the history floor.
  bool Insert(uint32_t slot, bool kernel_union, uint64_t b, uint64_t e);
  void AddCoverage(uint32_t slot, bool kernel_union, uint64_t s, uint64_t t);
  void AddCoverageSlow(uint32_t slot, bool kernel_union, uint64_t s, uint64_t t);
  void AddPiece(Bucket* bucket, uint32_t slot, bool kernel_union, uint64_t s, uint64_t t, uint64_t len);
  void EstimateBehindFloor(uint32_t slot, bool kernel_union, uint64_t b, uint64_t e);

  const Catalog* catalog_;
  Diagnostics* diagnostics_;
  Options options_;
  uint64_t history_buckets_ = 0;

  std::array<int16_t, 256> slot_of_;
  std::vector<DeviceState> devices_;

  std::vector<Bucket> ring_;
  Bucket older_;
  int64_t newest_ = -1;
  Bucket* cur_ = nullptr;   // the newest bucket.
  uint64_t cur_begin_ = 0;  // its range [cur_begin_, cur_begin_ + cur_len_).
  uint64_t cur_len_ = 0;    // 0 until the first bucket exists.
  uint64_t last_end_ = 0;   // newest event end.
  uint64_t floor_ = 0;      // intervals ending at or before it are dropped.
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_STEPS_DEVICE_UTILIZATION_H_
