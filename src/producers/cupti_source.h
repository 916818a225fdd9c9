// CuptiSource: the CUPTI subscription of the GPU producer. It loads CUPTI at
// run time, hands CUPTI activity buffers from a bounded pool, and turns every
// buffer CUPTI gives back into Events (CuptiRecordParser) in one ring of the
// Stream, named "cupti".
//
// Loading. dlopen("libcupti.so.13") and dlsym of the few entry points, typed
// from the CUDA 13 headers; libcuda.so.1 the same way, for the devices'
// properties (kDeviceInfo events: name, SM count, memory, compute
// capability). Neither library is ever linked, so the binary starts on a
// machine without CUDA, and neither is ever closed (unloading CUPTI or the
// driver from a live process is not safe). Start() says what is missing in
// message() and returns false, and the run goes on host-only:
//   - no libcupti: "CUPTI not available (...)";
//   - CUPTI loads but cannot trace (no driver, no GPU; measured on a machine
//     without them: cuptiActivityEnable returns CUPTI_ERROR_UNKNOWN):
//     "CUPTI loaded but activity tracing unavailable (no CUDA driver/GPU?):
//     <CUPTI's result>", then what the driver probe found;
//   - CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: activity tracing needs no
//     privilege (only performance counters do), so the message says so and
//     points at what restricts the process.
//
// Activity kinds, by capture level (Options::level, else the environment
// variable LIVEPROF_CUPTI_LEVEL=default|full; cupti_levels.h lists them):
// kDefault, the cheapest set that still gives the step breakdown, kernel
// stats, the kernel -> launch -> op joins and the memory profile: kernels,
// copies, memsets, memory, external correlation, NVTX markers, and only the
// launch / copy / memset / alloc / free / synchronize API calls (RUNTIME and
// DRIVER filtered per callback id), OVERHEAD (CUPTI's own cost, shown per
// step); kFull adds every other API call and SYNCHRONIZATION. DRIVER needs
// Options::driver_api, MARKER
// Options::nvtx. Only a failure of CONCURRENT_KERNEL fails Start(); the
// others are listed in message(), with the level.
// NVTX ranges reach CUPTI only if it is NVTX's injection library: start the
// profiled process with NVTX_INJECTION64_PATH=<path of libcupti.so.13> (for
// this toolkit /usr/local/cuda/lib/libcupti.so.13), before NVTX's first call.
//
// Buffers: kBufferCount buffers of kBufferBytes (32 x 1 MiB = 32 MiB of
// address space, touched only as CUPTI fills them), allocated at Start().
// CUPTI gives a buffer back only once every record in it is complete; while
// the GPU runs behind the CPU that is once it is full: 1 MiB (about 5,000
// records) bounds how long that takes, and so how late the events are.
// CUPTI's per-thread buffers are turned off (one pool serves every thread).
// When all buffers are with CUPTI or waiting to be parsed, a request gets
// none and CUPTI drops records; cuptiActivityGetNumDroppedRecords, read at
// every buffer completion, is this source's drop count (dropped(), and
// Diag::cupti_dropped_records). Events lost to a full ring are counted by the
// ring, as for every producer.
//
// Threads. CUPTI calls the buffer callbacks from its own worker thread or
// from the thread that flushes: they only move a buffer between pool states
// (lock-free). One thread of ours ("liveprof-cupti") is the ring's only
// producer: every kFlushPeriod it reads a (CUPTI timestamp, host clock) pair
// into the ClockMap, calls cuptiActivityFlushAll(0), parses the completed
// buffers in completion order, and declares how far its events are complete
// (RingProgress::kDeclared: the flush's start, or the request time of the
// oldest buffer CUPTI still holds), so that the pipeline waits for late
// buffers instead of taking their events as late. Stop() disables the kinds,
// flushes with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, parses the rest and closes
// the ring.
// CUPTI is process-wide, so one CuptiSource runs at a time.
//
// Capture on demand: while running, the source is the process's GPU
// activity switch (gpu_activity.h): off disables every kind but MEMORY2 and
// MEMORY_POOL (the memory profile needs every free), on enables them again;
// its level switches between kDefault and kFull at run time (full enables
// SYNCHRONIZATION and records every API call again; default
// disables them and switches the per-call filter on again: CuptiKindSet,
// cupti_levels.h). A sending process's capture controls turn both
// (ingest_sender.h).
//
// Framework ops: PushOp() / PopOp() bracket a framework op so that the
// kernels it launches carry it (cupti_records.h, "Framework ops").
//
// Another CUPTI client (docs/attach.md, "A script that profiles itself").
// With CUDA 13.2 or older, or drivers before r610 (CUDA 13.0 and r580 on
// this project's GPU machines), CUPTI has one set of activity buffer
// callbacks and one set of kinds for the whole process: a client that
// registers its callbacks (torch.profiler's Kineto at its prepareTrace)
// takes every buffer, ours still held by CUPTI included, and its stop
// disables kinds. So the source steps aside for it: Yield() turns its kinds
// off, gives back and parses every record CUPTI holds for it (a forced
// flush) and makes no CUPTI call at all until Regain(), which registers its
// callbacks, attributes and kinds anew (the other client may have
// finalized CUPTI). The source never calls cuptiSubscribe: the one
// subscriber stays free for the other client (Kineto's libkineto_init takes
// a refused cuptiSubscribe for "no GPU" and traces the CPU only, for good).
// A cuptiFinalize by the other client after Regain() (Kineto's
// TEARDOWN_CUPTI=1 finalizes at the first CUDA call after its stop) is
// seen at the next flush when CUPTI's thread id type, set at Start(), is
// back to its default: the source then registers everything again, and
// says so. Each handoff is an instant on the ring's "GPU tracer" track
// (kGpuData*, below) and an entry of handoffs(): what the server shows as
// "GPU data: torch.profiler from t0 to t1".
//
// Recording: with Options::record_path, or else the environment variable
// LIVEPROF_CUPTI_RECORD=/path/file.bin (the option wins; the variable lets a
// user record without changing code), the run's CUPTI buffers are also
// written, byte for byte, with the clock pairs and the names their pointers
// need, to a CUPTI recording (cupti_source_recorder.h, cupti_recording.h)
// that `liveprof analyze` and `liveprof replay` read. Stop() closes it and
// says once on stderr "liveprof: CUPTI recording: N buffers to PATH".
#ifndef LIVEPROF_PRODUCERS_CUPTI_SOURCE_H_
#define LIVEPROF_PRODUCERS_CUPTI_SOURCE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "producers/gpu_activity.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace liveprof {

