// The status view (`/api/status`, the `status` topic): what the stream
// carried and lost, each producer ring's totals and rates, liveprof's own
// cost in this process, the pipeline thread's time per analysis, the job's
// state, where steps come from, and every diagnostic. It keeps what only it
// shows (the rings' recent totals, the self-cost samples, the stream's
// totals, the backlog); the rest it reads from the other analyses when it
// is written.
//
// Pure: no I/O, no locks, no threads. Pipeline thread.
#ifndef LIVEPROF_AGGREGATORS_STATUS_VIEW_H_
#define LIVEPROF_AGGREGATORS_STATUS_VIEW_H_

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/gpu_handoffs.h"
#include "aggregators/steps/steps.h"
#include "aggregators/tf/overview.h"
#include "aggregators/tf/pod_view.h"
#include "base/json_writer.h"
#include "base/self_cost.h"
#include "stream/diagnostics.h"

namespace liveprof {

// Where the profiled job stands, as its owner sees it (serve's loop: the
// ingest sources, a replay's end). `finished` stops the clock of
// seconds_since_last_step at the moment it was first seen.
enum class JobState : uint8_t {
  kLive,          // producing (in-process sources; a connected ingest source).
  kWaiting,       // ingest: no source has introduced itself yet.
  kFinished,      // every source closed cleanly; a replay (not --loop) done.
  kDisconnected,  // every source gone, at least one cut off (no clean close).
};
std::string_view JobStateName(JobState s);  // "live", "waiting", "finished", "disconnected"

// One producer ring's counters.
struct SourceTotals {
  std::string name;
  uint64_t published = 0;
  uint64_t dropped = 0;
};
// Sorted by name, rings sharing a name summed: one entry per name.
std::vector<SourceTotals> MergeSourcesByName(std::vector<SourceTotals> sources);

// What the pipeline thread spends its time on (status "pipeline_cost"): the
// analyses Analyses::Consume times, in its order, then what the pipeline
// times and adds (Analyses::AddCost): the trace store's appends, the
// periodic render.
enum class Analysis : uint8_t {
  kCatalog,
  kPod,
  kOpStats,
  kKernels,
  kUtilization,
  kMemory,
  kModules,
  kAnnotations,
  kPytorch,
  kSteps,
  kTraceStore,
  kRender,
  kCount
};
std::string_view AnalysisName(Analysis a);  // "catalog", "pod", "op_stats"... "trace_store", "render"

// What one analysis cost the pipeline thread since the start.
struct AnalysisCost {
  uint64_t total_ns = 0;
  uint64_t max_ns = 0;  // its longest single batch.
  uint64_t batches = 0;
  uint64_t batches_over_10ms = 0;  // a stall that long at 1 M events/s fills 10,000 ring slots.
};

class StatusView {
 public:
  // The stream's totals (status events_published, events_dropped).
  void SetStreamTotals(uint64_t published, uint64_t dropped) {
    published_ = published;
    dropped_ = dropped;
  }
  uint64_t dropped() const { return dropped_; }
  // Events the drain thread has queued for the pipeline thread now, and the
  // most it has queued (status "pipeline_backlog").
  void SetPipelineBacklog(uint64_t queued, uint64_t max_queued) {
    backlog_ = queued;
    max_backlog_ = max_queued;
  }
  // Each producer ring's totals at host time `now_ns` (rings sharing a name
  // are summed): the sources and their rates over the last second or so.
  void SetSources(std::vector<SourceTotals> sources, uint64_t now_ns);
  // liveprof's own threads and memory in this process (base/self_cost.h),
  // about once a second: liveprof_cost, each thread's CPU over the last two.
  void SetSelfCost(SelfCostSample sample);
  const SelfCostSample& self_cost() const { return self_now_; }

  // What the other analyses say, when it is written.
  struct Inputs {
    const OverviewSnapshot& overview;
    const Catalog& catalog;
    const StepAssembler& steps;
    const PodView& pod;
    const GpuHandoffs& gpu_handoffs;
    const Diagnostics* diag;  // null: every count 0.
    JobState job_state;
    uint32_t analysed_process;  // WorkerFilter::process().
    uint64_t events_consumed;
    uint64_t watermark_ns;
    std::span<const AnalysisCost> costs;  // by Analysis; empty when the pipeline is not timed.
  };
  // The view's fields (docs/protocol.md, `status`) as one JSON object.
  void Write(JsonWriter& w, const Inputs& in) const;

 private:
  void WriteSources(JsonWriter& w) const;

  uint64_t published_ = 0, dropped_ = 0;
  uint64_t backlog_ = 0, max_backlog_ = 0;
  // SetSources' samples of the last second or so: rates are taken against
  // the oldest one.
  struct SourceSample {
    uint64_t now_ns;
    std::vector<SourceTotals> sources;
  };
  std::deque<SourceSample> source_history_;
  SelfCostSample self_prev_, self_now_;  // the two newest samples.
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_STATUS_VIEW_H_
