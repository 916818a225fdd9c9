// The fleet's wire: each message survives encode → decode field for field;
// each kind of bad message is refused with the reason and an error that
// names the subject and the field; subjects' tokens are made safe; NATS URLs
// lose their credentials before they are shown.
#include <string>

#include "doctest/doctest.h"
#include "fleet/fleet_wire.h"
#include "fleet/nats_link.h"

namespace liveprof::fleet_wire_test {
namespace {

constexpr uint64_t kUnix = 1'800'000'000'000'000'000ull;
constexpr uint64_t kStepNs = 30'000'000;

FleetStep MakeStep() {
  FleetStep s;
  s.job = "j1";
  s.host = "host-a";
  s.agent = "a1";
  s.label = "rank 3";
  s.rank = 3;
  s.seq = 7;
  s.step = 41;
  s.end_unix_ns = kUnix;
  s.step_ns = kStepNs;
  s.bucket_ns[static_cast<size_t>(Bucket::kInput)] = 6'000'000;
  s.bucket_ns[static_cast<size_t>(Bucket::kDeviceCompute)] = 20'000'000;
  s.mem_peak_bytes = 3ull << 30;
  s.agent_dropped = 5;
  s.sent_unix_ns = kUnix + 1;
  return s;
}

TEST_CASE("fleet wire: a step summary decodes to what was encoded") {
  const FleetStep s = MakeStep();
  const std::string subject = FleetStepSubject("j1", "host-a", s);
  CHECK(subject == "liveprof.j1.step.host-a.3");
  const FleetDecoded d = DecodeFleetMessage("j1", subject, EncodeFleetStep(s));
  REQUIRE(d.reject == FleetReject::kNone);
  const FleetStep& out = std::get<FleetStep>(d.message);
  CHECK(out.host == "host-a");
  CHECK(out.agent == "a1");
  CHECK(out.label == "rank 3");
  CHECK(out.rank == 3);
  CHECK(out.seq == 7);
  CHECK(out.step == 41);
  CHECK(out.end_unix_ns == kUnix);
  CHECK(out.step_ns == kStepNs);
  CHECK(out.bucket_ns == s.bucket_ns);
  CHECK(out.mem_peak_bytes == 3ull << 30);
  CHECK(out.agent_dropped == 5);
  CHECK(out.sent_unix_ns == kUnix + 1);
  // About 1 KB a step, as docs/fleet.md sizes it.
  CHECK(EncodeFleetStep(s).size() < 1024);
}

TEST_CASE("fleet wire: a status and an alert decode to what was encoded") {
  FleetStatus st;
  st.job = "j1";
  st.host = "h.example.com";
  st.agent = "a1";
  st.pid = 1234;
  st.started_unix_ns = kUnix;
  st.sent_unix_ns = kUnix + 5;
  st.url = "http://127.0.0.1:8080/";
  st.ranks = {"rank 0", "rank 1"};
  st.events_consumed = 100;
  st.events_dropped = 2;
  st.steps_published = 50;
  st.steps_dropped = 1;
  st.outbox = 3;
  st.stopping = true;
  const std::string subject = FleetStatusSubject("j1", st.host);
  CHECK(subject == "liveprof.j1.status.h_example_com");  // a dotted hostname is one token.
  FleetDecoded d = DecodeFleetMessage("j1", subject, EncodeFleetStatus(st));
  REQUIRE(d.reject == FleetReject::kNone);
  const FleetStatus& o = std::get<FleetStatus>(d.message);
  CHECK(o.host == "h.example.com");
  CHECK(o.pid == 1234);
  CHECK(o.ranks == st.ranks);
  CHECK(o.url == st.url);
  CHECK(o.events_consumed == 100);
  CHECK(o.steps_published == 50);
  CHECK(o.steps_dropped == 1);
  CHECK(o.outbox == 3);
  CHECK(o.stopping);

  FleetAlert a;
  a.job = "j1";
  a.host = "host-a";
  a.agent = "a1";
  a.rule = "input_bound_high";
  a.severity = "critical";
  a.summary = "HIGHLY input-bound";
  a.worker = "rank 1";
  a.firing = false;
  a.unix_ns = kUnix;
  d = DecodeFleetMessage("j1", FleetAlertSubject("j1", "host-a"), EncodeFleetAlert(a));
  REQUIRE(d.reject == FleetReject::kNone);
  const FleetAlert& ao = std::get<FleetAlert>(d.message);
  CHECK(ao.rule == "input_bound_high");
  CHECK(ao.worker == "rank 1");
  CHECK_FALSE(ao.firing);
  CHECK(ao.unix_ns == kUnix);
}

TEST_CASE("fleet wire: bad messages are refused with the reason, the subject and the field") {
  const FleetStep s = MakeStep();
  const std::string subject = FleetStepSubject("j1", "host-a", s);
  const std::string good = EncodeFleetStep(s);
  auto decode = [&](const std::string& data, const std::string& subj = "") {
    return DecodeFleetMessage("j1", subj.empty() ? subject : subj, data);
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string d = good;
    const size_t at = d.find(from);
    REQUIRE(at != std::string::npos);
    d.replace(at, from.size(), to);
    return d;
  };

  FleetDecoded d = decode("{not json");
  CHECK(d.reject == FleetReject::kMalformed);
  CHECK(d.error == subject + ": not JSON");
  CHECK(decode("[1,2]").reject == FleetReject::kMalformed);

  d = decode(replaced("\"v\":1", "\"v\":2"));
  CHECK(d.reject == FleetReject::kNewerVersion);
  CHECK(d.error.find("protocol v2, this fleet view reads v1") != std::string::npos);

  d = decode(replaced("\"job\":\"j1\"", "\"job\":\"other\""));
  CHECK(d.reject == FleetReject::kForeignJob);
  CHECK(d.error.find("job 'other', not 'j1'") != std::string::npos);

  d = decode(replaced("\"type\":\"fleet_step\"", "\"type\":\"fleet_bogus\""));
  CHECK(d.reject == FleetReject::kUnknownType);

  // Another host's summary on this host's subject; another rank's.
  d = decode(good, "liveprof.j1.step.host-b.3");
  CHECK(d.reject == FleetReject::kSubjectMismatch);
  d = decode(good, "liveprof.j1.step.host-a.4");
  CHECK(d.reject == FleetReject::kSubjectMismatch);
  CHECK(d.error.find("rank 'rank 3'") != std::string::npos);

  d = decode(replaced("\"step_ns\":30000000,", ""));
  CHECK(d.reject == FleetReject::kMalformed);
  CHECK(d.error == subject + ": field 'step_ns' missing");

  d = decode(replaced("\"step\":41", "\"step\":-4"));
  CHECK(d.reject == FleetReject::kMalformed);
  CHECK(d.error == subject + ": field 'step' is negative");

  d = decode(replaced("\"seq\":7", "\"seq\":\"7\""));
  CHECK(d.error == subject + ": field 'seq' not a whole number >= 0");

  d = decode(replaced("\"input\":6000000", "\"input\":60000000"));
  CHECK(d.reject == FleetReject::kMalformed);
  CHECK(d.error == subject + ": field 'buckets_ns' add up to more than step_ns");

  // A bucket a newer agent added is left out; the message is taken.
  d = decode(replaced("\"buckets_ns\":{", "\"buckets_ns\":{\"quantum\":5,"));
  CHECK(d.reject == FleetReject::kNone);
}

TEST_CASE("fleet wire: names, tokens and URLs") {
  CHECK(SubjectToken("a.b*c>d e") == "a_b_c_d_e");
  CHECK(SubjectToken("") == "_");
  CHECK(RankOfLabel("rank 12") == 12);
  CHECK(RankOfLabel("rank x") == -1);
  CHECK(RankOfLabel("local") == -1);
  FleetStep s = MakeStep();
  s.rank = -1;
  s.label = "worker 5";
  CHECK(RankToken(s) == "wworker_5");
  CHECK(CheckJobName("train-7_b").empty());
  CHECK_FALSE(CheckJobName("a.b").empty());
  CHECK_FALSE(CheckJobName("").empty());
  CHECK(FleetQuerySubject("j1", "host-a") == "liveprof-query.j1.host-a");

  CHECK(RedactNatsUrl("nats://alice:s3cret@127.0.0.1:4222") == "nats://***@127.0.0.1:4222");
  CHECK(RedactNatsUrl("nats://t0ken@h:4222,nats://h2:4222") == "nats://***@h:4222,nats://h2:4222");
  CHECK(RedactNatsUrl("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222");
  // cnats splits the user info at the last '@': so does the redaction.
  CHECK(RedactNatsUrl("nats://alice:p@ss@host:4222") == "nats://***@host:4222");
  CHECK(RedactNatsUrl("user:pw@host:1") == "***@host:1");
}

}  // namespace
}  // namespace liveprof::fleet_wire_test
