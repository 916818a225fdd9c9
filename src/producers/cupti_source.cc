#include "producers/cupti_source.h"

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <cupti_version.h>
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "producers/cupti_api.h"
#include "producers/cupti_levels.h"
#include "producers/cupti_records.h"
#include "producers/cupti_source_recorder.h"
#include "producers/gpu_activity.h"
#include "producers/host_api.h"
#include "stream/clock.h"

namespace liveprof {

using cupti_internal::BufferPool;
using cupti_internal::CuptiApi;
using cupti_internal::g_in_callback;
using cupti_internal::g_pool;
using cupti_internal::kCompleted;
using cupti_internal::kFree;
using cupti_internal::kWithCupti;
using cupti_internal::LoadCupti;
using cupti_internal::OnBufferCompleted;
using cupti_internal::OnBufferRequested;
using cupti_internal::ProbeDriver;
using cupti_internal::PublishDevices;
using cupti_internal::SourceCounters;

namespace {

constexpr const char* kHostOnly = "GPU activity is off; the run goes on host-only";

std::atomic<bool> g_source_running{false};  // one CuptiSource at a time (CUPTI is process-wide).

}  // namespace

// ---------------------------------------------------------------------------
// Messages.

bool IsCuptiPrivilegeError(int result) {
  return result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
         result == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES;
}

std::string CuptiEnableFailureMessage(int result, const std::string& result_name, const std::string& driver) {
  if (IsCuptiPrivilegeError(result)) {
    return "CUPTI refused activity tracing: " + result_name +
           ". Activity tracing (kernels, copies, API calls) needs no privilege; only GPU "
           "performance counters do (root, or the driver option "
           "NVreg_RestrictProfilingToAdminUsers=0), and liveprof does not use them. Something "
           "restricts this process: a container or a virtualized GPU that forbids profiling. "
           "Driver: " +
           driver + ". " + kHostOnly;
  }
  return "CUPTI loaded but activity tracing unavailable (no CUDA driver/GPU?): " + result_name + ". Driver: " + driver +
         ". " + kHostOnly;
}

// ---------------------------------------------------------------------------
// The running source.

struct CuptiSource::Impl {
  Stream& stream;
  CuptiApi api;
  std::unique_ptr<BufferPool> pool;
  ClockMap clock;
  std::unique_ptr<CuptiRecordParser> parser;
  uint64_t overhead_reported = 0;  // of parser's stats().cupti_overhead_ns, added to HookTotals.
  std::shared_ptr<Ring> ring;
  // The kinds on in CUPTI, turned by capture on demand (gpu_activity.h),
  // Yield(), Regain() and the flush thread: under cupti_mu.
  std::unique_ptr<CuptiKindSet> kinds;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;         // guarded by mu.
  std::string probe_driver;  // the driver library to ask at the first wake ("": asked at Start).
  SourceCounters counters;
  std::unique_ptr<CuptiSourceRecorder> recorder;  // null: no recording.

  // Another CUPTI client (cupti_source.h). cupti_mu serializes what calls
  // CUPTI or produces into the ring: the flush thread's wake, Yield(),
  // Regain(), the capture switch's turns (taken under the switch's own
  // lock: that one first, always).
  mutable std::mutex cupti_mu;
  bool aside = false;                       // guarded by cupti_mu; mirrored in *aside_flag.
  std::atomic<bool>* aside_flag = nullptr;  // CuptiSource::aside_ (PushOp, aside()).
  bool os_thread_ids = false;               // CUPTI took SYSTEM thread ids at Start().
  std::vector<Handoff> handoffs;            // guarded by cupti_mu; the newest kMaxHandoffs.
  TrackId marker_track = 0;                 // "GPU tracer", at the first handoff.
  std::string not_regained;                 // the last refusal said ("": none), said once.
  bool retry = false;                       // a Regain() was refused: the flush thread tries again.
  uint32_t wakes = 0;                       // the flush thread's, for retry's pace.

  explicit Impl(Stream& s) : stream(s) {}

  void SetAside(bool a) {  // under cupti_mu.
    aside = a;
    aside_flag->store(a, std::memory_order_release);
  }

