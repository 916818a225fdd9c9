// What `liveprof serve`, `demo`, `replay`, `open` and `run` hold while they
// serve (app/serve.cc parses their command lines and runs the loop): the
// mode's feed, the ingest server, the pipeline, the web server and the fleet
// agent, made, started and stopped here, each in one place.
#ifndef LIVEPROF_APP_SERVE_SESSION_H_
#define LIVEPROF_APP_SERVE_SESSION_H_

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/args.h"
#include "app/fleet.h"
#include "app/run.h"
#include "import/replay.h"
#include "ingest/ingest_server.h"
#include "pipeline/pipeline.h"
#include "store/trace_store.h"
#include "web/server.h"

namespace liveprof {

enum class ServeMode { kServe, kDemo, kReplay, kOpen, kRun };
std::string_view ModeName(ServeMode mode);

// What a serve, demo, replay, open or run command line says (only the
// options of its mode are added).
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
  PublishArgs publish;       // --publish: also a fleet agent.
  RunArgs run;               // run: the job.
  std::string step_pattern;  // --step-pattern: spans so named are steps (StepAssembler::Options).
};

// The mode's own producer (one class per mode, in serve_session.cc): the simulated
// workload, the replay, CUPTI, or none.
class Feed;

// One serving session. Each call fails by returning false with *error (the
// message, not yet the command's name). Owner's thread throughout.
class ServeSession {
 public:
  // `args` must outlive the session.
  ServeSession(ServeArgs& args, ServeMode mode);
  ~ServeSession();  // Stop()s.
  ServeSession(const ServeSession&) = delete;
  ServeSession& operator=(const ServeSession&) = delete;

  // Makes everything that needs no port: the run folder read back (open),
  // the trace file loaded (replay), CUPTI started (serve), the pipeline and
  // the servers (not started).
  bool Prepare(std::string* error);
  // Starts the web server and the ingest, creates the run folder, starts
  // the agent (--publish), then the pipeline and the feed.
  bool Start(std::string* error);
  // What serves where, on stdout ("listening on http://...", ...).
  void PrintStarted() const;
  // Each wake of the loop: the alerts, the job's state, the replay's end,
  // and with `progress` a line about the last steps.
  void Tick(bool progress);
  // The job as the session sees it (JobStateNow in serve_session.cc), and
  // as its owner decides at the end (run).
  JobState StateNow() const;
  void SetJobState(JobState state);
  // The ingest's first bound address (run: the job's LIVEPROF_SERVER).
  std::string IngestAddress() const;
  // The one shutdown (see serve_session.cc); idempotent.
  void Stop();
  // After Stop(): the agent's and the server's totals, on stdout.
  void PrintDone() const;

 private:
  ServeArgs& args_;
  const ServeMode mode_;
  Stream& stream_;
  Pipeline::Options po_;
  std::string url_;
  bool stopped_ = false;
  // Each member reads only those declared before it, so that destruction
  // (the reverse) never leaves one reading a member already gone.
  std::shared_ptr<TraceStore> store_;             // --trace-dir, open's folder
  std::unique_ptr<Feed> feed_;                    // writes the stream
  std::unique_ptr<IngestServer> ingest_;          // writes the stream
  std::unique_ptr<Pipeline> pipeline_;            // reads the stream, writes the store
  std::unique_ptr<FleetAgent> agent_;             // reads the pipeline
  std::atomic<FleetAgent*> agent_hook_{nullptr};  // the agent, once started, for the server
  std::unique_ptr<Server> server_;                // reads the pipeline, the ingest, the agent
};

}  // namespace liveprof

#endif  // LIVEPROF_APP_SERVE_SESSION_H_
