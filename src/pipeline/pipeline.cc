#include "pipeline/pipeline.h"

#include <algorithm>
#include <utility>

#include "stream/clock.h"

namespace liveprof {

Pipeline::Pipeline(Stream& stream, Options options)
    : stream_(stream),
      options_(std::move(options)),
      analyses_(options_.analyses, &stream.diagnostics()),
      drain_(stream, options_.drain, [this](const Batch& b) { OnBatch(b); }),
      chunk_(std::make_shared<EventChunk>()) {
  if (options_.trace_store) {
    trace_store_ = options_.trace_store;
  } else if (options_.trace_store_bytes > 0) {
    TraceStore::Options o;
    o.max_bytes = options_.trace_store_bytes;
    trace_store_ = std::make_shared<TraceStore>(o);
  }
}

Pipeline::~Pipeline() { Stop(); }

void Pipeline::SetSinks(SnapshotSink snapshots, ChunkSink chunks) {
  snapshot_sink_ = std::move(snapshots);
  chunk_sink_ = std::move(chunks);
}

void Pipeline::Start() {
  next_publish_ns_ = HostNowNs();
  drain_.Start();
}

void Pipeline::Stop() {
  if (stopped_) return;
  stopped_ = true;
  drain_.Stop();  // joins the pipeline thread: from here on it is ours.
  analyses_.Flush(drain_.Now());
  Publish(HostNowNs());
  AnswerRequests(/*stopped=*/true);
}

std::shared_ptr<const PipelineSnapshot> Pipeline::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void Pipeline::Request(const RenderOptions& options, RenderDone done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!requests_closed_) {
      requests_.push_back({options, std::move(done)});
      has_requests_.store(true, std::memory_order_release);
      return;
    }
  }
  done(nullptr);
}

std::vector<AlertEvent> Pipeline::TakeAlertEvents() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AlertEvent> out;
  out.swap(alert_events_);
  return out;
}

std::vector<PodNewStep> Pipeline::TakePodSteps(uint64_t* dropped) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PodNewStep> out;
  out.swap(pod_steps_);
  if (dropped) *dropped = pod_steps_dropped_;
  return out;
}

void Pipeline::OnBatch(const Batch& b) {
  analyses_.SetStreamTotals(stream_.TotalPublished(), stream_.TotalDropped());
  // A batch is normally a millisecond of events. After a stall it can be
  // millions: take it in slices, each with the watermark it proves (events
  // come by end, so a slice's last end less 1 ns), so that steps close and
  // publications go out while the pipeline catches up.
  constexpr size_t kSlice = size_t{1} << 16;
  std::span<const Event> rest = b.events;
  std::span<const Event> definitions = b.definitions;
  while (rest.size() > kSlice) {
    const std::span<const Event> slice = rest.first(kSlice);
    rest = rest.subspan(kSlice);
    analyses_.Consume(definitions, slice, {}, slice.back().end() - 1, b.now_ns);
    definitions = {};
    if (const uint64_t now = HostNowNs(); now >= next_publish_ns_) {
      Publish(now);
      ScheduleNextPublish(now);
    }
  }
  analyses_.Consume(definitions, rest, b.late, b.watermark_ns, b.now_ns);
  if (trace_store_) {
    const uint64_t t0 = HostNowNs();
    trace_store_->Append(b.definitions, b.events);
    trace_store_->Append({}, b.late, b.watermark_ns);
    analyses_.AddCost(Analysis::kTraceStore, HostNowNs() - t0);
  }

  EventChunk& c = *chunk_;
  c.definitions.insert(c.definitions.end(), b.definitions.begin(), b.definitions.end());
  if (tap_.load(std::memory_order_relaxed)) {
    for (std::span<const Event> part : {b.events, b.late}) {
      const size_t room = options_.max_chunk_events - std::min(options_.max_chunk_events, c.events.size());
      const size_t take = std::min(room, part.size());
      c.events.insert(c.events.end(), part.begin(), part.begin() + static_cast<ptrdiff_t>(take));
      c.dropped += part.size() - take;
    }
  }

  // Publications keep the host clock's period, whatever the stream's clock.
  if (const uint64_t now = HostNowNs(); now >= next_publish_ns_) {
    Publish(now);
    ScheduleNextPublish(now);
  }
  if (has_requests_.load(std::memory_order_acquire)) AnswerRequests(/*stopped=*/false);
}

