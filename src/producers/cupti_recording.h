// CUPTI recordings: the activity buffers of a real run, byte for byte as
// CUPTI filled them, with the clock pairs that map CUPTI's clock onto the
// host's. A recording is the CUPTI producer's input replayed: the same
// CuptiRecordParser reads it (cupti_records.h), so what a user with a GPU
// records, anyone can analyse (`liveprof analyze FILE`, `liveprof replay
// FILE`) and every test can check against a real GPU's bytes.
//
// Format "LPCUPTI1" (little endian; the shared recordings of
// ../shared/data/gpu/ and what CuptiRecordingWriter writes; gzip allowed):
//
//   "LPCUPTI1"            8 bytes
//   u32 cupti_version     cuptiGetVersion() of the recording run (130001)
//   u32 reserved          0
//   repeated, one per completed buffer:
//     u64 valid_size      bytes of records in this buffer (0 ends the list)
//     u32 stream_id       as CUPTI passed it to the buffer-completed callback
//     u32 reserved
//     valid_size bytes    the buffer (8-byte aligned records)
//   u32 n_pairs, then n_pairs x (u64 cuptiGetTimestamp(), u64 CLOCK_MONOTONIC ns)
//
// liveprof's extension, after the pairs (a file may end before it: the
// shared recordings do). CUPTI's records hold pointers (a kernel's name is a
// `const char*` into the recording process), which mean nothing once that
// process is gone; the writer therefore appends the strings they pointed to:
//
//   "LPNAMES1"            8 bytes
//   u32 op_external_kind  the CUPTI external-correlation kind under which the
//                         run pushed its framework ops (CUSTOM2 for
//                         CuptiSource), 0 if none
//   u32 n_names
//   n_names x (u8 what, 3 x u8 0, u32 length, u64 key, length bytes, zero
//              padding to a multiple of 8)
//       what 1: key = a kernel-name pointer as the records hold it
//       what 2: key = an external correlation id of op_external_kind: the
//               framework op's name
//
// Reading never trusts the bytes: every size is checked against what is
// left, and an error names what is wrong and at which byte.
#ifndef LIVEPROF_PRODUCERS_CUPTI_RECORDING_H_
#define LIVEPROF_PRODUCERS_CUPTI_RECORDING_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "producers/cupti_records.h"
#include "stream/clock.h"
#include "stream/name_table.h"
#include "stream/stream.h"

namespace liveprof {

inline constexpr std::string_view kCuptiRecordingMagic = "LPCUPTI1";
inline constexpr std::string_view kCuptiRecordingNamesMagic = "LPNAMES1";

struct CuptiRecording {
  struct Buffer {
    uint32_t stream_id = 0;
    uint64_t offset = 0;          // of its records in the file (uncompressed), for messages.
    std::vector<uint64_t> words;  // the records, 8-byte aligned as CUPTI's buffers are.
    size_t size = 0;              // valid bytes in `words`.
    const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words.data()); }
  };
  uint32_t cupti_version = 0;
  std::vector<Buffer> buffers;
  std::vector<std::pair<uint64_t, uint64_t>> clock_pairs;  // (CUPTI ns, host ns).
  bool has_names = false;                                  // the file had the LPNAMES1 section.
  uint32_t op_external_kind = 0;
  std::unordered_map<uint64_t, std::string> kernel_names;  // pointer -> name.
  std::unordered_map<uint64_t, std::string> op_names;      // external id -> name.
  uint64_t bytes = 0;                                      // uncompressed size read.
};

// True if `head` (a file's first bytes, gzip already undone) starts a
// recording.
inline bool IsCuptiRecording(std::string_view head) { return head.starts_with(kCuptiRecordingMagic); }

// Parses a whole recording held in memory. False with *error ("CUPTI
// recording: buffer 3 at byte 8520: valid_size 4294967296 is past the end
// of the file (59004 bytes)") on anything malformed; what was read before
// the fault stays in *out (a truncated recording keeps its whole buffers).
bool ParseCuptiRecording(std::string_view bytes, CuptiRecording* out, std::string* error);

// Reading a file (plain or gzip) is import/'s: import/cupti_recording_file.h.

