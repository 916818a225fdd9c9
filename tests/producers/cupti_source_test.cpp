// CuptiSource on the machine as it is. On this project's machines there is a
// CUDA toolkit (libcupti.so.13 loads) but no driver and no GPU: Start() must
// fail with the reason, leave nothing running and no ring behind, and the
// run goes on host-only (toolchain.md §4). On a GPU machine the same test
// starts and stops a real subscription.
#include "producers/cupti_source.h"

#include <cupti_activity.h>
#include <cupti_result.h>
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "stream/clock.h"
#include "stream/drain_loop.h"

namespace liveprof {
namespace {

// True if `library` loads here (it then stays loaded, as CuptiSource leaves it).
bool Loads(const char* library) { return dlopen(library, RTLD_NOW | RTLD_LOCAL) != nullptr; }

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

constexpr const char* kHostOnly = "GPU activity is off; the run goes on host-only";

}  // namespace

TEST_CASE("cupti source: without a driver, Start fails, says why and leaves nothing running") {
  Stream stream;
  CuptiSource source(stream);
  if (source.Start()) {
    // A GPU machine: a real subscription, stopped cleanly.
    CHECK(source.status() == CuptiSource::Status::kRunning);
    CHECK_FALSE(source.devices().empty());
    source.Stop();
    CHECK(source.status() == CuptiSource::Status::kStopped);
    return;
  }
  if (Loads("libcupti.so.13") && !Loads("libcuda.so.1")) {
    // This machine: CUPTI loads, activity tracing is refused with 999.
    CHECK(source.status() == CuptiSource::Status::kUnavailable);
    CHECK(source.message().starts_with(
        "CUPTI loaded but activity tracing unavailable (no CUDA driver/GPU?): "
        "CUPTI_ERROR_UNKNOWN (999). Driver: no CUDA driver: libcuda.so.1"));
    CHECK(source.message().ends_with(kHostOnly));
    CHECK(source.driver_message().starts_with("no CUDA driver: libcuda.so.1: cannot open"));
    CHECK(source.devices().empty());
  }
  CHECK(stream.Stats().empty());  // no ring registered.
  CHECK(stream.track_count() == 1);
  CHECK(source.dropped() == 0);
  CHECK(source.refused_buffers() == 0);
  source.PushOp(7);  // no-ops when not running.
  source.PopOp();
  const CuptiSource::Status status = source.status();
  source.Stop();
  source.Stop();
  CHECK(source.status() == status);
  CHECK_FALSE(source.Start());  // once per source.

  // The failed source holds nothing: another one may try (and fails alike).
  CuptiSource again(stream);
  CHECK_FALSE(again.Start());
  CHECK(again.status() == status);
  CHECK(again.message() == source.message());
}

TEST_CASE("cupti source: without the library, Start says CUPTI is not available") {
  Stream stream;
  CuptiSource::Options options;
  options.cupti_library = "libcupti-liveprof-missing.so.13";
  options.cuda_library = "libcuda-liveprof-missing.so.1";
  CuptiSource source(stream, options);
  CHECK_FALSE(source.Start());
  CHECK(source.status() == CuptiSource::Status::kNoLibrary);
  CHECK(source.message() ==
        "CUPTI not available (libcupti-liveprof-missing.so.13: cannot open shared object file: "
        "No such file or directory); " + std::string(kHostOnly));
  CHECK(source.driver_message() ==
        "no CUDA driver: libcuda-liveprof-missing.so.1: cannot open shared object file: No such "
        "file or directory");
  CHECK(stream.Stats().empty());
  source.Stop();
  CHECK(source.status() == CuptiSource::Status::kNoLibrary);
}

TEST_CASE("cupti source: Stop before Start is a no-op") {
  Stream stream;
  CuptiSource source(stream);
  source.Stop();
  CHECK(source.status() == CuptiSource::Status::kIdle);
  CHECK(source.message().empty());
  CHECK(source.dropped() == 0);
}

TEST_CASE("cupti source: insufficient privileges are explained, other refusals name the driver") {
  CHECK(IsCuptiPrivilegeError(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES));
  CHECK(IsCuptiPrivilegeError(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES));
  CHECK_FALSE(IsCuptiPrivilegeError(CUPTI_ERROR_UNKNOWN));
  CHECK_FALSE(IsCuptiPrivilegeError(CUPTI_SUCCESS));

  const std::string privileges = CuptiEnableFailureMessage(
      CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)",
      "1 GPU: 0=NVIDIA A100");
  CHECK(privileges.starts_with(
      "CUPTI refused activity tracing: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35). Activity tracing "
      "(kernels, copies, API calls) needs no privilege; only GPU performance counters do"));
  CHECK(Contains(privileges, "NVreg_RestrictProfilingToAdminUsers=0"));
  CHECK(Contains(privileges, "Driver: 1 GPU: 0=NVIDIA A100."));
  CHECK(privileges.ends_with(kHostOnly));