// The names of the handoff instants (above); the server reads them
// (aggregators/gpu_handoffs.h keeps its own copy: a test checks they match).
inline constexpr std::string_view kGpuDataTo = "GPU data: to ";  // + the other client.
inline constexpr std::string_view kGpuDataBack = "GPU data: back to liveprof";
inline constexpr std::string_view kGpuDataNotRegained = "GPU data: not regained: ";  // + why.
inline constexpr std::string_view kGpuDataFinalized = "GPU data: lost to a cuptiFinalize by another client";

// One GPU as the driver describes it.
struct CudaDevice {
  int ordinal = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  uint32_t sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
};

// What CuptiSource captures: CuptiLevel (gpu_activity.h, cupti_levels.h).
// "default", "full".
const char* CuptiLevelName(CuptiLevel level);
// Reads "default" / "full"; false (and *level untouched) otherwise.
bool ParseCuptiLevel(std::string_view text, CuptiLevel* level);

class CuptiSource {
 public:
  static constexpr size_t kBufferBytes = size_t{1} << 20;
  static constexpr size_t kBufferCount = 32;
  static constexpr std::chrono::milliseconds kFlushPeriod{150};

  enum class Status : uint8_t {
    kIdle = 0,  // not started.
    kRunning = 1,
    kStopped = 2,      // ran, then stopped.
    kNoLibrary = 3,    // libcupti.so.13 (or an entry point) missing.
    kUnavailable = 4,  // CUPTI loaded, activity tracing refused (no driver/GPU...).
    kNoPrivileges = 5,
    kBusy = 6,    // another CuptiSource is running in this process.
    kFailed = 7,  // no memory for the pool, no ring...
  };

  struct Options {
    std::string cupti_library = "libcupti.so.13";
    std::string cuda_library = "libcuda.so.1";
    // Events; holds a whole buffer's events (a 4 MiB buffer of 40-byte API
    // records makes about 105 k), so a flush does not overrun the drain.
    size_t ring_capacity = size_t{1} << 17;
    bool driver_api = true;  // DRIVER records (cuLaunchKernel from Triton, NCCL...).
    bool nvtx = true;        // MARKER records (see NVTX_INJECTION64_PATH above).
    // What to capture. Unset: LIVEPROF_CUPTI_LEVEL if set (a value that is
    // not a level is said in message() and ignored), else kDefault.
    std::optional<CuptiLevel> level;
    // Writes a CUPTI recording of the run to this file (see "Recording"
    // above). Empty: LIVEPROF_CUPTI_RECORD if set, else no recording.
    std::string record_path;
    // Asks the driver for its GPUs in Start() (kDeviceInfo events, the
    // driver line of message()). False inside cuInit (CUDA's injection
    // entry point, src/attach), where calling the driver could recurse:
    // the flush thread asks at its first wake instead.
    bool probe_driver_at_start = true;
    // Non-empty: another CUPTI client, so named, traces now (a Yield()
    // before the source existed, attach/gpu.cc): Start() prepares
    // everything but takes nothing from CUPTI (no callbacks, no kind) and
    // the source starts aside, until Regain().
    std::string start_aside_for;
  };

