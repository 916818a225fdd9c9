// `liveprof analyze FILE [--json] [--view tf|pytorch]`: a trace file (Chrome
// trace JSON or Kineto, plain or gzip) through the same analyses as live
// data, printed as tables, or as one JSON document (docs/analyze.md).
#ifndef LIVEPROF_APP_ANALYZE_H_
#define LIVEPROF_APP_ANALYZE_H_

namespace liveprof {

// argv[1] is "analyze". Returns the exit code: 0, 1 for a file that cannot
// be read or parsed, 2 for bad arguments.
int Analyze(int argc, char** argv);

}  // namespace liveprof

#endif  // LIVEPROF_APP_ANALYZE_H_
