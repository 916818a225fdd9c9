// The fleet over a real nats-server (Debian's, started here on loopback
// with JetStream and a store folder): an agent's step summaries reach the
// fleet view exactly once — across a nats-server killed and restarted while
// the agent keeps producing (its outbox holds them), and a fleet view
// restarted (it rebuilds from the stream) — a viewport query goes to the
// agent and back, a host with no agent is a 503, and a foreign message on
// the job's subjects is counted, not applied.
#include <nats/nats.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "fleet/fleet_agent.h"
#include "fleet/fleet_view.h"
#include "fleet/nats_link.h"
#include "fleet/nats_test_server.h"
#include "wait_for.h"

namespace liveprof::fleet_nats_test {
namespace {

using std::chrono::milliseconds;
using test::FreePort;
using NatsServer = test::NatsTestServer;
constexpr milliseconds kPatience{20000};

// The fleet's round trips through nats-server get twice the usual patience.
bool WaitFor(const std::function<bool()>& done) { return test::WaitFor(done, kPatience); }

// Steps of `ranks` ranks, handed to the agent as the pipeline would.
class StepSource {
 public:
  explicit StepSource(int ranks) : ranks_(ranks) {}
  void Produce(int steps) {
    std::lock_guard lock(mu_);
    for (int s = 0; s < steps; ++s, ++next_step_) {
      for (int r = 0; r < ranks_; ++r) {
        PodNewStep p;
        p.label = "rank " + std::to_string(r);
        p.step_num = next_step_;
        p.cell.step_ns = 10'000'000 + static_cast<uint64_t>(r) * 1'000'000;
        p.cell.bucket_ns[0] = p.cell.step_ns;
        pending_.push_back(p);
      }
    }
  }
  std::vector<PodNewStep> Take(uint64_t* dropped) {
    std::lock_guard lock(mu_);
    *dropped = 0;
    std::vector<PodNewStep> out;
    out.swap(pending_);
    return out;
  }

