// ChromeTraceWriter: liveprof events out as Chrome trace JSON (the Trace
// Event Format, in Kineto's category names), plain or gzip, written as a
// stream: what `liveprof export` writes, what Perfetto and chrome://tracing
// open, and what ChromeTraceImporter reads back into the same events (so an
// import → export → import gives the same analyses; a test checks it).
//
// Mapping (the inverse of chrome_trace.h):
//   kFrameworkOp   X cat cpu_op, args "External id" = corr (one from 2^31 up
//                  when it has none, for its kernels)
//   kHostSpan      X cat user_annotation
//   kRuntimeApi    X cat cuda_runtime (cuda_driver for ApiLayer::kDriver), args correlation;
//                  with WriteLaunchFlows (ExportTraceFile: XPlane, CUPTI
//                  recordings; the store's export, /api/export) and device activity of the same correlation
//                  id, an ac2g flow from it ("s") to the activity ("f", bp
//                  "e"), id = corr, as Kineto writes them (Perfetto's CPU→GPU
//                  arrows)
//   kKernel        X cat kernel on pid = device, tid "stream N"; correlation,
//                  launch details back into Kineto's args, and "External id"
//                  of the last op written with the kernel's op name (so the
//                  kernel finds its op again); with no such op (XPlane's
//                  tf_op), the name itself in "framework op" (liveprof's own)
//   kMemcpy*       X cat gpu_memcpy named "Memcpy HtoD" etc. unless the name
//                  says the direction already; bytes
//   kMemset        X cat gpu_memset; bytes
//   kAlloc/kFree   i "[memory]": Device Type (1 device, 0 host), Device Id,
//                  Addr, Bytes (negative for a free); "Allocator" (liveprof's
//                  own) when the allocator is not Kineto's "CUDA:N" / "CPU:N";
//                  an annotated allocation's "Op", "Region", "Data Type",
//                  "Shape", "Requested Bytes" (liveprof's own: TensorFlow's)
//   kCounter       C, "<name>/<key>" split back into name and args key
//   kInstant       i;  kFlow  s / t / f cat flow with id = corr
//   kStepMarker    X cat liveprof_step, args step_num (liveprof's own: a
//                  TF-style step marker has no Kineto form)
//   kInputSpan     X cat liveprof_input, args stage (InputStage)
//   kDeviceInfo    an entry of the top-level "deviceProperties" (id, name,
//                  totalGlobalMem, computeMajor/Minor, numSms), after traceEvents
// Tracks: host threads on pid 1 with tid = the OS thread id (or the track
// id), named by M thread_name events at the end; GPU streams on pid = the
// device, each GPU's process named as Kineto names it (M process_name,
// process_labels "GPU N", process_sort_index). Kinds with no Chrome form are
// counted, not written.
//
// A Chrome trace read whole (ExportTraceFile on Chrome / Kineto JSON) is
// written back as read instead (KeepOriginal): every element of traceEvents
// (minified) and every top-level member, so nothing Perfetto or the PyTorch
// plugin reads is lost (args, ac2g / fwdbwd flows, python_function, process
// metadata, CUDA versions, trace_id, ...); only a process_name is added for
// GPU processes that lack one.
//
// A file is written under a temporary name in its folder and renamed to its
// own at Close(): a failed export (unreadable input, a write error, an error
// midway) leaves no file, and an existing file is replaced only by a whole one.
#ifndef LIVEPROF_IMPORT_CHROME_EXPORT_H_
#define LIVEPROF_IMPORT_CHROME_EXPORT_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/trace_store.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace liveprof {

class ChromeTraceWriter {
 public:
  ChromeTraceWriter();
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // Opens `path` for writing (a temporary file beside it until Close());
  // gzip when it ends in ".gz". false with *error.
  bool Open(const std::string& path, std::string* error);
  // Gives up an Open(): the temporary file is removed, `path` is untouched.
  // The destructor does the same when Close() was not reached.
  void Abort();
  // Writes into *out instead (cleared first), gzip or not.
  bool OpenString(std::string* out, bool gzip, std::string* error);
  // Hands each piece of the output (at most 64 KiB gzip, or the JSON text
  // buffered, ~1 MiB) to `sink` in order; a sink that returns false stops
  // the writer (an error). The pieces are what OpenString would append.
  bool OpenSink(std::function<bool(std::string_view)> sink, bool gzip, std::string* error);
  // Definitions (kNameDef, kTrackDef) come before the events using them, as
  // from the stream or the importer; the strings they point to must live
  // until Close(). Events in any order, but a kernel's op before the kernel
  // (file order does that) for the kernel to name it.
  bool Write(std::span<const Event> definitions, std::span<const Event> events, std::string* error);
  // Writes the end of the document and closes the file.
  bool Close(std::string* error);
  // Top-level members written by Close() (what the source trace had):
  // Kineto's baseTimeNanoseconds (the events' ts are then relative to it)
  // and distributedInfo (JSON text).
  void SetBaseTime(int64_t ns) { base_time_ns_ = ns; }
  void SetDistributedInfo(std::string json) { distributed_ = std::move(json); }

  // An ac2g flow from each launch call (kRuntimeApi) to its device activity
  // (the first of its correlation id), as Kineto writes them (not counted in
  // events_written): Perfetto draws the arrow from a launch to its kernel.
  // Off by default (a Chrome trace written back as read has its own).
  void WriteLaunchFlows() { launch_flows_ = true; }

