// The serving session: what each part reads and writes decides the order.
//
//   feed, ingest --(stream)--> pipeline --(snapshots, chunks, steps)--> server, agent
//                                  \--> store (--trace-dir)      server --(hook)--> agent, ingest
//
// Starting is downstream first (the web server, the ingest, the run folder,
// the agent, then the pipeline and the feed), so that a port that cannot be
// had fails before any event is written. Stopping is upstream first, written
// once in Stop() (the destructor's too, whichever way a command returns):
//   1. the writers of the stream: the mode's feed, then the ingest server;
//   2. the pipeline: its last drain takes what they wrote, closes the steps
//      and publishes once more (to the server's clients, the agent's queue);
//   3. its last alerts: to the console and the agent;
//   4. the web server: its threads read the pipeline, the ingest and the
//      agent, so it stops before the agent;
//   5. the agent: it sends the pipeline's last steps and alerts, and stops.
// Lifetimes are the other way (serve_session.h: each member reads only the
// ones declared before it), so that no object goes while another reads it.
#include "app/serve_session.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <utility>

#include "import/progress.h"
#include "ingest/ingest_status.h"
#include "producers/host_api.h"
#include "producers/simulated_workload.h"
#ifdef LIVEPROF_HAVE_CUPTI
#include "producers/cupti_source.h"
#endif

namespace liveprof {

std::string_view ModeName(ServeMode mode) {
  switch (mode) {
    case ServeMode::kDemo: return "demo";
    case ServeMode::kReplay: return "replay";
    case ServeMode::kOpen: return "open";
    case ServeMode::kRun: return "run";
    case ServeMode::kServe: break;
  }
  return "serve";
}

// What feeds the stream in a mode besides --ingest. Prepare() runs before
// the pipeline is made (it may set the pipeline's options), Start() after
// the pipeline started, Stop() before it stops (idempotent; also after a
// failed or no Start()).
class Feed {
 public:
  virtual ~Feed() = default;
  virtual bool Prepare(Pipeline::Options* po, std::string* error) = 0;
  virtual void Start() {}
  virtual void Stop() {}
  virtual void PrintStarted() const {}
  virtual void Tick() {}
  // The job's state when the feed decides it (a replay); else none.
  virtual std::optional<JobState> State() const { return std::nullopt; }
};

namespace {

// serve: CUPTI in this process (where built with it).
class CuptiFeed final : public Feed {
 public:
  explicit CuptiFeed(Stream& stream) : stream_(stream) {}
  bool Prepare(Pipeline::Options* po, std::string*) override {
#ifdef LIVEPROF_HAVE_CUPTI
    cupti_ = std::make_unique<CuptiSource>(stream_);
    if (!cupti_->Start()) po->analyses.env.gpu_note = cupti_->message();
    std::printf("GPU tracing: %s\n", cupti_->message().c_str());
#else
    (void)stream_;
    po->analyses.env.gpu_note = "built without the CUPTI producer (no CUDA toolkit); host-only";
#endif
    return true;
  }
  void Stop() override {
#ifdef LIVEPROF_HAVE_CUPTI
    if (cupti_) cupti_->Stop();
#endif
  }

 private:
  Stream& stream_;
#ifdef LIVEPROF_HAVE_CUPTI
  std::unique_ptr<CuptiSource> cupti_;
#endif
};

// demo: the simulated GPU workload.
class WorkloadFeed final : public Feed {
 public:
  WorkloadFeed(Stream& stream, SimulatedWorkloadOptions& options) : stream_(stream), options_(options) {}
  bool Prepare(Pipeline::Options* po, std::string*) override {
    po->analyses.env.device_type = "GPU (simulated)";
    po->analyses.env.gpu_note = "simulated GPU workload (liveprof demo); no real GPU is traced";
    // Device batches every 10 ms (CUPTI's own source flushes less often):
    // the dashboard then trails the workload by ~10 ms plus a publication.
    options_.flush_period_ns = 10'000'000;
    workload_ = std::make_unique<SimulatedWorkload>(stream_, options_);
    return true;
  }
  void Start() override { workload_->Start(); }
  void Stop() override {
    if (workload_) workload_->Stop();
  }
  void PrintStarted() const override {
    std::printf("serving the simulated GPU workload (seed %" PRIu64 "); Ctrl-C stops\n", options_.model.seed);
  }

