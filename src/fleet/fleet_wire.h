// The fleet's messages on NATS (docs/fleet.md): what an agent publishes to
// its job's JetStream stream and what the fleet view reads back. JSON, one
// message per NATS message, each {"type": ..., "v": kFleetProtocolVersion}:
//
//   liveprof.<job>.step.<host>.<rank>   fleet_step: one rank's one step
//   liveprof.<job>.status.<host>        fleet_status: the agent, every few s
//   liveprof.<job>.alert.<host>         fleet_alert: an alert of the agent's
//   liveprof-query.<job>.<host>         request/reply (core NATS, not stored):
//                                       a trace viewport query, answered by
//                                       the agent's own /api/trace
//
// Encode*() make the bytes; Decode() checks every field it reads and says
// what is wrong and where (subject, field) instead of guessing. Pure: no I/O.
#ifndef LIVEPROF_FLEET_FLEET_WIRE_H_
#define LIVEPROF_FLEET_FLEET_WIRE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "aggregators/steps/step_breakdown.h"

namespace liveprof {

inline constexpr int kFleetProtocolVersion = 1;

// One rank's one step, as its agent measured it.
struct FleetStep {
  std::string job, host;
  std::string agent;         // the agent's incarnation: a new one per start.
  std::string label;         // the rank's name on its host ("rank 3").
  int64_t rank = -1;         // its number when the label says one, else -1.
  uint64_t seq = 0;          // 1, 2, 3... per (agent, label): gaps and repeats show.
  int64_t step = 0;          // the step number.
  uint64_t end_unix_ns = 0;  // the step's end, on the agent's wall clock.
  uint64_t step_ns = 0;
  std::array<uint64_t, kBucketCount> bucket_ns{};
  uint64_t mem_peak_bytes = 0;  // the rank's peak bytes in use over the step (0: not known).
  uint64_t agent_dropped = 0;   // events the agent's rings dropped, since its start.
  uint64_t sent_unix_ns = 0;    // when the agent queued it (wall clock).
};

// An agent's state, sent every few seconds.
struct FleetStatus {
  std::string job, host, agent;
  int64_t pid = 0;
  uint64_t started_unix_ns = 0, sent_unix_ns = 0;
  std::string url;                 // its own dashboard (http://HOST:PORT/), "" if unknown.
  std::vector<std::string> ranks;  // the labels it has seen steps of.
  uint64_t events_consumed = 0, events_dropped = 0;
  uint64_t steps_published = 0;  // acknowledged by JetStream.
  uint64_t steps_dropped = 0;    // its outbox was full (NATS away too long).
  uint64_t outbox = 0;           // waiting to be published now.
  bool stopping = false;         // its last status: it stopped cleanly.
};

// An alert transition of an agent's own rules.
struct FleetAlert {
  std::string job, host, agent;
  std::string rule, severity, summary, worker;
  bool firing = true;  // false: resolved.
  uint64_t unix_ns = 0;
};

// A viewport query's answer (request/reply): an HTTP status, its content
// type and body, as the agent's own /api/trace answered. On NATS the body
// is the message's data, the status and type its headers (kQueryStatusHeader,
// kQueryTypeHeader).
struct FleetQueryReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};
inline constexpr const char* kQueryStatusHeader = "Liveprof-Status";
inline constexpr const char* kQueryTypeHeader = "Content-Type";

std::string EncodeFleetStep(const FleetStep& s);
std::string EncodeFleetStatus(const FleetStatus& s);
std::string EncodeFleetAlert(const FleetAlert& a);

// Why a message was not taken (the fleet view counts each reason).
enum class FleetReject : uint8_t {
  kNone,
  kMalformed,
  kUnknownType,
  kNewerVersion,
  kForeignJob,
  kSubjectMismatch,
  kCount
};
std::string_view FleetRejectName(FleetReject r);  // "malformed", "unknown_type", ...

struct FleetDecoded {
  std::variant<std::monostate, FleetStep, FleetStatus, FleetAlert> message;
  FleetReject reject = FleetReject::kNone;
  std::string error;  // what and where, when rejected.
};
// Decodes a message of `job` received on `subject`. The subject's host (and
// rank token) must match the body's: a message on another host's subject is
// refused, not filed under the wrong host.
FleetDecoded DecodeFleetMessage(std::string_view job, std::string_view subject, std::string_view data);

// Subjects. Tokens are made safe (SubjectToken): '.', '*', '>', spaces and
// control characters become '_'.
std::string SubjectToken(std::string_view s);
std::string FleetStepSubject(std::string_view job, std::string_view host, const FleetStep& s);
std::string FleetStatusSubject(std::string_view job, std::string_view host);
std::string FleetAlertSubject(std::string_view job, std::string_view host);
// liveprof-query.<job>.<host>: outside the stream's liveprof.<job>.> (never stored).
std::string FleetQuerySubject(std::string_view job, std::string_view host);
// The rank token of a step's subject: its number, or "w" + label made safe.
std::string RankToken(const FleetStep& s);
// "rank 3" -> 3; anything else -1.
int64_t RankOfLabel(std::string_view label);
// A job name is 1-64 of [A-Za-z0-9_-] (a stream name and a subject token):
// "" if `job` is one, else why not.
std::string CheckJobName(std::string_view job);

}  // namespace liveprof

#endif  // LIVEPROF_FLEET_FLEET_WIRE_H_
