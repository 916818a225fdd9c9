// StepBreakdown: the TF Profiler's step-time breakdown (docs/semantics-tf.md
// §2) over closed steps, per step and over rolling windows.
//
// Per step, every event of the step gets an xprof EventType (§2.1, §2.3); a
// priority sweep makes them non-overlapping with the higher type winning
// (§2.5; computed as unions by descending end: PrioritySweep in the .cc);
// each type's time inside the step's span is summed, time in the span that
// no event covers is "All others" (§2.6); the types fold into
// the UI buckets (§2.7). In a profile with a device, steps with no device
// compute are left out as xprof does (§2.6 item 2; counted
// step_without_compute). A CPU-only step always has its row; one with no
// host compute span at all (an unannotated job: liveprof run's PyTorch
// hooks mark steps and input only) has its unclaimed time as Host compute
// instead of All others, so input and compute add up to the step.
//
// Two modes (§2.2):
//   kHostAndDevice (default, TF 2.x before ~2023): host spans join the sweep,
//     so "Kernel launch", "Host compute" and host "Input" can be non-zero; the
//     step's span is the host marker if it contains the device span, else the
//     device span (§2.4).
//   kDeviceOnly (current xprof): only device events, span = device span; a
//     CPU-only step uses its host events and host marker.
//
// The events' types come with the step (span_type.h, classified by the
// StepAssembler when each event joined).
//
// Windows: the last Options::max_steps rows are kept; a window (last N steps
// or last T seconds) combines them as ratios of sums (§3.2).
#ifndef LIVEPROF_AGGREGATORS_STEPS_STEP_BREAKDOWN_H_
#define LIVEPROF_AGGREGATORS_STEPS_STEP_BREAKDOWN_H_

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include "aggregators/steps/steps.h"
#include "base/json_writer.h"
#include "stream/diagnostics.h"

namespace liveprof {

// The UI buckets of §2.7, in the step-time graph's column order.
enum class Bucket : uint8_t {
  kDeviceCompute = 0,
  kDeviceToDevice,
  kDeviceCollectives,
  kHostCompute,
  kKernelLaunch,
  kInput,
  kOutput,
  kCompilation,
  kAllOthers,
};
inline constexpr size_t kBucketCount = 9;
std::string_view BucketName(Bucket b);  // "Device compute", "Input"...
std::string_view BucketKey(Bucket b);   // "device_compute", "input"... (JSON keys)

enum class BreakdownMode : uint8_t { kHostAndDevice = 0, kDeviceOnly = 1 };
std::string_view BreakdownModeName(BreakdownMode m);

// One step's breakdown.
struct StepBreakdownRow {
  int64_t step_num = 0;
  uint64_t seq = 0;
  uint64_t begin_ns = 0;  // the span the breakdown covers.
  uint64_t end_ns = 0;
  uint64_t host_begin_ns = 0;  // the host marker.
  uint64_t host_end_ns = 0;
  std::array<uint64_t, kSpanTypeCount> type_ns{};
  std::array<uint64_t, kBucketCount> bucket_ns{};
  DeviceWorkCounts work;        // kernels and copies of the step.
  uint64_t device_busy_ns = 0;  // union of device work inside the span.
  // Over the step's GPU range (its device work's first begin to last end),
  // as TraceLens' gpu_timeline.csv (gpu_timeline.h). Kineto's
  // gpu_user_annotation ProfilerStep#N is not that range: it holds only the
  // work launched from the step's own thread, so a training step's backward
  // (launched from autograd's thread) falls outside it (on the H200
  // slow-loader trace it covers 8.5 ms of step 3's 20.5 ms of GPU work).
  // One timeline over every GPU the process drives (TraceLens makes one per
  // GPU): for a process on several GPUs, busy is their union.
  GpuTimeline gpu;
  bool has_device = false;
  bool closed_by_timeout = false;
  uint64_t step_ns() const { return end_ns - begin_ns; }
};

// Buffers kept between steps for the rare step whose spans are not in order
// of end, so computing a step allocates nothing once warm.
struct BreakdownScratch {
  std::vector<StepSpan> device, host;
};

// Computes one step's row (a pure function of the step; the scratch only
// holds buffers).
StepBreakdownRow ComputeStepBreakdown(const StepRecord& step, BreakdownMode mode, bool profile_has_device,
                                      bool* well_formed, BreakdownScratch* scratch);
StepBreakdownRow ComputeStepBreakdown(const StepRecord& step, BreakdownMode mode, bool profile_has_device,
                                      bool* well_formed);

// Sums over a set of steps: ratios of sums, and the per-step statistics of §0.4.
struct RunningStats {
  uint64_t n = 0;
  double sum = 0, sum_sq = 0, min = 0, max = 0;
  void Add(double x);
  double mean() const { return n ? sum / static_cast<double>(n) : 0; }
  double stddev() const;  // sample σ, 0 for n < 2 (§0.4).
};

struct StepWindow {
  uint64_t steps = 0;
  int64_t first_step = 0, last_step = 0;
  uint64_t first_begin_ns = 0, last_end_ns = 0;
  uint64_t step_ns_sum = 0;
  std::array<uint64_t, kBucketCount> bucket_ns{};
  std::array<uint64_t, kSpanTypeCount> type_ns{};
  RunningStats step_ms;    // step time per step, ms.
  RunningStats input_pct;  // input % per step.
  std::array<RunningStats, kBucketCount> bucket_ms;
  double step_ms_median = 0;
  // The median absolute deviation from it (robust spread: one slow step
  // does not move it).
  double step_ms_mad = 0;
  uint64_t compute16_ns = 0, compute32_ns = 0;
  uint64_t h2d_count = 0, d2h_count = 0, d2d_count = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0, d2d_bytes = 0;
  uint64_t h2d_ns = 0, d2h_ns = 0;
  uint64_t kernel_count = 0, small_kernel_count = 0;
  uint64_t device_busy_ns = 0;
  GpuTimeline gpu;      // the steps' GPU timelines, summed.
  uint64_t gap_ns = 0;  // host time between consecutive steps' markers.
  bool has_device = false;

