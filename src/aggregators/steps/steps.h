// StepAssembler: cuts the ordered event stream into training steps
// (docs/semantics-tf.md §1, §13 "Step assignment").
//
// A step comes from, in order of precedence (the first kind seen wins and the
// others are then ordinary spans):
//   1. step markers (kStepMarker: TF's Trace("train", step_num=n, _r=1));
//   2. PyTorch's `ProfilerStep#N` spans (host span or framework op);
//   3. spans whose name matches Options::name_pattern, a glob where `*`
//      matches any text and `{n}` a decimal step number, e.g. for NVTX ranges
//      "train_step", "train_step {n}" or "*/step_{n}" (see MatchStepPattern).
// Markers are complete spans, so a step becomes known when it ENDS, after
// its children. Until then events wait in `pending_`.
//
// Membership:
//   - host spans (IsHostSpanKind): the step whose marker contains their begin;
//   - device work (IsDeviceKind): the step of its launch (the kRuntimeApi with
//     the same correlation id), else by time: the step whose
//     [begin, next step's begin) holds its begin (counted device_without_launch
//     when it had a correlation id nobody launched).
//   Events in no step (before the first, between host steps, or waiting more
//   than max_step_ns with no marker) are counted events_without_step.
//
// A step closes (is final) when its successor exists and every launch API it
// made (runtime calls named *Launch*, *Memcpy*, *Memset*) has seen its device
// work, or when the watermark is close_lag_ns past its end, or when more
// than max_open_steps are open (the oldest first). Device work that
// arrives for a closed step is counted late_for_step. Closed steps are handed
// out in order by TakeClosed().
//
// Pure: no I/O, no locks. Pipeline thread only.
#ifndef LIVEPROF_AGGREGATORS_STEPS_STEPS_H_
#define LIVEPROF_AGGREGATORS_STEPS_STEPS_H_

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/steps/gpu_timeline.h"
#include "aggregators/steps/span_type.h"
#include "base/corr_window.h"
#include "stream/diagnostics.h"
#include "stream/event.h"

namespace liveprof {

enum class StepSource : uint8_t { kNone = 0, kMarker = 1, kProfilerStep = 2, kNamePattern = 3 };
std::string_view StepSourceName(StepSource s);
// What a user calls the source of a process's steps, from the kind and the
// name of its markers: "optimizer" and "torch.profiler" (liveprof run's
// PyTorch hooks name their markers "optimizer step", "torch.profiler
// step"), "torch.profiler" too for ProfilerStep#N spans, "program marks"
// (liveprof.step, the host API), "pattern" (--step-pattern), "none".
std::string_view StepSourceLabel(StepSource s, std::string_view marker_name);

// True if `name` matches the glob `pattern` (`*` any text, `{n}` one or more
// digits, stored in *number; -1 when the pattern has no `{n}`).
bool MatchStepPattern(std::string_view pattern, std::string_view name, int64_t* number);

// One host span or device event of a step: its interval and what it counts
// as in the breakdown (span_type.h), classified when it joined the step.
struct StepSpan {
  uint64_t begin = 0, end = 0;
  SpanType type = SpanType::kUnknown;      // when the profile has a device.
  SpanType cpu_type = SpanType::kUnknown;  // when it has none (differs for host spans only).
  GpuWork work = GpuWork::kCompute;        // device spans: for the step's GPU timeline.
};

// A step's device work in numbers, counted as each event joins.
struct DeviceWorkCounts {
  uint32_t kernel_count = 0;
  uint32_t small_kernel_count = 0;  // kernels shorter than Options::small_kernel_ns.
  uint32_t h2d_count = 0, d2h_count = 0, d2d_count = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0, d2d_bytes = 0;
  uint64_t h2d_ns = 0, d2h_ns = 0;
};

struct StepRecord {
  int64_t step_num = 0;
  uint64_t seq = 0;  // 0, 1, 2... in host order.
  uint64_t host_begin_ns = 0;
  uint64_t host_end_ns = 0;
  // First begin and last end of the step's device work; both 0 if none.
  uint64_t device_begin_ns = 0;
  uint64_t device_end_ns = 0;
  // In arrival order (completion order when the stream is). Host spans
  // exclude the marker and the names xprof ignores (kNameIgnored).
  std::vector<StepSpan> host_spans;
  std::vector<StepSpan> device_spans;  // kernels, copies, memsets.
  // Bit t set: a span of SpanType t is in the list (host: as classified for
  // a profile with a device, and for one without).
  uint32_t device_types = 0, host_types = 0, cpu_host_types = 0;
  DeviceWorkCounts work;
  uint32_t device_by_corr = 0;     // joined through their launch.
  uint32_t device_by_time = 0;     // joined by time.
  bool closed_by_timeout = false;  // closed by close_lag_ns, not by a successor.
  // A host compute span (on the CPU-only reading) that the program named:
  // not only liveprof run's model forward and backward (IsModelPassName).
  bool annotated_host_compute = false;
  bool has_device() const { return !device_spans.empty(); }
};

class StepAssembler {
 public:
  struct Options {
    std::string name_pattern;               // empty: no pattern steps.
    uint64_t close_lag_ns = 2'000'000'000;  // 2 s past its end a step closes anyway.
    // At most this many steps wait open; beyond, the oldest close as if
    // timed out. Bounds memory and work when device work never comes (its
    // records were dropped) and steps are short.
    size_t max_open_steps = 256;
    // At most this many events wait for their step (launches and the rest
    // share it); beyond, the
    // oldest half leave as stepless. A step's events wait for its marker, a
    // few thousand at most; only lost markers and launches (a full ring)
    // make more wait, and every new marker looks at each of them again.
    size_t max_waiting_events = size_t{1} << 16;
    uint64_t max_step_ns = 60'000'000'000;  // events waiting longer leave as stepless.
    uint64_t small_kernel_ns = 40'000;      // "tiny" kernels: about the launch latency.
  };

