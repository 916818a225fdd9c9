// CuptiSource on the machine as it is. On this project's machines there is a
// CUDA toolkit (libcupti.so.13 loads) but no driver and no GPU: Start() must
// fail with the reason, leave nothing running and no ring behind, and the
// run goes on host-only (without a driver, CUPTI 13's activity calls return
// CUPTI_ERROR_UNKNOWN). On a GPU machine the same test
// starts and stops a real subscription.
#include "producers/cupti_source.h"

#include <cupti_activity.h>
#include <cupti_result.h>
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "producers/cupti_levels.h"
#include "producers/cupti_recording.h"
#include "producers/gpu_activity.h"
#include "stream/clock.h"
#include "stream/drain_loop.h"

namespace liveprof::cupti_source_test {
namespace {

// True if `library` loads here (it then stays loaded, as CuptiSource leaves it).
bool Loads(const char* library) { return dlopen(library, RTLD_NOW | RTLD_LOCAL) != nullptr; }

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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
    CHECK(
        source.message().starts_with("CUPTI loaded but activity tracing unavailable (no CUDA driver/GPU?): "
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
        "No such file or directory); " +
            std::string(kHostOnly));
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
      CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)", "1 GPU: 0=NVIDIA A100");
  CHECK(privileges.starts_with(
      "CUPTI refused activity tracing: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35). Activity tracing "
      "(kernels, copies, API calls) needs no privilege; only GPU performance counters do"));
  CHECK(Contains(privileges, "NVreg_RestrictProfilingToAdminUsers=0"));
  CHECK(Contains(privileges, "Driver: 1 GPU: 0=NVIDIA A100."));
  CHECK(privileges.ends_with(kHostOnly));

