// AnalyzeTrace: a trace file through the same analyses as live data, in
// batch (`liveprof analyze`, CI). The importer's events are put in
// completion order (by end, as the drain loop delivers live events), then
// consumed in slices, each with the watermark at its last end.
//
// Memory: the file is read in chunks, but the events are sorted in memory
// (48 bytes each: about 1.4x a Kineto file's gzip size... 100 M events need
// 4.8 GB). A spilling sort is the next step.
#ifndef LIVEPROF_IMPORT_TRACE_ANALYSIS_H_
#define LIVEPROF_IMPORT_TRACE_ANALYSIS_H_

#include <map>
#include <string>

#include "aggregators/analyses.h"
#include "aggregators/steps/gpu_timeline.h"
#include "import/progress.h"
#include "import/trace_file.h"

namespace liveprof {

struct TraceAnalysis {
  RenderedViews views;
  DeviceUtilizationSnapshot devices;  // busy, span and utilization per GPU, whole trace.
  // Per GPU ordinal, over the whole trace (its first device activity to its
  // last): TraceLens' gpu_timeline.csv (aggregators/steps/gpu_timeline.h).
  std::map<uint8_t, GpuTimeline> gpu_timelines;
  ImportReport report;
  uint64_t events = 0;  // events the analyses consumed.
  uint64_t first_ns = 0, last_ns = 0;
};

// Imports all of `path` into memory: its definitions and its events (file
// order, on the wall clock when the file gives Kineto's
// baseTimeNanoseconds), with the progress shown on `progress` (may be null). false with
// *error as ChromeTraceImporter::ImportFile. The importer owns the strings
// the definitions point to.
bool ImportWhole(TraceFileImporter& importer, const std::string& path, std::vector<Event>* definitions,
                 std::vector<Event>* events, ImportReport* report, std::string* error, ProgressLine* progress);

// Imports `path` (Chrome trace JSON or Kineto, plain or gzip) and renders
// every view with `render`. false with *error on an unreadable file.
// `progress` (may be null) shows the import and then the phases after it.
bool AnalyzeTrace(const std::string& path, const AnalysesOptions& options, const RenderOptions& render,
                  TraceAnalysis* out, std::string* error, ProgressLine* progress = nullptr);

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_TRACE_ANALYSIS_H_
