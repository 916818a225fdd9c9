// CuptiSourceRecorder: what a CuptiSource writes when it is asked to record
// its run (CuptiSource::Options::record_path, or LIVEPROF_CUPTI_RECORD=FILE),
// so that a user with a GPU can send us the exact bytes of a problem. The
// file is a CUPTI recording (cupti_recording.h, "LPCUPTI1" with liveprof's
// "LPNAMES1" names), which `liveprof analyze FILE` and `liveprof replay FILE`
// read through the very parser live buffers go through.
//
// What is written, and when:
//   - every completed buffer, byte for byte, from CUPTI's buffer-completed
//     callback, before the source parses it (empty buffers are left out);
//   - the kernel names: each buffer's kernel records (CONCURRENT_KERNEL and
//     KERNEL, read as CUpti_ActivityKernel10, found with
//     cuptiActivityGetNextRecord) hold a `const char*` into this process;
//     the string of each new pointer is added once (a set of pointers seen);
//   - the framework ops: the source pushes each op's NameId as an external
//     correlation id of kind CUSTOM2 (5); each id's name is added once;
//   - the (cuptiGetTimestamp, CLOCK_MONOTONIC ns) pairs the source reads for
//     its ClockMap, at start and at every flush;
//   - at Close(): the end of the buffer list, the pairs and the names.
//
// Threads: any (CUPTI's worker thread and the flushing thread complete
// buffers, any thread pushes ops). One mutex for the seen sets; the writer
// has its own. The file I/O on CUPTI's callback thread is the price of the
// recording the user asked for; without a recording none of this runs.
// Internal to the CUPTI producer (it includes CUPTI's headers).
#ifndef LIVEPROF_PRODUCERS_CUPTI_SOURCE_RECORDER_H_
#define LIVEPROF_PRODUCERS_CUPTI_SOURCE_RECORDER_H_

#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "producers/cupti_recording.h"

namespace liveprof {

class CuptiSourceRecorder {
 public:
  using NextRecordFn = decltype(&cuptiActivityGetNextRecord);

  // `next_record`: CUPTI's record walker (dlsym'd); null: kernel names are
  // not recorded (the recording's kernels then read "kernel 0x<pointer>").
  explicit CuptiSourceRecorder(NextRecordFn next_record) : next_record_(next_record) {}

  // Creates `path` and writes the header; `op_external_kind` is the kind the
  // source pushes ops under. False with *error.
  bool Open(const std::string& path, uint32_t cupti_version, uint32_t op_external_kind, std::string* error);

  // A buffer CUPTI completed (`valid` bytes of records): its new kernel
  // names, then its bytes. Before the buffer is parsed or given back.
  void AddBuffer(uint8_t* buffer, size_t valid, uint32_t stream_id);
  void AddClockPair(uint64_t cupti_ns, uint64_t host_ns);
  // Framework op `id` was pushed; `name` is its string (kept the first time).
  void AddOp(uint64_t id, std::string_view name);

  // Finishes the file; what is added afterwards is ignored. Returns the
  // line said on stderr:
  // "liveprof: CUPTI recording: N buffers to PATH" (or what went wrong).
  std::string Close();

  const std::string& path() const { return path_; }
  uint64_t buffers_written() const { return writer_.buffers_written(); }
  size_t kernel_names() const;

 private:
  NextRecordFn next_record_;
  std::string path_;
  CuptiRecordingWriter writer_;
  mutable std::mutex mu_;
  std::unordered_set<uint64_t> kernels_seen_;  // name pointers.
  std::unordered_set<uint64_t> ops_seen_;      // external ids.
};

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_CUPTI_SOURCE_RECORDER_H_
