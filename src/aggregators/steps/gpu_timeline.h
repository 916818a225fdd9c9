// GpuTimeline: where a GPU's time went over a window, as TraceLens computes
// its gpu_timeline.csv (AMD-AGI/TraceLens, GPUEventAnalyser): busy = the
// union of kernels, copies and memsets; computation = the union of compute
// kernels and memsets (TraceLens counts a memset as computation: its
// Falconsai report's computation equals its busy time, two memsets in it);
// exposed communication = collective kernels not under computation; exposed
// memcpy = copies under neither; idle = the window less busy. liveprof gives it for each step, over the step's GPU
// range (its device work's first begin to last end: see step_breakdown.h for why not Kineto's gpu_user_annotation), and
// for a whole trace (`liveprof analyze`). Pure; any thread.
#ifndef LIVEPROF_AGGREGATORS_STEPS_GPU_TIMELINE_H_
#define LIVEPROF_AGGREGATORS_STEPS_GPU_TIMELINE_H_

#include <cstdint>
#include <vector>

#include "base/json_writer.h"

namespace liveprof {

// Copies (IsMemcpyKind) are kMemcpy; kernels and memsets the others.
enum class GpuWork : uint8_t { kCompute = 0, kCommunication = 1, kMemcpy = 2 };

struct GpuInterval {
  uint64_t begin = 0, end = 0;
  GpuWork work = GpuWork::kCompute;
};

struct GpuTimeline {
  uint64_t total_ns = 0;  // the window.
  uint64_t busy_ns = 0, idle_ns = 0;
  uint64_t computation_ns = 0;
  uint64_t exposed_comm_ns = 0, exposed_memcpy_ns = 0;
  uint64_t comm_ns = 0, memcpy_ns = 0;  // totals (TraceLens' total_comm_time, total_memcpy_time).

  void Add(const GpuTimeline& o);
  // {"total_ms", "busy_ms", "idle_ms", "computation_ms", "exposed_comm_ms",
  // "exposed_memcpy_ms", "comm_ms", "memcpy_ms"}.
  void WriteJson(JsonWriter& w) const;
};

// Buffers kept between calls, so that a warm call allocates nothing.
struct GpuTimelineScratch {
  struct Range {
    uint64_t begin, end;
  };
  std::vector<Range> compute, comm, memcpy, busy;
};

// The timeline of `intervals` (any order; sorted by begin in place) clipped
// to [begin, end).
GpuTimeline ComputeGpuTimeline(std::vector<GpuInterval>* intervals, uint64_t begin, uint64_t end,
                               GpuTimelineScratch* scratch);

// The length of a union of intervals joined in order of DESCENDING end: one
// running component [lo, hi). An interval that ends at or after the
// component's begin joins it (its end cannot pass the component's end);
// else it starts a new one wholly to the left, and the old one's length is
// banked. Two compares an interval, no copy, no sort.
struct DescendingEndUnion {
  uint64_t lo = ~uint64_t{0}, hi = ~uint64_t{0}, len = 0;
  void Join(uint64_t b, uint64_t e) {
    if (e >= lo) {
      lo = b < lo ? b : lo;
    } else {
      len += hi - lo;
      hi = e;
      lo = b;
    }
  }
  uint64_t Length() const { return len + (hi - lo); }
};

// The same figures in one pass over intervals given in order of DESCENDING
// end (a step's breakdown walks its device work so): no copy, no sort. Each
// figure is the length of a union (DescendingEndUnion): computation = |C|,
// busy = |C ∪ M ∪ P|, exposed communication = |C ∪ M| - |C|, exposed
// memcpy = busy - |C ∪ M| (C compute, M communication, P memcpy).
class GpuTimelineSweep {
 public:
  GpuTimelineSweep(uint64_t begin, uint64_t end) : begin_(begin), end_(end) {}
  void Add(uint64_t b, uint64_t e, GpuWork work) {
    b = b > begin_ ? b : begin_;
    e = e < end_ ? e : end_;
    if (b >= e) return;
    switch (work) {
      case GpuWork::kCompute: u_[kC].Join(b, e), u_[kCM].Join(b, e); break;
      case GpuWork::kCommunication: u_[kM].Join(b, e), u_[kCM].Join(b, e); break;
      case GpuWork::kMemcpy: u_[kP].Join(b, e); break;
    }
    u_[kAll].Join(b, e);
  }
  GpuTimeline Finish() const;

 private:
  enum { kC, kM, kP, kCM, kAll, kUnions };
  uint64_t begin_, end_;
  DescendingEndUnion u_[kUnions];
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_STEPS_GPU_TIMELINE_H_