void Pipeline::ScheduleNextPublish(uint64_t now_ns) {
  // The next tick on the period's grid; a late round does not shift it.
  const uint64_t period =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(options_.publish_period).count());
  if (now_ns >= next_publish_ns_) next_publish_ns_ += period * ((now_ns - next_publish_ns_) / period + 1);
}

void Pipeline::Publish(uint64_t now_ns) {
  const uint64_t render_start = HostNowNs();
  auto snap = std::make_shared<PipelineSnapshot>();
  std::vector<SourceTotals> sources;
  for (const Stream::RingStats& r : stream_.Stats()) sources.push_back({r.name, r.published, r.dropped});
  analyses_.SetSources(std::move(sources), now_ns);
  if (now_ns >= next_self_cost_ns_) {  // liveprof's own threads, from /proc: ~50 µs.
    analyses_.SetSelfCost(ReadSelfCost(now_ns, "liveprof"));
    next_self_cost_ns_ = now_ns + 1'000'000'000;
  }
  analyses_.SetJobState(job_state_.load(std::memory_order_relaxed));
  analyses_.SetPipelineBacklog(drain_.handoff_queued(), drain_.handoff_max_queued());
  RenderOptions ro = options_.render;
  ro.advance_seq = true;
  snap->views = analyses_.Render(ro);
  snap->metrics = CollectMetrics(analyses_, stream_);
  snap->metrics.pipeline_backlog_events = drain_.handoff_queued();
  snap->watermark_ns = snap->views.watermark_ns;
  snap->published_ns = now_ns;
  snap->render_ns = HostNowNs() - render_start;
  analyses_.AddCost(Analysis::kRender, snap->render_ns);
  std::vector<AlertEvent> alerts = analyses_.TakeAlertEvents();
  std::vector<PodNewStep> pod_steps = analyses_.TakeNewPodSteps();
  std::shared_ptr<const PipelineSnapshot> published = std::move(snap);
  {
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = published;
    alert_events_.insert(alert_events_.end(), alerts.begin(), alerts.end());
    // (bounded: the analyses keep at most pod.max_new_steps between two
    // publications, and so does this between two takers' calls)
    const size_t room =
        options_.analyses.pod.max_new_steps - std::min(options_.analyses.pod.max_new_steps, pod_steps_.size());
    if (pod_steps.size() > room) {
      pod_steps_dropped_ += pod_steps.size() - room;
      pod_steps.resize(room);
    }
    if (pod_steps_.empty()) {
      pod_steps_.swap(pod_steps);
    } else {
      for (PodNewStep& p : pod_steps) pod_steps_.push_back(std::move(p));
    }
  }
  publications_.fetch_add(1, std::memory_order_relaxed);
  if (snapshot_sink_) snapshot_sink_(published);

  std::shared_ptr<EventChunk> chunk = std::move(chunk_);
  chunk_ = std::make_shared<EventChunk>();
  chunk_->events.reserve(chunk->events.size());
  chunk->seq = ++chunk_seq_;
  chunk->watermark_ns = published->watermark_ns;
  if (chunk_sink_) chunk_sink_(std::move(chunk));
}

void Pipeline::AnswerRequests(bool stopped) {
  std::vector<PendingRequest> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(requests_);
    has_requests_.store(false, std::memory_order_relaxed);
    if (stopped) requests_closed_ = true;
  }
  for (PendingRequest& r : pending) {
    RenderOptions ro = r.options;
    ro.advance_seq = false;
    r.done(std::make_shared<const RenderedViews>(analyses_.Render(ro)));
  }
}

}  // namespace liveprof
