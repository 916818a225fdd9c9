#include "stream/drain_loop.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "event_builder.h"
#include "wait_for.h"

namespace liveprof::drain_loop_test {
namespace {

// Collects every batch the loop delivers.
struct Collector {
  std::mutex mu;
  std::vector<Event> events, late;
  std::vector<uint64_t> watermarks;
  bool order_ok = true;

  DrainLoop::Consumer Fn() {
    return [this](const Batch& b) {
      std::lock_guard<std::mutex> lock(mu);
      const Event* prev = nullptr;
      events.insert(events.end(), b.definitions.begin(), b.definitions.end());
      for (const Event& e : b.events) {
        if (prev && CompletionOrderLess(e, *prev)) order_ok = false;
        if (e.end() > b.watermark_ns) order_ok = false;
        prev = &e;
        events.push_back(e);
      }
      late.insert(late.end(), b.late.begin(), b.late.end());
      if (!watermarks.empty() && b.watermark_ns < watermarks.back()) order_ok = false;
      watermarks.push_back(b.watermark_ns);
    };
  }
};

DrainLoop::Options FastOptions(size_t handoff_events = 0) {
  DrainLoop::Options o;
  o.reorder.window_ns = 5'000'000;  // 5 ms
  o.idle_sleep = std::chrono::microseconds(200);
  o.handoff_events = handoff_events;
  return o;
}

using test::WaitFor;

// A consumer that holds every batch until `release`: a pipeline stalled.
// Declare a Releaser after the loop: a failed REQUIRE then lets the loop's
// destructor stop it instead of waiting forever.
struct StalledCollector : Collector {
  std::atomic<bool> release{false};
  struct Releaser {
    StalledCollector& c;
    ~Releaser() { c.release = true; }
  };
  DrainLoop::Consumer Fn() {
    return [this, inner = Collector::Fn()](const Batch& b) {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      inner(b);
    };
  }
};

size_t Instants(const std::vector<Event>& events) {
  return static_cast<size_t>(
      std::count_if(events.begin(), events.end(), [](const Event& e) { return e.kind == EventKind::kInstant; }));
}

}  // namespace

TEST_CASE("drain: several threads below capacity lose and duplicate nothing") {
  // The consumer on the drain thread, and on a thread of its own.
  for (const size_t handoff : {size_t{0}, size_t{1} << 16}) {
    CAPTURE(handoff);
    constexpr int kThreads = 4;
    constexpr uint32_t kPerThread = 50'000;
    Stream stream(Stream::Options{.ring_capacity = kPerThread});  // can never fill.
    Collector c;
    DrainLoop loop(stream, FastOptions(handoff), c.Fn());
    loop.Start();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto ring = stream.AddRing({.name = "producer " + std::to_string(t)});
        if (ring == nullptr) return;
        uint32_t refused = 0;
        for (uint32_t i = 0; i < kPerThread; ++i) {
          refused += ring->queue->TryPush(test::Seq(HostNowNs(), i, static_cast<TrackId>(t + 1))) ? 0 : 1;
        }
        CHECK(refused == 0);
        ring->closed.store(true, std::memory_order_release);
      });
    }
    for (auto& th : threads) th.join();
    loop.Stop();

    CHECK(c.order_ok);
    // A producer preempted between its timestamp and its push for longer than
    // the window makes its event late: delivered apart, still not lost.
    std::map<TrackId, std::vector<uint32_t>> seqs;
    for (const auto* list : {&c.events, &c.late}) {
      for (const Event& e : *list) {
        if (e.kind == EventKind::kInstant) seqs[e.track].push_back(e.corr);
      }
    }
    REQUIRE(seqs.size() == kThreads);
    for (auto& [track, s] : seqs) {
      std::sort(s.begin(), s.end());
      CHECK(s.size() == kPerThread);
      CHECK(std::adjacent_find(s.begin(), s.end()) == s.end());  // no duplicate.
      CHECK(s.front() == 0);
      CHECK(s.back() == kPerThread - 1);
    }
    CHECK(stream.TotalDropped() == 0);
    CHECK(stream.TotalPublished() == kThreads * kPerThread);
    CHECK(stream.Stats().empty());  // closed rings were drained, then retired.
  }
}

TEST_CASE("drain: under overload every push is either delivered or counted as dropped") {
  for (const size_t handoff : {size_t{0}, size_t{1} << 16}) {
    CAPTURE(handoff);
    constexpr uint32_t kPushes = 1'000'000;
    Stream stream(Stream::Options{.ring_capacity = 1024});
    Collector c;
    DrainLoop::Options o = FastOptions(handoff);
    o.idle_sleep = std::chrono::microseconds(2000);  // a drain far slower than the producer.
    DrainLoop loop(stream, o, c.Fn());
    loop.Start();
    auto ring = stream.AddRing({.name = "fast producer"});
    REQUIRE(ring != nullptr);
    uint64_t refused = 0;
    for (uint32_t i = 0; i < kPushes; ++i) {
      refused += ring->queue->TryPush(test::Seq(HostNowNs(), i, 1)) ? 0 : 1;
    }
    loop.Stop();
    const uint64_t delivered = Instants(c.events);
    CHECK(refused > 0);  // it really was overloaded.
    CHECK(ring->queue->dropped() == refused);
    CHECK(stream.TotalDropped() == refused);
    CHECK(delivered + c.late.size() == kPushes - refused);
    CHECK(loop.events_drained() == kPushes - refused);
  }
}

