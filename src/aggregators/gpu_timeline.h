// GpuTimeline: where a GPU's time went over a window, as TraceLens computes
// its gpu_timeline.csv (AMD-AGI/TraceLens, GPUEventAnalyser): busy = the
// union of kernels, copies and memsets; computation = the union of compute
// kernels and memsets (TraceLens counts a memset as computation: its
// Falconsai report's computation equals its busy time, two memsets in it);
// exposed communication = collective kernels not under computation; exposed
// memcpy = copies under neither; idle = the window less busy. liveprof gives it for each step, over the step's GPU range (its
// device work's first begin to last end: see step_breakdown.h for why not
// Kineto's gpu_user_annotation), and for a whole trace (`liveprof analyze`).
// Pure; any thread.
#ifndef LIVEPROF_AGGREGATORS_GPU_TIMELINE_H_
#define LIVEPROF_AGGREGATORS_GPU_TIMELINE_H_

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

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_GPU_TIMELINE_H_