  // A handoff: logged, and an instant on the ring (under cupti_mu).
  void Note(Handoff::Kind kind, std::string what, std::string_view marker) {
    const uint64_t now = HostNowNs();
    if (handoffs.size() == kMaxHandoffs) handoffs.erase(handoffs.begin());
    handoffs.push_back({kind, now, what});
    if (marker_track == 0) {
      marker_track =
          stream.AddTrack(TrackInfo{stream.names().Intern("GPU tracer (liveprof)"), TrackType::kHostThread, 0, 0});
    }
    Event* e = ring->queue->TryReserve();
    if (e == nullptr) return;  // (a full ring: counted as the ring's drop)
    *e = Event{};
    e->ts = now;
    e->kind = EventKind::kInstant;
    e->name = stream.names().Intern(std::string(marker) + what);
    e->track = marker_track;
    ring->queue->Publish();
  }

  // CUPTI as the source wants it, from scratch: the attributes, the
  // callbacks, the kinds (after another client, or a cuptiFinalize). True
  // if tracing; else why in *why, and the kinds stay off. Under cupti_mu.
  bool Reestablish(std::string* why) {
    if (api.set_attribute != nullptr) {
      uint8_t per_thread = 0;
      size_t size = sizeof per_thread;
      api.set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
    }
    if (os_thread_ids) api.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    if (const CUptiResult r = api.register_callbacks(OnBufferRequested, OnBufferCompleted); r != CUPTI_SUCCESS) {
      *why = "cuptiActivityRegisterCallbacks: " + api.ResultName(r);
      return false;
    }
    if (const CUptiResult r = kinds->Resume(); r != CUPTI_SUCCESS) {
      kinds->Suspend(/*cupti_knows=*/true);
      *why = "CONCURRENT_KERNEL: " + api.ResultName(r);
      return false;
    }
    return true;
  }

  // Buffers CUPTI held when it was finalized, or when the other client's
  // forced flush gave them to its callbacks: CUPTI will never give them
  // back, so they are the pool's again. Under cupti_mu, aside or finalized.
  void ReclaimHeld() {
    for (BufferPool::Slot& s : pool->slots) {
      uint8_t held = kWithCupti;
      s.state.compare_exchange_strong(held, kFree, std::memory_order_acq_rel);
    }
  }

  // Whether CUPTI was finalized under the running source: the thread id
  // type it set at Start() is back to the default (cuptiFinalize forgets
  // it). Then everything again, and said. The flush thread, under cupti_mu.
  void CheckFinalized() {
    if (!os_thread_ids || api.get_thread_id_type == nullptr) return;
    CUpti_ActivityThreadIdType type = CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;
    if (api.get_thread_id_type(&type) != CUPTI_SUCCESS || type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) return;
    Note(Handoff::Kind::kFinalized, "", kGpuDataFinalized);
    ParseCompleted();  // (what it gave back before)
    ReclaimHeld();
    kinds->Suspend(/*cupti_knows=*/false);
    std::string why;
    if (Reestablish(&why)) {
      Note(Handoff::Kind::kRegained, "", kGpuDataBack);
    } else {
      SetAside(true);  // (Regain(), or this thread, tries again)
      retry = true;
      Note(Handoff::Kind::kNotRegained, why, kGpuDataNotRegained);
      not_regained = why;
    }
  }

  void AddClockPair() {
    // The tightest of three brackets of host time around CUPTI's timestamp.
    uint64_t best_width = ~uint64_t{0};
    for (int i = 0; i < 3; ++i) {
      uint64_t cupti = 0;
      const uint64_t h0 = HostNowNs();
      if (api.timestamp(&cupti) != CUPTI_SUCCESS) return;
      const uint64_t h1 = HostNowNs();
      if (h1 - h0 < best_width) {
        best_width = h1 - h0;
        if (i == 2 || best_width < 1000) {
          clock.AddPair(cupti, h0 + (h1 - h0) / 2);
          if (recorder) recorder->AddClockPair(cupti, h0 + (h1 - h0) / 2);
          return;
        }
      }
    }
  }

