// CuptiSource and another CUPTI client in the same process (cupti_source.h,
// "Another CUPTI client"; docs/attach.md, "A script that profiles itself"),
// against the stand-in CUPTI (fake_cupti.cc), whose second client
// (fake_cupti_peer_*) is Kineto as torch.profiler runs it on CUDA 13.0 /
// r580: one subscriber, process-wide buffer callbacks and kinds, a forced
// flush at its stop, cuptiFinalize with TEARDOWN_CUPTI=1. Each case runs
// liveprof's tracer, hands CUPTI to the other client and takes it back, and
// checks that the other client got every record of its window (its trace
// complete), liveprof every record before and after (none lost, none
// twice), and that each handoff is said with its time.
#include <cupti_activity.h>
#include <cupti_result.h>
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aggregators/gpu_handoffs.h"
#include "producers/cupti_source.h"
#include "producers/gpu_activity.h"
#include "stream/clock.h"
#include "stream/drain_loop.h"

#ifdef LIVEPROF_FAKE_CUPTI
namespace liveprof::cupti_peer_test {
namespace {

template <typename Fn>
Fn Fake(const char* name) {
  void* fake = dlopen(LIVEPROF_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(fake != nullptr);
  void* fn = dlsym(fake, name);
  REQUIRE(fn != nullptr);
  return reinterpret_cast<Fn>(fn);
}

// The fake's controls and its other client.
struct FakeCupti {
  void (*queue_launches)(int, uint32_t,
                         const char*) = Fake<void (*)(int, uint32_t, const char*)>("fake_cupti_queue_launches");
  int (*peer_start)(int) = Fake<int (*)(int)>("fake_cupti_peer_start");
  void (*peer_stop)(int) = Fake<void (*)(int)>("fake_cupti_peer_stop");
  int (*peer_kernels)(const char*) = Fake<int (*)(const char*)>("fake_cupti_peer_kernels");
  int (*peer_api_records)() = Fake<int (*)()>("fake_cupti_peer_api_records");
  int (*peer_unknown_buffers)() = Fake<int (*)()>("fake_cupti_peer_unknown_buffers");
  int (*kind_enabled)(int) = Fake<int (*)(int)>("fake_cupti_kind_enabled");
  int (*flushes)() = Fake<int (*)()>("fake_cupti_flushes");
  int (*finalized)() = Fake<int (*)()>("fake_cupti_finalized");
  int (*subscribed)() = Fake<int (*)()>("fake_cupti_subscribed");
  void (*thread_id_types)(int) = Fake<void (*)(int)>("fake_cupti_thread_id_types");
  void (*refuse_kernels)(int) = Fake<void (*)(int)>("fake_cupti_refuse_kernels");
  size_t (*external_depth)() = Fake<size_t (*)()>("fake_cupti_external_depth");
  CUptiResult (*finalize)() = Fake<CUptiResult (*)()>("cuptiFinalize");

  std::vector<int> EnabledKinds() const {
    std::vector<int> kinds;
    for (int k = 1; k < CUPTI_ACTIVITY_KIND_COUNT; ++k) {
      if (kind_enabled(k)) kinds.push_back(k);
    }
    return kinds;
  }
};

CuptiSource::Options PeerTestOptions() {
  CuptiSource::Options options;
  options.cupti_library = LIVEPROF_FAKE_CUPTI;
  options.cuda_library = "libcuda-liveprof-missing.so.1";
  options.level = CuptiLevel::kDefault;
  return options;
}

// Kernel names, one per phase (the fake's records point at them).
constexpr char kBefore[] = "k_before";
constexpr char kPeer[] = "k_peer";
constexpr char kAfter[] = "k_after";
constexpr char kLost[] = "k_after_finalize";
constexpr uint32_t kThread = 4242;
constexpr int kBeforeCount = 50, kPeerCount = 30, kAfterCount = 40;

// What liveprof's stream carried: kernels by name, and the handoff instants
// (name, time) on the "GPU tracer (liveprof)" track.
struct Carried {
  std::map<std::string, int> kernels;
  std::vector<std::pair<std::string, uint64_t>> instants;
};
Carried Drain(Stream& stream) {
  Carried c;
  DrainLoop loop(stream, DrainLoop::Options{}, [&](const Batch& b) {
    for (const Event& e : b.events) {
      if (e.kind == EventKind::kKernel) ++c.kernels[std::string(stream.names().Get(e.name))];
      if (e.kind == EventKind::kInstant) {
        CHECK(stream.names().Get(stream.track(e.track).name) == "GPU tracer (liveprof)");
        c.instants.emplace_back(std::string(stream.names().Get(e.name)), e.ts);
      }
    }
  });
  loop.Flush();
  return c;
}

// Waits (bounded) until the source's handoffs number `n`.
std::vector<CuptiSource::Handoff> WaitForHandoffs(const CuptiSource& source, size_t n) {
  for (int i = 0; i < 500 && source.handoffs().size() < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return source.handoffs();
}

using Kind = CuptiSource::Handoff::Kind;

}  // namespace

TEST_CASE("cupti peer (fake libcupti): torch.profiler's window is its own, liveprof keeps the rest") {
  FakeCupti fake;
  const std::vector<int> peer_kinds = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  Stream stream;
  const int subscribed = fake.subscribed();
  CuptiSource source(stream, PeerTestOptions());
  REQUIRE(source.Start());
  const std::vector<int> our_kinds = fake.EnabledKinds();
  REQUIRE(our_kinds.size() == 11);
  CHECK(fake.subscribed() == subscribed);  // liveprof never subscribes.
  const NameId matmul = stream.names().Intern("train/MatMul");
  fake.queue_launches(kBeforeCount, kThread, kBefore);
  source.PushOp(matmul);  // an op open across the handoff
  REQUIRE(fake.external_depth() == 1);

  const uint64_t t0 = HostNowNs();
  REQUIRE(source.Yield("torch.profiler"));
  const uint64_t t1 = HostNowNs();
  CHECK(source.aside());
  CHECK_FALSE(source.Yield("torch.profiler"));  // (once)
  CHECK(fake.EnabledKinds().empty());           // its kinds off, every one.
  const int flushes_aside = fake.flushes();
  // Its start: Kineto's libkineto_init subscribes (refused, it would trace
  // the CPU only, for good), registers its callbacks, enables its kinds.
  CHECK(fake.peer_start(/*subscribe=*/1) == CUPTI_SUCCESS);
  CHECK(fake.EnabledKinds() == peer_kinds);
  source.PushOp(matmul);  // aside: not pushed (its records would be the other's)...
  CHECK(fake.external_depth() == 1);
  fake.queue_launches(kPeerCount, kThread, kPeer);
  source.PopOp();  // ...and its pop skipped.
  CHECK(fake.external_depth() == 1);
  // Capture on demand while aside: taken, applied at the regain.
  REQUIRE(SetGpuActivityEnabled(false));
  CHECK(fake.EnabledKinds() == peer_kinds);
  // The flush thread wakes while aside (its progress moves) and calls no CUPTI.
  std::vector<std::shared_ptr<Ring>> rings;
  stream.CopyRings(&rings);
  std::shared_ptr<Ring> cupti;
  for (const auto& r : rings) {
    if (r->name == "cupti") cupti = r;
  }
  REQUIRE(cupti != nullptr);
  for (int i = 0; i < 300 && cupti->declared_ns.load() <= t1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(cupti->declared_ns.load() > t1);
  CHECK(fake.flushes() == flushes_aside);
  fake.peer_stop(/*finalize=*/0);

  const uint64_t t2 = HostNowNs();
  std::string why;
  REQUIRE(source.Regain(&why));
  const uint64_t t3 = HostNowNs();
  CHECK(why.empty());
  CHECK_FALSE(source.aside());
  CHECK(source.Regain());  // (nothing to take back)
  // Activity off while aside: only the memory kinds came back; on again: all.
  CHECK(fake.EnabledKinds() == std::vector<int>{CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL});
  REQUIRE(SetGpuActivityEnabled(true));
  CHECK(fake.EnabledKinds() == our_kinds);
  source.PopOp();  // the op pushed before the handoff
  CHECK(fake.external_depth() == 0);
  fake.queue_launches(kAfterCount, kThread, kAfter);
  source.Stop();

  // Its trace complete: every record of its window, and nothing else.
  CHECK(fake.peer_kernels(kPeer) == kPeerCount);
  CHECK(fake.peer_api_records() == kPeerCount);
  CHECK(fake.peer_kernels(kBefore) == 0);
  CHECK(fake.peer_kernels(kAfter) == 0);
  CHECK(fake.peer_unknown_buffers() == 0);  // no buffer of liveprof's reached it.
  // Liveprof's: every record before and after, none of the window.
  const Carried c = Drain(stream);
  CHECK(c.kernels == std::map<std::string, int>{{kBefore, kBeforeCount}, {kAfter, kAfterCount}});
  CHECK(source.dropped() == 0);
  // The handoffs, with their times.
  const std::vector<CuptiSource::Handoff> h = source.handoffs();
  REQUIRE(h.size() == 2);
  CHECK(h[0].kind == Kind::kYielded);
  CHECK(h[0].what == "torch.profiler");
  CHECK((h[0].host_ns >= t0 && h[0].host_ns <= t1));
  CHECK(h[1].kind == Kind::kRegained);
  CHECK((h[1].host_ns >= t2 && h[1].host_ns <= t3));
  REQUIRE(c.instants.size() == 2);
  CHECK(c.instants[0] == std::pair<std::string, uint64_t>{"GPU data: to torch.profiler", h[0].host_ns});
  CHECK(c.instants[1] == std::pair<std::string, uint64_t>{"GPU data: back to liveprof", h[1].host_ns});
}

TEST_CASE("cupti peer (fake libcupti): a cuptiFinalize by the other client, at its stop or later") {
  FakeCupti fake;
  // The finalize is seen by CUPTI's thread id type: the fake answers for it
  // in this case only.
  struct ThreadIdTypes {
    explicit ThreadIdTypes(const FakeCupti& f) : fake(f) { fake.thread_id_types(1); }
    ~ThreadIdTypes() { fake.thread_id_types(0); }
    const FakeCupti& fake;
  } thread_id_types(fake);
  Stream stream;
  CuptiSource source(stream, PeerTestOptions());
  REQUIRE(source.Start());
  const std::vector<int> our_kinds = fake.EnabledKinds();
  const int finalized = fake.finalized();
  fake.queue_launches(kBeforeCount, kThread, kBefore);

  SUBCASE("at its stop (TEARDOWN_CUPTI=1, the teardown before the regain)") {
    REQUIRE(source.Yield("torch.profiler"));
    CHECK(fake.peer_start(/*subscribe=*/1) == CUPTI_SUCCESS);
    fake.queue_launches(kPeerCount, kThread, kPeer);
    fake.peer_stop(/*finalize=*/1);
    CHECK(fake.finalized() == finalized + 1);
    CHECK(fake.EnabledKinds().empty());  // CUPTI forgot every kind, and every callback.
    REQUIRE(source.Regain());
    CHECK(fake.EnabledKinds() == our_kinds);
    fake.queue_launches(kAfterCount, kThread, kAfter);
    source.Stop();
    CHECK(fake.peer_kernels(kPeer) == kPeerCount);
    CHECK(fake.peer_unknown_buffers() == 0);
    const std::vector<CuptiSource::Handoff> h = source.handoffs();
    REQUIRE(h.size() == 2);
    CHECK(h[0].kind == Kind::kYielded);
    CHECK(h[1].kind == Kind::kRegained);
    const Carried c = Drain(stream);
    CHECK(c.kernels == std::map<std::string, int>{{kBefore, kBeforeCount}, {kAfter, kAfterCount}});
  }
  SUBCASE("after the regain (Kineto's teardown thread, at the next CUDA call)") {
    REQUIRE(source.Yield("torch.profiler"));
    CHECK(fake.peer_start(/*subscribe=*/1) == CUPTI_SUCCESS);
    fake.queue_launches(kPeerCount, kThread, kPeer);
    fake.peer_stop(/*finalize=*/0);
    REQUIRE(source.Regain());
    const uint64_t t0 = HostNowNs();
    REQUIRE(fake.finalize() == CUPTI_SUCCESS);
    // Until the flush thread sees it, CUPTI records nothing: these are lost.
    fake.queue_launches(10, kThread, kLost);
    const std::vector<CuptiSource::Handoff> h = WaitForHandoffs(source, 4);
    const uint64_t t1 = HostNowNs();
    REQUIRE(h.size() == 4);
    CHECK(h[2].kind == Kind::kFinalized);
    CHECK(h[3].kind == Kind::kRegained);
    CHECK((h[2].host_ns >= t0 && h[2].host_ns <= h[3].host_ns && h[3].host_ns <= t1));
    CHECK(fake.EnabledKinds() == our_kinds);
    fake.queue_launches(kAfterCount, kThread, kAfter);
    source.Stop();
    CHECK(fake.peer_kernels(kPeer) == kPeerCount);
    const Carried c = Drain(stream);
    CHECK(c.kernels == std::map<std::string, int>{{kBefore, kBeforeCount}, {kAfter, kAfterCount}});
    REQUIRE(c.instants.size() == 4);
    CHECK(c.instants[2].first == "GPU data: lost to a cuptiFinalize by another client");
    CHECK(c.instants[3].first == "GPU data: back to liveprof");
  }
}

TEST_CASE("cupti peer (fake libcupti): a tracer started during the other's window starts aside") {
  FakeCupti fake;
  Stream stream;
  CHECK(fake.peer_start(/*subscribe=*/1) == CUPTI_SUCCESS);
  const std::vector<int> peer_kinds = fake.EnabledKinds();
  CuptiSource::Options options = PeerTestOptions();
  options.start_aside_for = "torch.profiler";
  CuptiSource source(stream, options);
  REQUIRE(source.Start());  // (inside the other's first CUDA call: CUDA's injection)
  CHECK(source.aside());
  CHECK(fake.EnabledKinds() == peer_kinds);  // nothing taken from it.
  CHECK(source.message().ends_with(" Aside while torch.profiler traces (it started first): tracing from its end."));
  fake.queue_launches(kPeerCount, kThread, kPeer);
  fake.peer_stop(/*finalize=*/0);
  REQUIRE(source.Regain());
  CHECK(fake.EnabledKinds().size() == 11);
  fake.queue_launches(kAfterCount, kThread, kAfter);
  source.Stop();
  CHECK(fake.peer_kernels(kPeer) == kPeerCount);
  CHECK(fake.peer_unknown_buffers() == 0);
  const Carried c = Drain(stream);
  CHECK(c.kernels == std::map<std::string, int>{{kAfter, kAfterCount}});
  REQUIRE(c.instants.size() == 2);
  CHECK(c.instants[0].first == "GPU data: to torch.profiler");
  CHECK(c.instants[1].first == "GPU data: back to liveprof");
}

TEST_CASE("cupti peer (fake libcupti): a refused regain is said once, then tried again until it works") {
  FakeCupti fake;
  Stream stream;
  CuptiSource source(stream, PeerTestOptions());
  REQUIRE(source.Start());
  REQUIRE(source.Yield("torch.profiler"));
  CHECK(fake.peer_start(/*subscribe=*/0) == CUPTI_SUCCESS);
  fake.peer_stop(/*finalize=*/0);
  fake.refuse_kernels(1);
  struct Refusal {  // (never left on for the other cases)
    ~Refusal() { fake.refuse_kernels(0); }
    const FakeCupti& fake;
  } refusal{fake};
  std::string why;
  CHECK_FALSE(source.Regain(&why));
  CHECK(why == "CONCURRENT_KERNEL: FAKE_CUPTI_ERROR (" + std::to_string(CUPTI_ERROR_NOT_READY) + ")");
  CHECK(source.aside());
  CHECK(fake.EnabledKinds().empty());  // none left on half-way.
  CHECK_FALSE(source.Regain());        // (said once)
  SUBCASE("the flush thread tries again until CUPTI takes it") {
    fake.refuse_kernels(0);
    const std::vector<CuptiSource::Handoff> h = WaitForHandoffs(source, 3);
    REQUIRE(h.size() == 3);
    CHECK(h[1].kind == Kind::kNotRegained);
    CHECK(h[1].what == why);
    CHECK(h[2].kind == Kind::kRegained);
  }
  SUBCASE("another window stops the retries, and its end regains") {
    REQUIRE(source.Yield("torch.profiler"));  // (aside for a refusal only: this window is its own)
    CHECK_FALSE(source.Yield("torch.profiler"));
    fake.refuse_kernels(0);
    REQUIRE(source.Regain());
    const std::vector<CuptiSource::Handoff> h = source.handoffs();
    REQUIRE(h.size() == 4);
    CHECK(h[1].kind == Kind::kNotRegained);
    CHECK(h[2].kind == Kind::kYielded);
    CHECK(h[3].kind == Kind::kRegained);
  }
  CHECK_FALSE(source.aside());
  CHECK(fake.EnabledKinds().size() == 11);
  fake.queue_launches(kAfterCount, kThread, kAfter);
  source.Stop();
  const Carried c = Drain(stream);
  CHECK(c.kernels == std::map<std::string, int>{{kAfter, kAfterCount}});
  REQUIRE(c.instants.size() >= 3);
  CHECK(c.instants[1].first == "GPU data: not regained: " + why);
  CHECK(c.instants.back().first == "GPU data: back to liveprof");
}

// The server's reading of the same instants (aggregators/gpu_handoffs.h)
// uses the names the source writes.
TEST_CASE("cupti peer: the handoff instants' names are the ones the server reads") {
  CHECK(kGpuDataTo == GpuHandoffs::kTo);
  CHECK(kGpuDataBack == GpuHandoffs::kBack);
  CHECK(kGpuDataNotRegained == GpuHandoffs::kNotRegained);
  CHECK(kGpuDataFinalized == GpuHandoffs::kFinalized);
}

}  // namespace liveprof::cupti_peer_test
#endif  // LIVEPROF_FAKE_CUPTI
