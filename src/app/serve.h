// `liveprof serve`, `demo`, `replay` and `open`: the pipeline and the web
// server (src/web/server.h) until Ctrl-C or --seconds. serve takes real
// producers (CUPTI in this process; socket ingest feeds the same stream);
// demo is serve plus the simulated GPU workload on a scenario schedule;
// replay is serve plus a trace file fed through the live path
// (src/import/replay.h); open serves a run folder written with --trace-dir,
// read-only; run serves a job's events (app/run.h). Each prints "listening
// on http://127.0.0.1:PORT/" once ready. What each mode holds while it
// serves, and the order it starts and stops in: app/serve_session.cc.
#ifndef LIVEPROF_APP_SERVE_H_
#define LIVEPROF_APP_SERVE_H_

#include "app/args.h"

namespace liveprof {

// Adds the subcommands demo, serve, replay, run and open, with their options.
void AddServeCommands(CLI::App& app, Commands* commands);

}  // namespace liveprof

#endif  // LIVEPROF_APP_SERVE_H_
