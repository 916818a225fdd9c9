// `liveprof serve` and `liveprof demo`: the pipeline and the web server
// (src/web/server.h) until Ctrl-C or --seconds. serve takes real producers
// (CUPTI in this process; replay and socket ingest feed the same stream);
// demo is serve plus the simulated GPU workload on a scenario schedule.
// Both print "listening on http://127.0.0.1:PORT/" once ready.
#ifndef LIVEPROF_APP_SERVE_H_
#define LIVEPROF_APP_SERVE_H_

namespace liveprof {

// argv[1] is "serve" or "demo". Returns the exit code.
int Serve(int argc, char** argv, bool demo);

}  // namespace liveprof

#endif  // LIVEPROF_APP_SERVE_H_