  StepAssembler(const Catalog* catalog, Diagnostics* diag, Options options);

  // Adds events in stream order. Pipeline thread.
  void Consume(std::span<const Event> events);
  // Every event ending at or before `watermark_ns` has been consumed: closes
  // the steps that are final. Pipeline thread.
  void Advance(uint64_t watermark_ns);
  // End of stream: closes every open step and releases what waits.
  void Flush();
  // The steps closed since the last call, in order.
  std::vector<StepRecord> TakeClosed();
  // Gives closed steps back once read, so that new steps reuse their
  // (warm) span lists instead of allocating.
  void Recycle(std::vector<StepRecord>&& steps);

  StepSource source() const { return source_; }
  // The name of the steps' markers (of source()); 0 (the empty name) before the first.
  NameId marker_name() const { return marker_name_; }
  size_t open_steps() const { return open_.size(); }
  size_t pending_events() const { return pending_.size(); }
  uint64_t steps_closed() const { return steps_closed_; }

 private:
  struct OpenStep {
    StepRecord rec;
    uint32_t outstanding_launches = 0;  // launch APIs still waiting for device work.
    std::vector<uint32_t> launches;     // every correlation id launched in the step.
  };
  struct NameInfo {
    uint8_t state = 0;        // 0 unknown, 1 not a step, 2 step (ProfilerStep), 3 step (pattern).
    bool launches = false;    // a runtime API that makes device work.
    bool model_pass = false;  // IsModelPassName.
    uint8_t bits = 0;         // ClassifyName.
    int64_t number = -1;
  };

  const NameInfo& Info(NameId id) { return id < names_.size() && names_[id].state != 0 ? names_[id] : LearnName(id); }
  const NameInfo& LearnName(NameId id);
  bool IsMarker(const Event& e, int64_t* step_num);
  void AddStep(const Event& marker, int64_t step_num);
  // Tries to place `e`; false if it must keep waiting.
  bool Place(const Event& e);
  void AddToStep(OpenStep& s, const Event& e, bool by_corr);
  void CountDeviceWork(const Event& e, DeviceWorkCounts* w) const;
  OpenStep* StepAtHostTime(uint64_t ts);
  // Applies Options::max_waiting_events to the waiting list.
  void TrimWaiting();
  // A runtime API call that may have device work (has a correlation id).
  static bool IsLaunch(const Event& e) { return e.kind == EventKind::kRuntimeApi && e.corr != 0; }
  // Recomputes min_waiting_launch_ and min_waiting_end_ from the waiting list.
  void UpdateWaitingMins();
  // The open step with this seq, or null (closed).
  OpenStep* StepBySeq(uint64_t seq);
  void Rescan();
  void Close(size_t count);

  const Catalog* catalog_;
  Diagnostics* diag_;
  Options options_;
  std::vector<NameInfo> names_;
  StepSource source_ = StepSource::kNone;
  NameId marker_name_ = 0;

  // By host begin. A vector, not a deque: OpenStep is over 200 bytes, so a
  // deque holds 2 per block and every index divides; the few open steps move
  // cheaply when the oldest close.
  std::vector<OpenStep> open_;
  size_t hint_ = 0;          // where the last host-time lookup found its step.
  bool open_by_seq_ = true;  // and by seq too (no marker out of order since open_ was empty).
  // Waiting events, in arrival order.
  std::vector<Event> pending_;
  bool waited_on_launch_ = false;  // Place() left device work for a waiting launch.
  // The smallest correlation id of a waiting launch: device work whose launch
  // is unknown and whose id is not below it may belong to one and waits too.
  static constexpr uint32_t kNoWaitingLaunch = ~uint32_t{0};
  uint32_t min_waiting_launch_ = kNoWaitingLaunch;
  uint64_t min_waiting_end_ = UINT64_MAX;  // the earliest end in pending_.
  // Sizes of the last closed step, to reserve a new step's span lists once.
  size_t host_spans_hint_ = 0;
  size_t device_spans_hint_ = 0;
  std::vector<StepRecord> closed_;
  std::vector<StepRecord> spare_;  // recycled, for their span lists.
  uint64_t next_seq_ = 0;
  uint64_t steps_closed_ = 0;
  uint64_t last_closed_host_end_ = 0;  // host end of the newest closed step.
  uint64_t latest_marker_begin_ = 0;   // host begin of the newest marker.
  uint64_t markers_end_ = 0;           // the latest end of any marker seen.
  bool any_marker_ = false;
  bool flushing_ = false;
  uint64_t pattern_seq_ = 0;

  // Launch correlation id -> (the seq of its step (open or recently
  // closed) << 1) | its device work seen. Ids grow: a window of the newest.
  static constexpr size_t kMaxLaunchIds = size_t{1} << 21;
  CorrWindow<uint64_t> launch_step_;
  // The launches of closed steps, forgotten kRememberClosed steps later.
  static constexpr size_t kRememberClosed = 16;
  std::deque<std::vector<uint32_t>> closed_launches_;
  std::vector<uint32_t> spare_launches_;  // the list of the step forgotten last.
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_STEPS_STEPS_H_
