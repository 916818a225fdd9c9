// IngestServer over real sockets (a unix socket and a loopback TCP port): a
// sender's hello and batches reach the stream's rings, in the stream's ids,
// acknowledged; pings answered set the clock offset; a bad sender is closed
// with its reason and the others go on; a sender gone mid-frame keeps what
// it sent whole.
#include "ingest/ingest_server.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ingest/ingest_frames.h"
#include "ingest/ingest_status.h"
#include "ingest/ingest_test_client.h"
#include "producers/stderr_capture.h"
#include "stream/clock.h"
#include "stream/liveprof_generated.h"

namespace liveprof::ingest_server_test {
namespace {

using flatbuffers::FlatBufferBuilder;
using ingest_test::AtTempSocket;
using ingest_test::Batch;
using ingest_test::Client;
using ingest_test::Drain;
using ingest_test::Framed;
using ingest_test::Hello;
using ingest_test::TempSocket;
using ingest_test::TestPipeline;
using ingest_test::WaitFor;

TEST_CASE("ingest server: endpoints parse, and refuse what they cannot bind safely") {
  IngestEndpoint e;
  std::string error;
  REQUIRE(ParseIngestEndpoint("unix:/tmp/x.sock", &e, &error));
  CHECK(!e.tcp);
  CHECK(e.path == "/tmp/x.sock");
  REQUIRE(ParseIngestEndpoint("tcp:127.0.0.1:7777", &e, &error));
  CHECK(e.tcp);
  CHECK(e.port == 7777);
  CHECK(e.ToString() == "tcp:127.0.0.1:7777");
  CHECK(!ParseIngestEndpoint("tcp:0.0.0.0:7777", &e, &error));
  CHECK(error == "--ingest tcp:0.0.0.0:7777: TCP ingest binds a loopback address (127.x.x.x) only");
  CHECK(!ParseIngestEndpoint("tcp:127.0.0.1:99999", &e, &error));
  CHECK(!ParseIngestEndpoint("udp:1", &e, &error));
  CHECK(error == "--ingest udp:1: unix:PATH or tcp:127.0.0.1:PORT");
  CHECK(!ParseIngestEndpoint("unix:", &e, &error));
}

TEST_CASE("ingest server: senders over unix and TCP, acknowledged, clocks measured, a bad one closed alone") {
  Stream stream;
  IngestServer::Options o;
  IngestEndpoint unix_end, tcp_end;
  std::string error;
  REQUIRE(ParseIngestEndpoint("unix:" + TempSocket(), &unix_end, &error));
  REQUIRE(ParseIngestEndpoint("tcp:127.0.0.1:0", &tcp_end, &error));
  o.endpoints = {unix_end, tcp_end};
  o.ping_interval_ns = 20'000'000;
  o.stall_timeout_ns = 300'000'000;
  IngestServer server(stream, o);
  REQUIRE_MESSAGE(server.Start(&error), error);
  TestPipeline pipeline(stream);
  REQUIRE(server.bound().size() == 2);
  REQUIRE(server.bound()[1].port != 0);

  // Rank 0 over the unix socket, its clock 1 s behind ours.
  const int64_t skew = -1'000'000'000;
  Client a(server.bound()[0]);
  REQUIRE(a.ok());
  a.Send(Hello(0, HostNowNs() + skew));
  const uint64_t t = HostNowNs() + skew;
  a.Send(Batch(1, t, true) + Batch(2, t + 200'000, false));
  std::optional<std::string> ack = a.Until(wire::Body::IngestAck, true, skew);
  REQUIRE(ack);
  uint64_t acked = Client::AckSeq(*ack);
  if (acked < 2) {
    ack = a.Until(wire::Body::IngestAck, true, skew);
    REQUIRE(ack);
    acked = Client::AckSeq(*ack);
  }
  CHECK(acked == 2);

  // Rank 1 over TCP sends garbage after its hello: closed, with the reason.
  Client b(server.bound()[1]);
  REQUIRE(b.ok());
  b.Send(Hello(1, HostNowNs()));
  b.Send(std::string("\x08\x00\x00\x00garbage!", 12));
  CHECK(!b.Until(wire::Body::IngestAck, false).has_value());  // closed.

  // Rank 0 goes on: its pongs give an offset of about +1 s.
  for (int i = 0; i < 5; ++i) a.Until(wire::Body::IngestPing, true, skew);
  a.Send(Batch(3, t + 400'000, false));
  REQUIRE(a.Until(wire::Body::IngestAck, true, skew));
  std::vector<IngestServer::SourceStatus> s;
  REQUIRE(WaitFor([&] {
    s = server.Sources();
    return s.size() == 2 && !s[1].connected && s[0].batches == 3 && s[0].best_rtt_ns != 0;
  }));
  CHECK(s[0].label == "rank 0");
  CHECK(s[0].connected);
  CHECK(s[0].events == 300);
  CHECK(s[0].endpoint == "unix:" + TempSocket());
  CHECK(std::abs(s[0].clock_offset_ns - 1'000'000'000) <
        250'000'000);  // (the skew is 1 s; a loaded machine adds latency)
  CHECK(s[1].label == "rank 1");
  CHECK(s[1].closed_reason.starts_with("frame 2 (bytes "));
  CHECK(s[1].closed_reason.find("not a liveprof frame") != std::string::npos);

  // The events: in the stream's ids, on a row named for the sender, on our clock.
  const std::vector<Event> events = pipeline.Take(300);
  REQUIRE(events.size() == 300);
  CHECK(stream.names().Get(events[0].name) == "next_batch");
  CHECK(stream.names().Get(stream.track(events[0].track).name) == "rank 0 · loader");
  CHECK(events[0].kind == EventKind::kInputSpan);
  const int64_t moved = static_cast<int64_t>(events[0].ts) - static_cast<int64_t>(t);
  CHECK(std::abs(moved - 1'000'000'000) < 250'000'000);

  // Gone mid-frame: the whole frames before it stay, the torn one is dropped and said.
  Client c(server.bound()[1]);
  REQUIRE(c.ok());
  const std::string batch = Batch(1, t, true);
  c.Send(Hello(2, HostNowNs()) + batch + batch.substr(0, 30));
  REQUIRE(WaitFor([&] { return server.Sources().size() == 3 && server.Sources()[2].batches == 1; }));
  c.Close();
  REQUIRE(WaitFor([&] { return !server.Sources()[2].connected; }));
  CHECK(server.Sources()[2].closed_reason == "closed mid-frame (30 bytes of an unfinished frame dropped)");
  CHECK(pipeline.Take(100).size() == 100);

  // Silent mid-frame: closed after the stall timeout.
  Client d(server.bound()[0]);
  REQUIRE(d.ok());
  d.Send(Hello(3, HostNowNs()) + batch.substr(0, 10));
  REQUIRE(WaitFor([&] { return server.Sources().size() == 4 && !server.Sources()[3].connected; }));
  CHECK(server.Sources()[3].closed_reason.starts_with("stalled mid-frame for "));
  server.Stop();
  CHECK(!server.Sources()[0].connected);
  CHECK(server.Sources()[0].closed_reason == "the server stopped");
}

TEST_CASE("ingest server: a sender on this host reads our clock: offset 0, not estimated, through pongs") {
  // Its hello read the clock 80 ms before it came (a loaded machine): a
  // one-way estimate would put its events 80 ms late, and the first pong
  // would move the later ones back against the earlier.
  constexpr uint64_t kHelloTransitNs = 80'000'000;
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.ping_interval_ns = 20'000'000;
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  TestPipeline pipeline(stream);
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  Client a(server.bound()[0]);
  REQUIRE(a.ok());
  a.Send(Hello(0, HostNowNs() - kHelloTransitNs, host));
  const uint64_t t = HostNowNs();
  a.Send(Batch(1, t, true));
  REQUIRE(a.Until(wire::Body::IngestAck, true));
  for (int i = 0; i < 3; ++i) REQUIRE(a.Until(wire::Body::IngestPing, true));
  a.Send(Batch(2, t + 200'000, false));
  REQUIRE(a.Until(wire::Body::IngestAck, true));
  REQUIRE(WaitFor([&] { return server.Sources()[0].batches == 2 && server.Sources()[0].best_rtt_ns != 0; }));
  CHECK(server.Sources()[0].clock_offset_ns == 0);
  const std::vector<Event> events = pipeline.Take(200);
  REQUIRE(events.size() == 200);
  CHECK(events[0].ts == t);  // on our clock as it was read: no shift
  CHECK(events[100].ts == t + 200'000);
}

TEST_CASE("ingest server: a sender's progress is declared on its ring once a pong bounds its clock") {
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.ping_interval_ns = 20'000'000;
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  TestPipeline pipeline(stream);
  auto ring = [&]() -> std::shared_ptr<Ring> {
    std::vector<std::shared_ptr<Ring>> rings;
    stream.CopyRings(&rings);
    for (auto& r : rings) {
      if (r->name == "ingest rank 0") return r;
    }
    return nullptr;
  };

  // Its clock 1 s behind ours. Before a pong, the hello's one-way offset
  // has no bound: the progress is not declared.
  const int64_t skew = -1'000'000'000;
  Client a(server.bound()[0]);
  REQUIRE(a.ok());
  a.Send(Hello(0, HostNowNs() + skew));
  const uint64_t t = HostNowNs() + skew;
  a.Send(Batch(1, t, true, t - 1'000'000));
  REQUIRE(a.Until(wire::Body::IngestAck, false));
  REQUIRE(ring() != nullptr);
  CHECK(ring()->progress == RingProgress::kDeclared);
  CHECK(ring()->declared_ns.load() == 0);

  // Pongs: then the progress on our clock, less the best round trip (what a
  // better offset estimate may still move it by) and 50 ms (drift; senders
  // that join later). The progress comes after the last pong's reading, so
  // the newest offset maps it.
  for (int i = 0; i < 3; ++i) REQUIRE(a.Until(wire::Body::IngestPing, true, skew));
  REQUIRE(WaitFor([&] { return server.Sources()[0].best_rtt_ns != 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const uint64_t progress = HostNowNs() + skew - 2'000'000;
  a.Send(Batch(2, t + 200'000, false, progress));
  REQUIRE(a.Until(wire::Body::IngestAck, false));                      // (no pong meanwhile: the offset stays)
  REQUIRE(WaitFor([&] { return server.Sources()[0].batches == 2; }));  // (its status is published after the ack)
  const IngestServer::SourceStatus s = server.Sources()[0];
  const uint64_t expected = progress + s.clock_offset_ns - s.best_rtt_ns - 50'000'000;
  CHECK(ring()->declared_ns.load() == expected);
  CHECK(std::abs(static_cast<int64_t>(expected) - static_cast<int64_t>(HostNowNs())) < 500'000'000);

  // It only moves forward; a batch that cannot say leaves it.
  a.Send(Batch(3, t + 400'000, false, progress - 5'000'000) + Batch(4, t + 600'000, false, 0));
  const std::optional<std::string> ack = a.Until(wire::Body::IngestAck, false);
  REQUIRE(ack);
  if (Client::AckSeq(*ack) < 4) REQUIRE(a.Until(wire::Body::IngestAck, false));
  CHECK(ring()->declared_ns.load() == expected);

  // A stopping sender (its program disconnects or exits) has sent all it
  // recorded: its events are held back for nothing, released as far as the
  // drain loop's clock, and its last batch acknowledged without waiting out
  // the silent-source bound (3 s).
  a.Send(Batch(5, t + 800'000, false, 0, -1, /*stopping=*/true));
  REQUIRE(a.Until(wire::Body::IngestAck, false));
  CHECK(ring()->declared_ns.load() == UINT64_MAX);
  server.Stop();
}

TEST_CASE("ingest server: a source whose ring is half full is not read until it drains (nothing dropped)") {
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.ring_capacity = 1024;
  o.stall_timeout_ns = 200'000'000;
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);

  // 20 batches of 100 events at once, and nobody drains: the server takes
  // them while the ring is at most half full (512), so 6, and waits.
  Client a(server.bound()[0]);
  REQUIRE(a.ok());
  const uint64_t t = HostNowNs();
  std::string bytes = Hello(0, t);
  for (uint64_t seq = 1; seq <= 20; ++seq) bytes += Batch(seq, t + seq * 100'000, seq == 1);
  a.Send(bytes);
  REQUIRE(WaitFor([&] { return !server.Sources().empty() && server.Sources()[0].batches == 6; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // (twice the stall timeout: waiting is ours)
  IngestServer::SourceStatus s = server.Sources()[0];
  CHECK(s.connected);
  CHECK(s.batches == 6);
  CHECK(s.ring_dropped == 0);
  CHECK(s.acked_seq == 0);  // in the ring, not handled: not acknowledged.
  CHECK(s.unacked_batches == 6);

  // Drained, it goes on: every event, none dropped, all acknowledged.
  TestPipeline pipeline(stream);
  const std::vector<Event> got = pipeline.Take(2000);
  CHECK(got.size() == 2000);
  std::optional<std::string> ack;
  REQUIRE(WaitFor([&] { return server.Sources()[0].batches == 20; }));
  s = server.Sources()[0];
  CHECK(s.connected);
  CHECK(s.ring_dropped == 0);
  CHECK(s.events == 2000);
  uint64_t last_ack = 0;
  while (last_ack < 20 && (ack = a.Until(wire::Body::IngestAck, true))) last_ack = Client::AckSeq(*ack);
  CHECK(last_ack == 20);
  server.Stop();
}

TEST_CASE("ingest server: a unix path that is not a socket is not taken over") {
  const std::string path = TempSocket() + ".file";
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fclose(f);
  Stream stream;
  IngestServer::Options o;
  IngestEndpoint e;
  std::string error;
  REQUIRE(ParseIngestEndpoint("unix:" + path, &e, &error));
  o.endpoints = {e};
  IngestServer server(stream, o);
  CHECK(!server.Start(&error));
  CHECK(error == "ingest unix:" + path + ": exists and is not a socket");
  ::unlink(path.c_str());
}

TEST_CASE(
    "ingest server: a live server's socket is not taken over, events from the far future are dropped and counted") {
  Stream stream;
  IngestServer::Options o;
  IngestEndpoint e;
  std::string error;
  REQUIRE(ParseIngestEndpoint("unix:" + TempSocket() + ".live", &e, &error));
  o.endpoints = {e};
  o.max_future_ns = 1'000'000'000;
  IngestServer first(stream, o);
  REQUIRE_MESSAGE(first.Start(&error), error);
  CHECK(!first.Start(&error));
  CHECK(error == "ingest: the server is running already");
  IngestServer second(stream, o);
  CHECK(!second.Start(&error));
  CHECK(error == "ingest " + e.ToString() + ": another server listens there");

  Client a(first.bound()[0]);  // the first still serves.
  REQUIRE(a.ok());
  a.Send(Hello(0, HostNowNs()));
  // 100 events now, then 100 an hour ahead: those are dropped.
  a.Send(Batch(1, HostNowNs(), true) + Batch(2, HostNowNs() + 3'600'000'000'000ull, false));
  // (the other server's probe was a connection too: it said nothing and left)
  auto rank0 = [&] {
    for (const auto& s : first.Sources()) {
      if (s.label == "rank 0") return s;
    }
    return IngestServer::SourceStatus{};
  };
  REQUIRE(WaitFor([&] { return rank0().batches == 2; }));
  CHECK(rank0().future_dropped == 100);
  CHECK(rank0().worker == 1);
  CHECK(Drain(stream).size() == 100);
  first.Stop();
  // Stopped: the path is free again.
  REQUIRE_MESSAGE(second.Start(&error), error);
  second.Stop();
}

// What the real GPU's sender met: one event on track 0, never
// defined. Refused alone: the source keeps its connection, the rest of each
// batch is taken and acknowledged, the ack says what was refused, the
// console says it once per source and reason, and the counts are kept per
// source and summed over a worker's connections.
TEST_CASE("ingest server: one bad event is refused alone, counted, told in the ack, said once, the source goes on") {
  Stream stream;
  StderrCapture console;
  IngestServer server(stream, AtTempSocket());
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  TestPipeline pipeline(stream);
  Client a(server.bound()[0]);
  REQUIRE(a.ok());
  a.Send(Hello(0, HostNowNs()));
  const uint64_t t = HostNowNs();
  a.Send(Batch(1, t, true, 0, 57));
  std::optional<std::string> ack = a.Until(wire::Body::IngestAck, true);
  REQUIRE(ack);
  Client::AckFields f = Client::Ack(*ack);
  CHECK(f.seq == 1);
  CHECK(f.refused == 1);
  CHECK(f.refused_seq == 1);
  CHECK(f.reason == "undefined_track");
  CHECK(f.message == "event 57: track 0 was never defined");

  a.Send(Batch(2, t + 200'000, false, 0, 3));
  REQUIRE((ack = a.Until(wire::Body::IngestAck, true)));
  f = Client::Ack(*ack);
  CHECK(f.seq == 2);
  CHECK(f.refused == 1);
  CHECK(f.refused_seq == 2);
  CHECK(f.message == "event 3: track 0 was never defined");

  a.Send(Batch(3, t + 400'000, false));  // the next batch: taken whole.
  REQUIRE((ack = a.Until(wire::Body::IngestAck, true)));
  f = Client::Ack(*ack);
  CHECK(f.seq == 3);
  CHECK(f.refused == 0);
  CHECK(f.refused_seq == 0);
  CHECK(f.reason.empty());

  std::vector<IngestServer::SourceStatus> s;
  REQUIRE(WaitFor([&] {
    s = server.Sources();
    return s.size() == 1 && s[0].batches == 3;
  }));
  CHECK(s[0].connected);
  CHECK(s[0].closed_reason.empty());
  CHECK(s[0].events == 298);
  CHECK(s[0].refused_events == 2);
  REQUIRE(s[0].refused.size() == 1);
  CHECK(s[0].refused[0].reason == "undefined_track");
  CHECK(s[0].refused[0].events == 2);
  CHECK(s[0].refused[0].example.starts_with("frame 2 (bytes "));
  CHECK(s[0].refused[0].example.ends_with("): event 57: track 0 was never defined"));
  CHECK(pipeline.Take(298).size() == 298);
  CHECK(console.Count("sent an event the server refused (undefined_track): frame 2 (bytes ") == 1);
  CHECK(console.Count("liveprof: ingest source 1 (rank 0, unix:" + TempSocket() + ") sent an event") == 1);
  CHECK(console.Count("closed") == 0);

  // The same worker again (a reconnect): its own counts, and summed per source for /metrics.
  Client b(server.bound()[0]);
  REQUIRE(b.ok());
  b.Send(Hello(0, HostNowNs()) + Batch(1, t, true, 0, 99));
  REQUIRE((ack = b.Until(wire::Body::IngestAck, true)));
  CHECK(Client::Ack(*ack).refused == 1);
  REQUIRE(WaitFor([&] {
    s = server.Sources();
    return s.size() == 2 && s[1].refused_events == 1;
  }));
  const std::vector<IngestServer::RefusedCount> totals = server.RefusedTotals();
  REQUIRE(totals.size() == 1);
  CHECK(totals[0].source == "ingest rank 0");
  CHECK(totals[0].reason == "undefined_track");
  CHECK(totals[0].events == 3);
  CHECK(console.Count("sent an event the server refused (undefined_track)") == 2);  // once per source.
  server.Stop();
  console.Restore();
}

// The caps on a connection: past max_sources a new one is closed at once,
// with the reason; a sender that does not read what the server sends (acks,
// pings, controls: here 40,000 controls it never reads, over 1 MiB) is
// closed at the server's next pass over it, the others' service unharmed.
TEST_CASE("ingest server: past max_sources a connection is refused, a sender that does not read is closed") {
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.max_sources = 1;
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  Client a(server.bound()[0]);
  REQUIRE(a.ok());
  a.Send(Hello(0, HostNowNs()));
  REQUIRE(WaitFor([&] { return server.Sources().size() == 1 && server.Sources()[0].worker != 0; }));

  Client b(server.bound()[0]);
  REQUIRE(b.ok());
  REQUIRE(WaitFor([&] { return server.Sources().size() == 2 && !server.Sources()[1].connected; }));
  CHECK(server.Sources()[1].closed_reason == "refused: 1 sources connected already, none idle");
  CHECK(server.Sources()[0].connected);

  // `a` never reads: the controls pile up past the socket's buffers and 1 MiB.
  IngestServer::CaptureRequest r;
  r.host_level = 1;
  for (int i = 0; i < 40'000; ++i) REQUIRE_MESSAGE(server.Capture(1, r, &error), error);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // (the io thread queues them)
  a.Send(Batch(1, HostNowNs(), true));                          // a pass over it: then the bound is looked at.
  REQUIRE(WaitFor([&] { return !server.Sources()[0].connected; }));
  CHECK(server.Sources()[0].closed_reason == "not reading what the server sends (acks, pings)");
  CHECK(server.Sources()[0].batches == 1);
  server.Stop();
}

TEST_CASE("ingest status: /api/status's sources, each field, a capture's time left and a cost or null") {
  IngestServer::SourceStatus live;
  live.id = 3;
  live.endpoint = "unix:/tmp/x.sock";
  live.label = "train.py:7";
  live.host = "h1";
  live.pid = 7;
  live.rank = 2;
  live.program = "train.py";
  live.peer = "pid 7";
  live.connected = true;
  live.frames = 10;
  live.batches = 8;
  live.acked_seq = 6;
  live.unacked_batches = 2;
  live.events = 1000;
  live.clock_offset_ns = -5;
  live.best_rtt_ns = 40'000;
  live.worker = 1;
  live.capture = {.known = true,
                  .control_id = 4,
                  .host_level = 2,
                  .python_scopes = true,
                  .gpu = true,
                  .gpu_available = true,
                  .until_ns = 3'500'000'000,
                  .gpu_level = 1};
  live.cost.now.at_ns = 2'000'000'000;
  live.cost.now.rss_bytes = 1 << 20;
  IngestServer::SourceStatus gone;
  gone.id = 4;
  gone.rank = -1;
  gone.closed_reason = "bad frame";
  gone.lost_batches = 1;
  gone.sender_dropped = 2;
  gone.ring_dropped = 3;
  gone.duplicate_batches = 4;
  gone.future_dropped = 5;
  gone.refused_events = 6;
  gone.refused = {{"no such name", 6, "name 99 in event 0"}};
  gone.capture = {.known = true, .until_ns = 1'000'000'000, .gpu_level = -1};

  const nlohmann::json j = nlohmann::json::parse(IngestSourcesJson({live, gone}, 3'000'000'000));
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 2);
  const nlohmann::json& a = j[0];
  CHECK(a["id"] == 3);
  CHECK(a["endpoint"] == "unix:/tmp/x.sock");
  CHECK(a["label"] == "train.py:7");
  CHECK(a["host"] == "h1");
  CHECK(a["pid"] == 7);
  CHECK(a["rank"] == 2);
  CHECK(a["program"] == "train.py");
  CHECK(a["peer"] == "pid 7");
  CHECK(a["connected"] == true);
  CHECK(a["closed_reason"] == "");
  CHECK(a["closed_cleanly"] == false);
  CHECK(a["frames"] == 10);
  CHECK(a["batches"] == 8);
  CHECK(a["acked_seq"] == 6);
  CHECK(a["unacked_batches"] == 2);
  CHECK(a["events"] == 1000);
  CHECK(a["clock_offset_ns"] == -5);
  CHECK(a["best_rtt_ns"] == 40000);
  CHECK(a["worker"] == 1);
  CHECK(a["refused"] == nlohmann::json::array());
  const nlohmann::json& c = a["capture"];
  CHECK(c["control_id"] == 4);
  CHECK(c["host_level"] == 2);
  CHECK(c["python_scopes"] == true);
  CHECK(c["gpu"] == true);
  CHECK(c["gpu_available"] == true);
  CHECK(c["gpu_level"] == "full");
  CHECK(c["until_ns"] == 3'500'000'000);
  CHECK(c["seconds_left"].get<double>() == doctest::Approx(0.5));
  REQUIRE(a["cost"].is_object());
  CHECK(a["cost"]["rss_bytes"] == 1 << 20);

  const nlohmann::json& b = j[1];
  CHECK(b["id"] == 4);
  CHECK(b["rank"] == -1);
  CHECK(b["connected"] == false);
  CHECK(b["closed_reason"] == "bad frame");
  CHECK(b["lost_batches"] == 1);
  CHECK(b["sender_dropped"] == 2);
  CHECK(b["ring_dropped"] == 3);
  CHECK(b["duplicate_batches"] == 4);
  CHECK(b["future_dropped"] == 5);
  CHECK(b["refused_events"] == 6);
  CHECK(b["refused"] ==
        nlohmann::json::parse(R"([{"reason":"no such name","events":6,"example":"name 99 in event 0"}])"));
  CHECK(b["capture"]["gpu_level"].is_null());
  CHECK(b["capture"]["seconds_left"] == 0.0);  // (ended before now)
  CHECK(b["cost"].is_null());

  IngestServer::SourceStatus unknown;
  CHECK(nlohmann::json::parse(IngestSourcesJson({unknown}, 0))[0]["capture"].is_null());
  CHECK(IngestSourcesJson({}, 0) == "[]");
}

}  // namespace
}  // namespace liveprof::ingest_server_test
