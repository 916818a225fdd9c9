// ChromeTraceImporter: Chrome trace JSON (the Trace Event Format, and the
// PyTorch profiler's Kineto traces in it) into liveprof events, as a stream:
// a file is read in chunks (ChunkReader), cut into batches of whole events
// (TraceJsonSplitter) and each batch parsed with simdjson's on-demand parser,
// so memory does not grow with the file.
//
// Mapping (Kineto's old and new category names):
//   ph X, cat Operator / cpu_op          kFrameworkOp, corr = args["External id"]
//   ph X, cat user_annotation            kHostSpan
//   ph X, cat Runtime / cuda_runtime     kRuntimeApi, corr = args.correlation
//   ph X, cat cuda_driver                kRuntimeApi, sub ApiLayer::kDriver (cuLaunchKernel...)
//   ph X, cat Kernel / kernel            kKernel on (device, stream), corr, launch details,
//                                        kernel.op = the op whose External id is the kernel's
//                                        (Kineto: the innermost op at the launch; ops come first),
//                                        else liveprof's own "framework op" arg (chrome_export.h)
//   ph X, cat Memcpy / gpu_memcpy        kMemcpy{HtoD,DtoH,DtoD,HtoH,PtoP,Other} by name, bytes
//   ph X, cat Memset / gpu_memset        kMemset, bytes
//   ph X, other categories               kHostSpan (a host track) or dropped (a GPU track)
//   ph B / E                             a kHostSpan per matched pair (a stack per track)
//   ph i / I, name "[memory]"            kAlloc (Bytes > 0) / kFree (Bytes < 0), allocator "<Device Type>:<Id>"
//                                        (or liveprof's own "Allocator" arg, chrome_export.h); its
//                                        "Op", "Region", "Data Type", "Shape", "Requested Bytes"
//                                        (liveprof's own) the annotation (kFlagAllocAnnotation)
//   ph i / I, others                     kInstant
//   ph C                                 a kCounter per numeric args member, named "<name>/<key>"
//   ph M process_name / thread_name      track names
//   ph s / t / f                         kFlow (sub: 0 start, 1 step, 2 end), corr = id
//   "deviceProperties" (top level)       a kDeviceInfo per GPU (name, memory, SMs, compute
//                                        capability), ts 0
// Dropped and counted, by reason, in ImportReport: other phases, the
// categories liveprof does not analyse (python_function,
// gpu_user_annotation, ...), unmatched E, events without a usable ts.
//
// Kept text (Keep(), for `liveprof export`): each batch of traceEvents'
// elements and each other top-level member as written, so that an export
// writes back what liveprof does not model (every arg, ac2g / fwdbwd flows,
// python_function, process metadata, Kineto's top-level keys). Off by
// default: then nothing but a branch per batch is added to the import.
//
// Events come out in file order (not completion order), with timestamps as
// written (µs → ns, exactly). `baseTimeNanoseconds` (new Kineto traces: ts
// relative to it) is reported, not applied here: Kineto writes it after the
// events, which are already handed over by then; ImportWhole
// (trace_analysis.h) applies it.
#ifndef LIVEPROF_IMPORT_CHROME_TRACE_H_
#define LIVEPROF_IMPORT_CHROME_TRACE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "import/progress.h"
#include "stream/event.h"
#include "stream/name_table.h"
#include "stream/stream.h"

namespace liveprof {

struct ImportReport {
  uint64_t bytes = 0;                                       // uncompressed JSON bytes read.
  uint64_t trace_events = 0;                                // elements of traceEvents.
  uint64_t events_out = 0;                                  // liveprof events made.
  std::map<std::string, uint64_t, std::less<>> dropped;     // reason -> count.
  std::map<std::string, uint64_t, std::less<>> caveats;     // kept, but: what -> count.
  std::map<std::string, uint64_t, std::less<>> phases;      // ph -> count.
  std::map<std::string, uint64_t, std::less<>> categories;  // cat -> count (ph X).
  int64_t base_time_ns = 0;                                 // baseTimeNanoseconds, when given.
  bool has_base_time = false;
  std::string schema;  // schemaVersion, as written.
  // Kineto's "distributedInfo" (the rank in its job), as written (JSON
  // text, "" without), and the numbers read from it (-1 without).
  std::string distributed;
  int64_t rank = -1, world_size = -1;
  std::vector<std::string> hosts;  // XPlane: the XSpace's host names.
  uint64_t dropped_total() const;
};

// Adds `n` to `key`'s count in one of ImportReport's maps (any importer).
void AddCount(std::map<std::string, uint64_t, std::less<>>& counts, std::string_view key, uint64_t n = 1);

// A copy's direction from its name, in either spelling: Kineto's and
// CUPTI's "HtoD" or TF's "H2D" (likewise DtoH, DtoD, HtoH, PtoP);
// kMemcpyOther when the name does not say.
EventKind CopyKindFromName(std::string_view name);

class ChromeTraceImporter {
 public:
  // Every event, in file order, in batches. Definitions (kNameDef, kTrackDef)
  // come before the events that use them.
  using Sink = std::function<void(std::span<const Event> definitions, std::span<const Event> events)>;

  // Names go to the importer's own table, or to `names` (which must outlive it).
  ChromeTraceImporter();
  explicit ChromeTraceImporter(NameTable* names);
  ~ChromeTraceImporter();

  // Imports `path` (plain or gzip). false on an unreadable or malformed file:
  // *error says what and where; what was imported before it was handed over
  // (the report says how much).
  // `progress`, when set, is called after each chunk.
  bool ImportFile(const std::string& path, const Sink& sink, ImportReport* report, std::string* error,
                  const ImportProgressFn& progress = {});
  // The same over text already in memory (tests, fuzzing).
  bool ImportText(std::string_view text, const Sink& sink, ImportReport* report, std::string* error);

  const NameTable& names() const { return *names_; }

  // The text an exporter needs to write the file back whole. `events`: each
  // batch of traceEvents' elements, "e,e,..." as written (whitespace and
  // all), `count` of them, in file order, after it parsed and before its
  // events go to the sink. `member`: each top-level member other than
  // traceEvents, its key as written (escapes and all) and its value's JSON
  // text, where it stands in the file. The text lives during the call only.
  // Set before ImportFile / ImportText; either may be empty.
  struct KeepText {
    std::function<void(std::string_view elements, size_t count)> events;
    std::function<void(std::string_view key, std::string_view value)> member;
  };
  void Keep(KeepText keep);
  // With Keep(): the pids (JSON text as written, "0") of the processes that
  // hold GPU activity (kernels, copies, memsets) but have no process_name
  // metadata event, after the import.
  std::vector<std::string> UnnamedGpuProcesses() const;

 private:
  struct Parser;
  bool Run(const std::function<bool(std::string_view*)>& next_chunk, const Sink& sink, ImportReport* report,
           std::string* error);

  NameTable own_names_;
  NameTable* names_;
  std::unique_ptr<Parser> parser_;
  KeepText keep_;
};

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_CHROME_TRACE_H_
