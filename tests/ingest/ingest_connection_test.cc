// One ingest connection's protocol without a socket (src/ingest/
// ingest_connection.h): bytes in, events in its ring and frames owed to the
// sender out, as the server drives it.
#include "ingest/ingest_connection.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "ingest/ingest_wire.h"
#include "stream/clock.h"
#include "stream/drain_loop.h"
#include "stream/liveprof_generated.h"
#include "stream/wire_event.h"

namespace liveprof::ingest_connection_test {
namespace {

using flatbuffers::FlatBufferBuilder;

// A frame as a sender writes it: size-prefixed, padded to 8 bytes.
template <typename Build>
std::string Frame(wire::Body type, Build&& build) {
  std::string out;
  AppendIngestFrame(&out, type, build);
  return out;
}

std::string Hello(uint64_t session, int32_t rank = 3) {
  return Frame(wire::Body::IngestHello, [&](FlatBufferBuilder& fbb) {
    return wire::CreateIngestHelloDirect(fbb, kIngestProtocol, "node7", 4242, rank, "train.py", 1'000, session).Union();
  });
}

// One batch: name 1 "step" on track 9, one span per (ts, dur).
std::string Batch(uint64_t seq, const std::vector<std::pair<uint64_t, uint64_t>>& spans) {
  return Frame(wire::Body::IngestBatch, [&](FlatBufferBuilder& fbb) {
    std::vector<flatbuffers::Offset<wire::NameDef>> names{wire::CreateNameDefDirect(fbb, 1, "step")};
    std::vector<flatbuffers::Offset<wire::TrackDef>> tracks{wire::CreateTrackDef(fbb, 9, 1, 0, 1009)};
    std::vector<wire::Event> events;
    for (const auto& [ts, dur] : spans) {
      events.emplace_back(ts, dur, 1, 9, 0, static_cast<uint8_t>(EventKind::kHostSpan), 0, 0, 0, 0, 0);
    }
    return wire::CreateIngestBatchDirect(fbb, seq, &names, &tracks, &events, 0).Union();
  });
}

// A batch as a sender writes it with liveprof's own cost in its process
// (IngestBatch.cost): one span, and `threads` (tid, name, cpu_ns) read at `at_ns`.
// With `hooks` (hook_ns, hook_calls, steps, cupti_overhead_ns): its hooks'
// counters and CUPTI's own time too.
std::string CostBatch(uint64_t seq, uint64_t at_ns, uint64_t rss_bytes,
                      const std::vector<std::tuple<uint64_t, std::string, uint64_t>>& threads,
                      std::tuple<uint64_t, uint64_t, uint64_t, uint64_t> hooks = {}) {
  return Frame(wire::Body::IngestBatch, [&](FlatBufferBuilder& fbb) {
    std::vector<flatbuffers::Offset<wire::NameDef>> names{wire::CreateNameDefDirect(fbb, 1, "step")};
    std::vector<flatbuffers::Offset<wire::TrackDef>> tracks{wire::CreateTrackDef(fbb, 9, 1, 0, 1009)};
    std::vector<wire::Event> events{
        {seq * 100, 10, 1, 9, 0, static_cast<uint8_t>(EventKind::kHostSpan), 0, 0, 0, 0, 0}};
    std::vector<flatbuffers::Offset<wire::IngestThreadCpu>> cpu;
    for (const auto& [tid, name, cpu_ns] : threads)
      cpu.push_back(wire::CreateIngestThreadCpuDirect(fbb, tid, name.c_str(), cpu_ns));
    const auto cost = wire::CreateIngestCost(fbb, at_ns, rss_bytes, fbb.CreateVector(cpu), std::get<0>(hooks),
                                             std::get<1>(hooks), std::get<2>(hooks), std::get<3>(hooks));
    return wire::CreateIngestBatch(fbb, seq, fbb.CreateVector(names), fbb.CreateVector(tracks),
                                   fbb.CreateVectorOfStructs(events), 0, 0, cost)
        .Union();
  });
}

// The frames in `bytes` (what the connection owes its sender), by type.
std::vector<wire::Body> Types(const std::string& bytes, std::vector<uint64_t>* ack_seqs = nullptr) {
  FrameSplitter s;
  s.Feed(bytes);
  std::vector<wire::Body> types;
  while (const auto f = s.Next()) {
    const wire::Frame* frame = wire::GetFrame(f->data());
    types.push_back(frame->body_type());
    if (ack_seqs != nullptr && frame->body_type() == wire::Body::IngestAck) {
      ack_seqs->push_back(frame->body_as_IngestAck()->seq());
    }
  }
  return types;
}

size_t RingSize(Stream& stream) {
  std::vector<std::shared_ptr<Ring>> rings;
  stream.CopyRings(&rings);
  size_t n = 0;
  for (const auto& r : rings) {
    if (r->name.rfind("ingest ", 0) == 0) n += r->queue->size();
  }
  return n;
}

// The source's ring (the stream's only ingest ring).
std::shared_ptr<Ring> IngestRing(Stream& stream) {
  std::vector<std::shared_ptr<Ring>> rings;
  stream.CopyRings(&rings);
  for (const auto& r : rings) {
    if (r->name.rfind("ingest ", 0) == 0) return r;
  }
  return nullptr;
}

// One round of a pipeline at `now_ns` (its consumer takes the batch): what
// ends by now_ns - 250 ms is handled (Ring::Handled).
void Handle(Stream& stream, uint64_t now_ns) {
  DrainLoop loop(stream, {}, [](const liveprof::Batch&) {});
  loop.RunOnce(now_ns);
}

// One server's shared parts, as the connections under test see them.
struct Server {
  Server() {
    options.stall_timeout_ns = 1'000'000'000;
    options.ping_interval_ns = 500'000'000;
  }
  Stream stream;
  IngestWorkers workers{stream};
  IngestServer::Options options;
  std::string reason;
};

TEST_CASE_FIXTURE(Server, "ingest connection: a hello and a batch become a worker, events in its ring, and one ack") {
  IngestConnection c(stream, workers, options, 7, "unix:/tmp/x", 1'000);
  c.splitter().Feed(Hello(99) + Batch(1, {{100, 10}, {200, 20}}));
  REQUIRE(c.TakeFrames(&reason));
  CHECK(reason.empty());
  CHECK(RingSize(stream) == 2);
  c.AppendAck();  // in the ring only: no ack.
  CHECK(c.out().empty());
  Handle(stream, HostNowNs() + 1'000'000'000);  // a second on: released to the consumer.
  CHECK(RingSize(stream) == 0);
  c.AppendAck();
  std::vector<uint64_t> acks;
  CHECK(Types(c.out(), &acks) == std::vector<wire::Body>{wire::Body::IngestAck});
  CHECK(acks == std::vector<uint64_t>{1});
  c.out().clear();
  c.AppendAck();  // nothing new since: no ack.
  CHECK(c.out().empty());

  const IngestServer::SourceStatus s = c.Status();
  CHECK(s.id == 7);
  CHECK(s.endpoint == "unix:/tmp/x");
  CHECK(s.label == "rank 3");
  CHECK(s.worker == 1);
  CHECK(s.frames == 2);
  CHECK(s.batches == 1);
  CHECK(s.events == 2);
  CHECK(s.connected);
  c.Closed("");
  CHECK_FALSE(c.Status().connected);
}

TEST_CASE_FIXTURE(Server,
                  "ingest connection: a sender's own cost, its two newest samples, and none from an older sender") {
  IngestConnection c(stream, workers, options, 1, "unix:/tmp/x", 1'000);
  // An older sender's batch has no cost: none in the status.
  c.splitter().Feed(Hello(5) + Batch(1, {{100, 10}}));
  REQUIRE(c.TakeFrames(&reason));
  CHECK(c.Status().batches == 1);
  CHECK(c.Status().cost.now.at_ns == 0);
  CHECK(c.Status().cost.now.threads.empty());
  CHECK(c.Status().cost.prev.at_ns == 0);

  // Two samples half a second apart: the sender's thread spent 100 ms of it,
  // the CUPTI thread, started in between, 25 ms.
  c.splitter().Feed(
      CostBatch(2, 5'000'000'000, 300 << 20, {{11, "liveprof send", 400'000'000}}) +
      CostBatch(3, 5'500'000'000, 310 << 20, {{11, "liveprof send", 500'000'000}, {12, "liveprof-cupti", 25'000'000}}));
  REQUIRE(c.TakeFrames(&reason));
  IngestServer::SourceStatus s = c.Status();
  CHECK(s.batches == 3);
  CHECK(s.cost.now.at_ns == 5'500'000'000);
  CHECK(s.cost.now.rss_bytes == uint64_t{310} << 20);
  REQUIRE(s.cost.now.threads.size() == 2);
  CHECK(s.cost.now.threads[0].name == "liveprof send");
  CHECK(s.cost.now.threads[0].tid == 11);
  CHECK(s.cost.now.threads[1].cpu_ns == 25'000'000);
  CHECK(s.cost.prev.at_ns == 5'000'000'000);
  const SelfCostInterval in = CompareSelfCost(s.cost.prev, s.cost.now);
  CHECK(in.interval_s == doctest::Approx(0.5));
  REQUIRE(in.thread_pct.size() == 2);
  CHECK(in.thread_pct[0] == doctest::Approx(20.0));
  CHECK(in.thread_pct[1] == doctest::Approx(5.0));
  CHECK(in.cpu_pct == doctest::Approx(25.0));

  // A batch without one keeps them; an older sample (a batch sent again) is
  // not taken; a malformed one (a name with a control character) is left
  // out, its batch taken.
  c.splitter().Feed(Batch(4, {{400, 10}}) + CostBatch(5, 4'000'000'000, 1, {{11, "liveprof send", 1}}) +
                    CostBatch(6, 6'000'000'000, 1, {{11, "liveprof\nsend", 1}}));
  REQUIRE(c.TakeFrames(&reason));
  s = c.Status();
  CHECK(s.batches == 6);
  CHECK(s.cost.now.at_ns == 5'500'000'000);
  CHECK(s.cost.prev.at_ns == 5'000'000'000);
}

TEST_CASE_FIXTURE(Server,
                  "ingest connection: a sender's hooks' counters come with its cost, its last reading at the stop") {
  IngestConnection c(stream, workers, options, 1, "unix:/tmp/x", 1'000);
  // An older sender's cost has no hooks' counters: 0.
  c.splitter().Feed(Hello(5) + CostBatch(1, 5'000'000'000, 1, {}));
  REQUIRE(c.TakeFrames(&reason));
  CHECK(c.Status().cost.now.hook_ns == 0);
  CHECK(c.Status().cost.now.steps == 0);
  // Readings a second apart, then the sender's last at its stop, 0.3 s on.
  c.splitter().Feed(CostBatch(2, 6'000'000'000, 1, {}, {2'000'000, 90, 20, 20'000'000}) +
                    CostBatch(3, 7'000'000'000, 1, {}, {6'000'000, 290, 60, 20'500'000}) +
                    CostBatch(4, 7'300'000'000, 1, {}, {7'000'000, 340, 70, 21'000'000}));
  REQUIRE(c.TakeFrames(&reason));
  const IngestServer::SourceStatus s = c.Status();
  CHECK(s.cost.now.at_ns == 7'300'000'000);
  CHECK(s.cost.now.hook_ns == 7'000'000);
  CHECK(s.cost.now.hook_calls == 340);
  CHECK(s.cost.now.steps == 70);
  CHECK(s.cost.now.cupti_overhead_ns == 21'000'000);
  CHECK(s.cost.prev.at_ns == 6'000'000'000);  // (the last took the place of the reading 0.3 s before it)
  // 5 ms of hooks over the 50 steps since the first reading after steps: 100 µs a step.
  CHECK(s.cost.steps_prev.at_ns == 6'000'000'000);
  CHECK(CompareHookCost(s.cost.steps_prev, s.cost.steps_now).per_step_us == doctest::Approx(100.0));
  CHECK(CompareHookCost(s.cost.steps_prev, s.cost.steps_now).cupti_per_step_us == doctest::Approx(20.0));
  CHECK(CompareHookCost(s.cost.prev, s.cost.now).pct == doctest::Approx(5.0 / 1300 * 100));
}

TEST_CASE_FIXTURE(Server,
                  "ingest connection: a reconnecting sender is the same worker and its batches taken are skipped") {
  {
    IngestConnection first(stream, workers, options, 1, "tcp:127.0.0.1:1", 1'000);
    first.splitter().Feed(Hello(42) + Batch(1, {{100, 10}}) + Batch(2, {{200, 10}}));
    REQUIRE(first.TakeFrames(&reason));
    first.Closed("");  // unacknowledged, but taken: not taken again.
  }
  IngestConnection again(stream, workers, options, 2, "tcp:127.0.0.1:1", 2'000);
  again.splitter().Feed(Hello(42) + Batch(2, {{200, 10}}) + Batch(3, {{300, 10}}));
  REQUIRE(again.TakeFrames(&reason));
  const IngestServer::SourceStatus s = again.Status();
  CHECK(s.worker == 1);  // the same rows
  CHECK(s.duplicate_batches == 1);
  CHECK(RingSize(stream) == 3);  // 1, 2, then 3 only

  // Another session of the same label: the same worker, nothing skipped.
  IngestConnection other(stream, workers, options, 3, "tcp:127.0.0.1:1", 3'000);
  other.splitter().Feed(Hello(43) + Batch(2, {{400, 10}}));
  REQUIRE(other.TakeFrames(&reason));
  CHECK(other.Status().duplicate_batches == 0);
  CHECK(other.Status().worker == 1);
}

TEST_CASE_FIXTURE(Server, "ingest connection: timeouts name what was missing, and a ping is owed once introduced") {
  {
    IngestConnection silent(stream, workers, options, 1, "unix:/tmp/x", 1'000);
    CHECK(silent.Tick(1'000 + options.stall_timeout_ns, &reason));
    CHECK_FALSE(silent.Tick(1'001 + options.stall_timeout_ns, &reason));
    CHECK(reason == "no hello in 1000 ms");
  }
  IngestConnection c(stream, workers, options, 2, "unix:/tmp/x", 1'000);
  c.splitter().Feed(Hello(5));
  REQUIRE(c.TakeFrames(&reason));
  REQUIRE(c.Tick(HostNowNs(), &reason));
  CHECK(Types(c.out()) == std::vector<wire::Body>{wire::Body::IngestPing});
  c.out().clear();
  REQUIRE(c.Tick(HostNowNs(), &reason));  // the next one is due a ping interval later.
  CHECK(c.out().empty());

  // Half a frame, then silence past the stall timeout.
  const std::string batch = Batch(1, {{100, 10}});
  c.splitter().Feed(batch.substr(0, 20));
  c.Received(5'000);
  REQUIRE(c.TakeFrames(&reason));
  CHECK_FALSE(c.Tick(5'001 + options.stall_timeout_ns, &reason));
  CHECK(reason == "stalled mid-frame for 1000 ms (20 bytes of an unfinished frame dropped)");
}

TEST_CASE_FIXTURE(Server, "ingest connection: a refused frame gives the reason to close, what came before is taken") {
  IngestConnection c(stream, workers, options, 1, "unix:/tmp/x", 1'000);
  c.splitter().Feed(Hello(5) + Batch(1, {{100, 10}}) + Batch(1, {{200, 10}}));  // seq 1 again: out of order.
  CHECK_FALSE(c.TakeFrames(&reason));
  CHECK(reason.find("frame 3 (bytes ") == 0);
  CHECK(RingSize(stream) == 1);
  Handle(stream, HostNowNs() + 1'000'000'000);
  std::vector<uint64_t> acks;
  c.AppendAck();
  Types(c.out(), &acks);
  CHECK(acks == std::vector<uint64_t>{1});
}

// An ack says the pipeline has handled the batch (with a
// run folder: written there), not that it is in the ring.
TEST_CASE_FIXTURE(Server, "ingest connection: a batch is acknowledged once its events are drained and released") {
  IngestConnection c(stream, workers, options, 1, "unix:/tmp/x", 1'000);
  c.splitter().Feed(Hello(5) + Batch(1, {{100, 10}, {200, 20}}) + Batch(2, {{300, 10}}));
  REQUIRE(c.TakeFrames(&reason));
  const std::shared_ptr<Ring> ring = IngestRing(stream);
  REQUIRE(ring != nullptr);
  REQUIRE(ring->queue->published() == 3);
  std::vector<uint64_t> acks;
  // Batch 1's two events drained and released, batch 2's not drained: 1.
  ring->handled_events = 2;
  ring->handled_ns = UINT64_MAX;
  c.AppendAck();
  Types(c.out(), &acks);
  CHECK(acks == std::vector<uint64_t>{1});
  c.out().clear();
  // All drained, but the release has not reached batch 2's end: none.
  ring->handled_events = 3;
  ring->handled_ns = 0;
  c.AppendAck();
  CHECK(c.out().empty());
  // A real round: drained, and held while its window is open (its events
  // end about now), then released a second later.
  size_t handed = 0;
  DrainLoop loop(stream, {}, [&](const liveprof::Batch& b) { handed += b.events.size(); });
  loop.RunOnce(HostNowNs());
  CHECK(handed == 0);
  c.AppendAck();
  CHECK(c.out().empty());
  loop.RunOnce(HostNowNs() + 1'000'000'000);
  CHECK(handed == 3);
  c.AppendAck();
  acks.clear();
  Types(c.out(), &acks);
  CHECK(acks == std::vector<uint64_t>{2});
}

TEST_CASE("ingest statuses: a capture request is checked against the source's status") {
  IngestStatuses statuses;
  IngestServer::SourceStatus s;
  s.id = 4, s.worker = 1, s.connected = true, s.label = "rank 0";
  statuses.Publish(s);
  std::string error;
  IngestServer::CaptureRequest r;
  r.host_level = 2;
  CHECK(statuses.CheckCapture(4, r, &error));
  CHECK_FALSE(statuses.CheckCapture(5, r, &error));
  CHECK(error == "source 5 is unknown");
  r.gpu = 1;
  CHECK_FALSE(statuses.CheckCapture(4, r, &error));
  CHECK(error == "source 4 (rank 0) has no GPU producer to turn on (gpu_available false: no CuptiSource runs in it)");
  r = {};
  r.host_level = 4;
  CHECK_FALSE(statuses.CheckCapture(4, r, &error));
  CHECK(error == "host_level 4: 1 (critical), 2 (detailed) or 3 (verbose)");
  s.connected = false;
  statuses.Publish(s);
  r = {};
  CHECK_FALSE(statuses.CheckCapture(4, r, &error));
  CHECK(error == "source 4 is closed");
  CHECK(statuses.All().size() == 1);
}

}  // namespace
}  // namespace liveprof::ingest_connection_test
