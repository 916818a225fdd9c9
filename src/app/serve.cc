#include "app/serve.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "app/analyze.h"
#include "app/args.h"
#include "app/fleet.h"
#include "app/paths.h"
#include "app/run.h"
#include "app/serve_session.h"
#include "import/chrome_export.h"

#ifndef LIVEPROF_VERSION
#define LIVEPROF_VERSION "unknown"
#endif

namespace liveprof {
namespace {

// run: the job's ingest address, a socket in a folder of our own (mode
// 0700), removed when this goes (after the session, which closes the socket).
class RunFolder {
 public:
  ~RunFolder() {
    if (dir_.empty()) return;
    ::unlink((dir_ + "/ingest.sock").c_str());
    ::rmdir(dir_.c_str());
  }
  // False: errno says why.
  bool Make(IngestServer::Options* io) {
    char dir[] = "/tmp/liveprof-run-XXXXXX";
    if (mkdtemp(dir) == nullptr) return false;
    dir_ = dir;
    IngestEndpoint e;
    std::string error;
    ParseIngestEndpoint("unix:" + dir_ + "/ingest.sock", &e, &error);
    io->endpoints.push_back(e);
    return true;
  }

 private:
  std::string dir_;
};

// Serves until Ctrl-C (SIGINT, SIGTERM), --seconds, or under run the job's
// end; the exit status.
int Serve(ServeArgs& args, ServeMode mode) {
  const std::string command = "liveprof " + std::string(ModeName(mode));
  // SIGINT/SIGTERM are taken by sigtimedwait below: block them before any
  // thread starts, so that every thread inherits the mask.
  sigset_t signals, unblocked;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // Declared before the session: the folder goes after the ingest's socket.
  std::unique_ptr<Job> job;
  RunFolder run_folder;
  if (mode == ServeMode::kRun) {
    sigaddset(&signals, SIGCHLD);  // the job's end wakes the loop.
    signal(SIGCHLD, SIG_DFL);      // (inherited SIG_IGN would reap the job for us, status unknown)
    job = std::make_unique<Job>(args.run);
    if (!job->Check()) return job->exit_status();  // before any server starts.
    if (args.io.endpoints.empty() && !run_folder.Make(&args.io)) {
      std::fprintf(stderr, "%s: mkdtemp: %s\n", command.c_str(), std::strerror(errno));
      return kExitLiveprofFailed;
    }
  }
  pthread_sigmask(SIG_BLOCK, &signals, &unblocked);  // (the job gets the mask we had)
  // A failure of liveprof itself: 1, or under run 125 (the job's statuses are its own).
  const int failed = mode == ServeMode::kRun ? kExitLiveprofFailed : 1;

  // However Serve returns from here, the session stops (its destructor).
  ServeSession session(args, mode);
  std::string error;
  if (!session.Prepare(&error) || !session.Start(&error)) {
    std::fprintf(stderr, "%s: %s\n", command.c_str(), error.c_str());
    return failed;
  }
  session.PrintStarted();
  std::fflush(stdout);
  if (job) {
    // A Ctrl-C while the server started is pending here, and the job was not
    // there to get it: stop now rather than start the job.
    const timespec now_only{0, 0};
    if (const int sig = sigtimedwait(&signals, nullptr, &now_only); sig == SIGINT || sig == SIGTERM) {
      std::printf("%s: %s before the job started; not started\n", command.c_str(),
                  sig == SIGINT ? "SIGINT" : "SIGTERM");
      return 128 + sig;
    }
    if (!job->Start(session.IngestAddress(), unblocked)) return job->exit_status();
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
    // (under run, the job's own output is what the terminal shows)
    session.Tick(++ticks % 5 == 0 && !job);
    std::fflush(stdout);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (args.seconds > 0 && elapsed >= args.seconds) {
      if (!job) break;
      if (!seconds_up) {  // run: the job is asked to stop; the server stops once it has.
        seconds_up = true;
        std::printf("%s: --seconds %g reached\n", command.c_str(), args.seconds);
        job->OnSignal(SIGTERM, SI_USER);
      }
    }
  }

  if (job) {
    // The job has ended (that is what ends a run), whether or not its
    // sources' close was seen yet: its alerts close with their last values.
    JobState end = session.StateNow();
    if (end != JobState::kFinished && end != JobState::kDisconnected) {
      end = job->exit_status() == 0 ? JobState::kFinished : JobState::kDisconnected;
    }
    session.SetJobState(end);
  }
  session.Stop();
  session.PrintDone();
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
  if (mode == ServeMode::kServe || mode == ServeMode::kDemo ||
      mode == ServeMode::kRun) {  // (a replay runs on trace time)
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
  AddServeCommand(app, commands, ServeMode::kReplay, "serve a trace file fed through the live path as if it ran now");
  AddServeCommand(app, commands, ServeMode::kRun,
                  "run a job (liveprof run -- python train.py) with no change to it, serving its "
                  "dashboard: its GPU activity (CUDA injection) and, for Python, PyTorch's steps and "
                  "input time (docs/attach.md); exits with the job's status");
  AddServeCommand(app, commands, ServeMode::kOpen,
                  "serve a run folder written with --trace-dir (stopped or killed): its events in "
                  "the trace viewer");
}

}  // namespace liveprof
