// The fleet view's state, fed messages as the stream would deliver them:
// 3 hosts × 4 ranks give the pod's medians and name the straggler by host
// and rank; a repeated summary is counted and not applied, a gap is
// counted, a restarted agent starts a new sequence; a redelivered stream
// sequence is skipped; a silent host goes and comes back, a stopped one is
// not gone; a host whose clock is seconds off is flagged and its steps still
// line up by step number; bad messages are counted by reason; the JSON
// carries the same numbers.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "fleet/fleet_metrics.h"
#include "fleet/fleet_state.h"

namespace liveprof::fleet_state_test {
namespace {

constexpr uint64_t kSec = 1'000'000'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 1'800'000'000 * kSec;
constexpr uint64_t kBaseStepNs = 100 * kMs;
const char* const kHosts[] = {"host-a", "host-b", "host-c"};

// Feeds FleetState messages with increasing stream sequences.
struct Feed {
  FleetState state;
  uint64_t stream_seq = 0;
  uint64_t now = kT0;

  explicit Feed(FleetStateOptions o = {}) : state(o) {}

  void Raw(const std::string& subject, const std::string& data, uint64_t stored) {
    state.Apply("j1", subject, data, ++stream_seq, stored, now, true);
  }
  void Step(const std::string& host, int rank, uint64_t seq, int64_t step, uint64_t step_ns,
            const std::string& agent = "", uint64_t input_ns = 0, int64_t clock_offset_ns = 0) {
    FleetStep s;
    s.job = "j1";
    s.host = host;
    s.agent = agent.empty() ? host + "-agent" : agent;
    s.label = "rank " + std::to_string(rank);
    s.rank = rank;
    s.seq = seq;
    s.step = step;
    s.end_unix_ns = static_cast<uint64_t>(static_cast<int64_t>(now) + clock_offset_ns);
    s.step_ns = step_ns;
    s.bucket_ns[static_cast<size_t>(Bucket::kInput)] = input_ns;
    s.bucket_ns[static_cast<size_t>(Bucket::kDeviceCompute)] = step_ns - input_ns;
    Raw(FleetStepSubject("j1", host, s), EncodeFleetStep(s), now);
  }
  void Status(const std::string& host, bool stopping = false, int64_t clock_offset_ns = 0,
              const std::string& agent = "") {
    FleetStatus st;
    st.job = "j1";
    st.host = host;
    st.agent = agent.empty() ? host + "-agent" : agent;
    st.sent_unix_ns = static_cast<uint64_t>(static_cast<int64_t>(now) + clock_offset_ns);
    st.stopping = stopping;
    Raw(FleetStatusSubject("j1", host), EncodeFleetStatus(st), now);
  }
  // Steps 0..n-1 of every rank of every host; host-b rank 2 `slow` times slower.
  void Grid(int64_t n, double slow) {
    for (int64_t step = 0; step < n; ++step) {
      for (const char* h : kHosts) {
        for (int r = 0; r < 4; ++r) {
          const bool straggler = std::string(h) == "host-b" && r == 2;
          const uint64_t t = straggler ? static_cast<uint64_t>(static_cast<double>(kBaseStepNs) * slow)
                                       : kBaseStepNs + static_cast<uint64_t>(r) * kMs;
          Step(h, r, static_cast<uint64_t>(step) + 1, step, t);
        }
      }
      now += 100 * kMs;
    }
  }
  const FleetRank& Rank(const std::string& host, int r) const {
    return state.ranks().at(host + '\x1f' + "rank " + std::to_string(r));
  }
  const FleetAlertState& Alert(const std::string& rule) const {
    for (const FleetAlertState& a : state.alerts()) {
      if (a.rule == rule) return a;
    }
    FAIL("no rule " << rule);
    return state.alerts().front();
  }
};

TEST_CASE("fleet state: 3 hosts × 4 ranks: the pod by step number, the straggler named by host and rank") {
  Feed f;
  f.Grid(10, 1.5);
  f.state.Tick(f.now);
  CHECK(f.state.ranks().size() == 12);
  const PodSnapshot pod = f.state.pod().Snapshot();
  REQUIRE(pod.workers.size() == 12);
  REQUIRE(pod.steps.size() == 10);
  // Each step's median over the 12: the ranks' times are 100,101,102,103 ms
  // on hosts a and c, 100,101,150,103 on host b: sorted, the 6th and 7th are
  // 101 and 102; 150 / 101.5 is 47.8 % over.
  CHECK(pod.steps.back().median_ms == doctest::Approx(101.5));
  const FleetAlertState& s = f.Alert("straggler");
  CHECK(s.firing);
  CHECK(s.host == "host-b");
  CHECK(s.label == "rank 2");
  CHECK(s.summary == "host-b rank 2 is 48 % slower than the median over steps 7-9");
  CHECK_FALSE(f.Alert("host_gone").firing);
  CHECK_FALSE(f.Alert("input_bound").firing);
  // The worker's label in the pod says both.
  bool labelled = false;
  for (const PodWorkerSummary& w : pod.workers) labelled |= w.label == "host-b · rank 2";
  CHECK(labelled);
}

TEST_CASE("fleet state: a repeated summary is counted and not applied, a gap is counted") {
  Feed f;
  f.Step("host-a", 0, 1, 0, kBaseStepNs);
  f.Step("host-a", 0, 2, 1, kBaseStepNs);
  f.Step("host-a", 0, 2, 1, kBaseStepNs * 3);  // the same seq again (a rank that reports a step twice).
  CHECK(f.Rank("host-a", 0).last_step_ns == kBaseStepNs);
  f.Step("host-a", 0, 5, 4, kBaseStepNs);  // seqs 3 and 4 never came.
  const FleetRank& r = f.Rank("host-a", 0);
  CHECK(r.steps == 3);
  CHECK(r.duplicates == 1);
  CHECK(r.missing == 2);
  CHECK(f.state.counts().duplicate_steps == 1);
  CHECK(f.state.counts().missing_steps == 2);
  CHECK(f.state.pod().cells_total() == 3);  // the repeat never reached the pod.
  CHECK(r.last_step_ns == kBaseStepNs);     // nor changed the rank's step time.

  // seq 3 comes late (its window was sent again after 5 was stored): applied,
  // no longer missing; once more, it is a repeat.
  f.Step("host-a", 0, 3, 2, kBaseStepNs);
  CHECK(r.steps == 4);
  CHECK(r.missing == 1);
  CHECK(r.late == 1);
  CHECK(f.state.counts().missing_steps == 1);
  CHECK(f.state.pod().cells_total() == 4);
  CHECK(r.last_step == 4);  // a late one does not change the newest.
  f.Step("host-a", 0, 3, 2, kBaseStepNs);
  CHECK(r.duplicates == 2);
  CHECK(r.steps == 4);
}

TEST_CASE("fleet state: a seq far ahead is counted missing at once, not walked") {
  Feed f;
  f.Step("host-a", 0, 1, 0, kBaseStepNs);
  f.Step("host-a", 0, uint64_t{1} << 62, 1, kBaseStepNs);
  CHECK(f.Rank("host-a", 0).missing == (uint64_t{1} << 62) - 2);
  CHECK(f.Rank("host-a", 0).gaps.size() == 4096);
  CHECK(f.Rank("host-a", 0).steps == 2);
}

TEST_CASE("fleet state: a restarted agent starts a new sequence, not a duplicate") {
  Feed f;
  for (uint64_t i = 1; i <= 5; ++i) f.Step("host-a", 0, i, static_cast<int64_t>(i), kBaseStepNs, "first");
  for (uint64_t i = 1; i <= 3; ++i) f.Step("host-a", 0, i, static_cast<int64_t>(5 + i), kBaseStepNs, "second");
  const FleetRank& r = f.Rank("host-a", 0);
  CHECK(r.incarnations == 2);
  CHECK(r.steps == 8);
  CHECK(r.duplicates == 0);
  CHECK(r.missing == 0);
  CHECK(f.state.counts().restarts == 1);
  CHECK(f.state.hosts().at("host-a").agents == 2);
}

TEST_CASE("fleet state: a stream sequence delivered again is skipped") {
  Feed f;
  FleetStep s;
  s.job = "j1";
  s.host = "host-a";
  s.agent = "x";
  s.label = "rank 0";
  s.rank = 0;
  s.seq = 1;
  s.step_ns = kBaseStepNs;
  const std::string subject = FleetStepSubject("j1", "host-a", s);
  f.state.Apply("j1", subject, EncodeFleetStep(s), 10, f.now, f.now, true);
  f.state.Apply("j1", subject, EncodeFleetStep(s), 10, f.now, f.now, true);
  f.state.Apply("j1", subject, EncodeFleetStep(s), 9, f.now, f.now, true);
  CHECK(f.state.counts().redelivered == 2);
  CHECK(f.state.counts().messages == 1);
  CHECK(f.Rank("host-a", 0).steps == 1);
}

TEST_CASE("fleet state: a silent host is gone after gone_after and back when it speaks, a stopped one is not gone") {
  FleetStateOptions o;
  o.gone_after_ns = 6 * kSec;
  Feed f(o);
  f.Status("host-a");
  f.Status("host-b");
  f.now += 5 * kSec;
  f.Status("host-a");
  f.Status("host-b", /*stopping=*/true);
  f.now += 5 * kSec;
  f.state.Tick(f.now);  // a: 5 s silent, b: stopped.
  CHECK_FALSE(f.state.hosts().at("host-a").gone);
  CHECK_FALSE(f.Alert("host_gone").firing);
  f.now += 2 * kSec;
  f.state.Tick(f.now);  // a: 7 s silent.
  CHECK(f.state.hosts().at("host-a").gone);
  CHECK_FALSE(f.state.hosts().at("host-b").gone);
  CHECK(f.Alert("host_gone").firing);
  CHECK(f.Alert("host_gone").host == "host-a");
  CHECK(f.Alert("host_gone").summary == "1 host silent for over 6 s: host-a");
  f.Status("host-a", false, 0, "host-a-restarted");
  f.state.Tick(f.now);
  const FleetHost& a = f.state.hosts().at("host-a");
  CHECK_FALSE(a.gone);
  CHECK(a.gone_count == 1);
  CHECK(a.back_count == 1);
  CHECK(a.agents == 2);
  CHECK_FALSE(f.Alert("host_gone").firing);
  const nlohmann::json j = nlohmann::json::parse(f.state.RenderJson(f.now, 1));
  CHECK(j["hosts"][0]["state"] == "live");
  CHECK(j["hosts"][1]["state"] == "stopped");
  CHECK(j["alert_history"].size() == 2);  // host_gone fired, then resolved.
}

TEST_CASE("fleet state: a host's clock seconds off is flagged, and its steps still line up by step number") {
  Feed f;
  const int64_t kAhead = 5 * static_cast<int64_t>(kSec);
  f.Status("host-a");
  f.Status("host-b", false, kAhead);
  for (int64_t step = 0; step < 3; ++step) {
    f.Step("host-a", 0, static_cast<uint64_t>(step) + 1, step, kBaseStepNs);
    f.Step("host-b", 0, static_cast<uint64_t>(step) + 1, step, 2 * kBaseStepNs, "", 0, kAhead);
  }
  f.state.Tick(f.now);
  CHECK(f.state.hosts().at("host-b").skewed);
  CHECK(f.state.hosts().at("host-b").skew_ns == kAhead);
  CHECK_FALSE(f.state.hosts().at("host-a").skewed);
  CHECK(f.state.counts().skewed_hosts == 1);
  const PodSnapshot pod = f.state.pod().Snapshot();
  REQUIRE(pod.steps.size() == 3);
  for (const PodStepRow& row : pod.steps) {
    CHECK(row.cells.size() == 2);  // both hosts' cells in the same row.
    CHECK(row.median_ms == doctest::Approx(150.0));
  }
  // Steps ending further in the future than gone_after: counted, no lag from them.
  f.state.RenderJson(f.now, 1);
  const uint64_t lag_samples = f.state.lag().samples;
  CHECK(lag_samples == 6);
  f.Step("host-b", 0, 4, 3, kBaseStepNs, "", 0, 60 * static_cast<int64_t>(kSec));
  f.Step("host-a", 0, 4, 3, kBaseStepNs);
  f.state.RenderJson(f.now, 2);
  CHECK(f.state.counts().steps_from_future == 1);
  CHECK(f.state.lag().samples == lag_samples + 1);  // host-a's only.
}

TEST_CASE("fleet state: an input-bound rank is named") {
  Feed f;
  for (int64_t step = 0; step < 5; ++step) {
    f.Step("host-a", 0, static_cast<uint64_t>(step) + 1, step, kBaseStepNs, "", 2 * kMs);
    f.Step("host-c", 3, static_cast<uint64_t>(step) + 1, step, kBaseStepNs, "", 30 * kMs);
  }
  f.state.Tick(f.now);
  const FleetAlertState& a = f.Alert("input_bound");
  CHECK(a.firing);
  CHECK(a.host == "host-c");
  CHECK(a.label == "rank 3");
  CHECK(a.summary == "1 rank input-bound; the most: host-c rank 3 at 30 % of its step time waiting for input");
}

TEST_CASE("fleet state: bad messages are counted by reason, the newest errors kept, nothing applied") {
  Feed f;
  f.Raw("liveprof.j1.step.host-a.0", "{oops", f.now);
  f.Raw("liveprof.j1.step.host-a.0", R"({"type":"fleet_step","v":9,"job":"j1","host":"host-a","agent":"x"})", f.now);
  f.Raw("liveprof.j1.status.host-a", R"({"type":"fleet_status","v":1,"job":"j2","host":"host-a","agent":"x"})", f.now);
  f.Raw(
      "liveprof.j1.status.host-z",
      R"({"type":"fleet_status","v":1,"job":"j1","host":"host-a","agent":"x","pid":1,"started_unix_ns":1,"sent_unix_ns":1})",
      f.now);
  f.Raw("liveprof.j1.other.host-a", R"({"type":"what","v":1,"job":"j1","host":"host-a","agent":"x"})", f.now);
  // A status on a subject with a token too many is not this host's status subject.
  f.Raw(
      "liveprof.j1.status.host-a.x",
      R"({"type":"fleet_status","v":1,"job":"j1","host":"host-a","agent":"x","pid":1,"started_unix_ns":1,"sent_unix_ns":1})",
      f.now);
  for (int i = 0; i < 10; ++i) f.Raw("liveprof.j1.step.host-a.0", "", f.now);
  const FleetCounts& c = f.state.counts();
  CHECK(c.rejected[static_cast<size_t>(FleetReject::kMalformed)] == 11);
  CHECK(c.rejected[static_cast<size_t>(FleetReject::kNewerVersion)] == 1);
  CHECK(c.rejected[static_cast<size_t>(FleetReject::kForeignJob)] == 1);
  CHECK(c.rejected[static_cast<size_t>(FleetReject::kSubjectMismatch)] == 2);
  CHECK(c.rejected[static_cast<size_t>(FleetReject::kUnknownType)] == 1);
  CHECK(f.state.hosts().empty());
  CHECK(f.state.ranks().empty());
  CHECK(f.state.recent_errors().size() == 8);
  const nlohmann::json j = nlohmann::json::parse(f.state.RenderJson(f.now, 3));
  CHECK(j["type"] == "fleet");
  CHECK(j["seq"] == 3);
  CHECK(j["counts"]["rejected"]["malformed"] == 11);
  CHECK(j["counts"]["rejected"]["subject_mismatch"] == 2);
  CHECK(j["recent_errors"].back() == "liveprof.j1.step.host-a.0: not JSON");
}

TEST_CASE("fleet state: two live agents under one host name are a conflict, not restarts") {
  Feed f;
  f.Status("host-a", false, 0, "one");
  f.Status("host-a", false, 0, "two");  // a restart, as far as anyone can tell yet
  f.Status("host-a", false, 0, "one");  // ... but the first speaks again
  f.Status("host-a", false, 0, "two");
  const FleetHost& h = f.state.hosts().at("host-a");
  CHECK(h.agents == 2);
  CHECK(h.conflicts == 2);
  CHECK(f.state.counts().host_conflicts == 2);
}

TEST_CASE("fleet state: hosts past the cap are counted, not kept") {
  FleetStateOptions o;
  o.max_hosts = 2;
  Feed f(o);
  f.Status("host-a");
  f.Status("host-b");
  f.Status("host-c");
  f.Step("host-d", 0, 1, 0, kBaseStepNs);
  CHECK(f.state.hosts().size() == 2);
  CHECK(f.state.counts().hosts_over_cap == 2);
  CHECK(f.state.ranks().empty());
}

TEST_CASE("fleet state: the view model carries the ranks, the pod and the lag") {
  Feed f;
  f.Grid(4, 1.5);
  f.state.Tick(f.now);
  const nlohmann::json j = nlohmann::json::parse(f.state.RenderJson(f.now, 1));
  CHECK(j["ranks"].size() == 12);
  CHECK(j["pod"]["workers"].size() == 12);
  CHECK(j["pod"]["steps"].size() == 4);
  CHECK(j["counts"]["steps"] == 48);
  CHECK(j["lag"]["samples"] == 48);
  for (const auto& r : j["ranks"]) {
    CHECK(r["steps"] == 4);
    CHECK(r["missing"] == 0);
    CHECK(r["duplicates"] == 0);
  }
}

// The fleet view's /metrics: hosts by state and each host up, the ranks,
// the straggler alert with its host and rank, what the stream brought.
TEST_CASE("fleet metrics: hosts, ranks, the straggler by host and rank, the stream's counts") {
  Feed f;
  f.Grid(10, 1.5);
  f.Status("host-c", /*stopping=*/true);
  f.Raw("liveprof.j1.step.host-a.r0", "{not json", f.now);
  f.state.Tick(f.now);
  const std::string text = RenderFleetPrometheus(f.state, true);
  const auto has = [&text](const std::string& line) { return text.find("\n" + line + "\n") != std::string::npos; };
  CHECK(has("liveprof_fleet_nats_connected 1"));
  CHECK(has("liveprof_fleet_hosts{state=\"live\"} 2"));
  CHECK(has("liveprof_fleet_hosts{state=\"gone\"} 0"));
  CHECK(has("liveprof_fleet_hosts{state=\"stopped\"} 1"));
  CHECK(has("liveprof_fleet_host_state{host=\"host-a\",state=\"live\"} 1"));
  CHECK(has("liveprof_fleet_host_state{host=\"host-a\",state=\"gone\"} 0"));
  CHECK(has("liveprof_fleet_host_state{host=\"host-c\",state=\"live\"} 0"));
  CHECK(has("liveprof_fleet_host_state{host=\"host-c\",state=\"stopped\"} 1"));
  CHECK(has("liveprof_fleet_ranks 12"));
  CHECK(has("liveprof_fleet_alert_firing{rule=\"straggler\",host=\"host-b\",rank=\"rank 2\"} 1"));
  CHECK(has("liveprof_fleet_alert_firing{rule=\"input_bound\",host=\"\",rank=\"\"} 0"));
  CHECK(has("liveprof_fleet_step_summaries_total 120"));
  CHECK(has("liveprof_fleet_messages_total 122"));
  CHECK(has("liveprof_fleet_rejected_messages_total{reason=\"malformed\"} 1"));
  CHECK(has("# TYPE liveprof_fleet_step_summaries_total counter"));
  // Per rank: host-b rank 2 150 ms against medians of 101.5: 47.8 % slower;
  // no input in this grid.
  const auto value = [&text](const std::string& series) {
    const size_t at = text.find("\n" + series + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + series.size() + 2));
  };
  CHECK(value("liveprof_fleet_rank_slowdown_ratio{host=\"host-b\",rank=\"rank 2\"}") ==
        doctest::Approx(48.5 / 101.5).epsilon(0.01));
  CHECK(value("liveprof_fleet_rank_slowdown_ratio{host=\"host-a\",rank=\"rank 0\"}") < 0);
  CHECK(value("liveprof_fleet_rank_input_ratio{host=\"host-b\",rank=\"rank 2\"}") == 0);

  FleetAgent::Stats agent;
  agent.connected = true;
  agent.steps_published = 40;
  agent.outbox = 3;
  const std::string a = RenderFleetAgentPrometheus(agent);
  CHECK(a.find("\nliveprof_fleet_agent_step_summaries_published_total 40\n") != std::string::npos);
  CHECK(a.find("\nliveprof_fleet_agent_outbox 3\n") != std::string::npos);
  CHECK(a.find("\nliveprof_fleet_agent_connected 1\n") != std::string::npos);
}

}  // namespace
}  // namespace liveprof::fleet_state_test