 private:
  std::mutex mu_;
  int ranks_;
  int64_t next_step_ = 0;
  std::vector<PodNewStep> pending_;
};

FleetView::Options ViewOptions(const std::string& url) {
  FleetView::Options o;
  o.nats.url = url;
  o.job = "jt";
  o.render_period = milliseconds(50);
  o.query_timeout_ms = 2000;
  o.state.gone_after_ns = 2'000'000'000;
  return o;
}

uint64_t Steps(const FleetView& v) { return v.counts().steps; }

TEST_CASE("fleet over nats-server: every step once, across a server restart and a view restart") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("liveprof-fleet-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const uint16_t port = FreePort();
  NatsServer server(port, dir.string());
  REQUIRE(server.Start());

  constexpr int kRanks = 3;
  StepSource source(kRanks);
  FleetAgent::Options ao;
  // A list of servers, the first never up: cnats goes on to the next.
  ao.nats.url = "nats://127.0.0.1:" + std::to_string(FreePort()) + "," + server.url();
  ao.job = "jt";
  ao.host = "host-a";
  ao.status_period = milliseconds(200);
  ao.poll_period = milliseconds(10);
  ao.take_steps = [&](uint64_t* dropped) { return source.Take(dropped); };
  ao.query = [](const std::string& target) {
    if (target.starts_with("/html")) return FleetQueryReply{200, "text/html", "<script>alert(1)</script>"};
    return FleetQueryReply{200, "application/json", "{\"echo\":\"" + target + "\"}"};
  };
  FleetAgent agent(ao);
  std::string error;
  REQUIRE_MESSAGE(agent.Start(&error), error);

  auto view = std::make_unique<FleetView>(ViewOptions(server.url()));
  REQUIRE_MESSAGE(view->Start(&error), error);

  source.Produce(50);
  REQUIRE(WaitFor([&] { return Steps(*view) == 50 * kRanks; }));

  SUBCASE("a query goes to the host's agent and back; a host with no agent is a 503") {
    const FleetQueryReply r = view->Query("host-a", "/api/trace?t0=1&t1=2");
    CHECK(r.status == 200);
    CHECK(r.body == "{\"echo\":\"/api/trace?t0=1&t1=2\"}");
    const FleetQueryReply none = view->Query("host-zz", "/api/trace");
    CHECK(none.status == 503);
    CHECK(none.body.find("no agent of host 'host-zz' answers") != std::string::npos);
    // Whatever answers on the query subject, the fleet view passes on JSON only.
    const FleetQueryReply html = view->Query("host-a", "/html");
    CHECK(html.status == 502);
    CHECK(html.content_type == "application/json");
    CHECK(html.body.find("<script>") == std::string::npos);
  }

  SUBCASE("a foreign message on the job's subjects is counted and not applied") {
    NatsLink raw;
    NatsOptions no;
    no.url = server.url();
    REQUIRE(raw.Connect(no, &error));
    REQUIRE(WaitFor([&] { return raw.connected(); }));
    const char junk[] = "{\"type\":\"fleet_step\",\"v\":1,\"job\":\"jt\"";
    REQUIRE(natsConnection_Publish(raw.connection(), "liveprof.jt.step.host-a.0", junk,
                                   static_cast<int>(sizeof junk - 1)) == NATS_OK);
    natsConnection_Flush(raw.connection());
    REQUIRE(WaitFor([&] { return view->counts().rejected[static_cast<size_t>(FleetReject::kMalformed)] == 1; }));
    source.Produce(1);
    REQUIRE(WaitFor([&] { return Steps(*view) == 51 * kRanks; }));
    CHECK(view->counts().missing_steps == 0);
  }

  SUBCASE("nats-server killed and restarted: the agent keeps what it made, the view gets each step once") {
    server.Kill(SIGKILL);
    REQUIRE(WaitFor([&] { return !agent.stats().connected; }));
    source.Produce(50);  // made while the server is away.
    REQUIRE(WaitFor([&] { return agent.stats().outbox >= 50 * kRanks; }));
    REQUIRE(server.Start());
    REQUIRE(WaitFor([&] { return Steps(*view) == 100 * kRanks; }));
    const FleetCounts c = view->counts();
    CHECK(c.missing_steps == 0);
    CHECK(c.duplicate_steps == 0);
    CHECK(agent.stats().steps_published == 100 * kRanks);
    CHECK(agent.stats().steps_dropped == 0);

    // A fleet view restarted mid-job rebuilds its picture from the stream.
    view->Stop();
    view = std::make_unique<FleetView>(ViewOptions(server.url()));
    REQUIRE(view->Start(&error));
    REQUIRE(WaitFor([&] { return Steps(*view) == 100 * kRanks; }));
    source.Produce(10);
    REQUIRE(WaitFor([&] { return Steps(*view) == 110 * kRanks; }));
    const FleetCounts after = view->counts();
    CHECK(after.missing_steps == 0);
    CHECK(after.duplicate_steps == 0);
    CHECK(after.restarts == 0);
  }

  view->Stop();
  agent.Stop();
  server.Kill(SIGTERM);
  std::filesystem::remove_all(dir);
}

TEST_CASE("fleet over nats-server: an agent started before the server publishes once it is up") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("liveprof-fleet-late-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const uint16_t port = FreePort();
  NatsServer server(port, dir.string());
  StepSource source(2);
  FleetAgent::Options ao;
  ao.nats.url = server.url();
  ao.job = "jt";
  ao.host = "host-late";
  ao.poll_period = milliseconds(10);
  ao.take_steps = [&](uint64_t* dropped) { return source.Take(dropped); };
  FleetAgent agent(ao);
  std::string error;
  REQUIRE_MESSAGE(agent.Start(&error), error);  // no server yet: it starts anyway.
  source.Produce(20);
  REQUIRE(WaitFor([&] { return agent.stats().outbox >= 40; }));
  CHECK_FALSE(agent.stats().connected);
  REQUIRE(server.Start());
  FleetView view(ViewOptions(server.url()));
  REQUIRE(view.Start(&error));
  REQUIRE(WaitFor([&] { return Steps(view) == 40; }));
  CHECK(view.counts().missing_steps == 0);
  CHECK(agent.stats().steps_published == 40);
  view.Stop();
  agent.Stop();
  server.Kill(SIGTERM);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace liveprof::fleet_nats_test
