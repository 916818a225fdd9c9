// `liveprof analyze FILE [--json] [--view tf|pytorch]`: a trace file (Chrome
// trace JSON or Kineto, plain or gzip) through the same analyses as live
// data, printed as tables, or as one JSON document (docs/analyze.md).
// `liveprof export IN OUT`: a trace file rewritten as Chrome trace JSON
// (gzip when OUT ends in .gz), in the form liveprof reads back.
#ifndef LIVEPROF_APP_ANALYZE_H_
#define LIVEPROF_APP_ANALYZE_H_

#include "app/args.h"

namespace liveprof {

// Adds the subcommands analyze and export. Each exits 0, 1 for a file that
// cannot be read, parsed or written, 2 for bad arguments.
void AddAnalyzeCommands(CLI::App& app, Commands* commands);

}  // namespace liveprof

#endif  // LIVEPROF_APP_ANALYZE_H_