  // A handoff of CUPTI between this source and another client.
  struct Handoff {
    enum class Kind : uint8_t {
      kYielded,  // `what`: the other client.
      kRegained,
      kNotRegained,  // `what`: why (CUPTI refused the callbacks or CONCURRENT_KERNEL).
      kFinalized,    // CUPTI was finalized under the running source.
    };
    Kind kind;
    uint64_t host_ns;  // HostNowNs(): kinds off (kYielded), on again (kRegained), seen.
    std::string what;
  };
  static constexpr size_t kMaxHandoffs = 64;  // handoffs() keeps the newest.

  CuptiSource(Stream& stream, Options options);
  explicit CuptiSource(Stream& stream) : CuptiSource(stream, Options()) {}
  ~CuptiSource();  // Stop().
  CuptiSource(const CuptiSource&) = delete;
  CuptiSource& operator=(const CuptiSource&) = delete;

  // Loads CUPTI and the driver, enables activity tracing and starts the
  // flush thread. False when GPU tracing is not possible here: message()
  // says why, status() which case, and nothing keeps running. The owner's
  // thread; once.
  bool Start();
  // Stops tracing after a forced flush; every record CUPTI still held is
  // parsed. Safe before Start(), after a failed Start() and twice. The
  // owner's thread.
  void Stop();

  // The owner's thread, after Start().
  Status status() const { return status_; }
  const std::string& message() const { return message_; }
  // GPUs found through the driver (also sent as kDeviceInfo events), and
  // what the driver probe said ("2 GPUs", "libcuda.so.1 not found: ...").
  const std::vector<CudaDevice>& devices() const { return devices_; }
  const std::string& driver_message() const { return driver_message_; }
  // The level in effect now: the start's, or the last capture control's
  // (gpu_activity.h). Any thread, after Start().
  CuptiLevel level() const { return level_.load(std::memory_order_relaxed); }
  // The recording being written ("" when none). The owner's thread, after Start().
  const std::string& record_path() const { return record_path_; }

  // Records CUPTI dropped for want of a buffer (its own count), and buffers
  // CUPTI asked for when the pool had none. Any thread, once Start() returned.
  uint64_t dropped() const;
  uint64_t refused_buffers() const;

  // Brackets a framework op on the calling thread: device work launched
  // until PopOp() carries `op` (CuptiRecordParser's op external kind). No-op
  // unless running; aside (Yield()), nothing is pushed (the other client
  // would get the records) and the matching pop is skipped. Any thread,
  // between Start() and Stop().
  void PushOp(NameId op);
  void PopOp();

  // Steps aside for another CUPTI client `client` ("torch.profiler"): see
  // "Another CUPTI client" above. True if it stepped aside now (or was
  // aside only for a refused Regain(), whose retries then stop); false when
  // not running or aside for another client. Any thread; returns once every
  // record CUPTI held for the source is parsed.
  bool Yield(const std::string& client);
  // Takes CUPTI back from the other client, which has stopped (its kinds
  // off, its buffers flushed). True if tracing again (or not aside); false
  // with why in *why when CUPTI refused: the source stays aside and Regain()
  // may be called again. Any thread.
  bool Regain(std::string* why = nullptr);
  // Aside for another client now. Any thread.
  bool aside() const { return aside_.load(std::memory_order_acquire); }
  // The handoffs so far, oldest first (the newest kMaxHandoffs). Any thread.
  std::vector<Handoff> handoffs() const;

 private:
  struct Impl;

  Stream& stream_;
  Options options_;
  Status status_ = Status::kIdle;
  std::string message_;
  std::string driver_message_;
  std::vector<CudaDevice> devices_;
  std::string record_path_;
  std::atomic<CuptiLevel> level_{CuptiLevel::kDefault};
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> running_{false};  // for PushOp / PopOp.
  std::atomic<bool> aside_{false};    // Yield() .. Regain(); for PushOp.
};

// The message Start() gives when cuptiActivityEnable fails with CUPTI result
// `result` (`result_name`: cuptiGetResultString's text); `driver` is what
// the driver probe found. Pure; exposed for tests.
std::string CuptiEnableFailureMessage(int result, const std::string& result_name, const std::string& driver);
// True if `result` is CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (or its
// virtualized-device variant).
bool IsCuptiPrivilegeError(int result);

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_CUPTI_SOURCE_H_
