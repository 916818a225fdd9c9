// `liveprof analyze FILE [--json [--pretty]] [--view tf|pytorch]`: a trace
// file (Chrome trace JSON or Kineto, XPlane, a CUPTI recording; plain or
// gzip) through the same analyses as live data, printed as tables, or as one
// JSON document, members in reading order (docs/analyze.md).
// `liveprof export IN OUT`: a trace file written as Chrome trace JSON (gzip
// when OUT ends in .gz): Chrome / Kineto JSON as read, the others from their
// events; a failed export leaves no OUT.
#ifndef LIVEPROF_APP_ANALYZE_H_
#define LIVEPROF_APP_ANALYZE_H_

#include "app/args.h"

namespace liveprof {

// The files analyze, export and replay read (TraceFileImporter, trace_file.h),
// for their help.
inline constexpr char kTraceFileHelp[] =
    "a Chrome trace JSON or PyTorch (Kineto) trace, .json or .json.gz; a TensorFlow / JAX XPlane, "
    ".xplane.pb or .xplane.pb.gz; or a CUPTI recording (recognised by its header, plain or gzip: "
    "docs/architecture.md, CUPTI recordings)";

// Adds the subcommands analyze and export. Each exits 0, 1 for a file that
// cannot be read, parsed or written, 2 for bad arguments.
void AddAnalyzeCommands(CLI::App& app, Commands* commands);

}  // namespace liveprof

#endif  // LIVEPROF_APP_ANALYZE_H_
