// `liveprof analyze FILE [--json] [--view tf|pytorch]`: a trace file (Chrome
// trace JSON or Kineto, plain or gzip) through the same analyses as live
// data, printed as tables, or as one JSON document (docs/analyze.md).
// `liveprof export IN OUT`: a trace file rewritten as Chrome trace JSON
// (gzip when OUT ends in .gz), in the form liveprof reads back.
#ifndef LIVEPROF_APP_ANALYZE_H_
#define LIVEPROF_APP_ANALYZE_H_

namespace liveprof {

// argv[1] is "analyze". Returns the exit code: 0, 1 for a file that cannot
// be read or parsed, 2 for bad arguments.
int Analyze(int argc, char** argv);

// argv[1] is "export". Returns 0, 1 for a file that cannot be read or
// written, 2 for bad arguments.
int Export(int argc, char** argv);

}  // namespace liveprof

#endif  // LIVEPROF_APP_ANALYZE_H_
