// Clocks. The host clock is CLOCK_MONOTONIC in nanoseconds: system-wide, so
// events from other processes (socket ingest, the Python module) line up.
//
// The record path of the host tracing API reads the TSC instead (9.4 ns here
// against 21.5 ns for clock_gettime; bench/clock_bench.cc, bench/RESULTS.md)
// and writes raw ticks into its ring. The drain loop maps ticks onto the host
// clock with a ClockMap fed by (tsc, CLOCK_MONOTONIC) pairs. The same ClockMap
// maps a GPU's clock onto the host clock for the CUPTI producer.
#ifndef LIVEPROF_STREAM_CLOCK_H_
#define LIVEPROF_STREAM_CLOCK_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <deque>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace liveprof {

// The host clock: CLOCK_MONOTONIC in ns. Any thread.
inline uint64_t HostNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The wall clock: CLOCK_REALTIME in ns since the Unix epoch, for what is
// compared across hosts (the fleet's step ends); never for durations. Any thread.
inline uint64_t UnixNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Raw time-stamp counter, or HostNowNs() where there is none. Any thread.
inline uint64_t TscRead() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return HostNowNs();
#endif
}

// True if the CPU reports an invariant TSC (constant rate, runs in every
// C-state: CPUID 0x80000007 EDX bit 8), so ticks can be mapped linearly onto
// the host clock. Computed once. Any thread.
bool TscIsInvariant();

// Maps readings of another clock ("other": TSC ticks, a GPU's ns) onto the
// host clock by a least-squares line over the last `max_pairs` pairs of
// simultaneous readings. Not thread-safe: one owner (the drain loop, or the
// CUPTI producer's thread) adds pairs and converts.
class ClockMap {
 public:
  // `nominal_slope` (host ns per other unit) is used until two pairs with
  // distinct readings exist; 1.0 suits another ns clock.
  explicit ClockMap(size_t max_pairs = 64, double nominal_slope = 1.0);

  // Adds one pair: `other` and `host` read at the same instant.
  void AddPair(uint64_t other, uint64_t host);

  // Host ns of an `other` reading. Before any pair, returns `other` scaled by
  // the nominal slope.
  //
  // A reading always maps to the same host time, whenever it is converted:
  // the map is a chain of segments, one per pair, joined end to end (each
  // starts where the previous one is at its pair, and aims its slope at the
  // fitted line one pair interval later). A refit changes only the readings
  // from its pair on, so a step marker converted after a refit and its first
  // child converted before it still begin at the same nanosecond.
  uint64_t ToHost(uint64_t other) const {
    if (segments_.empty()) {
      return static_cast<uint64_t>(std::llround(static_cast<double>(other) * slope_));
    }
    const Segment* s = &segments_.back();
    if (other < s->other) [[unlikely]]
      s = &SegmentOf(other);
    const double d = static_cast<double>(static_cast<int64_t>(other - s->other));
    return s->host + static_cast<uint64_t>(std::llround(d * s->slope));
  }
  // A duration in `other` units as host ns.
  uint64_t DurationToHost(uint64_t other_units) const {
    return static_cast<uint64_t>(std::llround(static_cast<double>(other_units) * slope_));
  }

  double slope() const { return slope_; }
  size_t pairs() const { return pairs_.size(); }
  // Root-mean-square residual of the fit over the current pairs, in host ns.
  double rms_residual_ns() const { return rms_; }

 private:
  struct Pair {
    uint64_t other;
    uint64_t host;
  };
  void Refit();
  // The line fitted over the pairs at `other`.
  uint64_t FitToHost(uint64_t other) const {
    const double d = static_cast<double>(static_cast<int64_t>(other - anchor_other_));
    return anchor_host_ + static_cast<uint64_t>(std::llround(d * slope_ + offset_));
  }
  struct Segment {
    uint64_t other;  // from this reading on (until the next segment's),
    uint64_t host;   // host = host + slope * (reading - other).
    double slope;
  };
  // Older readings use the oldest (their mapping then moves as segments go):
  // 8,192 pairs, 13 min at the drain loop's pair every 100 ms.
  static constexpr size_t kMaxSegments = 8192;
  const Segment& SegmentOf(uint64_t other) const;
  void AddSegment(uint64_t at);

  size_t max_pairs_;
  std::deque<Segment> segments_;
  bool fitted_ = false;  // a segment was made from a fit of two pairs or more.
  std::deque<Pair> pairs_;
  // host = anchor_host_ + offset_ + slope_ * (other - anchor_other_)
  uint64_t anchor_other_ = 0;
  uint64_t anchor_host_ = 0;
  double offset_ = 0;
  double slope_;
  double rms_ = 0;
};

// Reads one (tsc, host ns) pair as tightly as possible: the TSC is read on
// both sides of clock_gettime and the pair with the shortest bracket out of a
// few tries is kept. Any thread.
struct TscPair {
  uint64_t tsc;
  uint64_t host_ns;
};
TscPair ReadTscPair();

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_CLOCK_H_
