// The ingest server under idle sources and unfinished frames:
// a source that answers no ping is closed with its reason;
// at the source cap an idle source gives way to a real sender; unfinished
// frames past the budget close their largest holders, whichever connection
// is being read.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ingest/ingest_server.h"
#include "ingest/ingest_test_client.h"
#include "stream/clock.h"
#include "stream/stream.h"

namespace liveprof::ingest_limits_test {
namespace {

using ingest_test::AtTempSocket;
using ingest_test::Batch;
using ingest_test::Client;
using ingest_test::Hello;
using ingest_test::TestPipeline;
using ingest_test::WaitFor;

size_t Connected(const IngestServer& server) {
  size_t n = 0;
  for (const auto& s : server.Sources()) n += s.connected;
  return n;
}

TEST_CASE("ingest limits: a source that answers no ping is closed, with its reason") {
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.ping_interval_ns = 100'000'000;
  o.pong_timeout_ns = 500'000'000;
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  Client silent(server.bound()[0]), live(server.bound()[0]);
  REQUIRE(silent.ok());
  REQUIRE(live.ok());
  silent.Send(Hello(0, HostNowNs()));
  live.Send(Hello(1, HostNowNs()));
  // `live` answers its pings for a while (and sends a batch); `silent` never does.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  live.Send(Batch(1, HostNowNs(), true));
  while (std::chrono::steady_clock::now() < until) REQUIRE(live.Until(wire::Body::IngestPing, true));
  const auto sources = server.Sources();
  REQUIRE(sources.size() == 2);
  CHECK(!sources[0].connected);
  CHECK(sources[0].closed_reason.starts_with("answered no ping in "));
  CHECK(sources[0].closed_reason.find("IngestPong") != std::string::npos);
  CHECK(sources[1].connected);
  CHECK(sources[1].batches == 1);
  server.Stop();
}

// The lock-out: every place held by sources that said hello and
// then nothing; a real sender (a hello, then batches) takes an idle one's
// place instead of being refused.
TEST_CASE("ingest limits: at the source cap an idle source gives way to a new sender") {
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.max_sources = 8;
  o.pong_timeout_ns = 60'000'000'000;  // (the idle ones would go anyway: not this test's point)
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  TestPipeline pipeline(stream);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<Client>(server.bound()[0]));
    REQUIRE(idle.back()->ok());
    idle.back()->Send(Hello(i, HostNowNs()));
  }
  REQUIRE(WaitFor([&] { return Connected(server) == 8; }));
  // Newly idle: not yet idle long enough (2 s) to give way: refused.
  Client early(server.bound()[0]);
  REQUIRE(WaitFor([&] { return server.Sources().size() == 9; }));
  CHECK(server.Sources()[8].closed_reason == "refused: 8 sources connected already, none idle");
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));

  Client real(server.bound()[0]);
  REQUIRE(real.ok());
  real.Send(Hello(42, HostNowNs()));
  real.Send(Batch(1, HostNowNs(), true));
  const auto ack = real.Until(wire::Body::IngestAck, true);
  REQUIRE(ack);
  CHECK(Client::AckSeq(*ack) == 1);
  // (the status is published just after the ack is queued: wait for it)
  REQUIRE(WaitFor([&] { return server.Sources().size() == 10 && server.Sources()[9].batches == 1; }));
  const auto sources = server.Sources();
  REQUIRE(sources.size() == 10);
  // The oldest idle one gave its place, and says why.
  CHECK(!sources[0].connected);
  CHECK(sources[0].closed_reason.starts_with("gave its place to a new sender: 8 sources connected"));
  CHECK(sources[9].connected);
  CHECK(sources[9].batches == 1);
  CHECK(Connected(server) == 8);
  server.Stop();
}