 private:
  Stream& stream_;
  SimulatedWorkloadOptions& options_;
  std::unique_ptr<SimulatedWorkload> workload_;
};

// replay: a trace file through the live path, on the trace's clock.
class ReplayFeed final : public Feed {
 public:
  ReplayFeed(Stream& stream, const std::string& file, const TraceReplay::Options& options)
      : file_(file), options_(options), replay_(stream, options) {}
  bool Prepare(Pipeline::Options* po, std::string* error) override {
    ProgressLine progress(file_);
    if (!replay_.Load(file_, error, &progress)) return false;
    po->analyses.env.gpu_note = "replay of " + file_;
    // The stream runs on the replay's clock: the trace's time at any speed.
    po->drain.clock = [r = &replay_] { return r->Clock(); };
    return true;
  }
  void Start() override { replay_.Start(); }
  void Stop() override { replay_.Stop(); }
  void PrintStarted() const override {
    char pace[32] = "max speed";
    if (!options_.max_speed) std::snprintf(pace, sizeof pace, "%gx", options_.speed);
    std::printf("replaying %s: %zu events over %.6g s of trace time, at %s%s; Ctrl-C stops\n", file_.c_str(),
                replay_.events(), static_cast<double>(replay_.span_ns()) / 1e9, pace, options_.loop ? ", looping" : "");
  }
  void Tick() override {
    if (!replay_.done() || reported_) return;
    reported_ = true;
    std::printf("replay done: %" PRIu64 " events written; still serving\n", replay_.events_written());
  }
  // A replay that is done (not looping) has finished.
  std::optional<JobState> State() const override {
    return replay_.done() && !options_.loop ? JobState::kFinished : JobState::kLive;
  }

 private:
  const std::string& file_;
  const TraceReplay::Options& options_;
  TraceReplay replay_;
  bool reported_ = false;
};

// open: no producer; the run folder read back is the trace viewer's.
class OpenFeed final : public Feed {
 public:
  OpenFeed(const std::string& dir, const TraceStore& store) : dir_(dir), store_(store) {}
  bool Prepare(Pipeline::Options* po, std::string*) override {
    po->analyses.env.gpu_note = "a run read back from " + dir_ + " (liveprof open): the trace viewer only";
    po->analyses.env.opened_run = dir_;
    return true;
  }
  void PrintStarted() const override {
    const TraceStore::Stats st = store_.stats();
    std::printf("opened %s: %" PRIu64 " events over %.6g s, %" PRIu64
                " segments (%.1f MiB), %zu problems; "
                "the trace viewer shows them; Ctrl-C stops\n",
                dir_.c_str(), st.events, static_cast<double>(st.last_ns - st.first_ns) / 1e9, st.segments,
                static_cast<double>(st.disk_bytes) / (1 << 20), store_.problems().size());
  }