TEST_CASE("drain: each name and track is defined once, before its first use") {
  for (const size_t handoff : {size_t{0}, size_t{1} << 16}) {
    CAPTURE(handoff);
    Stream stream;
    Collector c;
    DrainLoop loop(stream, FastOptions(handoff), c.Fn());
    loop.Start();
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        const TrackId track = stream.AddTrack({stream.names().Intern("worker " + std::to_string(t)),
                                               TrackType::kHostThread, static_cast<uint64_t>(t), 0});
        auto ring = stream.AddRing({.name = "worker", .track = track});
        for (int i = 0; i < 2000; ++i) {
          const NameId name = stream.names().Intern("op/" + std::to_string(i % 300 + t * 100));
          ring->queue->TryPush(test::Span(HostNowNs(), 1, name, track));
        }
        ring->closed.store(true, std::memory_order_release);
      });
    }
    for (auto& th : threads) th.join();
    loop.Stop();

    std::set<NameId> defined;
    std::set<TrackId> tracks;
    bool used_before_defined = false;
    for (const Event& e : c.events) {
      if (e.kind == EventKind::kNameDef) {
        CHECK(defined.insert(e.name).second);  // once.
        CHECK(stream.names().Get(e.name) == std::string_view(e.payload.name_def.data, e.payload.name_def.size));
      } else if (e.kind == EventKind::kTrackDef) {
        CHECK(tracks.insert(e.track).second);
        if (!defined.count(e.name)) used_before_defined = true;
      } else {
        if (!defined.count(e.name) || !tracks.count(e.track)) used_before_defined = true;
      }
    }
    CHECK_FALSE(used_before_defined);
    CHECK(defined.size() == stream.names().size());
    CHECK(tracks.size() == 3);
  }
}