// What a CuptiRecordParser needs to read a recording's buffers: the clock
// of its pairs (host times moved by `host_shift_ns`, so that a recording can
// play "now"), the recorded kernel names, and the framework ops of its
// external correlation ids. It owns what the parser's options point to, so
// it must outlive the parser; construct it once per recording.
class RecordedCupti {
 public:
  struct Options {
    int64_t host_shift_ns = 0;
    // The external-correlation kind whose ids name framework ops: 0 takes
    // the recording's (its names section), or none for a recording without
    // one (its ids name ops of a process we know nothing of).
    uint32_t op_external_kind = 0;
    // The op name of an id of that kind; overrides the recording's names
    // ("" : no op). For a tool that knows what the recorded run pushed.
    std::function<std::string(uint64_t id)> op_name;
  };
  RecordedCupti(const CuptiRecording& recording, NameTable& names, Options options);
  RecordedCupti(const CuptiRecording& recording, NameTable& names) : RecordedCupti(recording, names, Options()) {}

  // Options for a parser of this recording's buffers.
  CuptiRecordParser::Options parser_options();
  const ClockMap& clock() const { return clock_; }
  // Clock pairs left out: not later than the previous one in both clocks.
  size_t pairs_ignored() const { return pairs_ignored_; }

 private:
  NameId OpName(uint64_t id);

  const CuptiRecording& recording_;
  NameTable& names_;
  Options options_;
  ClockMap clock_;
  std::unordered_map<uint64_t, NameId> ops_;  // external id -> name, as asked.
  size_t pairs_ignored_ = 0;
};

// True if this build can read `recording`'s records: recorded by the CUPTI
// major.minor whose structs it was built with (13.0); else false with *why
// naming both versions. A newer CUPTI may write newer record versions, of
// other sizes: walked as 13.0's they would be garbage.
bool CuptiRecordingReadable(const CuptiRecording& recording, std::string* why);

// Feeds a recording to `stream` as the CUPTI producer would: one ring
// ("cupti recording"), each buffer parsed into it by a CuptiRecordParser,
// the ring drained meanwhile by the stream's drain loop. The calling thread
// is the ring's producer; a full ring makes it wait (this is no profiled
// program), never drop; a ring not drained for 10 s ends the play
// (complete false, with `error`). A recording this build cannot read
// (CuptiRecordingReadable) plays nothing. `after_buffer(i, max_end_host_ns)` runs after
// buffer i is in the ring (a test's clock, a pacer); may be null.
struct CuptiPlayResult {
  uint64_t buffers = 0, records = 0, events = 0;
  uint64_t max_end_ns = 0;  // host ns, of the latest event written.
  bool complete = true;     // every buffer walked to its end.
  std::string error;        // why not, when the play itself stopped.
};
CuptiPlayResult PlayCuptiRecording(const CuptiRecording& recording, Stream& stream,
                                   const RecordedCupti::Options& options,
                                   const std::function<void(size_t, uint64_t)>& after_buffer = {});

// Writes a recording while a run goes on: each buffer as CUPTI completes it,
// the pairs and names at Close(). Thread-safe (one mutex: CUPTI's
// buffer-completed callback and the flush thread both write); the
// recording is the user's explicit request, so the file I/O on those
// threads is the price asked for, and a failed write stops the recording
// (said once, on stderr) without touching the run.
class CuptiRecordingWriter {
 public:
  CuptiRecordingWriter() = default;
  ~CuptiRecordingWriter();  // Close()s.
  CuptiRecordingWriter(const CuptiRecordingWriter&) = delete;
  CuptiRecordingWriter& operator=(const CuptiRecordingWriter&) = delete;

  // Creates `path` (truncating it) and writes the header. False with *error.
  bool Open(const std::string& path, uint32_t cupti_version, std::string* error);
  bool is_open() const;

  // One completed buffer (`valid_size` bytes of records).
  void AddBuffer(const uint8_t* buffer, size_t valid_size, uint32_t stream_id);
  void AddClockPair(uint64_t cupti_ns, uint64_t host_ns);
  // Records a kernel-name pointer's string (once per pointer is enough).
  void AddKernelName(const void* pointer, std::string_view name);
  void SetOpExternalKind(uint32_t kind);
  void AddOpName(uint64_t external_id, std::string_view name);

  // Ends the buffer list, writes the pairs and the names, closes. True if
  // every byte was written. Idempotent.
  bool Close(std::string* error = nullptr);

  uint64_t buffers_written() const;

 private:
  bool WriteLocked(const void* data, size_t size);

  mutable std::mutex mu_;
  std::FILE* file_ = nullptr;
  std::string path_;
  bool failed_ = false;
  uint64_t buffers_ = 0;
  uint32_t op_external_kind_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> pairs_;
  std::unordered_map<uint64_t, std::string> kernel_names_;
  std::unordered_map<uint64_t, std::string> op_names_;
};

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_CUPTI_RECORDING_H_