 private:
  const std::string& dir_;
  const TraceStore& store_;
};

// run: the job's events come through the ingest; nothing of its own.
class JobFeed final : public Feed {
 public:
  bool Prepare(Pipeline::Options* po, std::string*) override {
    // The job's GPU activity comes from inside it (CUDA's injection of
    // libliveprof.so), with its host events, through the ingest.
    po->analyses.env.gpu_note = "liveprof run: the job's GPU activity, if any, is traced inside it (CUDA injection)";
    return true;
  }
};

// The job as serve sees it, with an ingest: no source yet is waiting, any
// connected source is live, and all gone is finished when every one closed
// cleanly, else disconnected.
JobState IngestJobState(const IngestServer& ingest) {
  bool any = false, cut_off = false;
  for (const IngestServer::SourceStatus& s : ingest.Sources()) {
    if (s.worker == 0) continue;  // never introduced itself: not a part of the job.
    if (s.connected) return JobState::kLive;
    any = true;
    cut_off = cut_off || !s.closed_cleanly;
  }
  if (!any) return JobState::kWaiting;
  return cut_off ? JobState::kDisconnected : JobState::kFinished;
}

// What the console shows while serving: a line about the last steps.
void PrintProgress(const PipelineSnapshot& s) {
  const MetricsInput& m = s.metrics;
  if (m.window.steps == 0) {
    std::printf("  %" PRIu64 " events, no step closed yet\n", m.events_consumed);
    return;
  }
  std::printf("  steps %" PRId64 "-%" PRId64 ": p50 %.2f ms | input %.1f%% | %" PRIu64 " events, %" PRIu64 " dropped\n",
              m.window.first_step, m.window.last_step, m.step_time.p50 * 1e3, m.input_ratio * 100, m.events_consumed,
              m.events_dropped);
}

// Alert transitions as the console shows them (and to the fleet agent).
void ReportAlerts(const std::vector<AlertEvent>& events, FleetAgent* agent) {
  if (agent) agent->AddAlerts(events);
  for (const AlertEvent& e : events) {
    std::printf("  ALERT %s %s: %s\n", std::string(AlertEventStateName(e.state)).c_str(), e.rule.c_str(),
                e.summary.c_str());
  }
}

// The server's hooks into the ingest (/api/status, /metrics, POST /api/capture).
void SetIngestHooks(ServerOptions* so, IngestServer& ingest) {
  so->ingest_status = [&ingest] { return IngestSourcesJson(ingest.Sources(), HostNowNs()); };
  so->ingest_refused = [&ingest] {
    std::vector<MetricsRefusal> out;
    for (const IngestServer::RefusedCount& r : ingest.RefusedTotals()) out.push_back({r.source, r.reason, r.events});
    return out;
  };
  so->ingest_cost = [&ingest] {  // each connected source's newest sample, by ring name.
    std::vector<MetricsSourceCost> out;
    for (const IngestServer::SourceStatus& s : ingest.Sources()) {
      if (!s.connected || s.cost.now.at_ns == 0) continue;
      const std::string source = "ingest " + s.label;
      const auto it =
          std::find_if(out.begin(), out.end(), [&](const MetricsSourceCost& c) { return c.source == source; });
      MetricsSourceCost& c = it != out.end() ? *it : out.emplace_back();  // (a later connection: newer)
      c = {source, s.cost.now.threads, s.cost.now.rss_bytes, s.cost.now.hook_ns, s.cost.now.cupti_overhead_ns};
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.source < b.source; });
    return out;
  };
  so->capture = [&ingest](const CaptureQuery& q) {
    std::string error;
    const IngestServer::CaptureRequest r{q.host_level, q.python_scopes, q.gpu, q.duration_ns, q.gpu_level};
    return ingest.Capture(q.source, r, &error) ? std::string() : error;
  };
}

}  // namespace

ServeSession::ServeSession(ServeArgs& args, ServeMode mode) : args_(args), mode_(mode), stream_(GlobalStream()) {}

ServeSession::~ServeSession() { Stop(); }

bool ServeSession::Prepare(std::string* error) {
  TraceStore::Options& trace = args_.trace;
  po_.trace_store_bytes = static_cast<uint64_t>(args_.trace_mb * 1024 * 1024);
  if (mode_ == ServeMode::kOpen || !trace.dir.empty()) {
    if (mode_ == ServeMode::kOpen) trace.dir = args_.file;
    trace.max_bytes = po_.trace_store_bytes;
    // Segments of an eighth of the disk budget (the newest, being written,
    // is never deleted): the folder stays within about 9/8 of it.
    if (trace.max_disk_bytes > 0)
      trace.segment_bytes = std::clamp<uint64_t>(trace.max_disk_bytes / 8, 1 << 20, 64 << 20);
    store_ = std::make_shared<TraceStore>(trace);
    po_.trace_store = store_;
    if (mode_ == ServeMode::kOpen && !store_->Open(error)) return false;  // (a new run's folder: Start())
    for (const std::string& problem : store_->problems()) std::printf("  %s\n", problem.c_str());
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) po_.analyses.env.hostname = host;
  po_.analyses.steps.name_pattern = args_.step_pattern;
  switch (mode_) {
    case ServeMode::kServe: feed_ = std::make_unique<CuptiFeed>(stream_); break;
    case ServeMode::kDemo: feed_ = std::make_unique<WorkloadFeed>(stream_, args_.workload.options); break;
    case ServeMode::kReplay: feed_ = std::make_unique<ReplayFeed>(stream_, args_.file, args_.ro); break;
    case ServeMode::kOpen: feed_ = std::make_unique<OpenFeed>(args_.file, *store_); break;
    case ServeMode::kRun: feed_ = std::make_unique<JobFeed>(); break;
  }
  if (!feed_->Prepare(&po_, error)) return false;

  PreparePublish(args_.publish, &po_);
  SetAgentHook(&args_.so, &agent_hook_);
  if (!args_.io.endpoints.empty()) {
    ingest_ = std::make_unique<IngestServer>(stream_, args_.io);
    SetIngestHooks(&args_.so, *ingest_);
  }
  pipeline_ = std::make_unique<Pipeline>(stream_, po_);
  server_ = std::make_unique<Server>(*pipeline_, args_.so);
  return true;
}

