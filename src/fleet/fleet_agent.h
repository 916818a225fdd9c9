// FleetAgent: the publishing half of an agent (`liveprof serve --publish
// nats://... --job NAME`). Its thread takes the steps each rank completed
// (the pipeline's pod), turns each into a fleet_step summary, and publishes
// them, the agent's alerts and its status (every status_period) to the
// job's JetStream stream (fleet_wire.h; docs/fleet.md). It answers viewport
// queries for its host (request/reply) with `query`.
//
// Nothing is lost quietly: summaries wait in a bounded outbox while NATS is
// away (max_outbox; past it the oldest go, counted and said in the status);
// a window of asynchronous publishes is sent again whole when any of it was
// not acknowledged, and JetStream drops the copies it already has (each
// message's id is agent/label/seq, within the stream's duplicate window).
// The profiled program is never waited for: the agent only reads what the
// pipeline handed over.
#ifndef LIVEPROF_FLEET_FLEET_AGENT_H_
#define LIVEPROF_FLEET_FLEET_AGENT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aggregators/alerts/alerts.h"
#include "aggregators/tf/pod_view.h"
#include "fleet/fleet_wire.h"
#include "fleet/nats_link.h"

namespace liveprof {

class FleetAgent {
 public:
  struct Options {
    NatsOptions nats;
    std::string job;
    std::string host;  // the host's name in the fleet (default: gethostname).
    std::string url;   // this agent's own dashboard, shown by the fleet view.
    std::chrono::milliseconds status_period{2000};
    std::chrono::milliseconds poll_period{20};
    size_t max_outbox = 100'000;  // messages (about 100 MB of summaries).
    size_t publish_window = 256;  // asynchronous publishes awaiting their acks.
    int64_t stream_max_age_s = 3600;
    int64_t stream_max_bytes = int64_t{1} << 30;
    // Worker steps completed since the last call; `*dropped`: the steps the
    // source had to leave out since the start. Agent thread.
    std::function<std::vector<PodNewStep>(uint64_t* dropped)> take_steps;
    // The agent's events consumed and dropped since the start. Agent thread.
    std::function<void(uint64_t* consumed, uint64_t* dropped)> totals;
    // Answers a viewport query (a target such as "/api/trace?t0=..."). On
    // cnats' thread; may be empty (a 501).
    std::function<FleetQueryReply(const std::string& target)> query;
  };

  struct Stats {
    bool connected = false;
    std::string agent;  // this incarnation's id.
    uint64_t steps_queued = 0, steps_published = 0, steps_dropped = 0;
    uint64_t source_dropped = 0;  // left out before the outbox (take_steps' *dropped).
    uint64_t alerts_published = 0, statuses_published = 0;
    uint64_t alerts_dropped = 0;  // an outbox full past its cap.
    uint64_t outbox = 0, outbox_max_seen = 0;
    uint64_t windows_resent = 0;
    uint64_t disconnects = 0, reconnects = 0;
    uint64_t queries = 0;
  };

  explicit FleetAgent(Options options);
  ~FleetAgent();  // Stop()s.
  FleetAgent(const FleetAgent&) = delete;
  FleetAgent& operator=(const FleetAgent&) = delete;

  // Connects (in the background if NATS is not up), starts the thread.
  // False for what waiting cannot mend (a bad URL or job name); *error says
  // what (the URL redacted).
  bool Start(std::string* error);
  // Sends a last status (stopping) and what is queued, for up to `drain`,
  // and stops. Idempotent. Owner's thread.
  void Stop(std::chrono::milliseconds drain = std::chrono::milliseconds(2000));
  // Alert transitions to publish. Any thread.
  void AddAlerts(const std::vector<AlertEvent>& events);
  Stats stats() const;
  // /api/fleet/agent: {"type":"fleet_agent","v":1,...} (docs/fleet.md).
  std::string StatusJson() const;
  const std::string& agent_id() const { return agent_id_; }
  const std::string& host() const { return options_.host; }

 private:
  struct Pending {
    std::string subject, msg_id, data;  // msg_id: JetStream's Nats-Msg-Id.
    enum Kind : uint8_t { kStep, kAlert, kStatus } kind = kStep;
  };
  void Run();
  void Enqueue(Pending p);
  void QueueStatus(bool stopping, uint64_t now_unix_ns);
  // Publishes the outbox's front window; true when all of it was acknowledged.
  bool PublishWindow();
  static void OnQuery(natsConnection* nc, natsSubscription* sub, natsMsg* msg, void* self);
  static void OnQueriesDone(void* self);  // cnats: the query subscription's last callback has returned.

  Options options_;
  std::string agent_id_;
  uint64_t started_unix_ns_ = 0;
  NatsLink link_;
  natsSubscription* query_sub_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::chrono::milliseconds drain_{2000};
  bool started_ = false;

  // Agent thread only.
  std::deque<Pending> outbox_;
  std::vector<std::pair<std::string, uint64_t>> seqs_;  // per label: the last seq given.
  std::vector<std::string> ranks_;                      // labels seen.
  uint64_t alert_seq_ = 0, status_seq_ = 0;

  mutable std::mutex mu_;  // guards the members below.
  std::vector<AlertEvent> alerts_in_;
  Stats stats_;
  bool queries_done_ = false;
  std::condition_variable queries_done_cv_;
};

}  // namespace liveprof

#endif  // LIVEPROF_FLEET_FLEET_AGENT_H_