TEST_CASE("drain: TSC-tick rings come out on the host clock") {
  Stream stream;
  Collector c;
  DrainLoop loop(stream, FastOptions(), c.Fn());
  auto ring = stream.AddRing({.name = "tsc", .domain = TimeDomain::kTscTicks});
  const uint64_t host_before = HostNowNs();
  const uint64_t t0 = TscRead();
  while (HostNowNs() - host_before < 1'000'000) {
  }
  const uint64_t t1 = TscRead();
  const uint64_t host_after = HostNowNs();
  ring->queue->TryPush(test::Span(t0, t1 - t0, 7, 1));
  loop.Flush();
  std::erase_if(c.events, [](const Event& e) { return e.kind == EventKind::kNameDef; });
  REQUIRE(c.events.size() == 1);
  const Event& e = c.events[0];
  // Correctness tolerances, not speed: the span lies inside the host interval
  // measured around it, give or take 100 us of calibration error.
  CHECK(e.ts + 100'000 >= host_before);
  CHECK(e.end() <= host_after + 100'000);
  CHECK(e.dur >= 900'000);
  CHECK(e.dur <= host_after - host_before + 100'000);
}

TEST_CASE("drain: synchronous rounds release by the window and flush the rest") {
  Stream stream;
  Collector c;
  DrainLoop::Options o;
  o.reorder.window_ns = 1'000;
  DrainLoop loop(stream, o, c.Fn());
  auto ring = stream.AddRing({.name = "manual"});
  ring->queue->TryPush(test::Instant(5'000));
  ring->queue->TryPush(test::Instant(9'500));
  CHECK(loop.RunOnce(10'000) == 2);  // cutoff 9'000: the first only.
  std::vector<uint64_t> ts;
  for (const Event& e : c.events)
    if (e.kind == EventKind::kInstant) ts.push_back(e.ts);
  CHECK(ts == std::vector<uint64_t>{5'000});
  ring->queue->TryPush(test::Instant(8'000));  // behind the watermark: late.
  loop.RunOnce(10'500);
  CHECK(c.late.size() == 1);
  CHECK(stream.diagnostics().Get(Diag::late_events) == 1);
  loop.Flush();
  ts.clear();
  for (const Event& e : c.events)
    if (e.kind == EventKind::kInstant) ts.push_back(e.ts);
  CHECK(ts == std::vector<uint64_t>{5'000, 9'500});
}

TEST_CASE("drain: a ring that pushes back keeps its events while the reorder buffer has a backlog") {
  Stream stream;
  Collector c;
  DrainLoop::Options o;
  o.reorder.window_ns = 1'000;
  o.reorder.max_release = 10;
  DrainLoop loop(stream, o, c.Fn());
  auto plain = stream.AddRing({.name = "drops when full"});
  auto waits = stream.AddRing({.name = "pushes back", .pushes_back = true});
  // Events waiting for their window are no backlog: both rings drained.
  for (uint64_t i = 0; i < 40; ++i) plain->queue->TryPush(test::Instant(1'000'000 + i));
  for (uint64_t i = 0; i < 30; ++i) waits->queue->TryPush(test::Instant(1'000'000 + i));
  CHECK(loop.RunOnce(1'000'500) == 70);
  CHECK(c.events.empty() == false);  // (the definitions; no instant is old enough yet)
  CHECK(Instants(c.events) == 0);
  // All releasable now, but 10 a round: a backlog. The plain ring is drained,
  // the other keeps its events.
  for (uint64_t i = 0; i < 20; ++i) plain->queue->TryPush(test::Instant(1'000'100 + i));
  for (uint64_t i = 0; i < 30; ++i) waits->queue->TryPush(test::Instant(1'000'100 + i));
  loop.RunOnce(2'000'000);  // drains 50, releases 10: backlog.
  CHECK(plain->queue->size() == 0);
  CHECK(waits->queue->size() == 0);
  for (uint64_t i = 0; i < 5; ++i) plain->queue->TryPush(test::Instant(1'000'200 + i));
  for (uint64_t i = 0; i < 7; ++i) waits->queue->TryPush(test::Instant(1'000'200 + i));
  CHECK(loop.RunOnce(2'000'000) == 5);
  CHECK(waits->queue->size() == 7);
  // The last drain takes everything: none is left behind.
  loop.Flush();
  CHECK(waits->queue->size() == 0);
  CHECK(Instants(c.events) == 132);
}

TEST_CASE("drain: with a handoff queue a stalled consumer leaves its backlog in the queue, not the rings") {
  // Rings of 1,024 events, 20,000 written while the consumer is stuck: each
  // thousand is drained into the queue before the next is written. (With
  // the consumer on the drain thread nothing is drained after its first
  // batch, and the wait below gives up.)
  Stream stream(Stream::Options{.ring_capacity = 1024});
  StalledCollector c;
  DrainLoop loop(stream, FastOptions(size_t{1} << 20), c.Fn());
  const StalledCollector::Releaser releaser{c};
  auto ring = stream.AddRing({.name = "producer"});
  loop.Start();
  uint32_t seq = 0;
  bool drained = true;
  for (int block = 0; block < 20 && drained; ++block) {
    for (int i = 0; i < 1000; ++i) CHECK(ring->queue->TryPush(test::Seq(HostNowNs(), seq++, 1)));
    drained = WaitFor([&] { return loop.events_drained() == seq; });
  }
  CHECK(drained);
  CHECK(WaitFor([&] { return loop.handoff_queued() >= 15'000; }));  // the window let most out.
  // Nothing is handled (acknowledged to an ingest sender) before the
  // consumer has had it.
  CHECK(ring->handled_events.load() == 0);
  c.release = true;
  loop.Stop();
  CHECK(stream.TotalDropped() == 0);
  CHECK(Instants(c.events) + c.late.size() == seq);
  CHECK(c.order_ok);
  CHECK(loop.handoff_queued() == 0);
  CHECK(loop.handoff_max_queued() >= 15'000);
  CHECK(ring->handled_events.load() == seq);  // all of them, once consumed.
}

TEST_CASE("drain: a full handoff queue stops the drain, and the rings drop what does not fit, counted") {
  Stream stream(Stream::Options{.ring_capacity = 1024});
  StalledCollector c;
  constexpr size_t kQueue = 4096;
  DrainLoop loop(stream, FastOptions(kQueue), c.Fn());
  const StalledCollector::Releaser releaser{c};
  auto ring = stream.AddRing({.name = "producer"});
  loop.Start();
  uint32_t pushed = 0, refused = 0, seq = 0;
  auto push = [&](int n) {
    for (int i = 0; i < n; ++i) (ring->queue->TryPush(test::Seq(HostNowNs(), seq++, 1)) ? pushed : refused) += 1;
  };
  // Blocks of 1,000 until the queue is full (the drain may stop mid-block).
  for (int block = 0; block < 20 && loop.handoff_queued() < kQueue; ++block) {
    push(1000);
    REQUIRE(WaitFor([&] { return loop.events_drained() == pushed || loop.handoff_queued() >= kQueue; }));
  }
  REQUIRE(WaitFor([&] { return loop.handoff_queued() >= kQueue; }));
  const uint64_t drained = loop.events_drained();
  const uint32_t refused_before = refused;
  push(5000);
  // The drain has stopped (a round under way when the queue filled may take
  // one ring's worth more): the ring fills, and drops the rest.
  CHECK(refused - refused_before >= 5000 - 2 * 1024);
  CHECK(loop.events_drained() <= drained + 1024);
  CHECK(ring->queue->size() == 1024);
  c.release = true;
  loop.Stop();
  CHECK(stream.TotalDropped() == refused);
  CHECK(Instants(c.events) + c.late.size() == pushed);
}

}  // namespace liveprof::drain_loop_test