bool ServeSession::Start(std::string* error) {
  if (!server_->Start(error) || (ingest_ && !ingest_->Start(error))) return false;
  // The run folder once nothing else can fail: a failed start leaves none.
  if (mode_ != ServeMode::kOpen && store_ && !store_->Create(error)) return false;
  const ServerOptions& so = args_.so;
  const std::string shown_host = so.bind.find(':') != std::string::npos ? "[" + so.bind + "]" : so.bind;
  url_ = "http://" + shown_host + ":" + std::to_string(server_->port()) + "/";
  if (!args_.publish.url.empty()) {
    agent_ = StartAgent(args_.publish, *pipeline_, stream_, url_, error);
    agent_hook_.store(agent_.get(), std::memory_order_release);
    if (!agent_) {
      *error = "--publish: " + *error;
      return false;
    }
  }
  pipeline_->Start();
  feed_->Start();
  return true;
}

void ServeSession::PrintStarted() const {
  std::printf("listening on %s\n", url_.c_str());
  if (agent_) {
    std::printf("publishing job %s, host %s, to %s (agent %s)\n", args_.publish.job.c_str(), agent_->host().c_str(),
                RedactNatsUrl(args_.publish.url).c_str(), agent_->agent_id().c_str());
  }
  if (ingest_) {
    for (const IngestEndpoint& e : ingest_->bound()) std::printf("ingest on %s\n", e.ToString().c_str());
  }
  feed_->PrintStarted();
  if (mode_ != ServeMode::kOpen && !args_.trace.dir.empty()) {
    std::printf("writing every event to %s\n", args_.trace.dir.c_str());
  }
}

void ServeSession::Tick(bool progress) {
  ReportAlerts(pipeline_->TakeAlertEvents(), agent_.get());
  pipeline_->SetJobState(StateNow());
  feed_->Tick();
  if (progress) {
    if (const auto latest = pipeline_->Latest()) PrintProgress(*latest);
  }
}

// A feed that decides (a replay) says; else with an ingest, its sources;
// in-process producers are live.
JobState ServeSession::StateNow() const {
  if (const std::optional<JobState> s = feed_->State()) return *s;
  return ingest_ ? IngestJobState(*ingest_) : JobState::kLive;
}

void ServeSession::SetJobState(JobState state) { pipeline_->SetJobState(state); }

std::string ServeSession::IngestAddress() const { return ingest_->bound().front().ToString(); }

void ServeSession::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // (Prepare() may have failed part way: each part made is stopped.)
  if (feed_) feed_->Stop();
  if (ingest_) ingest_->Stop();
  if (!pipeline_) return;  // (then nothing after it was made)
  pipeline_->Stop();
  ReportAlerts(pipeline_->TakeAlertEvents(), agent_.get());  // the last publication's (a run's end).
  std::fflush(stdout);
  server_->Stop();
  if (agent_) agent_->Stop();
}

void ServeSession::PrintDone() const {
  if (agent_) {
    const FleetAgent::Stats as = agent_->stats();
    std::printf("fleet: %" PRIu64 " step summaries published, %" PRIu64 " dropped, %" PRIu64 " unsent\n",
                as.steps_published, as.steps_dropped + as.source_dropped, as.outbox);
  }
  const ServerStats st = server_->stats();
  std::printf("done: %" PRIu64 " events dropped; served %" PRIu64 " connections, %" PRIu64 " view frames, %" PRIu64
              " event frames\n",
              stream_.TotalDropped(), st.connections_accepted, st.view_frames_sent, st.event_frames_sent);
}

}  // namespace liveprof
