#include "app/serve.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pipeline/pipeline.h"
#include "app/analyze.h"
#include "app/args.h"
#include "app/fleet.h"
#include "app/paths.h"
#include "app/run.h"
#include "import/chrome_export.h"
#include "import/replay.h"
#include "base/json_writer.h"
#include "base/self_cost.h"
#include "producers/host_api.h"
#include "ingest/ingest_server.h"
#include "producers/simulated_workload.h"
#ifdef LIVEPROF_HAVE_CUPTI
#include "producers/cupti_source.h"
#endif
#include "web/server.h"

#ifndef LIVEPROF_VERSION
#define LIVEPROF_VERSION "unknown"
#endif

namespace liveprof {
namespace {

enum class ServeMode { kServe, kDemo, kReplay, kOpen, kRun };

// What a serve, demo, replay or open command line says (only the options of
// its mode are added).
struct ServeArgs {
  ServerOptions so;
  double seconds = 0;
  double trace_mb = 1024;
  double trace_disk_mb = 0;
  WorkloadArgs workload;
  std::string file;  // replay: the trace file; open: the run folder.
  TraceStore::Options trace;
  std::string speed = "1";
  TraceReplay::Options ro;
  std::vector<std::string> ingest;
  IngestServer::Options io;
  PublishArgs publish;  // --publish: also a fleet agent.
  RunArgs run;          // run: the job.
  std::string run_dir;  // run: a private folder for the ingest socket (removed at the end).
  std::string step_pattern;  // --step-pattern: spans so named are steps (StepAssembler::Options).
};

// The job as serve sees it: a replay (not looping) that is done has
// finished; with an ingest, no source yet is waiting, any connected source is
// live, and all gone is finished when every one closed cleanly, else
// disconnected. In-process producers are live.
JobState JobStateNow(const IngestServer* ingest, const TraceReplay* replay, bool loop) {
  if (replay) return replay->done() && !loop ? JobState::kFinished : JobState::kLive;
  if (!ingest) return JobState::kLive;
  bool any = false, cut_off = false;
  for (const IngestServer::SourceStatus& s : ingest->Sources()) {
    if (s.worker == 0) continue;  // never introduced itself: not a part of the job.
    if (s.connected) return JobState::kLive;
    any = true;
    cut_off = cut_off || !s.closed_cleanly;
  }
  if (!any) return JobState::kWaiting;
  return cut_off ? JobState::kDisconnected : JobState::kFinished;
}

// /api/status's "ingest": every source, connected or not.
std::string IngestStatusJson(const IngestServer& ingest) {
  JsonWriter w;
  w.BeginArray();
  for (const IngestServer::SourceStatus& s : ingest.Sources()) {
    w.BeginObject();
    w.KV("id", s.id);
    w.KV("endpoint", s.endpoint);
    w.KV("label", s.label);
    w.KV("host", s.host);
    w.KV("pid", s.pid);
    w.KV("rank", static_cast<int64_t>(s.rank));
    w.KV("program", s.program);
    w.KV("peer", s.peer);
    w.KV("connected", s.connected);
    w.KV("closed_reason", s.closed_reason);
    w.KV("closed_cleanly", s.closed_cleanly);
    w.KV("frames", s.frames);
    w.KV("batches", s.batches);
    w.KV("acked_seq", s.acked_seq);
    w.KV("unacked_batches", s.unacked_batches);
    w.KV("events", s.events);
    w.KV("lost_batches", s.lost_batches);
    w.KV("sender_dropped", s.sender_dropped);
    w.KV("ring_dropped", s.ring_dropped);
    w.KV("clock_offset_ns", s.clock_offset_ns);
    w.KV("best_rtt_ns", s.best_rtt_ns);
    w.KV("worker", static_cast<uint64_t>(s.worker));
    w.KV("duplicate_batches", s.duplicate_batches);
    w.KV("future_dropped", s.future_dropped);
    w.KV("refused_events", s.refused_events);
    w.Key("refused");  // by reason, each with its first event's message.
    w.BeginArray();
    for (const IngestRefusal& r : s.refused) {
      w.BeginObject();
      w.KV("reason", r.reason);
      w.KV("events", r.events);
      w.KV("example", r.example);
      w.EndObject();
    }
    w.EndArray();
    w.Key("capture");
    if (!s.capture.known) {
      w.Null();
    } else {
      w.BeginObject();
      w.KV("control_id", static_cast<uint64_t>(s.capture.control_id));
      w.KV("host_level", static_cast<int64_t>(s.capture.host_level));
      w.KV("python_scopes", s.capture.python_scopes);
      w.KV("gpu", s.capture.gpu);
      w.KV("gpu_available", s.capture.gpu_available);
      w.Key("gpu_level");  // the GPU producer's capture level; null: none.
      if (s.capture.gpu_level < 0) {
        w.Null();
      } else {
        w.String(s.capture.gpu_level == 1 ? "full" : "default");
      }
      w.KV("until_ns", s.capture.until_ns);
      const uint64_t now = HostNowNs();
      w.KV("seconds_left", s.capture.until_ns > now ? static_cast<double>(s.capture.until_ns - now) / 1e9 : 0.0);
      w.EndObject();
    }
    w.Key("cost");  // liveprof's own cost in its process (IngestBatch.cost); null: none said.
    if (s.cost.now.at_ns == 0) {
      w.Null();
    } else {
      w.BeginObject();
      WriteSelfCostFields(w, s.cost.prev, s.cost.now);
      WriteHookCostFields(w, s.cost);  // (the time its hooks add per step)
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

// What the console shows while serving: alerts as they change, and a line
// about the last steps every few seconds.
void PrintProgress(const PipelineSnapshot& s) {
  const MetricsInput& m = s.metrics;
  if (m.window.steps == 0) {
    std::printf("  %" PRIu64 " events, no step closed yet\n", m.events_consumed);
    return;
  }
  std::printf("  steps %" PRId64 "-%" PRId64 ": p50 %.2f ms | input %.1f%% | %" PRIu64
              " events, %" PRIu64 " dropped\n",
              m.window.first_step, m.window.last_step, m.step_time.p50 * 1e3, m.input_ratio * 100,
              m.events_consumed, m.events_dropped);
}

// Alert transitions as the console shows them (and to the fleet agent).
void ReportAlerts(const std::vector<AlertEvent>& events, FleetAgent* agent) {
  if (agent) agent->AddAlerts(events);
  for (const AlertEvent& e : events) {
    std::printf("  ALERT %s %s: %s\n", std::string(AlertEventStateName(e.state)).c_str(), e.rule.c_str(),
                e.summary.c_str());
  }
}

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

int Serve(ServeArgs& args, ServeMode mode) {
  const bool demo = mode == ServeMode::kDemo;
  const std::string command = "liveprof " + std::string(ModeName(mode));
  ServerOptions& so = args.so;
  const double seconds = args.seconds;
  SimulatedWorkloadOptions& wo = args.workload.options;
  const std::string& replay_file = args.file;
  TraceStore::Options& trace = args.trace;
  const TraceReplay::Options& ro = args.ro;
  const double trace_mb = args.trace_mb;
  const IngestServer::Options& io = args.io;

  // SIGINT/SIGTERM are taken by sigtimedwait below: block them before any
  // thread starts, so that every thread inherits the mask.
  sigset_t signals, unblocked;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  std::unique_ptr<Job> job;
  if (mode == ServeMode::kRun) {
    sigaddset(&signals, SIGCHLD);  // the job's end wakes the loop.
    signal(SIGCHLD, SIG_DFL);      // (inherited SIG_IGN would reap the job for us, status unknown)
    job = std::make_unique<Job>(args.run);
    if (!job->Check()) return job->exit_status();  // before any server starts.
    if (args.io.endpoints.empty()) {
      // The job's address: a socket in a folder of our own (mode 0700).
      char dir[] = "/tmp/liveprof-run-XXXXXX";
      if (mkdtemp(dir) == nullptr) {
        std::fprintf(stderr, "%s: mkdtemp: %s\n", command.c_str(), std::strerror(errno));
        return kExitLiveprofFailed;
      }
      args.run_dir = dir;
      IngestEndpoint e;
      std::string error;
      ParseIngestEndpoint("unix:" + args.run_dir + "/ingest.sock", &e, &error);
      args.io.endpoints.push_back(e);
    }
  }
  // The run's folder goes however Serve returns (after the ingest server,
  // declared below, has closed its socket).
  struct RemoveRunDir {
    const std::string& dir;
    ~RemoveRunDir() {
      if (dir.empty()) return;
      ::unlink((dir + "/ingest.sock").c_str());
      ::rmdir(dir.c_str());
    }
  } remove_run_dir{args.run_dir};
  pthread_sigmask(SIG_BLOCK, &signals, &unblocked);  // (the job gets the mask we had)
  // A failure of liveprof itself: 1, or under run 125 (the job's statuses are its own).
  const int failed = mode == ServeMode::kRun ? kExitLiveprofFailed : 1;

  Stream& stream = GlobalStream();
  Pipeline::Options po;
  po.trace_store_bytes = static_cast<uint64_t>(trace_mb * 1024 * 1024);
  if (mode == ServeMode::kOpen || !trace.dir.empty()) {
    if (mode == ServeMode::kOpen) trace.dir = replay_file;
    trace.max_bytes = po.trace_store_bytes;
    // Segments of an eighth of the disk budget (the newest, being written,
    // is never deleted): the folder stays within about 9/8 of it.
    if (trace.max_disk_bytes > 0) trace.segment_bytes = std::clamp<uint64_t>(trace.max_disk_bytes / 8, 1 << 20, 64 << 20);
    po.trace_store = std::make_shared<TraceStore>(trace);
    std::string error;
    if (mode == ServeMode::kOpen && !po.trace_store->Open(&error)) {  // (a new run's folder: once serving)
      std::fprintf(stderr, "%s: %s\n", command.c_str(), error.c_str());
      return failed;
    }
    for (const std::string& problem : po.trace_store->problems()) std::printf("  %s\n", problem.c_str());
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) po.analyses.env.hostname = host;
  po.analyses.steps.name_pattern = args.step_pattern;
  std::unique_ptr<SimulatedWorkload> workload;
  std::unique_ptr<TraceReplay> replay;
#ifdef LIVEPROF_HAVE_CUPTI
  std::unique_ptr<CuptiSource> cupti;
#endif
  if (mode == ServeMode::kOpen) {
    po.analyses.env.gpu_note = "a run read back from " + replay_file + " (liveprof open): the trace viewer only";
    po.analyses.env.opened_run = replay_file;
  } else if (mode == ServeMode::kReplay) {
    replay = std::make_unique<TraceReplay>(stream, ro);
    ProgressLine progress(replay_file);
    std::string error;
    if (!replay->Load(replay_file, &error, &progress)) {
      std::fprintf(stderr, "%s: %s\n", command.c_str(), error.c_str());
      return failed;
    }
    po.analyses.env.gpu_note = "replay of " + replay_file;
    // The stream runs on the replay's clock: the trace's time at any speed.
    po.drain.clock = [r = replay.get()] { return r->Clock(); };
  } else if (demo) {
    po.analyses.env.device_type = "GPU (simulated)";
    po.analyses.env.gpu_note = "simulated GPU workload (liveprof demo); no real GPU is traced";
    // Device batches every 10 ms (CUPTI's own source flushes less often):
    // the dashboard then trails the workload by ~10 ms plus a publication.
    wo.flush_period_ns = 10'000'000;
    workload = std::make_unique<SimulatedWorkload>(stream, wo);
  } else if (mode == ServeMode::kRun) {
    // The job's GPU activity comes from inside it (CUDA's injection of
    // libliveprof.so), with its host events, through the ingest.
    po.analyses.env.gpu_note = "liveprof run: the job's GPU activity, if any, is traced inside it (CUDA injection)";
  } else {  // serve
#ifdef LIVEPROF_HAVE_CUPTI
    cupti = std::make_unique<CuptiSource>(stream);
    if (!cupti->Start()) po.analyses.env.gpu_note = cupti->message();
    std::printf("GPU tracing: %s\n", cupti->message().c_str());
#else
    po.analyses.env.gpu_note = "built without the CUPTI producer (no CUDA toolkit); host-only";
#endif
  }

  PreparePublish(args.publish, &po);
  std::unique_ptr<FleetAgent> agent;  // (outlives the server and the pipeline: stopped before either goes)
  std::atomic<FleetAgent*> agent_for_hook{nullptr};  // what the server's threads read, once started
  SetAgentHook(&so, &agent_for_hook);
  std::unique_ptr<IngestServer> ingest;
  if (!io.endpoints.empty()) {
    ingest = std::make_unique<IngestServer>(stream, io);
    so.ingest_status = [&ingest] { return IngestStatusJson(*ingest); };
    so.ingest_refused = [&ingest] {
      std::vector<MetricsRefusal> out;
      for (const IngestServer::RefusedCount& r : ingest->RefusedTotals()) out.push_back({r.source, r.reason, r.events});
      return out;
    };
    so.ingest_cost = [&ingest] {  // each connected source's newest sample, by ring name.
      std::vector<MetricsSourceCost> out;
      for (const IngestServer::SourceStatus& s : ingest->Sources()) {
        if (!s.connected || s.cost.now.at_ns == 0) continue;
        const std::string source = "ingest " + s.label;
        const auto it = std::find_if(out.begin(), out.end(), [&](const MetricsSourceCost& c) { return c.source == source; });
        MetricsSourceCost& c = it != out.end() ? *it : out.emplace_back();  // (a later connection: newer)
        c = {source, s.cost.now.threads, s.cost.now.rss_bytes, s.cost.now.hook_ns, s.cost.now.cupti_overhead_ns};
      }
      std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.source < b.source; });
      return out;
    };
    so.capture = [&ingest](const CaptureQuery& q) {
      std::string error;
      const IngestServer::CaptureRequest r{q.host_level, q.python_scopes, q.gpu, q.duration_ns, q.gpu_level};
      return ingest->Capture(q.source, r, &error) ? std::string() : error;
    };
  }
  Pipeline pipeline(stream, po);
  Server server(pipeline, so);
  // However Serve returns from here, the agent (which reads the pipeline)
  // stops first: after the server (whose threads read the agent), before the
  // pipeline goes.
  struct StopAgentFirst {
    Server& server;
    std::unique_ptr<FleetAgent>& agent;
    ~StopAgentFirst() {
      if (!agent) return;
      server.Stop();
      agent->Stop();
    }
  } stop_agent_first{server, agent};
  std::string error;
  if (!server.Start(&error) || (ingest && !ingest->Start(&error))) {
    std::fprintf(stderr, "%s: %s\n", command.c_str(), error.c_str());
    return failed;
  }
  // The run folder once nothing else can fail: a failed start leaves none.
  if (mode != ServeMode::kOpen && po.trace_store && !po.trace_store->Create(&error)) {
    std::fprintf(stderr, "%s: %s\n", command.c_str(), error.c_str());
    return failed;
  }
  const std::string shown_host = so.bind.find(':') != std::string::npos ? "[" + so.bind + "]" : so.bind;
  const std::string url = "http://" + shown_host + ":" + std::to_string(server.port()) + "/";
  if (!args.publish.url.empty()) {
    agent = StartAgent(args.publish, pipeline, stream, url, &error);
    agent_for_hook.store(agent.get(), std::memory_order_release);
    if (!agent) {
      std::fprintf(stderr, "%s: --publish: %s\n", command.c_str(), error.c_str());
      if (ingest) ingest->Stop();
      server.Stop();
      return failed;
    }
  }
  pipeline.Start();
  if (workload) workload->Start();
  if (replay) replay->Start();
  std::printf("listening on %s\n", url.c_str());
  if (agent) {
    std::printf("publishing job %s, host %s, to %s (agent %s)\n", args.publish.job.c_str(),
                agent->host().c_str(), RedactNatsUrl(args.publish.url).c_str(),
                agent->agent_id().c_str());
  }
  if (ingest) {
    for (const IngestEndpoint& e : ingest->bound()) std::printf("ingest on %s\n", e.ToString().c_str());
  }
  if (demo) {
    std::printf("serving the simulated GPU workload (seed %" PRIu64 "); Ctrl-C stops\n", wo.model.seed);
  }
  if (replay) {
    char pace[32] = "max speed";
    if (!ro.max_speed) std::snprintf(pace, sizeof pace, "%gx", ro.speed);
    std::printf("replaying %s: %zu events over %.6g s of trace time, at %s%s; Ctrl-C stops\n",
                replay_file.c_str(), replay->events(), static_cast<double>(replay->span_ns()) / 1e9, pace,
                ro.loop ? ", looping" : "");
  }
  if (mode == ServeMode::kOpen) {
    const TraceStore::Stats st = po.trace_store->stats();
    std::printf("opened %s: %" PRIu64 " events over %.6g s, %" PRIu64 " segments (%.1f MiB), %zu problems; "
                "the trace viewer shows them; Ctrl-C stops\n",
                replay_file.c_str(), st.events, static_cast<double>(st.last_ns - st.first_ns) / 1e9, st.segments,
                static_cast<double>(st.disk_bytes) / (1 << 20), po.trace_store->problems().size());
  } else if (!trace.dir.empty()) {
    std::printf("writing every event to %s\n", trace.dir.c_str());
  }
  bool replay_reported = false;
  std::fflush(stdout);
  if (job) {
    // A Ctrl-C while the server started is pending here, and the job was not
    // there to get it: stop now rather than start the job.
    const timespec now_only{0, 0};
    if (const int sig = sigtimedwait(&signals, nullptr, &now_only); sig == SIGINT || sig == SIGTERM) {
      std::printf("%s: %s before the job started; not started\n", command.c_str(),
                  sig == SIGINT ? "SIGINT" : "SIGTERM");
      ingest->Stop();
      pipeline.Stop();
      server.Stop();
      return 128 + sig;
    }
  }
  if (job && !job->Start(ingest->bound().front().ToString(), unblocked)) {
    ingest->Stop();
    pipeline.Stop();
    server.Stop();
    return job->exit_status();
  }

  const auto start = std::chrono::steady_clock::now();
  int ticks = 0;
  bool seconds_up = false;
  for (;;) {
    const timespec one_second{1, 0};
    siginfo_t info{};
    const int sig = sigtimedwait(&signals, &info, &one_second);
    if (job) {  // run: the job decides when the server stops.
      if (sig == SIGINT || sig == SIGTERM) job->OnSignal(sig, info.si_code);
      if (!job->KeepServing()) break;
    } else if (sig == SIGINT || sig == SIGTERM) {
      std::printf("%s: stopping (%s)\n", command.c_str(), sig == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    ReportAlerts(pipeline.TakeAlertEvents(), agent.get());
    pipeline.SetJobState(JobStateNow(ingest.get(), replay.get(), ro.loop));
    if (replay && replay->done() && !replay_reported) {
      replay_reported = true;
      std::printf("replay done: %" PRIu64 " events written; still serving\n", replay->events_written());
    }
    if (++ticks % 5 == 0 && !job) {  // (under run, the job's own output is what the terminal shows)
      if (const auto latest = pipeline.Latest()) PrintProgress(*latest);
    }
    std::fflush(stdout);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 0 && elapsed >= seconds) {
      if (!job) break;
      if (!seconds_up) {  // run: the job is asked to stop; the server stops once it has.
        seconds_up = true;
        std::printf("%s: --seconds %g reached\n", command.c_str(), seconds);
        job->OnSignal(SIGTERM, SI_USER);
      }
    }
  }

  if (job) {
    // The job has ended (that is what ends a run), whether or not its
    // sources' close was seen yet: its alerts close with their last values.
    JobState end = JobStateNow(ingest.get(), replay.get(), ro.loop);
    if (end != JobState::kFinished && end != JobState::kDisconnected) {
      end = job->exit_status() == 0 ? JobState::kFinished : JobState::kDisconnected;
    }
    pipeline.SetJobState(end);
  }
  if (workload) workload->Stop();
  if (replay) replay->Stop();
  if (ingest) ingest->Stop();
#ifdef LIVEPROF_HAVE_CUPTI
  if (cupti) cupti->Stop();
#endif
  pipeline.Stop();
  ReportAlerts(pipeline.TakeAlertEvents(), agent.get());  // the last publication's (a run's end).
  std::fflush(stdout);
  server.Stop();  // (before the agent: the server's threads read it)
  if (agent) {  // after the pipeline's last steps: they go too.
    agent->Stop();
    const FleetAgent::Stats as = agent->stats();
    std::printf("fleet: %" PRIu64 " step summaries published, %" PRIu64 " dropped, %" PRIu64 " unsent\n",
                as.steps_published, as.steps_dropped + as.source_dropped, as.outbox);
  }
  const ServerStats st = server.stats();
  std::printf("done: %" PRIu64 " events dropped; served %" PRIu64 " connections, %" PRIu64
              " view frames, %" PRIu64 " event frames\n",
              stream.TotalDropped(), st.connections_accepted, st.view_frames_sent,
              st.event_frames_sent);
  return job ? job->exit_status() : 0;
}

// The checks that need the whole command line; a failure is said as a parse
// error (exit 2).
void FinishServeArgs(ServeArgs& a, ServeMode mode) {
  if ((mode == ServeMode::kReplay || mode == ServeMode::kOpen) && a.file.empty()) {
    throw CLI::ValidationError(mode == ServeMode::kOpen ? "which folder?" : "which file?");
  }
  if (a.trace_disk_mb > 0) {
    if (a.trace.dir.empty()) throw CLI::ValidationError("--trace-disk-mb needs --trace-dir");
    a.trace.max_disk_bytes = static_cast<uint64_t>(a.trace_disk_mb * 1024 * 1024);
  }
  for (const std::string& endpoint : a.ingest) {
    IngestEndpoint e;
    std::string error;
    if (!ParseIngestEndpoint(endpoint, &e, &error)) throw CLI::ValidationError(error);
    a.io.endpoints.push_back(e);
  }
  if (a.speed == "max") {
    a.ro.max_speed = true;
  } else {
    a.ro.speed = std::strtod(a.speed.c_str(), nullptr);  // (checked while parsing)
  }
  if (mode == ServeMode::kDemo) FinishWorkloadOptions(&a.workload);
  if (mode == ServeMode::kRun) {
    a.run.command.insert(a.run.command.end(), a.run.after_dashes.begin(), a.run.after_dashes.end());
    if (a.run.command.empty()) throw CLI::ValidationError("which command? liveprof run [options] -- COMMAND [ARGS...]");
  }
  if (const std::string invalid = ValidateServerOptions(a.so); !invalid.empty()) {
    throw CLI::ValidationError(invalid);
  }
  FinishPublishOptions(a.publish);
}

void AddServeCommand(CLI::App& app, Commands* commands, ServeMode mode, const std::string& description) {
  auto a = std::make_shared<ServeArgs>();
  a->so.version = LIVEPROF_VERSION;
  a->so.export_trace = ExportStoreRangeStream;  // /api/export, streamed
  a->so.static_dir = DefaultStaticDir();
  CLI::App* sub = app.add_subcommand(std::string(ModeName(mode)), description);
  if (mode == ServeMode::kReplay) {
    sub->add_option("FILE", a->file, kTraceFileHelp);
  } else if (mode == ServeMode::kOpen) {
    sub->add_option("DIR", a->file,
                    "a run folder (--trace-dir): its events in the trace viewer, read-only; the live "
                    "analyses' pages stay empty");
  }
  AddNumber(sub, "--port", a->so.port, 0, 65535, "port to listen on (0 picks a free one)");
  sub->add_option("--bind", a->so.bind, "address to listen on (any but loopback needs --token)");
  sub->add_option("--token", a->so.token,
                  "require T on every request (Authorization: Bearer T, ?token=T, or the WebSocket "
                  "subprotocol liveprof.token.T; default: none)");
  sub->add_option("--allow-origin", a->so.allowed_origins,
                  "a browser origin that may open /ws besides the server's own (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--static", a->so.static_dir, "the dashboard's files");
  AddNumber(sub, "--seconds", a->seconds, 0.1, 1e9, "stop after N seconds (by default, 0: run until Ctrl-C)");
  AddNumber(sub, "--trace-mb", a->trace_mb, 0, 1 << 20,
            "the trace viewer's memory for events, MiB; past it the oldest go (to --trace-dir if "
            "given; 0 keeps none)");
  if (mode != ServeMode::kOpen) {
    sub->add_option("--trace-dir", a->trace.dir,
                    "write every event to this run folder as well (a new or empty folder): past "
                    "--trace-mb they stay there for the viewer, and a run stopped or killed can be "
                    "read back (liveprof open DIR; default: none)");
    AddNumber(sub, "--trace-disk-mb", a->trace_disk_mb, 1, 1 << 30,
              "the run folder's size, MiB; past it the oldest segments are deleted (by default, 0: no limit)");
  }
  if (mode == ServeMode::kServe || mode == ServeMode::kDemo || mode == ServeMode::kRun) {  // (a replay runs on trace time)
    sub->add_option("--ingest", a->ingest,
                    "take events from other processes at E: unix:PATH or tcp:127.0.0.1:PORT "
                    "(repeatable; docs/ingest.md)")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  if (mode != ServeMode::kOpen) {
    sub->add_option("--step-pattern", a->step_pattern,
                    "host spans whose name matches this glob are steps, where a program marks none "
                    "(`*`: any text, `{n}`: the step number, e.g. 'train_step_{n}' or 'Trainer.step*'); "
                    "step markers and ProfilerStep#N take precedence");
  }
  if (mode == ServeMode::kDemo) AddWorkloadOptions(sub, &a->workload);
  if (mode == ServeMode::kServe || mode == ServeMode::kDemo || mode == ServeMode::kRun) {
    AddPublishOptions(sub, &a->publish);
  }
  if (mode == ServeMode::kRun) AddRunOptions(sub, &a->run, commands);
  if (mode == ServeMode::kReplay) {
    sub->add_option("--speed", a->speed,
                    "X times the trace's own pace, a number in " + RangeText(1e-3, 1e6) +
                        ", or max: as fast as the pipeline takes it; the analyses keep the trace's times")
        ->check(CLI::Validator(
            [number = NumberIn(1e-3, 1e6, false)](std::string& s) {
              if (s == "max") return std::string();
              const std::string error = number(s);  // "'fast': expected a number in [...]"
              return error.empty() ? error : error + " or max";
            },
            ""));
    sub->add_flag("--loop", a->ro.loop, "start again after the end (until Ctrl-C or --seconds)");
  }
  sub->callback([a, mode] { FinishServeArgs(*a, mode); });
  commands->Add(sub, [a, mode] {
    if (mode == ServeMode::kRun && !a->run.connect.empty()) return RunConnected(a->run);
    return Serve(*a, mode);
  });
}

}  // namespace

void AddServeCommands(CLI::App& app, Commands* commands) {
  AddServeCommand(app, commands, ServeMode::kDemo,
                  "the dashboard and feed on the simulated GPU workload: serve plus a scenario "
                  "schedule (--scenario to pin one)");
  AddServeCommand(app, commands, ServeMode::kServe,
                  "the dashboard, REST, /metrics and the WebSocket feed for real producers (CUPTI in "
                  "this process, --ingest for others)");
  AddServeCommand(app, commands, ServeMode::kReplay,
                  "serve a trace file fed through the live path as if it ran now");
  AddServeCommand(app, commands, ServeMode::kRun,
                  "run a job (liveprof run -- python train.py) with no change to it, serving its "
                  "dashboard: its GPU activity (CUDA injection) and, for Python, PyTorch's steps and "
                  "input time (docs/attach.md); exits with the job's status");
  AddServeCommand(app, commands, ServeMode::kOpen,
                  "serve a run folder written with --trace-dir (stopped or killed): its events in "
                  "the trace viewer");
}

}  // namespace liveprof