  // Parses every completed buffer, oldest completion first, and returns it
  // to the pool. The flush thread (or Start/Stop when it is not running).
  void ParseCompleted() {
    std::array<BufferPool::Slot*, kBufferCount> done{};
    size_t n = 0;
    for (BufferPool::Slot& s : pool->slots) {
      if (s.state.load(std::memory_order_acquire) == kCompleted) done[n++] = &s;
    }
    // Insertion sort by completion order (n <= kBufferCount; std::sort on this array
    // trips GCC 12's -Warray-bounds).
    for (size_t i = 1; i < n; ++i) {
      for (size_t j = i; j > 0 && done[j]->seq < done[j - 1]->seq; --j) {
        std::swap(done[j], done[j - 1]);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      WaitForRoom(done[i]->valid / sizeof(CUpti_ActivityAPI) + 1);
      parser->Parse(done[i]->data, done[i]->valid, *ring->queue);
      done[i]->state.store(kFree, std::memory_order_release);
    }
    // CUPTI's own time so far, for the process's cost (HookTotals).
    const uint64_t overhead = parser->stats().cupti_overhead_ns;
    if (overhead > overhead_reported) {
      AddCuptiOverhead(overhead - overhead_reported);
      overhead_reported = overhead;
    }
  }

  // Gives the drain loop up to half a second to make room for a buffer's
  // events before parsing it (what still does not fit is dropped and counted).
  void WaitForRoom(size_t events) {
    const SpscRing& q = *ring->queue;
    events = std::min(events, q.capacity());
    for (int i = 0; i < 500 && q.capacity() - q.size() < events; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void Flush(uint32_t flag) {
    AddClockPair();
    const uint64_t flush_ns = HostNowNs();
    api.flush_all(flag);
    size_t dropped = 0;
    if (api.dropped(nullptr, 0, &dropped) == CUPTI_SUCCESS) pool->AddDropped(dropped);
    ParseCompleted();
    DeclareProgress(flush_ns);
  }

  // How far this source's events are delivered, for the reorder buffer
  // (RingProgress::kDeclared), after a flush that began at flush_ns has been
  // parsed. cuptiActivityFlushAll(0) gives back every buffer whose records
  // are all complete; CUPTI writes a kernel's record at its launch and its
  // times when it has run, so a buffer still with CUPTI after the flush may
  // hold a record of anything since it was asked for (while the GPU runs
  // behind the CPU, until the buffer fills). So: the flush's start, or just
  // before the oldest buffer CUPTI still holds was asked for (an API call's
  // record is written as it returns, a moment after its end). Only forward.
  void DeclareProgress(uint64_t flush_ns) {
    uint64_t progress = flush_ns;
    for (const BufferPool::Slot& s : pool->slots) {
      // Held by CUPTI, or completed since ParseCompleted looked (CUPTI's
      // worker completes buffers at any time): not in the ring yet either.
      if (s.state.load(std::memory_order_acquire) == kFree) continue;
      const uint64_t requested = s.requested_ns.load(std::memory_order_relaxed);
      progress = std::min(progress, requested > kRequestSlackNs ? requested - kRequestSlackNs : 0);
    }
    if (progress > ring->declared_ns.load(std::memory_order_relaxed)) ring->DeclareProgress(progress);
  }
  static constexpr uint64_t kRequestSlackNs = 1'000'000;
  // A refused Regain() is tried again every this many wakes (about 1 s).
  static constexpr uint32_t kRetryWakes = 7;

  void Run() {
    pthread_setname_np(pthread_self(), "liveprof-cupti");
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, kFlushPeriod, [this] { return stop; })) {
      lock.unlock();
      {
        std::lock_guard<std::mutex> c(cupti_mu);
        if (!probe_driver.empty()) {  // (Options::probe_driver_at_start false)
          std::vector<CudaDevice> devices;
          ProbeDriver(probe_driver, &devices);
          PublishDevices(*ring->queue, stream, devices);
          probe_driver.clear();
        }
        if (aside && retry && ++wakes % kRetryWakes == 0) {
          std::string why;  // (said at the refusal; a new reason is said too)
          if (Reestablish(&why)) {
            SetAside(false);
            retry = false;
            not_regained.clear();
            Note(Handoff::Kind::kRegained, "", kGpuDataBack);
          } else if (why != not_regained) {
            Note(Handoff::Kind::kNotRegained, why, kGpuDataNotRegained);
            not_regained = why;
          }
        }
        if (aside) {
          // No CUPTI call: it is the other client's. Nothing of the source's
          // is in flight (Yield() parsed it all): complete up to now.
          const uint64_t now = HostNowNs();
          if (now > ring->declared_ns.load(std::memory_order_relaxed)) ring->DeclareProgress(now);
        } else {
          CheckFinalized();
          if (!aside) Flush(0);
        }
      }
      lock.lock();
    }
    lock.unlock();
    std::lock_guard<std::mutex> c(cupti_mu);
    if (!aside) {
      kinds->DisableAll();
      Flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    ring->closed.store(true, std::memory_order_release);
  }

  // Detaches the pool from CUPTI's callbacks; frees it unless CUPTI still
  // holds one of its buffers (then it is left allocated on purpose: CUPTI
  // may still write into it).
  void ReleasePool() {
    if (!pool) return;
    g_pool.store(nullptr);
    while (g_in_callback.load() != 0) std::this_thread::yield();
    if (pool->AllFree()) {
      pool.reset();
    } else {
      (void)pool.release();
    }
  }

  // Opens the recording asked for (the option, else LIVEPROF_CUPTI_RECORD);
  // the path, or "" when none. A file that cannot be created is said on
  // stderr and the run goes on unrecorded. Before the callbacks exist.
  std::string OpenRecording(const std::string& option) {
    std::string path = option;
    if (path.empty()) {
      if (const char* env = std::getenv("LIVEPROF_CUPTI_RECORD"); env != nullptr) path = env;
    }
    if (path.empty()) return path;
    uint32_t version = 0;
    if (api.version != nullptr) api.version(&version);
    auto r = std::make_unique<CuptiSourceRecorder>(api.next_record);
    std::string error;
    if (!r->Open(path, version, CuptiRecordParser::kOpExternalKind, &error)) {
      std::fprintf(stderr, "liveprof: no CUPTI recording: %s\n", error.c_str());
      return "";
    }
    recorder = std::move(r);
    pool->recorder = recorder.get();
    return path;
  }

  // Closes the recording, once the pool is released (no callback writes).
  // The recorder itself lives as long as the source (a PushOp racing with
  // Stop() may still add to it: ignored). `keep`: false removes the file
  // (Start failed: nothing was recorded).
  void CloseRecording(bool keep) {
    if (!recorder) return;
    const std::string line = recorder->Close();
    if (keep) {
      std::fprintf(stderr, "%s\n", line.c_str());
    } else {
      std::remove(recorder->path().c_str());
    }
  }
};

CuptiSource::CuptiSource(Stream& stream, Options options) : stream_(stream), options_(std::move(options)) {}

CuptiSource::~CuptiSource() { Stop(); }

bool CuptiSource::Start() {
  if (status_ != Status::kIdle) return status_ == Status::kRunning;
  if (g_source_running.exchange(true)) {
    status_ = Status::kBusy;
    message_ = std::string("another CuptiSource is running in this process; ") + kHostOnly;
    return false;
  }
  auto fail = [this](Status s, std::string message) {
    if (impl_) {
      impl_->ReleasePool();
      impl_->CloseRecording(/*keep=*/false);
    }
    impl_.reset();
    record_path_.clear();
    status_ = s;
    message_ = std::move(message);
    g_source_running.store(false);
    return false;
  };

  auto impl = std::make_unique<Impl>(stream_);
  std::string error;
  if (!LoadCupti(options_.cupti_library, &impl->api, &error)) {
    driver_message_ =
        options_.probe_driver_at_start ? ProbeDriver(options_.cuda_library, &devices_) : "not asked (inside cuInit)";
    return fail(Status::kNoLibrary, "CUPTI not available (" + error + "); " + kHostOnly);
  }
  impl_ = std::move(impl);
  Impl& im = *impl_;
  im.aside_flag = &aside_;
  const CuptiApi& api = im.api;

  im.pool = std::make_unique<BufferPool>();
  im.pool->counters = &im.counters;
  im.pool->get_dropped = api.dropped;
  im.pool->diag = &stream_.diagnostics();
  if (!im.pool->Allocate()) {
    return fail(Status::kFailed, "no memory for CUPTI's buffer pool; " + std::string(kHostOnly));
  }
  record_path_ = im.OpenRecording(options_.record_path);
  g_pool.store(im.pool.get());

  // Another client traces now (Options::start_aside_for): nothing is taken
  // from CUPTI until Regain(); whether it gives OS thread ids is only read.
  const bool start_aside = !options_.start_aside_for.empty();
  // One pool for every thread, and OS thread ids (so API spans join the host
  // API's thread tracks). Both before the callbacks and the first kind.
  if (api.set_attribute != nullptr && !start_aside) {
    uint8_t per_thread = 0;
    size_t size = sizeof per_thread;
    api.set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
  }
  CUpti_ActivityThreadIdType id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  const bool os_thread_ids =
      api.set_thread_id_type != nullptr &&
      (start_aside ? api.get_thread_id_type != nullptr && api.get_thread_id_type(&id_type) == CUPTI_SUCCESS
                   : api.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS);
  im.os_thread_ids = os_thread_ids;
  if (const CUptiResult r = start_aside ? CUPTI_SUCCESS : api.register_callbacks(OnBufferRequested, OnBufferCompleted);
      r != CUPTI_SUCCESS) {
    return fail(Status::kFailed, "cuptiActivityRegisterCallbacks failed: " + api.ResultName(r) + "; " + kHostOnly);
  }
  im.kinds = std::make_unique<CuptiKindSet>(
      CuptiKindSet::Api{api.enable, api.disable, api.enable_runtime_api, api.enable_driver_api}, options_.driver_api,
      options_.nvtx, api.callback_name);
  if (start_aside) im.kinds->Suspend(/*cupti_knows=*/false);
  const uint64_t enabled_ns = HostNowNs();  // nothing CUPTI records ends before this.
  if (const CUptiResult r = start_aside ? CUPTI_SUCCESS : im.kinds->EnableKernels(); r != CUPTI_SUCCESS) {
    driver_message_ =
        options_.probe_driver_at_start ? ProbeDriver(options_.cuda_library, &devices_) : "not asked (inside cuInit)";
    return fail(IsCuptiPrivilegeError(r) ? Status::kNoPrivileges : Status::kUnavailable,
                CuptiEnableFailureMessage(r, api.ResultName(r), driver_message_));
  }
  std::string level_note;
  const CuptiLevel level = ChooseCuptiLevel(options_.level, std::getenv("LIVEPROF_CUPTI_LEVEL"), &level_note);
  level_.store(level);
  const std::string not_enabled = im.kinds->EnableLevel(level, [&api](CUptiResult r) { return api.ResultName(r); });

  std::string ring_error;
  im.ring = stream_.AddRing({.name = "cupti",
                             .domain = TimeDomain::kHostNs,
                             .capacity = options_.ring_capacity,
                             .track = 0,
                             .progress = RingProgress::kDeclared},
                            &ring_error);
  if (im.ring == nullptr) {
    im.kinds->DisableAll();
    api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    return fail(Status::kFailed, ring_error + "; " + kHostOnly);
  }
  im.pool->ring.store(im.ring->queue.get(), std::memory_order_release);

  CuptiRecordParser::Options po;
  po.clock = &im.clock;
  po.os_thread_ids = os_thread_ids;
  po.owns_overhead_data = true;
  if (auto name_fn = api.callback_name; name_fn != nullptr) {
    po.api_name = [name_fn](bool driver, uint32_t cbid) -> const char* {
      const char* name = nullptr;
      const auto domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
      return name_fn(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
    };
  }
  im.parser = std::make_unique<CuptiRecordParser>(stream_, std::move(po));
  im.overhead_reported = 0;
  im.AddClockPair();

  // The GPUs, for the run environment: written before the flush thread
  // exists, so this thread is still the ring's only producer. Inside cuInit
  // (the injection) the driver is not asked now: the flush thread asks it
  // at its first wake, once cuInit has returned.
  if (options_.probe_driver_at_start) {
    driver_message_ = ProbeDriver(options_.cuda_library, &devices_);
    PublishDevices(*im.ring->queue, stream_, devices_);
  } else {
    driver_message_ = "asked after cuInit";
    im.probe_driver = options_.cuda_library;
  }

  uint32_t version = 0;
  if (api.version != nullptr) api.version(&version);
  message_ = "CUPTI " + std::to_string(version) + " tracing GPU activity (" + std::to_string(kBufferCount) + " x " +
             std::to_string(kBufferBytes >> 20) + " MiB buffers, flushed every " +
             std::to_string(kFlushPeriod.count()) + " ms). Driver: " + driver_message_ + ".";
  message_ += CuptiLevelMessage(level, im.kinds->filtered(), im.kinds->filter()) + level_note;
  if (!not_enabled.empty()) message_ += " Not enabled: " + not_enabled + ".";
  if (!os_thread_ids) {
    message_ += " CUPTI thread ids are not OS thread ids: API calls get tracks of their own.";
  }
  if (!record_path_.empty()) {
    message_ += " Recording to " + record_path_ +
                (api.next_record == nullptr ? " (without kernel names: no cuptiActivityGetNextRecord)." : ".");
  }
  if (start_aside) {
    message_ += " Aside while " + options_.start_aside_for + " traces (it started first): tracing from its end.";
    im.SetAside(true);
    im.Note(Handoff::Kind::kYielded, options_.start_aside_for, kGpuDataTo);
  }
  status_ = Status::kRunning;
  // Nothing CUPTI records ends before its kinds were enabled: said at once,
  // so that until the first flush (after the driver's probe) the source is
  // not one that cannot say.
  im.ring->DeclareProgress(enabled_ns);
  im.thread = std::thread([&im] { im.Run(); });
  running_.store(true, std::memory_order_release);
  // (Aside, the kinds are suspended: a turn is kept for Regain().)
  InstallGpuActivitySwitch({.apply =
                                [&im](bool on) {
                                  std::lock_guard<std::mutex> c(im.cupti_mu);
                                  im.kinds->SetActivity(on);
                                },
                            .set_level =
                                [this, &im](CuptiLevel l) {
                                  std::lock_guard<std::mutex> c(im.cupti_mu);
                                  im.kinds->SetLevel(l);
                                  level_.store(l, std::memory_order_relaxed);
                                },
                            .level = level});
  return true;
}

void CuptiSource::Stop() {
  if (status_ != Status::kRunning) return;
  RemoveGpuActivitySwitch();  // no capture control reaches it from here on.
  running_.store(false, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
  impl_->ReleasePool();
  impl_->CloseRecording(/*keep=*/true);
  status_ = Status::kStopped;
  g_source_running.store(false);
}

uint64_t CuptiSource::dropped() const { return impl_ ? impl_->counters.dropped.load(std::memory_order_relaxed) : 0; }

uint64_t CuptiSource::refused_buffers() const {
  return impl_ ? impl_->counters.refused.load(std::memory_order_relaxed) : 0;
}

namespace {
// Pushes PushOp() skipped on this thread while aside, whose pops PopOp() skips.
thread_local uint32_t t_skipped_ops = 0;
}  // namespace

void CuptiSource::PushOp(NameId op) {
  if (aside_.load(std::memory_order_acquire) && running_.load(std::memory_order_acquire)) {
    ++t_skipped_ops;
    return;
  }
  if (running_.load(std::memory_order_acquire) && impl_->api.push_external != nullptr) {
    // A recording keeps each op's name (its ids mean nothing elsewhere).
    if (impl_->recorder) impl_->recorder->AddOp(op, stream_.names().Get(op));
    impl_->api.push_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, op);
  }
}

void CuptiSource::PopOp() {
  if (t_skipped_ops > 0) {
    --t_skipped_ops;
    return;
  }
  if (running_.load(std::memory_order_acquire) && impl_->api.pop_external != nullptr) {
    uint64_t last = 0;
    impl_->api.pop_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &last);
  }
}

bool CuptiSource::Yield(const std::string& client) {
  if (status_ != Status::kRunning || !impl_) return false;
  Impl& im = *impl_;
  std::lock_guard<std::mutex> c(im.cupti_mu);
  if (im.aside) {
    // Aside only because CUPTI refused a regain: the retries stop (they
    // would take CUPTI in the middle of this client's window), and this
    // client's window is said as any other.
    if (!im.retry) return false;
    im.retry = false;
    im.Note(Handoff::Kind::kYielded, client, kGpuDataTo);
    return true;
  }
  // Its kinds off first (no new record), then every buffer CUPTI holds back
  // (forced: partly filled ones too), parsed; then CUPTI is the other's.
  im.kinds->Suspend(/*cupti_knows=*/true);
  im.Flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  // The thread ids the other client would have without liveprof.
  if (im.os_thread_ids) im.api.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT);
  im.SetAside(true);
  im.retry = false;
  im.not_regained.clear();
  im.Note(Handoff::Kind::kYielded, client, kGpuDataTo);
  return true;
}

bool CuptiSource::Regain(std::string* why) {
  if (status_ != Status::kRunning || !impl_) return true;
  Impl& im = *impl_;
  std::lock_guard<std::mutex> c(im.cupti_mu);
  if (!im.aside) return true;
  // The other client's forced flush at its stop gave it whatever CUPTI held
  // (a buffer of ours among them, if one was still out).
  im.ReclaimHeld();
  std::string reason;
  if (!im.Reestablish(&reason)) {
    if (reason != im.not_regained) {  // (said once per reason)
      im.Note(Handoff::Kind::kNotRegained, reason, kGpuDataNotRegained);
      im.not_regained = reason;
    }
    if (why != nullptr) *why = reason;
    im.retry = true;
    return false;
  }
  im.SetAside(false);
  im.retry = false;
  im.not_regained.clear();
  im.AddClockPair();
  im.Note(Handoff::Kind::kRegained, "", kGpuDataBack);
  return true;
}

std::vector<CuptiSource::Handoff> CuptiSource::handoffs() const {
  if (!impl_) return {};
  std::lock_guard<std::mutex> c(impl_->cupti_mu);
  return impl_->handoffs;
}

}  // namespace liveprof