  CHECK(CuptiEnableFailureMessage(CUPTI_ERROR_UNKNOWN, "CUPTI_ERROR_UNKNOWN (999)", "CUDA driver loaded, no GPU") ==
        "CUPTI loaded but activity tracing unavailable (no CUDA driver/GPU?): CUPTI_ERROR_UNKNOWN "
        "(999). Driver: CUDA driver loaded, no GPU. " +
            std::string(kHostOnly));
}

#ifdef LIVEPROF_FAKE_CUPTI
// The running path, against tests/producers/fake_cupti.cc (a stand-in
// libcupti that hands out real records through the buffer callbacks).
TEST_CASE("cupti source: running (fake libcupti): parses, bounds the pool, counts drops, flushes") {
  void* fake = dlopen(LIVEPROF_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(fake != nullptr);
  auto queue_launches =
      reinterpret_cast<void (*)(int, uint32_t, const char*)>(dlsym(fake, "fake_cupti_queue_launches"));
  auto hold_buffers = reinterpret_cast<int (*)(int)>(dlsym(fake, "fake_cupti_hold_buffers"));
  auto add_dropped = reinterpret_cast<void (*)(size_t)>(dlsym(fake, "fake_cupti_add_dropped"));
  auto flags_seen = reinterpret_cast<uint32_t (*)()>(dlsym(fake, "fake_cupti_flags_seen"));
  auto enabled_kinds = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cupti_enabled_kinds"));
  REQUIRE((queue_launches && hold_buffers && add_dropped && flags_seen && enabled_kinds));

  Stream stream;
  CuptiSource::Options options;
  options.cupti_library = LIVEPROF_FAKE_CUPTI;
  options.cuda_library = "libcuda-liveprof-missing.so.1";
  options.level = CuptiLevel::kDefault;
  CuptiSource source(stream, options);
  const uint64_t begin = HostNowNs();
  REQUIRE(source.Start());
  CHECK(source.status() == CuptiSource::Status::kRunning);
  CHECK(source.message().starts_with(
      "CUPTI 0 tracing GPU activity (32 x 1 MiB buffers, flushed every 150 ms). Driver: no CUDA "
      "driver: libcuda-liveprof-missing.so.1"));
  // The fake has no cuptiSetThreadIdType: said, and API calls get own tracks.
  CHECK(Contains(source.message(), "CUPTI thread ids are not OS thread ids"));
  CHECK(enabled_kinds() == 11);  // CONCURRENT_KERNEL and the default level's 10 (see below).
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

  // CUPTI holds every buffer and asks for one more: refused. Records it then
  // cannot place are its drops, and ours.
  CHECK(hold_buffers(static_cast<int>(CuptiSource::kBufferCount) + 1) == static_cast<int>(CuptiSource::kBufferCount));
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
  CHECK(rings[0].dropped == 25);       // CUPTI's drops are the source's drops...
  CHECK(stream.TotalDropped() == 25);  // ...and the stream's.

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

namespace {

// The fake's controls, by name.
template <typename Fn>
Fn FakeFn(const char* name) {
  void* fake = dlopen(LIVEPROF_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(fake != nullptr);
  void* fn = dlsym(fake, name);
  REQUIRE(fn != nullptr);
  return reinterpret_cast<Fn>(fn);
}

CuptiSource::Options FakeOptions(CuptiLevel level) {
  CuptiSource::Options options;
  options.cupti_library = LIVEPROF_FAKE_CUPTI;
  options.cuda_library = "libcuda-liveprof-missing.so.1";
  options.level = level;
  return options;
}

// The CUpti_ActivityKinds enabled in the fake now.
std::vector<int> EnabledKinds() {
  auto kind_enabled = FakeFn<int (*)(int)>("fake_cupti_kind_enabled");
  std::vector<int> kinds;
  for (int k = 1; k < CUPTI_ACTIVITY_KIND_COUNT; ++k) {
    if (kind_enabled(k)) kinds.push_back(k);
  }
  return kinds;
}

// The fake's callback ids (fake_cupti.cc, kCallbacks) and whether the
// default level records each: (driver, cbid) -> recorded.
const std::map<std::pair<int, uint32_t>, int> kDefaultApiCalls = {
    {{0, 10}, 0},   // cudaGetLastError
    {{0, 17}, 0},   // cudaGetDevice
    {{0, 20}, 1},   // cudaMalloc
    {{0, 22}, 1},   // cudaFree
    {{0, 31}, 1},   // cudaMemcpy
    {{0, 51}, 1},   // cudaMemsetAsync
    {{0, 131}, 1},  // cudaStreamSynchronize
    {{0, 138}, 0},  // cudaEventQuery
    {{0, 211}, 1},  // cudaLaunchKernel
    {{0, 317}, 0},  // cudaStreamIsCapturing
    {{0, 373}, 1},  // cudaMallocAsync
    {{0, 375}, 1},  // cudaFreeAsync
    {{1, 17}, 1},   // cuCtxSynchronize
    {{1, 120}, 0},  // cuEventQuery
    {{1, 126}, 1},  // cuStreamSynchronize
    {{1, 216}, 1},  // cuMemsetD8Async
    {{1, 243}, 1},  // cuMemAlloc_v2
    {{1, 245}, 1},  // cuMemFree_v2
    {{1, 276}, 1},  // cuMemcpyHtoD_v2
    {{1, 304}, 0},  // cuCtxGetCurrent
    {{1, 307}, 1},  // cuLaunchKernel
    {{1, 392}, 0},  // cuDevicePrimaryCtxGetState
    {{1, 598}, 1},  // cuMemAllocAsync
    {{1, 686}, 0},  // cuKernelGetAttribute
};

// What the fake records of each of its callback ids now.
std::map<std::pair<int, uint32_t>, int> RecordedApiCalls() {
  auto recorded = FakeFn<int (*)(int, uint32_t)>("fake_cupti_api_recorded");
  std::map<std::pair<int, uint32_t>, int> now;
  for (const auto& [key, unused] : kDefaultApiCalls) now[key] = recorded(key.first, key.second);
  return now;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The kinds each level enables (as EnabledKinds() lists them, sorted), and
// every API call of the fake recorded (the full level).
std::vector<int> LevelKinds(CuptiLevel level) {
  std::vector<int> kinds = {
      CUPTI_ACTIVITY_KIND_MEMCPY,
      CUPTI_ACTIVITY_KIND_MEMSET,
      CUPTI_ACTIVITY_KIND_RUNTIME,
      CUPTI_ACTIVITY_KIND_DRIVER,
      CUPTI_ACTIVITY_KIND_MARKER,
      CUPTI_ACTIVITY_KIND_MEMCPY2,
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
      CUPTI_ACTIVITY_KIND_MEMORY2,
      CUPTI_ACTIVITY_KIND_MEMORY_POOL,
      CUPTI_ACTIVITY_KIND_OVERHEAD,
  };
  if (level == CuptiLevel::kFull) kinds.push_back(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}
std::map<std::pair<int, uint32_t>, int> AllApiCalls() {
  std::map<std::pair<int, uint32_t>, int> all = kDefaultApiCalls;
  for (auto& [key, on] : all) on = 1;
  return all;
}

}  // namespace

TEST_CASE("cupti source: capture levels (fake libcupti): the kinds and API calls each enables") {
  const std::vector<int> full_kinds = LevelKinds(CuptiLevel::kFull);
  const std::vector<int> sorted_default = LevelKinds(CuptiLevel::kDefault);
  const std::map<std::pair<int, uint32_t>, int> all_recorded = AllApiCalls();

  Stream stream;
  SUBCASE("default: kernels, copies, memsets, memory, ops; launch/copy/alloc/sync calls only") {
    CuptiSource source(stream, FakeOptions(CuptiLevel::kDefault));
    REQUIRE(source.Start());
    CHECK(source.level() == CuptiLevel::kDefault);
    CHECK(EnabledKinds() == sorted_default);
    CHECK(RecordedApiCalls() == kDefaultApiCalls);
    CHECK(Contains(source.message(),
                   " Level default: API calls recorded: runtime 8 of 12, driver 8 of 12 (launch, "
                   "copy, memset, alloc, free, synchronize; LIVEPROF_CUPTI_LEVEL=full records "
                   "every call)."));
    // Capture on demand turns RUNTIME and DRIVER off and on again; enabling
    // a kind forgets CUPTI's per-call choices, so the source makes them again.
    REQUIRE(SetGpuActivityEnabled(false));
    CHECK(EnabledKinds() == std::vector<int>{CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL});
    REQUIRE(SetGpuActivityEnabled(true));
    CHECK(EnabledKinds() == sorted_default);
    CHECK(RecordedApiCalls() == kDefaultApiCalls);
    source.Stop();
    CHECK(EnabledKinds().empty());
  }
  SUBCASE("full: every kind liveprof knows, every API call") {
    auto switches = FakeFn<size_t (*)()>("fake_cupti_api_switches");
    FakeFn<void (*)()>("fake_cupti_reset_log")();
    CuptiSource source(stream, FakeOptions(CuptiLevel::kFull));
    REQUIRE(source.Start());
    CHECK(source.level() == CuptiLevel::kFull);
    CHECK(EnabledKinds() == full_kinds);
    CHECK(RecordedApiCalls() == all_recorded);
    CHECK(switches() == 0);  // no per-call switch at all.
    CHECK(Contains(source.message(), " Level full: every kind, every API call."));
    source.Stop();
  }
  SUBCASE("the environment chooses when the option does not; a bad value is said") {
    CuptiSource::Options options = FakeOptions(CuptiLevel::kDefault);
    options.level.reset();
    setenv("LIVEPROF_CUPTI_LEVEL", "full", 1);
    {
      CuptiSource source(stream, options);
      REQUIRE(source.Start());
      CHECK(source.level() == CuptiLevel::kFull);
      CHECK(EnabledKinds() == full_kinds);
    }
    {
      CuptiSource source(stream, FakeOptions(CuptiLevel::kDefault));  // the option wins.
      REQUIRE(source.Start());
      CHECK(source.level() == CuptiLevel::kDefault);
      CHECK(EnabledKinds() == sorted_default);
    }
    setenv("LIVEPROF_CUPTI_LEVEL", "everything", 1);
    {
      CuptiSource source(stream, options);
      REQUIRE(source.Start());
      CHECK(source.level() == CuptiLevel::kDefault);
      CHECK(Contains(source.message(),
                     " Level default: API calls recorded: runtime 8 of 12, driver 8 of 12 (launch, "
                     "copy, memset, alloc, free, synchronize; LIVEPROF_CUPTI_LEVEL=full records "
                     "every call). LIVEPROF_CUPTI_LEVEL=everything is not a level (default, full): "
                     "default used."));
    }
    unsetenv("LIVEPROF_CUPTI_LEVEL");
  }
}

// Capture on demand switches a running source's level (gpu_activity.h): the
// kinds and the per-call choices follow, whether the activity is on or off.
TEST_CASE("cupti source: the level switches at run time (fake libcupti): kinds and API calls follow") {
  const std::vector<int> memory_kinds = {CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL};
  Stream stream;
  SUBCASE("default -> full -> default") {
    CuptiSource source(stream, FakeOptions(CuptiLevel::kDefault));
    REQUIRE(source.Start());
    CHECK(GpuActivityLevel() == CuptiLevel::kDefault);
    CuptiLevel was = CuptiLevel::kFull;
    REQUIRE(SetGpuActivityLevel(CuptiLevel::kFull, &was));
    CHECK(was == CuptiLevel::kDefault);
    CHECK(source.level() == CuptiLevel::kFull);
    CHECK(GpuActivityLevel() == CuptiLevel::kFull);
    CHECK(EnabledKinds() == LevelKinds(CuptiLevel::kFull));
    CHECK(RecordedApiCalls() == AllApiCalls());  // each id switched off is switched on again.
    REQUIRE(SetGpuActivityLevel(CuptiLevel::kDefault));
    CHECK(source.level() == CuptiLevel::kDefault);
    CHECK(EnabledKinds() == LevelKinds(CuptiLevel::kDefault));
    CHECK(RecordedApiCalls() == kDefaultApiCalls);
    // Switched while the activity is off: only the memory kinds stay on; the
    // level's kinds and calls come with the activity.
    REQUIRE(SetGpuActivityEnabled(false));
    REQUIRE(SetGpuActivityLevel(CuptiLevel::kFull));
    CHECK(EnabledKinds() == memory_kinds);
    REQUIRE(SetGpuActivityEnabled(true));
    CHECK(EnabledKinds() == LevelKinds(CuptiLevel::kFull));
    CHECK(RecordedApiCalls() == AllApiCalls());
    REQUIRE(SetGpuActivityEnabled(false));
    REQUIRE(SetGpuActivityLevel(CuptiLevel::kDefault));
    CHECK(EnabledKinds() == memory_kinds);
    REQUIRE(SetGpuActivityEnabled(true));
    CHECK(EnabledKinds() == LevelKinds(CuptiLevel::kDefault));
    CHECK(RecordedApiCalls() == kDefaultApiCalls);  // the filter again, after the kinds' enable.
    source.Stop();
    CHECK(EnabledKinds().empty());
    CHECK(!SetGpuActivityLevel(CuptiLevel::kFull));  // no producer any more.
    CHECK(GpuActivityLevel() == CuptiLevel::kDefault);
  }
  SUBCASE("started full, switched to default: the filter is there too") {
    CuptiSource source(stream, FakeOptions(CuptiLevel::kFull));
    REQUIRE(source.Start());
    CHECK(GpuActivityLevel() == CuptiLevel::kFull);
    REQUIRE(SetGpuActivityLevel(CuptiLevel::kDefault));
    CHECK(source.level() == CuptiLevel::kDefault);
    CHECK(EnabledKinds() == LevelKinds(CuptiLevel::kDefault));
    CHECK(RecordedApiCalls() == kDefaultApiCalls);
    REQUIRE(SetGpuActivityLevel(CuptiLevel::kFull));
    CHECK(EnabledKinds() == LevelKinds(CuptiLevel::kFull));
    CHECK(RecordedApiCalls() == AllApiCalls());
    source.Stop();
    CHECK(EnabledKinds().empty());
  }
}

TEST_CASE("cupti source: recording (fake libcupti): the file holds the buffers, pairs and names") {
  auto queue_launches = FakeFn<void (*)(int, uint32_t, const char*)>("fake_cupti_queue_launches");
  auto delivered_count = FakeFn<size_t (*)()>("fake_cupti_delivered_count");
  auto delivered = FakeFn<const uint8_t* (*)(size_t, size_t*)>("fake_cupti_delivered");
  FakeFn<void (*)()>("fake_cupti_reset_log")();
  const std::string path = "/tmp/liveprof_cupti_source_test_" + std::to_string(getpid()) + ".bin";
  const std::string env_path = path + ".env";
  // The option wins over LIVEPROF_CUPTI_RECORD.
  setenv("LIVEPROF_CUPTI_RECORD", env_path.c_str(), 1);

  static const char kGemm[] = "fake_gemm_kernel";
  static const char kRelu[] = "fake_relu_kernel";
  Stream stream;
  const NameId matmul = stream.names().Intern("train/MatMul");
  const NameId relu = stream.names().Intern("train/Relu");
  CuptiSource::Options options = FakeOptions(CuptiLevel::kDefault);
  options.record_path = path;
  {
    CuptiSource source(stream, options);
    REQUIRE(source.Start());
    CHECK(source.record_path() == path);
    CHECK(Contains(source.message(), " Recording to " + path + "."));
    source.PushOp(matmul);
    queue_launches(30, 77, kGemm);
    source.PopOp();
    for (int i = 0; i < 300 && delivered_count() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    source.PushOp(relu);
    source.PushOp(relu);  // (its name is kept once)
    queue_launches(5, 77, kRelu);
    source.PopOp();
    source.PopOp();
    source.Stop();
  }
  unsetenv("LIVEPROF_CUPTI_RECORD");
  CHECK(ReadFile(env_path).empty());  // never created.

  CuptiRecording rec;
  std::string error;
  REQUIRE_MESSAGE(ParseCuptiRecording(ReadFile(path), &rec, &error), error);
  std::remove(path.c_str());
  // Every buffer CUPTI delivered, byte for byte, in order.
  REQUIRE(delivered_count() == 2);
  REQUIRE(rec.buffers.size() == 2);
  for (size_t i = 0; i < rec.buffers.size(); ++i) {
    size_t size = 0;
    const uint8_t* bytes = delivered(i, &size);
    CHECK(rec.buffers[i].size == size);
    CHECK(std::string_view(reinterpret_cast<const char*>(rec.buffers[i].data()), rec.buffers[i].size) ==
          std::string_view(reinterpret_cast<const char*>(bytes), size));
  }
  // 30 x (external correlation, API, kernel) then 5 x the same.
  CHECK(rec.buffers[0].size ==
        30 * (sizeof(CUpti_ActivityExternalCorrelation) + sizeof(CUpti_ActivityAPI) + sizeof(CUpti_ActivityKernel10)));
  // The start pair and one a flush at least: CUPTI's clock (the fake's runs
  // 1000 s ahead) first, the host's second.
  REQUIRE(rec.clock_pairs.size() >= 2);
  for (const auto& [cupti, host] : rec.clock_pairs) {
    const int64_t offset = static_cast<int64_t>(cupti - host);
    CHECK(offset > 999'000'000'000);
    CHECK(offset < 1'001'000'000'000);
  }
  CHECK(rec.has_names);
  CHECK(rec.op_external_kind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);
  CHECK(rec.kernel_names == std::unordered_map<uint64_t, std::string>{{reinterpret_cast<uintptr_t>(kGemm), kGemm},
                                                                      {reinterpret_cast<uintptr_t>(kRelu), kRelu}});
  CHECK(rec.op_names == std::unordered_map<uint64_t, std::string>{{matmul, "train/MatMul"}, {relu, "train/Relu"}});

  // What the live run made of the same buffers: kernels joined to their ops.
  std::map<NameId, int> kernels_by_op;
  DrainLoop loop(stream, DrainLoop::Options{}, [&](const Batch& b) {
    for (const Event& e : b.events) {
      if (e.kind == EventKind::kKernel) ++kernels_by_op[e.payload.kernel.op];
    }
  });
  loop.Flush();
  CHECK(kernels_by_op == std::map<NameId, int>{{matmul, 30}, {relu, 5}});
}

TEST_CASE("cupti source: a recording that cannot be created leaves the run unrecorded") {
  Stream stream;
  CuptiSource::Options options = FakeOptions(CuptiLevel::kDefault);
  options.record_path = "/nonexistent-liveprof-dir/rec.bin";
  CuptiSource source(stream, options);
  REQUIRE(source.Start());
  CHECK(source.record_path().empty());
  CHECK_FALSE(Contains(source.message(), "Recording to"));
  source.Stop();
  CHECK(source.status() == CuptiSource::Status::kStopped);
}
// CUPTI gives a buffer back only once every record in it is complete (while
// the GPU runs behind, once it is full): the source declares its events
// complete up to the oldest buffer CUPTI still holds, so that the pipeline
// waits for that buffer rather than taking its events as late.
TEST_CASE("cupti source: declares its progress, held back by a buffer CUPTI still holds (fake libcupti)") {
  auto hold_buffers = FakeFn<int (*)(int)>("fake_cupti_hold_buffers");
  auto complete_held = FakeFn<int (*)()>("fake_cupti_complete_held");
  auto queue_launches = FakeFn<void (*)(int, uint32_t, const char*)>("fake_cupti_queue_launches");
  Stream stream;
  CuptiSource source(stream, FakeOptions(CuptiLevel::kDefault));
  REQUIRE(source.Start());
  std::vector<std::shared_ptr<Ring>> rings;
  stream.CopyRings(&rings);
  REQUIRE(rings.size() == 1);
  const Ring& ring = *rings[0];
  CHECK(ring.progress == RingProgress::kDeclared);
  const auto declared = [&ring] { return ring.declared_ns.load(std::memory_order_acquire); };
  // Waits (up to 10 s, for a loaded machine) until the declared progress passes t.
  const auto passes = [&declared](uint64_t t) {
    for (int i = 0; i < 1000 && declared() <= t; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return declared() > t;
  };
  const uint64_t started = declared();
  CHECK(started > 0);  // said at Start: nothing recorded ends before its kinds were on.

  // Nothing held: each flush declares its own start.
  static const char kName[] = "fake_kernel";
  queue_launches(5, 77, kName);
  const uint64_t before = HostNowNs();
  CHECK(passes(before));
  CHECK(declared() <= HostNowNs());

  // CUPTI holds a buffer (its records not all complete): the progress stays
  // just before the buffer was asked for, flush after flush, while what
  // came in other buffers is delivered.
  const uint64_t before_hold = HostNowNs();
  REQUIRE(hold_buffers(1) == 1);
  const uint64_t after_hold = HostNowNs();
  queue_launches(5, 77, kName);
  for (int i = 0; i < 1000 && stream.TotalPublished() < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(stream.TotalPublished() == 20);
  const uint64_t held = declared();
  std::this_thread::sleep_for(2 * CuptiSource::kFlushPeriod);  // more flushes: it does not move.
  CHECK(declared() == held);
  CHECK(held < after_hold);                // never past the request (less 1 ms),
  CHECK(held + 1'000'000 >= before_hold);  // which was made in the test's bracket.

  // Given back: a flush declares its start again.
  REQUIRE(complete_held() == 1);
  CHECK(passes(after_hold));
  source.Stop();
}

#endif  // LIVEPROF_FAKE_CUPTI

TEST_CASE("cupti levels: names, the environment, which API calls the default keeps") {
  CuptiLevel level = CuptiLevel::kFull;
  CHECK(ParseCuptiLevel("default", &level));
  CHECK(level == CuptiLevel::kDefault);
  CHECK(ParseCuptiLevel("full", &level));
  CHECK(level == CuptiLevel::kFull);
  CHECK_FALSE(ParseCuptiLevel("Full", &level));
  CHECK(level == CuptiLevel::kFull);
  CHECK(std::string(CuptiLevelName(CuptiLevel::kDefault)) == "default");
  CHECK(std::string(CuptiLevelName(CuptiLevel::kFull)) == "full");

  std::string note;
  CHECK(ChooseCuptiLevel(CuptiLevel::kDefault, "full", &note) == CuptiLevel::kDefault);
  CHECK(ChooseCuptiLevel(std::nullopt, "full", &note) == CuptiLevel::kFull);
  CHECK(ChooseCuptiLevel(std::nullopt, nullptr, &note) == CuptiLevel::kDefault);
  CHECK(ChooseCuptiLevel(std::nullopt, "", &note) == CuptiLevel::kDefault);
  CHECK(note.empty());
  CHECK(ChooseCuptiLevel(std::nullopt, "max", &note) == CuptiLevel::kDefault);
  CHECK(note == " LIVEPROF_CUPTI_LEVEL=max is not a level (default, full): default used.");

  // What steps.h and span_type.h read (Launch, Memcpy, Memset; the syncs of
  // the breakdown) and the memory calls are kept; Kineto's noisy ones are not.
  for (const char* kept : {"cudaLaunchKernel_v7000",
                           "cudaLaunchKernel_ptsz_v7000",
                           "cudaLaunchKernelExC_v11060",
                           "cudaGraphLaunch_v10000",
                           "cuLaunchKernel",
                           "cuLaunchKernelEx",
                           "cudaMemcpy_v3020",
                           "cudaMemcpyAsync_v3020",
                           "cuMemcpyHtoDAsync_v2",
                           "cudaMemset_v3020",
                           "cuMemsetD32Async",
                           "cudaMalloc_v3020",
                           "cudaFree_v3020",
                           "cudaMallocAsync_v11020",
                           "cudaFreeAsync_v11020",
                           "cudaHostAlloc_v3020",
                           "cudaMallocHost_v3020",
                           "cuMemAlloc_v2",
                           "cuMemFree_v2",
                           "cuMemAllocAsync",
                           "cuMemFreeAsync",
                           "cudaStreamSynchronize_v3020",
                           "cudaDeviceSynchronize_v3020",
                           "cudaEventSynchronize_v3020",
                           "cuCtxSynchronize",
                           "cuStreamSynchronize"}) {
    CAPTURE(kept);
    CHECK(DefaultLevelApi(kept));
  }
  for (const char* dropped :
       {"cudaGetDevice_v3020", "cudaSetDevice_v3020", "cudaGetLastError_v3020", "cudaEventQuery_v3020",
        "cudaEventRecord_v3020", "cudaStreamIsCapturing_v10000", "cudaFuncGetAttributes_v3020", "cuKernelGetAttribute",
        "cuDevicePrimaryCtxGetState", "cuCtxGetCurrent", "cuCtxSetCurrent", "cuEventQuery", "cuPointerGetAttribute",
        "cuGetProcAddress_v2"}) {
    CAPTURE(dropped);
    CHECK_FALSE(DefaultLevelApi(dropped));
  }
}

}  // namespace liveprof::cupti_source_test