// One process past its cap of sources is refused, naming the peer as the
// kernel gave it (SO_PEERCRED); another process still gets in, and a place
// freed is taken again.
TEST_CASE("ingest limits: a process past max_sources_per_peer is refused, another process is not") {
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.max_sources_per_peer = 4;
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  TestPipeline pipeline(stream);
  std::vector<std::unique_ptr<Client>> mine;
  for (int i = 0; i < 5; ++i) {
    mine.push_back(std::make_unique<Client>(server.bound()[0]));
    REQUIRE(mine.back()->ok());
    // The fifth is refused at accept, maybe before its hello is written.
    if (i < 4) {
      mine.back()->Send(Hello(i, HostNowNs()));
    } else {
      mine.back()->TrySend(Hello(i, HostNowNs()));
    }
  }
  REQUIRE(WaitFor([&] { return server.Sources().size() == 5 && Connected(server) == 4; }));
  const std::string me = "pid " + std::to_string(::getpid()) + ", uid " + std::to_string(::getuid());
  std::vector<IngestServer::SourceStatus> s = server.Sources();
  CHECK(s[0].peer == me);
  CHECK(!s[4].connected);
  CHECK(s[4].closed_reason == "refused: its peer (" + me + ") has 4 sources connected already (max_sources_per_peer)");

  // Another process: its own peer, taken while this one is at its cap.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Client other(server.bound()[0]);
    other.Send(Hello(9, HostNowNs()));
    other.Send(Batch(1, HostNowNs(), true));
    const auto ack = other.Until(wire::Body::IngestAck, true);
    ::_exit(ack && Client::AckSeq(*ack) == 1 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE(WaitFor([&] { return server.Sources().size() == 6; }));
  CHECK(server.Sources()[5].peer == "pid " + std::to_string(child) + ", uid " + std::to_string(::getuid()));
  CHECK(server.Sources()[5].batches == 1);

  // One of this process's closes: its place is taken again.
  mine[0]->Close();
  REQUIRE(WaitFor([&] { return !server.Sources()[0].connected; }));
  Client again(server.bound()[0]);
  again.Send(Hello(7, HostNowNs()));
  REQUIRE(WaitFor([&] { return server.Sources().size() == 7 && server.Sources()[6].worker != 0; }));
  CHECK(server.Sources()[6].connected);
  server.Stop();
}

// 8 senders each hold 1 MiB of a frame that never ends; the budget is
// 4 MiB: the largest holders are closed until the rest fit, although the
// connection being read when the budget is passed is seldom the largest.
TEST_CASE("ingest limits: unfinished frames past the budget close their largest holders") {
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.max_buffered_bytes = size_t{4} << 20;
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  constexpr int kSenders = 8;
  constexpr uint32_t kFrame = 2u << 20;  // what the size prefix says
  std::string torn(4 + (size_t{1} << 20), 'x');
  std::memcpy(torn.data(), &kFrame, 4);
  std::vector<std::unique_ptr<Client>> senders;
  for (int i = 0; i < kSenders; ++i) {
    senders.push_back(std::make_unique<Client>(server.bound()[0]));
    REQUIRE(senders.back()->ok());
    senders.back()->Send(Hello(i, HostNowNs()));
    senders.back()->TrySend(torn);  // (the server may close it for the budget as it reads)
  }
  // Every byte read (1 MiB each: the server's reads are 64 KiB) and the
  // budget held: at most 4 of them left, the others closed for it.
  const std::string full = "the server's buffers for received frames are full (4 MiB); this sender held the most";
  auto closed_for_budget = [&] {
    int n = 0;
    for (const auto& s : server.Sources()) n += !s.connected && s.closed_reason.starts_with(full);
    return n;
  };
  REQUIRE(WaitFor([&] { return server.Sources().size() == kSenders && closed_for_budget() >= kSenders - 4; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // (any bytes still in flight)
  CHECK(Connected(server) <= 4);
  CHECK(static_cast<size_t>(closed_for_budget()) + Connected(server) == kSenders);
  for (const auto& s : server.Sources()) {
    if (!s.connected) CHECK(s.closed_reason.find("not acknowledged: sent again on reconnect") != std::string::npos);
  }
  server.Stop();
}

// How each source ended is said, in /api/status and on the console: a
// clean close (and then the job is "finished", not cut off), a sender
// killed with the server's frames unread (a reset), a frame cut short.
TEST_CASE("ingest limits: a clean close, a killed sender and a cut frame each say how the source ended") {
  Stream stream;
  IngestServer::Options o = AtTempSocket();
  o.ping_interval_ns = 60'000'000'000;  // one ping, at the hello
  IngestServer server(stream, o);
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  TestPipeline pipeline(stream);
  {
    Client clean(server.bound()[0]);
    clean.Send(Hello(0, HostNowNs()));
    clean.Send(Batch(1, HostNowNs(), true));
    REQUIRE(clean.Until(wire::Body::IngestAck, true));  // (the ping read on the way)
  }
  REQUIRE(WaitFor([&] { return server.Sources().size() == 1 && !server.Sources()[0].connected; }));
  {
    Client killed(server.bound()[0]);
    killed.Send(Hello(1, HostNowNs()));
    REQUIRE(WaitFor([&] { return server.Sources().size() == 2 && server.Sources()[1].worker != 0; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // (its ping is in its socket, unread)
  }
  REQUIRE(WaitFor([&] { return !server.Sources()[1].connected; }));
  {
    Client cut(server.bound()[0]);
    cut.Send(Hello(2, HostNowNs()));
    REQUIRE(cut.Until(wire::Body::IngestPing, true));
    cut.Send(Batch(2, HostNowNs(), true).substr(0, 40));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(WaitFor([&] { return server.Sources().size() == 3 && !server.Sources()[2].connected; }));
  const auto s = server.Sources();
  CHECK(s[0].closed_reason == "closed by the sender");
  CHECK(s[0].closed_cleanly);
  CHECK(s[0].batches == 1);
  CHECK(s[1].closed_reason == "reset by the sender (killed, or gone without closing)");
  CHECK(!s[1].closed_cleanly);
  CHECK(s[2].closed_reason == "closed mid-frame (40 bytes of an unfinished frame dropped)");
  CHECK(!s[2].closed_cleanly);
  server.Stop();
}

}  // namespace
}  // namespace liveprof::ingest_limits_test
