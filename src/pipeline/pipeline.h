// Pipeline: the pipeline, whole. It runs the DrainLoop over a Stream (a
// drain thread that empties the rings and restores their order), feeds every
// batch to the Analyses on the pipeline thread, and publishes for other
// threads:
//
//   - a PipelineSnapshot (every view rendered as JSON, the /metrics values,
//     the watermark) every `publish_period`, as an immutable shared_ptr;
//   - an EventChunk with the name and track definitions of the period and,
//     while someone wants them (SetEventTap), the raw events themselves;
//   - answers to render requests with other options (a longer step window,
//     CSV), rendered on the pipeline thread;
//   - every event, in a TraceStore that other threads query (trace_store()).
//
// Readers (the web threads, the command line) never touch the analyses: they
// keep the shared_ptrs they were handed. Sinks run on the pipeline thread and
// must return quickly (the server posts to its own io_context).
#ifndef LIVEPROF_PIPELINE_PIPELINE_H_
#define LIVEPROF_PIPELINE_PIPELINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "aggregators/analyses.h"
#include "pipeline/metrics_input.h"
#include "store/trace_store.h"
#include "stream/clock.h"
#include "stream/drain_loop.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace liveprof {

// One publication: immutable once handed out.
struct PipelineSnapshot {
  RenderedViews views;        // views.seq: 1, 2, 3... one per publication.
  MetricsInput metrics;       // what /metrics renders.
  uint64_t watermark_ns = 0;  // = views.watermark_ns: what the views reflect.
  uint64_t published_ns = 0;  // host clock when it was made.
  uint64_t render_ns = 0;     // what rendering it cost the pipeline thread.
};

// The stream's raw content of one publish period, for the events feed.
struct EventChunk {
  uint64_t seq = 0;  // one per chunk, gapless.
  uint64_t watermark_ns = 0;
  // kNameDef and kTrackDef events of the period, always (a kNameDef's string
  // lives as long as the Stream).
  std::vector<Event> definitions;
  // Events in completion order (late ones after them, flagged), only while
  // the tap is on, at most Options::max_chunk_events.
  std::vector<Event> events;
  uint64_t dropped = 0;  // events left out of this chunk by the cap.
};

class Pipeline {
 public:
  struct Options {
    // The PyTorch view keeps a buffer of events for its batch recompute,
    // rendered on request only (/api/pytorch, the dashboard's PyTorch page):
    // live, the newest 256 Ki events (about 12 MiB; older steps leave it).
    AnalysesOptions analyses = [] {
      AnalysesOptions o;
      o.pytorch.max_events = size_t{1} << 18;
      o.clock_ns = &HostNowNs;  // each analysis' cost, in /api/status.
      return o;
    }();
    // The analyses run on a thread of their own, fed by the drain thread
    // through a queue that stops taking at 2 Mi events (96 MiB, ~2 s at
    // 1 M events/s): a pipeline that stalls that long (no core free, a slow
    // batch) catches up instead of the rings dropping.
    DrainLoop::Options drain = [] {
      DrainLoop::Options o;
      o.handoff_events = size_t{1} << 21;
      return o;
    }();
    std::chrono::milliseconds publish_period{100};
    RenderOptions render;                       // what each publication renders.
    size_t max_chunk_events = size_t{1} << 21;  // 2 Mi a period: 21 M events/s at 10 Hz.
    // Every event also goes to a TraceStore (the trace viewer, exports) of
    // this byte budget; 0: no store. Or to this one, if set (a run
    // folder's: its owner Create()s or Open()s it first).
    uint64_t trace_store_bytes = uint64_t{1} << 30;
    std::shared_ptr<TraceStore> trace_store;
  };
  using SnapshotSink = std::function<void(std::shared_ptr<const PipelineSnapshot>)>;
  using ChunkSink = std::function<void(std::shared_ptr<const EventChunk>)>;
  // `views` is null when the pipeline stopped before it could answer.
  using RenderDone = std::function<void(std::shared_ptr<const RenderedViews> views)>;

  // `stream` must outlive the pipeline.
  Pipeline(Stream& stream, Options options);
  ~Pipeline();  // Stop()s.
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Where publications go, besides Latest(). Before Start(); owner's thread.
  void SetSinks(SnapshotSink snapshots, ChunkSink chunks);

  // Starts the pipeline thread / stops it after a last drain, closing every
  // step, and a last publication. Owner's thread; Stop is idempotent.
  void Start();
  void Stop();

  // The newest publication (null before the first). Any thread.
  std::shared_ptr<const PipelineSnapshot> Latest() const;
  // Renders with `options` on the pipeline thread at its next round and
  // calls `done` there (with null if it stopped first). Any thread.
  void Request(const RenderOptions& options, RenderDone done);
  // While on, chunks carry the raw events. Any thread.
  void SetEventTap(bool on) { tap_.store(on, std::memory_order_relaxed); }
  // The job's state as its owner sees it (serve's loop); the analyses take
  // it at their next publication. Any thread.
  void SetJobState(JobState s) { job_state_.store(s, std::memory_order_relaxed); }
  // Alert transitions since the last call, in order. Any thread.
  std::vector<AlertEvent> TakeAlertEvents();
  // Every worker's steps completed since the last call, in order, with
  // options.analyses.pod.max_new_steps > 0 (a fleet agent publishes them);
  // at most that many wait, the rest are counted in `*dropped` (since the
  // start; also the pod view's new_steps_dropped). Any thread.
  std::vector<PodNewStep> TakePodSteps(uint64_t* dropped = nullptr);

  const Options& options() const { return options_; }
  // The trace store the pipeline thread fills (null without one): queries
  // from any thread.
  const TraceStore* trace_store() const { return trace_store_.get(); }
  uint64_t publications() const { return publications_.load(std::memory_order_relaxed); }

 private:
  void OnBatch(const Batch& batch);
  void Publish(uint64_t now_ns);
  void ScheduleNextPublish(uint64_t now_ns);
  void AnswerRequests(bool stopped);

  Stream& stream_;
  Options options_;
  Analyses analyses_;                        // pipeline thread only.
  std::shared_ptr<TraceStore> trace_store_;  // appended on the pipeline thread.
  DrainLoop drain_;
  SnapshotSink snapshot_sink_;
  ChunkSink chunk_sink_;
  std::atomic<bool> tap_{false};
  std::atomic<JobState> job_state_{JobState::kLive};
  std::atomic<uint64_t> publications_{0};
  uint64_t next_publish_ns_ = 0;
  uint64_t next_self_cost_ns_ = 0;  // the next /proc/self sample (once a second).
  uint64_t chunk_seq_ = 0;
  std::shared_ptr<EventChunk> chunk_;  // being filled; pipeline thread only.
  bool stopped_ = false;               // owner's thread.

  mutable std::mutex mu_;  // guards the members below.
  std::shared_ptr<const PipelineSnapshot> latest_;
  struct PendingRequest {
    RenderOptions options;
    RenderDone done;
  };
  std::vector<PendingRequest> requests_;
  bool requests_closed_ = false;  // after Stop(): answered at once, with null.
  std::atomic<bool> has_requests_{false};
  std::vector<AlertEvent> alert_events_;
  std::vector<PodNewStep> pod_steps_;
  uint64_t pod_steps_dropped_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_PIPELINE_PIPELINE_H_
