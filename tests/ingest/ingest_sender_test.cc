// The host API sending to a server (ingest_sender.h) over a real unix
// socket, into an IngestServer in this process: every event arrives once, on
// rows named for the sender, across a server restart; capture controls turn
// the host level, the Python scopes and a CuptiSource's GPU activity and
// level (on a stand-in libcupti) and come back by themselves.
#include "ingest/global_sender.h"

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ingest/ingest_test_client.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/self_cost.h"
#include "ingest/ingest_server.h"
#include "producers/gpu_activity.h"
#include "producers/host_api.h"
#include "producers/stderr_capture.h"
#include "stream/clock.h"
#include "stream/stream.h"
#ifdef LIVEPROF_FAKE_CUPTI
#include <cupti_activity.h>

#include "producers/cupti_source.h"
#endif

namespace liveprof::ingest_sender_test {
namespace {

using test::WaitFor;

// Moves every event the server's pipeline was handed into `out`.
void Drain(ingest_test::TestPipeline& pipeline, std::vector<Event>* out) {
  const std::vector<Event> more = pipeline.Take();
  out->insert(out->end(), more.begin(), more.end());
}

// Step numbers of the markers named `name` among `events`, with how often each came.
std::map<int64_t, int> Steps(const Stream& stream, const std::vector<Event>& events, std::string_view name) {
  std::map<int64_t, int> steps;
  for (const Event& e : events) {
    if (e.kind == EventKind::kStepMarker && stream.names().Get(e.name) == name) ++steps[e.payload.step.step_num];
  }
  return steps;
}

void RecordSteps(int64_t first, int64_t count, NameId step_name, NameId work) {
  for (int64_t i = first; i < first + count; ++i) {
    StepBegin(i, step_name);
    BeginSpan(work);
    EndSpan();
    StepEnd(i);
  }
}

// Options of a server on a unix socket at `path`, pinging every 50 ms.
IngestServer::Options UnixServer(const std::string& path) {
  IngestServer::Options o;
  IngestEndpoint e;
  std::string error;
  REQUIRE_MESSAGE(ParseIngestEndpoint("unix:" + path, &e, &error), error);
  o.endpoints = {e};
  o.ping_interval_ns = 50'000'000;
  return o;
}

TEST_CASE("ingest sender: the host API's events reach the server once each, across a server restart") {
  const std::string path = "/tmp/liveprof-sender-test-" + std::to_string(::getpid()) + ".sock";
  Stream server_stream;
  IngestServer server(server_stream, UnixServer(path));
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  ingest_test::TestPipeline pipeline(server_stream);

  SenderOptions so;
  so.address = "unix:" + path;
  so.program = "sender-test";
  so.rank = 7;
  so.reconnect_period_ns = 50'000'000;
  REQUIRE_MESSAGE(ConnectGlobalStream(so, &error), error);
  CHECK(!ConnectGlobalStream(so, &error));  // one sender a process.
  CHECK(error.find("already sends to a server (unix:" + path + ")") != std::string::npos);

  const NameId step_name = InternName("sender-test step");
  const NameId work = InternName("sender-test work");
  RecordSteps(0, 100, step_name, work);
  std::vector<Event> got;
  REQUIRE(WaitFor([&] {
    Drain(pipeline, &got);
    return Steps(server_stream, got, "sender-test step").size() == 100;
  }));
  std::vector<IngestServer::SourceStatus> sources = server.Sources();
  REQUIRE(sources.size() == 1);
  CHECK(sources[0].label == "rank 7");
  CHECK(sources[0].program == "sender-test");
  CHECK(sources[0].pid == static_cast<uint64_t>(::getpid()));
  CHECK(sources[0].worker == 1);
  CHECK(sources[0].lost_batches == 0);
  REQUIRE(WaitFor([&] { return server.Sources()[0].best_rtt_ns != 0; }));
  // Same host, same clock: the measured offset is about 0.
  CHECK(std::abs(server.Sources()[0].clock_offset_ns) < 50'000'000);

  // The sender says how far its events are complete (IngestBatch.progress_ns),
  // declared on its ring: past the last step, and moving on while the program
  // records nothing (a batch of progress alone now and then), never ahead of now.
  std::shared_ptr<Ring> source_ring;
  {
    std::vector<std::shared_ptr<Ring>> rings;
    server_stream.CopyRings(&rings);
    for (const auto& r : rings) source_ring = r->name == "ingest rank 7" ? r : source_ring;
  }
  REQUIRE(source_ring != nullptr);
  uint64_t last_end = 0;
  for (const Event& ev : got) last_end = std::max(last_end, ev.end());
  REQUIRE(WaitFor([&] { return source_ring->declared_ns.load() > last_end; }));
  const uint64_t idle_from = source_ring->declared_ns.load();
  REQUIRE(WaitFor([&] { return source_ring->declared_ns.load() > idle_from + 150'000'000; }));
  CHECK(source_ring->declared_ns.load() <= HostNowNs());

  // The rows: the sender's thread, named for it, of worker 1; a process row names the worker.
  const Event* marker = nullptr;
  for (const Event& ev : got) {
    if (ev.kind == EventKind::kStepMarker && server_stream.names().Get(ev.name) == "sender-test step") marker = &ev;
  }
  REQUIRE(marker != nullptr);
  const TrackId marker_track = marker->track;
  const TrackInfo row = server_stream.track(marker_track);
  CHECK(row.process == 1);
  CHECK(std::string(server_stream.names().Get(row.name)).starts_with("rank 7 · "));
  bool process_row = false;
  for (TrackId t = 1; t < server_stream.track_count(); ++t) {
    const TrackInfo info = server_stream.track(t);
    if (info.type == TrackType::kProcess && info.process == 1 && server_stream.names().Get(info.name) == "rank 7") {
      process_row = true;
    }
  }
  CHECK(process_row);

  // The server goes away; the program records on (never blocked); the server
  // comes back at the same path and gets what it missed, once.
  server.Stop();
  REQUIRE(WaitFor([] { return !GlobalSenderStatus().connected; }));
  RecordSteps(100, 100, step_name, work);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE_MESSAGE(server.Start(&error), error);
  REQUIRE(WaitFor([&] {
    Drain(pipeline, &got);
    return Steps(server_stream, got, "sender-test step").size() == 200;
  }));
  RecordSteps(200, 10, step_name, work);
  REQUIRE(WaitFor([&] {
    Drain(pipeline, &got);
    return Steps(server_stream, got, "sender-test step").size() == 210;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Drain(pipeline, &got);
  for (const auto& entry : Steps(server_stream, got, "sender-test step")) {
    const auto& step = entry.first;
    const auto& n = entry.second;
    INFO("step " << step);
    CHECK(n == 1);
  }
  sources = server.Sources();
  REQUIRE(sources.size() == 2);
  CHECK(sources[1].worker == 1);  // the same worker,
  const SenderStatus status = GlobalSenderStatus();
  CHECK_MESSAGE(status.connects == 2,
                status.last_error << " / " << sources[0].closed_reason << " / " << sources[1].closed_reason);
  CHECK(status.batches_dropped == 0);
  // and its rows again: the reconnected sender's markers are on the first row.
  for (const Event& ev : got) {
    if (ev.kind == EventKind::kStepMarker && server_stream.names().Get(ev.name) == "sender-test step") {
      CHECK(ev.track == marker_track);
      if (ev.track != marker_track) break;
    }
  }

  // Capture on demand: the critical level and no Python scopes for 300 ms,
  // then back to what it was.
  REQUIRE(HostTraceLevel() == kHostLevelDetailed);
  REQUIRE(PythonScopesEnabled());
  CHECK(!server.Capture(999, {}, &error));
  CHECK(error == "source 999 is unknown");
  CHECK(!server.Capture(sources[1].id, {.host_level = 4}, &error));
  CHECK(error == "host_level 4: 1 (critical), 2 (detailed) or 3 (verbose)");
  REQUIRE_MESSAGE(server.Capture(sources[1].id,
                                 {.host_level = 1, .python_scopes = 0, .gpu = -1, .duration_ns = 300'000'000}, &error),
                  error);
  REQUIRE(WaitFor([&] {
    const auto s = server.Sources();
    return s.size() == 2 && s[1].capture.known && s[1].capture.host_level == 1 && s[1].capture.until_ns != 0;
  }));
  CHECK(HostTraceLevel() == kHostLevelCritical);
  CHECK(!PythonScopesEnabled());
  CHECK(server.Sources()[1].capture.control_id == 1);
  CHECK(!server.Sources()[1].capture.python_scopes);
  REQUIRE(WaitFor([&] {
    const auto s = server.Sources()[1].capture;
    return s.host_level == 2 && s.control_id == 0 && s.until_ns == 0;
  }));
  CHECK(HostTraceLevel() == kHostLevelDetailed);
  CHECK(PythonScopesEnabled());
  CHECK(server.Sources()[1].capture.python_scopes);

  DisconnectGlobalStream();
  CHECK(!GlobalSenderStatus().running);
  REQUIRE(WaitFor([&] { return !server.Sources()[1].connected; }));
  server.Stop();
}

// What the real GPU's sender met: a producer wrote events on track
// 0, which no stream defines. The server refuses them alone and takes the
// rest; the sender is told in the acks, says so once, and goes on on the same
// connection (nothing sent again, no reconnect).
TEST_CASE("ingest sender: events the server refuses are said once, acknowledged, never sent again") {
  const std::string path = "/tmp/liveprof-sender-refused-" + std::to_string(::getpid()) + ".sock";
  Stream server_stream;
  IngestServer server(server_stream, UnixServer(path));
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  ingest_test::TestPipeline pipeline(server_stream);  // (acks come once the pipeline has the events)
  StderrCapture console;
  SenderOptions so;
  so.address = "unix:" + path;
  so.rank = 8;
  so.reconnect_period_ns = 50'000'000;
  REQUIRE_MESSAGE(ConnectGlobalStream(so, &error), error);

  // A producer with that bug: one event of each hundred on track 0.
  Stream& stream = GlobalStream();
  const std::shared_ptr<Ring> ring = stream.AddRing({.name = "refused-test"});
  REQUIRE(ring != nullptr);
  const TrackId row = stream.AddTrack({InternName("refused-test row"), TrackType::kHostThread, 1, 0, 0});
  const NameId name = InternName("refused-test span");
  auto source = [&] {
    for (const IngestServer::SourceStatus& s : server.Sources()) {
      if (s.label == "rank 8") return s;
    }
    return IngestServer::SourceStatus{};
  };
  constexpr uint64_t kRounds = 3;
  for (uint64_t round = 1; round <= kRounds; ++round) {
    const uint64_t now = HostNowNs();
    for (uint32_t i = 0; i < 100; ++i) {
      Event e;
      e.ts = now + i * 1'000;
      e.dur = 500;
      e.name = name;
      e.track = i == 42 ? 0 : row;
      e.kind = EventKind::kHostSpan;
      REQUIRE(ring->queue->TryPush(e));
    }
    REQUIRE(WaitFor([&] { return source().events >= 99 * round && source().refused_events == round; }));
  }
  ring->closed.store(true);
  const IngestServer::SourceStatus s = source();
  CHECK(s.connected);
  CHECK(s.refused_events == kRounds);
  REQUIRE(s.refused.size() == 1);
  CHECK(s.refused[0].reason == "undefined_track");
  CHECK(s.refused[0].example.ends_with("track 0 was never defined"));
  REQUIRE(WaitFor([] { return GlobalSenderStatus().events_refused == kRounds; }));
  const SenderStatus status = GlobalSenderStatus();
  CHECK_MESSAGE(status.connects == 1, status.last_error);  // never reconnected,
  CHECK(status.batches_resent == 0);                       // nor sent anything again.
  CHECK(status.batches_dropped == 0);
  CHECK(console.Count("liveprof: the server refused ") == 1);  // once, with the reason:
  CHECK(console.Count("liveprof: the server refused 1 event of batch") == 1);
  CHECK(console.Count(" (undefined_track: event ") == 1);
  CHECK(console.Count(": track 0 was never defined); further refusals are counted in /api/status\n") == 1);
  CHECK(console.Count("sent an event the server refused (undefined_track)") == 1);  // the server, once too.
  DisconnectGlobalStream();
  console.Restore();
  server.Stop();
}

// liveprof's own cost in the sending process (IngestBatch.cost): the
// sender thread, named "liveprof send", reads /proc/self once a second and
// its batches carry it, with the hooks' counters; the server keeps the two
// newest samples; the last, at the stop, has every step.
TEST_CASE("ingest sender: the batches carry liveprof's own cost in this process, the sender's CPU, the hooks' time") {
  const std::string path = "/tmp/liveprof-sender-cost-" + std::to_string(::getpid()) + ".sock";
  Stream server_stream;
  IngestServer server(server_stream, UnixServer(path));
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  ingest_test::TestPipeline pipeline(server_stream);
  SenderOptions so;
  so.address = "unix:" + path;
  so.rank = 9;
  REQUIRE_MESSAGE(ConnectGlobalStream(so, &error), error);
  auto source = [&] {
    for (const IngestServer::SourceStatus& s : server.Sources()) {
      if (s.label == "rank 9" && s.connected) return s;
    }
    return IngestServer::SourceStatus{};
  };
  auto sender_cpu = [](const SelfCostSample& c) -> const ThreadCpu* {
    for (const ThreadCpu& t : c.threads) {
      if (t.name == "liveprof send") return &t;
    }
    return nullptr;
  };
  // The sender works (drains, batches, sends) until its CPU shows: at least
  // one clock tick, in a sample the server has with one before it.
  const NameId step_name = InternName("cost-test step");
  const NameId work = InternName("cost-test work");
  // A hook's body measured (as the C ABI's liveprof_hook_end does): 2 ms of
  // ticks, sent in ns with the steps this process marks.
  const HookTotals before = ReadHookTotals();
  const uint64_t hook_tsc = TscRead();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  AddHookTime(TscRead() - hook_tsc);
  // CUPTI's own time, as the CUPTI source adds it after a buffer: sent as is.
  AddCuptiOverhead(1'234'567);
  int64_t step = 0;
  REQUIRE(WaitFor(
      [&] {
        RecordSteps(step, 2000, step_name, work);
        step += 2000;
        pipeline.Take();
        const IngestServer::SourceStatus s = source();
        const ThreadCpu* t = sender_cpu(s.cost.now);
        return s.cost.prev.at_ns != 0 && t != nullptr && t->cpu_ns > 0;
      },
      std::chrono::milliseconds(30'000)));
  const IngestServer::SourceStatus s = source();
  // The sender's thread of this process, by its tid and name, as /proc says.
  const SelfCostSample here = ReadSelfCost(HostNowNs(), "liveprof send");
  REQUIRE(here.threads.size() == 1);
  const ThreadCpu* sent = sender_cpu(s.cost.now);
  REQUIRE(sent != nullptr);
  CHECK(sent->tid == here.threads[0].tid);
  CHECK(sent->cpu_ns <= here.threads[0].cpu_ns);
  // Only liveprof's threads (here the server's too: this process holds both).
  for (const ThreadCpu& t : s.cost.now.threads) CHECK(t.name.starts_with("liveprof"));
  // Samples about a second apart (at most once a second), on the sender's clock.
  CHECK(s.cost.now.at_ns - s.cost.prev.at_ns >= 1'000'000'000);
  CHECK(s.cost.now.at_ns <= HostNowNs());
  // The process's resident set, about what this process reads now.
  CHECK(s.cost.now.rss_bytes > uint64_t{1} << 20);
  CHECK(s.cost.now.rss_bytes < here.rss_bytes * 2);
  CHECK(here.rss_bytes < s.cost.now.rss_bytes * 2);
  const SelfCostInterval in = CompareSelfCost(s.cost.prev, s.cost.now);
  CHECK(in.interval_s >= 1.0);
  CHECK(in.cpu_pct >= 0);
  // The hooks' counters: the one body measured, and the steps marked before the reading.
  CHECK(s.cost.now.hook_calls == before.calls + 1);
  CHECK(s.cost.now.hook_ns - before.ns >= 1'900'000);  // (the ticks' rate, measured: within 5 %)
  CHECK(s.cost.now.hook_ns - before.ns < 200'000'000);
  CHECK(s.cost.now.cupti_overhead_ns - before.cupti_overhead_ns == 1'234'567);
  CHECK(s.cost.now.steps > before.steps);
  CHECK(s.cost.now.steps - before.steps <= static_cast<uint64_t>(step));
  CHECK(ReadHookTotals().steps - before.steps == static_cast<uint64_t>(step));
  // At the stop the sender reads them once more: the server has every step.
  RecordSteps(step, 7, step_name, work);
  step += 7;
  DisconnectGlobalStream();
  uint64_t last_steps = 0;
  CHECK(WaitFor([&] {
    for (const IngestServer::SourceStatus& o : server.Sources()) {
      if (o.label == "rank 9") last_steps = o.cost.now.steps - before.steps;
    }
    return last_steps == static_cast<uint64_t>(step);
  }));
  CHECK(last_steps == static_cast<uint64_t>(step));
  server.Stop();
}

TEST_CASE("ingest sender: a bad address is refused with what was wrong") {
  std::string error;
  SenderOptions so;
  so.address = "udp:1";
  CHECK(!ConnectGlobalStream(so, &error));
  CHECK(error == "connecting to a liveprof server: --ingest udp:1: unix:PATH or tcp:127.0.0.1:PORT");
  so.address = "tcp:127.0.0.1:0";
  CHECK(!ConnectGlobalStream(so, &error));
  CHECK(error == "liveprof.connect(tcp:127.0.0.1:0): a TCP address needs the server's port");
  CHECK(!GlobalSenderStatus().running);
}

#ifdef LIVEPROF_FAKE_CUPTI
// A server in this process on a unix socket named for `test`, GlobalStream()
// sending to it as `rank` (its source introduced), and a CuptiSource on the
// stand-in libcupti (not started) at `level`. The test disconnects and stops.
struct GpuCaptureSetup {
  GpuCaptureSetup(const std::string& test, int32_t rank, CuptiLevel level)
      : path("/tmp/liveprof-sender-" + test + "-" + std::to_string(::getpid()) + ".sock"),
        server(server_stream, UnixServer(path)),
        cupti(GlobalStream(), CuptiOptions(level)) {
    REQUIRE_MESSAGE(server.Start(&error), error);
    so.address = "unix:" + path;
    so.rank = rank;
    REQUIRE_MESSAGE(ConnectGlobalStream(so, &error), error);
    REQUIRE(WaitFor([&] { return server.Sources().size() == 1 && capture().known; }));
    id = server.Sources()[0].id;
  }
  static CuptiSource::Options CuptiOptions(CuptiLevel level) {
    CuptiSource::Options co;
    co.cupti_library = LIVEPROF_FAKE_CUPTI;
    co.cuda_library = "libcuda-liveprof-missing.so.1";
    co.level = level;
    return co;
  }
  IngestServer::CaptureState capture() const { return server.Sources().at(0).capture; }
  template <typename Fn>
  Fn Fake(const char* name) {
    void* fake = dlopen(LIVEPROF_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(fake != nullptr);
    void* fn = dlsym(fake, name);
    REQUIRE(fn != nullptr);
    return reinterpret_cast<Fn>(fn);
  }

  std::string path;
  Stream server_stream;
  IngestServer server;
  ingest_test::TestPipeline pipeline{server_stream};
  CuptiSource cupti;
  SenderOptions so;
  std::string error;
  uint64_t id = 0;
};

// Capture on demand of GPU activity: a CuptiSource (on the stand-in
// libcupti, tests/producers/fake_cupti.cc, which records only enabled kinds
// as CUPTI does) in a sending process is turned off and back on by the
// server's controls; the server hears of it starting and stopping.
TEST_CASE("ingest sender: capture turns a CuptiSource's GPU activity off for a while, memory kinds kept") {
  // Its CuptiSource at full: every kind, 12 on the stand-in (cupti_levels.h).
  GpuCaptureSetup setup("gpu-test", 3, CuptiLevel::kFull);
  auto queue_launches = setup.Fake<void (*)(int, uint32_t, const char*)>("fake_cupti_queue_launches");
  auto enabled_kinds = setup.Fake<int (*)()>("fake_cupti_enabled_kinds");
  auto kind_enabled = setup.Fake<int (*)(int)>("fake_cupti_kind_enabled");
  IngestServer& server = setup.server;
  Stream& server_stream = setup.server_stream;
  ingest_test::TestPipeline& pipeline = setup.pipeline;
  CuptiSource& cupti = setup.cupti;
  std::string& error = setup.error;
  auto capture = [&] { return setup.capture(); };
  const uint64_t id = setup.id;

  // No GPU producer yet: said, and a gpu request is refused with why.
  CHECK(!GpuActivityAvailable());
  CHECK(!capture().gpu_available);
  CHECK(!server.Capture(id, {.gpu = 0}, &error));
  CHECK(error == "source " + std::to_string(id) +
                     " (rank 3) has no GPU producer to turn off (gpu_available false: no CuptiSource runs in it)");

  // A CuptiSource starts in the sending process: the server is told.
  REQUIRE_MESSAGE(cupti.Start(), cupti.message());
  REQUIRE(WaitFor([&] { return capture().gpu_available && capture().gpu; }));
  CHECK(enabled_kinds() == 12);

  static const char kKernel[] = "sender_gpu_test_kernel";
  std::vector<Event> got;
  auto kernels = [&] {
    Drain(pipeline, &got);
    size_t n = 0;
    for (const Event& ev : got) n += ev.kind == EventKind::kKernel && server_stream.names().Get(ev.name) == kKernel;
    return n;
  };
  queue_launches(10, 4242, kKernel);
  REQUIRE(WaitFor([&] { return kernels() == 10; }));

  // Off until the next control: every kind but the memory ones is disabled
  // in CUPTI, so launches meanwhile are not recorded; then on again.
  REQUIRE_MESSAGE(server.Capture(id, {.gpu = 0}, &error), error);
  REQUIRE(WaitFor([&] { return !capture().gpu; }));
  CHECK(capture().gpu_available);
  CHECK(capture().host_level == HostTraceLevel());  // untouched.
  CHECK(capture().until_ns == 0);
  CHECK(!GpuActivityEnabled());
  CHECK(enabled_kinds() == 2);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2) == 1);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY_POOL) == 1);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 0);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME) == 0);
  queue_launches(20, 4242, kKernel);  // while off: nothing recorded.
  REQUIRE_MESSAGE(server.Capture(id, {.gpu = 1}, &error), error);
  REQUIRE(WaitFor([&] { return capture().gpu; }));
  CHECK(GpuActivityEnabled());
  CHECK(enabled_kinds() == 12);
  queue_launches(30, 4242, kKernel);
  REQUIRE(WaitFor([&] { return kernels() == 40; }));

  // Off for a second, then back on by itself (nothing asserted inside the
  // second but the state it shows).
  REQUIRE_MESSAGE(server.Capture(id, {.gpu = 0, .duration_ns = 1'000'000'000}, &error), error);
  REQUIRE(WaitFor([&] { return !capture().gpu && capture().until_ns != 0; }));
  REQUIRE(WaitFor([&] { return capture().gpu && capture().control_id == 0 && capture().until_ns == 0; }));
  CHECK(GpuActivityEnabled());
  CHECK(enabled_kinds() == 12);

  // A timed control still running when the sender stops: turned back.
  REQUIRE_MESSAGE(server.Capture(id, {.gpu = 0, .duration_ns = 60'000'000'000}, &error), error);
  REQUIRE(WaitFor([&] { return !capture().gpu; }));
  DisconnectGlobalStream();
  CHECK(GpuActivityEnabled());
  CHECK(enabled_kinds() == 12);
  REQUIRE_MESSAGE(ConnectGlobalStream(setup.so, &error), error);
  REQUIRE(WaitFor([&] { return server.Sources().size() == 2 && server.Sources()[1].capture.known; }));
  auto capture2 = [&] { return server.Sources().at(1).capture; };
  CHECK(capture2().gpu_available);
  CHECK(capture2().gpu);

  // Stopped while off: the kinds it had on are disabled, no more; the
  // server hears the producer is gone.
  SetGpuActivityEnabled(false);
  cupti.Stop();
  CHECK(enabled_kinds() == 0);
  CHECK(!GpuActivityAvailable());
  CHECK(!SetGpuActivityEnabled(true));
  REQUIRE(WaitFor([&] { return !capture2().gpu_available && !capture2().gpu; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(kernels() == 40);

  DisconnectGlobalStream();
  server.Stop();
}

// The GPU level through the capture controls: a sending process's
// CuptiSource at default is switched to full by the server and back (kinds
// and API calls in the stand-in libcupti, the level in the state the server
// shows); a timed control switches it back at its end; a source without a
// GPU producer is refused.
TEST_CASE("ingest sender: capture switches a CuptiSource's level to full and back, by itself when timed") {
  // 10 kinds on the stand-in at default, the noisy calls (below) off.
  GpuCaptureSetup setup("gpu-level-test", 5, CuptiLevel::kDefault);
  auto enabled_kinds = setup.Fake<int (*)()>("fake_cupti_enabled_kinds");
  auto kind_enabled = setup.Fake<int (*)(int)>("fake_cupti_kind_enabled");
  auto api_recorded = setup.Fake<int (*)(int, uint32_t)>("fake_cupti_api_recorded");
  IngestServer& server = setup.server;
  CuptiSource& cupti = setup.cupti;
  std::string& error = setup.error;
  auto capture = [&] { return setup.capture(); };
  const uint64_t id = setup.id;
  // The fake's callback ids the default level switches off (fake_cupti.cc):
  // cudaGetLastError, cudaGetDevice, cudaEventQuery, cudaStreamIsCapturing;
  // cuEventQuery, cuCtxGetCurrent, cuDevicePrimaryCtxGetState,
  // cuKernelGetAttribute. How many of them are recorded now.
  auto noisy_recorded = [&] {
    const std::pair<int, uint32_t> noisy[] = {{0, 10},  {0, 17},  {0, 138}, {0, 317},
                                              {1, 120}, {1, 304}, {1, 392}, {1, 686}};
    int n = 0;
    for (const auto& [driver, cbid] : noisy) n += api_recorded(driver, cbid);
    return n;
  };
  // Kept at both levels: cudaLaunchKernel, cuLaunchKernel.
  auto launches_recorded = [&] { return api_recorded(0, 211) + api_recorded(1, 307); };

  // No GPU producer: no level said, and a level request is refused with why.
  CHECK(capture().gpu_level == -1);
  CHECK(!server.Capture(id, {.gpu_level = 1}, &error));
  CHECK(error == "source " + std::to_string(id) +
                     " (rank 5) has no GPU producer to switch to level full (gpu_available false: no CuptiSource "
                     "runs in it)");
  CHECK(!server.Capture(id, {.gpu_level = 2}, &error));
  CHECK(error == "gpu_level 2: 0 (default), 1 (full) or unset");

  REQUIRE_MESSAGE(cupti.Start(), cupti.message());
  REQUIRE(WaitFor([&] { return capture().gpu_available && capture().gpu; }));
  CHECK(capture().gpu_level == 0);
  CHECK(enabled_kinds() == 11);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_OVERHEAD) == 1);  // at both levels.
  CHECK(noisy_recorded() == 0);
  CHECK(launches_recorded() == 2);

  // Full until the next control: SYNCHRONIZATION on, every call
  // recorded; the state says so.
  REQUIRE_MESSAGE(server.Capture(id, {.gpu_level = 1}, &error), error);
  REQUIRE(WaitFor([&] { return capture().gpu_level == 1; }));
  CHECK(capture().gpu);
  CHECK(capture().until_ns == 0);
  CHECK(cupti.level() == CuptiLevel::kFull);
  CHECK(enabled_kinds() == 12);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) == 1);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_OVERHEAD) == 1);
  CHECK(noisy_recorded() == 8);
  CHECK(launches_recorded() == 2);
  REQUIRE_MESSAGE(server.Capture(id, {.gpu_level = 0}, &error), error);
  REQUIRE(WaitFor([&] { return capture().gpu_level == 0; }));
  CHECK(cupti.level() == CuptiLevel::kDefault);
  CHECK(enabled_kinds() == 11);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) == 0);
  CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_OVERHEAD) == 1);
  CHECK(noisy_recorded() == 0);
  CHECK(launches_recorded() == 2);

  // Full for a second, then default again by itself.
  REQUIRE_MESSAGE(server.Capture(id, {.duration_ns = 1'000'000'000, .gpu_level = 1}, &error), error);
  REQUIRE(WaitFor([&] { return capture().gpu_level == 1 && capture().until_ns != 0; }));
  REQUIRE(WaitFor([&] { return capture().gpu_level == 0 && capture().control_id == 0 && capture().until_ns == 0; }));
  CHECK(cupti.level() == CuptiLevel::kDefault);
  CHECK(enabled_kinds() == 11);
  CHECK(noisy_recorded() == 0);
  CHECK(launches_recorded() == 2);

  // Off and full at once for a second: only the memory kinds while off; back
  // on at default at its end, with the filter applied again.
  REQUIRE_MESSAGE(server.Capture(id, {.gpu = 0, .duration_ns = 1'000'000'000, .gpu_level = 1}, &error), error);
  REQUIRE(WaitFor([&] { return !capture().gpu && capture().gpu_level == 1; }));
  CHECK(enabled_kinds() == 2);
  REQUIRE(WaitFor([&] { return capture().gpu && capture().gpu_level == 0 && capture().until_ns == 0; }));
  CHECK(enabled_kinds() == 11);
  CHECK(noisy_recorded() == 0);
  CHECK(launches_recorded() == 2);

  // Stopped: the server hears the producer (and its level) is gone.
  cupti.Stop();
  CHECK(enabled_kinds() == 0);
  REQUIRE(WaitFor([&] { return !capture().gpu_available && capture().gpu_level == -1; }));
  DisconnectGlobalStream();
  server.Stop();
}
#endif

#if !defined(LIVEPROF_SANITIZED_THREAD) && !defined(LIVEPROF_SANITIZED_ADDRESS)
// (Release only. TSan does not support threads started in the child of a
// threaded parent, which the child's sender is. ASan (clang 14) takes no
// lock of its allocator around fork: a child forked while another thread of
// the parent (the server's, reading the parent's batch) held it waited on it
// for ever in its first allocation (seen under gdb, 5 runs in 6). glibc's
// malloc, which programs run with, is made safe across fork by its own
// handlers; later compiler-rt releases lock the allocator around fork.)

// Waits up to 30 s for `child`; its exit status, or -1 (killed: it hung).
// (The child connects, sends and waits up to 5 s for its acknowledgement; an
// ASan build beside a busy suite once took over 10 s.)
int WaitChild(pid_t child) {
  int status = -1;
  for (int i = 0; i < 3000; ++i) {
    if (::waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return -1;
}

TEST_CASE("ingest sender: a child forked after the connect sends its own events, named as its parent's helper") {
  const std::string path = "/tmp/liveprof-fork-test-" + std::to_string(::getpid()) + ".sock";
  Stream server_stream;
  IngestServer server(server_stream, UnixServer(path));
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  ingest_test::TestPipeline pipeline(server_stream);
  SenderOptions so;
  so.address = "unix:" + path;
  so.program = "fork-test";
  so.rank = 4;
  REQUIRE_MESSAGE(ConnectGlobalStream(so, &error), error);
  const NameId before = InternName("fork-test before the fork");
  const NameId in_child = InternName("fork-test in the child");
  // Events the parent's sender may not have sent at the fork: they are the
  // parent's, sent once, by it, never by the child.
  for (int i = 0; i < 50; ++i) {
    BeginSpan(before);
    EndSpan();
  }
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    // The parent's sender thread did not come along; the child connects
    // with a sender of its own, sends what it records, and flushes it.
    // _exit, not exit: LeakSanitizer's exit-time scan hung now and then in
    // a child of a many-threaded parent (ASan builds under load).
    int code = GlobalSenderStatus().running ? 10 : 0;
    SenderOptions child_options = so;
    child_options.helper = "loader 0";
    child_options.helper_of = static_cast<uint64_t>(parent);
    std::string why;
    if (code == 0 && !ConnectGlobalStream(child_options, &why)) code = 11;
    for (int i = 0; code == 0 && i < 3; ++i) {
      BeginSpan(in_child);  // (a name interned before the fork: the same id here)
      EndSpan();
    }
    DisconnectGlobalStream(5'000'000'000);
    if (code == 0 && GlobalSenderStatus().batches_acked == 0) code = 12;
    ::_exit(code);
  }
  CHECK(WaitChild(child) == 0);
  CHECK(GlobalSenderStatus().running);  // the parent's goes on.
  std::vector<Event> got;
  auto count = [&](std::string_view name, uint32_t* process) {
    int n = 0;
    for (const Event& e : got) {
      if (e.kind == EventKind::kHostSpan && server_stream.names().Get(e.name) == name) {
        ++n;
        *process = server_stream.track(e.track).process;
      }
    }
    return n;
  };
  uint32_t parent_process = 0, child_process = 0;
  REQUIRE(WaitFor([&] {
    Drain(pipeline, &got);
    return count("fork-test before the fork", &parent_process) == 50 &&
           count("fork-test in the child", &child_process) == 3;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // (anything sent twice would be in by now)
  Drain(pipeline, &got);
  CHECK(count("fork-test before the fork", &parent_process) == 50);
  CHECK(count("fork-test in the child", &child_process) == 3);
  CHECK(parent_process != child_process);
  std::map<uint32_t, std::string> labels;
  for (const IngestServer::SourceStatus& s : server.Sources()) labels[s.worker] = s.label;
  CHECK(labels[parent_process] == "rank 4");
  CHECK(labels[child_process] == "rank 4 · loader 0");
  // The child's rows are its own thread's, none of the parent's: every track
  // of its process is its process row or a thread whose id is the child's.
  for (uint32_t id = 1; id < server_stream.track_count(); ++id) {
    const TrackInfo t = server_stream.track(id);
    if (t.process != child_process || t.type == TrackType::kProcess) continue;
    CHECK(t.type == TrackType::kHostThread);
    CHECK(t.os_id == static_cast<uint64_t>(child));
  }
  DisconnectGlobalStream(1'000'000'000);
  server.Stop();
}

TEST_CASE("ingest sender: a fork while another thread holds the stream's locks waits for them, the child goes on") {
  // Another thread holds every lock of the stream (as a thread interning a
  // name or adding its ring would, one at a time) when the main thread
  // forks: the fork handlers wait for them, so the child has none held by
  // a thread it lacks. Without them the child waits forever at its first
  // new name or ring. The GPU switch the parent installed is not the
  // child's: it says no GPU producer.
  std::string error;
  SenderOptions so;
  so.address = "unix:/tmp/liveprof-fork-nobody-" + std::to_string(::getpid()) + ".sock";  // retried.
  REQUIRE_MESSAGE(ConnectGlobalStream(so, &error), error);
  InstallGpuActivitySwitch({.apply = [](bool) {}, .set_level = [](CuptiLevel) {}});
  REQUIRE(GpuActivityAvailable());
  std::atomic<bool> held{false};
  std::thread holder([&] {
    GlobalStream().LockForFork();
    held = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    GlobalStream().UnlockAfterFork();
  });
  while (!held) std::this_thread::yield();
  const pid_t child = ::fork();
  if (child == 0) {
    int code = GpuActivityAvailable() ? 4 : 0;
    BeginSpan(InternName("fork-child " + std::to_string(::getpid())));  // a new name, this thread's new ring.
    EndSpan();
    std::thread([] {
      BeginSpan(InternName("fork-child thread"));
      EndSpan();
    }).join();
    std::string why;
    if (code == 0 && !ConnectGlobalStream(so, &why)) code = 3;
    DisconnectGlobalStream(0);
    ::_exit(code);
  }
  holder.join();
  CHECK(WaitChild(child) == 0);
  CHECK(GpuActivityAvailable());  // (the parent's is still there)
  RemoveGpuActivitySwitch();
  DisconnectGlobalStream(0);
}

#endif  // neither sanitizer

}  // namespace
}  // namespace liveprof::ingest_sender_test
