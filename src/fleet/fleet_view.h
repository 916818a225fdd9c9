// FleetView: the fleet view's NATS side (`liveprof fleet --nats ... --job
// NAME`). Its thread reads the job's stream through a durable pull consumer
// and applies every message to a FleetState; every render_period it renders
// the view model that /api/fleet serves.
//
// At start the durable consumer is made afresh from rebuild_seconds back:
// a fleet view restarted mid-job rebuilds its picture from the stream. From
// then on the consumer is JetStream's (file storage): a nats-server restart
// or a lost connection resumes at its acknowledged floor, and a message
// delivered again is recognised by its stream sequence, never applied twice.
//
// Query() forwards a viewport query to the agent of a host (request/reply)
// and returns its answer: raw events cross the network only when asked for.
#ifndef LIVEPROF_FLEET_FLEET_VIEW_H_
#define LIVEPROF_FLEET_FLEET_VIEW_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "fleet/fleet_state.h"
#include "fleet/fleet_wire.h"
#include "fleet/nats_link.h"

namespace liveprof {

class FleetView {
 public:
  struct Options {
    NatsOptions nats;
    std::string job;
    std::string durable = "liveprof-fleet";  // the consumer's name (one per fleet view of a job).
    int64_t rebuild_seconds = 300;           // read back at start.
    std::chrono::milliseconds render_period{250};
    int fetch_batch = 512;
    int64_t query_timeout_ms = 5000;
    int64_t stream_max_age_s = 3600;
    int64_t stream_max_bytes = int64_t{1} << 30;
    FleetStateOptions state;
  };
  struct Stats {
    bool connected = false;
    bool consuming = false;  // the consumer is bound.
    uint64_t fetched = 0, acked_batches = 0, fetch_errors = 0;
    uint64_t renders = 0;
    double last_render_ms = 0;
    uint64_t queries = 0, query_errors = 0;
    uint64_t disconnects = 0, reconnects = 0;
  };

  explicit FleetView(Options options);
  ~FleetView();  // Stop()s.
  FleetView(const FleetView&) = delete;
  FleetView& operator=(const FleetView&) = delete;

  // Connects (in the background if NATS is not up) and starts the thread.
  // False for what waiting cannot mend; *error says what (URL redacted).
  bool Start(std::string* error);
  void Stop();  // idempotent; owner's thread.

  // The newest view model (null before the first render). Any thread.
  std::shared_ptr<const std::string> Latest() const;
  // The newest render's Prometheus families (fleet_metrics.h; null before
  // the first render). Any thread.
  std::shared_ptr<const std::string> LatestMetrics() const;
  // Forwards `target` ("/api/trace?...") to `host`'s agent and waits for
  // its answer (a 504 after query_timeout_ms, a 503 with no agent there).
  // Any thread; blocks: never the web thread.
  FleetQueryReply Query(const std::string& host, const std::string& target);
  Stats stats() const;
  // A copy of the lag figures and counters (benchmarks). Any thread.
  FleetState::Lag lag() const;
  FleetCounts counts() const;

 private:
  void Run();
  bool Bind(bool fresh);
  void Render();

  Options options_;
  NatsLink link_;
  natsSubscription* sub_ = nullptr;  // the view's thread only.
  uint64_t started_unix_ns_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool started_ = false;

  // The state: written by the view's thread only (applying messages,
  // rendering), read by counts() and lag(). Apart from mu_, so that a web
  // thread's Latest() never waits for a render (50-75 ms at 1,000 ranks).
  mutable std::mutex state_mu_;
  FleetState state_;
  uint64_t seq_ = 0;

  mutable std::mutex mu_;  // guards the members below; held only to copy.
  std::shared_ptr<const std::string> latest_;
  std::shared_ptr<const std::string> latest_metrics_;
  Stats stats_;
};

}  // namespace liveprof

#endif  // LIVEPROF_FLEET_FLEET_VIEW_H_