  // Percent of Σ step time in bucket b (ratio of sums).
  double pct(Bucket b) const;
  double precision16_pct() const;
};

// Window selection: last N steps, or the steps ending in the last T ns of the
// newest step's end. Zero for both: every kept step.
struct WindowSel {
  uint32_t last_steps = 0;
  uint64_t last_ns = 0;
  uint32_t offset_steps = 0;  // leave out the newest steps first (baselines).
};

// Writes a window summary as one JSON object (shared by several views).
void WriteStepWindowJson(JsonWriter& w, const StepWindow& win);

struct StepBreakdownSnapshot {
  BreakdownMode mode = BreakdownMode::kHostAndDevice;
  StepWindow window;
  std::vector<StepBreakdownRow> rows;  // the window's steps, oldest first (≤ graph cap).
  uint64_t steps_total = 0;            // closed steps seen.
  uint64_t steps_dropped = 0;          // without compute.
  // What bounds the graph, said so that a view can say it: rows carries at
  // most rows_cap rows (Options::graph_rows), the window's oldest
  // rows_left_out are not in it; windows reach back over the newest
  // steps_kept steps only (Options::max_steps).
  uint64_t rows_cap = 0;
  uint64_t rows_left_out = 0;
  uint64_t steps_kept = 0;
  void WriteJson(JsonWriter& w) const;
};

class StepBreakdown {
 public:
  struct Options {
    BreakdownMode mode = BreakdownMode::kHostAndDevice;
    size_t max_steps = 10'000;  // rows kept for windows.
    // Rows a snapshot carries at most: the dashboard's longest step window
    // (last 1000 steps) whole; of a longer one, the newest (rows_left_out).
    size_t graph_rows = 1000;
  };
  StepBreakdown(Diagnostics* diag, Options options);

  // Adds closed steps, in order. Pipeline thread.
  void Consume(std::span<const StepRecord> steps);
  // Marks that the profile has device activity (turns on the GPU rules even
  // for steps without device work). Pipeline thread.
  void SetProfileHasDevice() { has_device_ = true; }
  void SetMode(BreakdownMode mode) { options_.mode = mode; }

  StepWindow Window(const WindowSel& sel) const;
  StepBreakdownSnapshot Snapshot(const WindowSel& sel) const;
  const std::deque<StepBreakdownRow>& rows() const { return rows_; }
  uint64_t steps_total() const { return steps_total_; }
  // Rows added since the start (steps_total() less the steps left out).
  uint64_t rows_added() const { return rows_added_; }

 private:
  // The index of the first kept row in the window.
  size_t WindowStart(const WindowSel& sel) const;
  size_t WindowEnd(const WindowSel& sel) const;  // one past the last row.

  Diagnostics* diag_;
  Options options_;
  bool has_device_ = false;
  std::deque<StepBreakdownRow> rows_;
  uint64_t steps_total_ = 0;
  uint64_t steps_dropped_ = 0;
  uint64_t rows_added_ = 0;
  BreakdownScratch scratch_;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_STEPS_STEP_BREAKDOWN_H_