  // Writing a Chrome trace back as read (ChromeTraceImporter::Keep), instead
  // of Write(): call before anything else is written.
  void KeepOriginal() { keep_original_ = true; }
  // Elements of traceEvents as read ("e,e,...", `count` of them), minified
  // into the output. false with *error on a write error or text that is not
  // JSON.
  bool WriteKept(std::string_view elements, size_t count, std::string* error);
  // A top-level member as read (key as written, value's JSON text): before
  // traceEvents when it comes before the first element, else after it.
  void KeepMember(std::string_view key, std::string_view value);
  // An M process_name event (with Kineto's process_labels and
  // process_sort_index) for process `pid_json` (its JSON text), written by
  // Close(), at `ts_ns`.
  void AddProcessName(std::string pid_json, std::string name, std::string label, int64_t sort_index, uint64_t ts_ns);

  uint64_t events_written() const { return written_; }
  uint64_t events_skipped() const { return skipped_; }  // kinds with no Chrome form.
  uint64_t flows_written() const { return flows_; }     // ac2g flow events (not in events_written).

 private:
  void Define(const Event& d);
  void WriteEvent(const Event& e);
  void Emit(std::string_view json);                                    // one element of traceEvents.
  bool Start(bool gzip, const std::string& what, std::string* error);  // after Open / OpenString.
  void BeginEvents();  // the members kept so far, then "traceEvents": [.
  void WriteProcessNames();
  void LaunchFlow(const Event& e, bool start);  // an ac2g flow's "s" (a launch) or "f" (its device activity).
  bool Put(const void* data, size_t n, std::string* error);  // to the file or the string.
  bool Flush(bool finish, std::string* error);
  std::string_view Name(NameId id) const;
  std::string Track(TrackId id) const;  // "\"pid\":P,\"tid\":T"

  std::FILE* file_ = nullptr;
  std::string path_, temp_path_;                // Open()'s, and the file written until Close().
  std::function<bool(std::string_view)> sink_;  // OpenString's / OpenSink's, instead of file_.
  bool gzip_ = false;
  struct Deflater;
  std::unique_ptr<Deflater> deflater_;
  std::string buf_;  // JSON text not yet written.
  bool first_ = true;
  std::vector<std::string_view> names_;               // by NameId.
  std::vector<TrackInfo> tracks_;                     // by TrackId.
  std::unordered_map<NameId, uint32_t> op_external_;  // op name -> its last External id.
  uint32_t next_external_id_ = 0x80000000u;           // for ops that had none.
  std::vector<Event> gpus_;                           // kDeviceInfo, written as "deviceProperties" at the end.
  int64_t base_time_ns_ = 0;                          // 0: none.
  std::string distributed_;
  bool keep_original_ = false;
  bool launch_flows_ = false;
  // Launch calls and device activities whose other end is not written yet,
  // by correlation id: track and ts (at most kMaxUnmatchedFlows each; past
  // it, new ones get no flow).
  static constexpr size_t kMaxUnmatchedFlows = size_t{1} << 20;
  std::unordered_map<uint32_t, std::pair<TrackId, uint64_t>> unmatched_launches_, unmatched_activities_;
  bool events_begun_ = false;
  std::string kept_after_;  // members kept after traceEvents began (",\n\"k\": v" each).
  bool kept_schema_ = false, kept_time_unit_ = false;
  struct ProcessName {
    std::string pid, name, label;
    int64_t sort_index;
    uint64_t ts;
  };
  std::vector<ProcessName> process_names_;
  std::string minified_;          // scratch for WriteKept.
  uint64_t min_ts_ = UINT64_MAX;  // of the events written (for metadata events' ts).
  uint64_t written_ = 0, skipped_ = 0, flows_ = 0;
};

// `liveprof export IN OUT`: imports IN (any file the importer reads) and
// writes it to OUT batch by batch (memory does not grow with the file): a
// Chrome / Kineto trace as read (KeepOriginal), XPlane and CUPTI recordings
// from their events. *events: the trace events written (metadata added by
// the writer not counted). false with *error, and then no OUT is written
// (an existing one is left as it was).
bool ExportTraceFile(const std::string& in, const std::string& out, uint64_t* events, std::string* error);

// The events of `store` overlapping [t0, t1] on `tracks` (empty: all), as
// a gzip Chrome trace in *gz, whole, with the launch flows and each event's
// args (correlation id, stream, grid / block, bytes: the mapping above). false with *error, also when the range
// holds over kMaxExportEvents events. Any thread (the store locks per
// chunk).
inline constexpr uint64_t kMaxExportEvents = 5'000'000;
bool ExportStoreRange(const TraceStore& store, uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                      std::string* gz, std::string* error);
// The same export, streamed: each piece to `sink` as it is produced (the
// server's /api/export writes it chunk by chunk, the next piece made once
// the last was written), so memory stays bounded (the 1 MiB of JSON before
// deflate, a 64 KiB piece) whatever the range: no event cap. A sink that
// returns false stops it (false, *error says so). Any thread.
bool ExportStoreRangeStream(const TraceStore& store, uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                            const std::function<bool(std::string_view)>& sink, std::string* error);

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_CHROME_EXPORT_H_