  CHECK(CuptiEnableFailureMessage(CUPTI_ERROR_UNKNOWN, "CUPTI_ERROR_UNKNOWN (999)",
                                  "CUDA driver loaded, no GPU") ==
        "CUPTI loaded but activity tracing unavailable (no CUDA driver/GPU?): CUPTI_ERROR_UNKNOWN "
        "(999). Driver: CUDA driver loaded, no GPU. " + std::string(kHostOnly));
}

#ifdef LIVEPROF_FAKE_CUPTI
// The running path, against tests/producers/fake_cupti.cc (a stand-in
// libcupti that hands out real records through the buffer callbacks).
TEST_CASE("cupti source: running (fake libcupti): parses, bounds the pool, counts drops, flushes") {
  void* fake = dlopen(LIVEPROF_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(fake != nullptr);
  auto queue_launches = reinterpret_cast<void (*)(int, uint32_t, const char*)>(
      dlsym(fake, "fake_cupti_queue_launches"));
  auto hold_buffers = reinterpret_cast<int (*)(int)>(dlsym(fake, "fake_cupti_hold_buffers"));
  auto add_dropped = reinterpret_cast<void (*)(size_t)>(dlsym(fake, "fake_cupti_add_dropped"));
  auto flags_seen = reinterpret_cast<uint32_t (*)()>(dlsym(fake, "fake_cupti_flags_seen"));
  auto enabled_kinds = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cupti_enabled_kinds"));
  REQUIRE((queue_launches && hold_buffers && add_dropped && flags_seen && enabled_kinds));

  Stream stream;
  CuptiSource::Options options;
  options.cupti_library = LIVEPROF_FAKE_CUPTI;
  options.cuda_library = "libcuda-liveprof-missing.so.1";
  CuptiSource source(stream, options);
  const uint64_t begin = HostNowNs();
  REQUIRE(source.Start());
  CHECK(source.status() == CuptiSource::Status::kRunning);
  CHECK(source.message().starts_with(
      "CUPTI 0 tracing GPU activity (8 x 4 MiB buffers, flushed every 150 ms). Driver: no CUDA "
      "driver: libcuda-liveprof-missing.so.1"));
  // The fake has no cuptiSetThreadIdType: said, and API calls get own tracks.
  CHECK(Contains(source.message(), "CUPTI thread ids are not OS thread ids"));
  CHECK(enabled_kinds() == 12);  // CONCURRENT_KERNEL and 11 more.
  {
    CuptiSource other(stream, options);  // CUPTI is process-wide: one at a time.
    CHECK_FALSE(other.Start());
    CHECK(other.status() == CuptiSource::Status::kBusy);
  }

  // A periodic flush delivers the records; the parse thread publishes them.
  static const char kName[] = "fake_gemm_kernel";
  queue_launches(50, 4242, kName);
  for (int i = 0; i < 300 && stream.TotalPublished() < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(stream.TotalPublished() == 100);

  // CUPTI holds every buffer and asks for a ninth: refused. Records it then
  // cannot place are its drops, and ours.
  CHECK(hold_buffers(9) == static_cast<int>(CuptiSource::kBufferCount));
  CHECK(source.refused_buffers() == 1);
  queue_launches(10, 4242, kName);
  add_dropped(5);
  for (int i = 0; i < 300 && source.dropped() < 25; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(source.dropped() == 25);
  CHECK(stream.diagnostics().Get(Diag::cupti_dropped_records) == 25);

  source.Stop();
  const uint64_t end = HostNowNs();
  CHECK(source.status() == CuptiSource::Status::kStopped);
  CHECK((flags_seen() & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
  CHECK(enabled_kinds() == 0);
  CHECK(source.dropped() == 25);  // kept after the pool is gone.
  const std::vector<Stream::RingStats> rings = stream.Stats();
  REQUIRE(rings.size() == 1);
  CHECK(rings[0].name == "cupti");
  CHECK(rings[0].closed);
  CHECK(rings[0].dropped == 25);          // CUPTI's drops are the source's drops...
  CHECK(stream.TotalDropped() == 25);     // ...and the stream's.

  std::vector<Event> kernels, launches;
  DrainLoop loop(stream, DrainLoop::Options{}, [&](const Batch& b) {
    for (const Event& e : b.events) {
      if (e.kind == EventKind::kKernel) kernels.push_back(e);
      if (e.kind == EventKind::kRuntimeApi) launches.push_back(e);
    }
  });
  loop.Flush();
  REQUIRE(kernels.size() == 50);
  REQUIRE(launches.size() == 50);
  for (const Event& k : kernels) {
    CHECK(stream.names().Get(k.name) == kName);
    CHECK(k.dur == 10'000);
    // The fake clock runs 1000 s ahead of the host's: mapped back through
    // the clock pairs (within the pairs' jitter).
    CHECK(k.ts + 10'000'000 > begin);
    CHECK(k.ts < end + 10'000'000);
  }
  CHECK(stream.names().Get(launches[0].name) == "cudaLaunchKernel");
  CHECK(stream.track(launches[0].track).os_id == 4242);
  CHECK(stream.Stats().empty());  // drained and retired.
}
#endif  // LIVEPROF_FAKE_CUPTI

}  // namespace liveprof
