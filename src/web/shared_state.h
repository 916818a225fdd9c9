// SharedState: what every web session shares, on the web thread: the newest
// published snapshot, the names and tracks seen so far (for the events feed),
// the open WebSocket sessions and their subscriptions, the per-address
// connection counts, and the server's counters.
//
// A publication reaches the sessions here: each view topic's JSON was
// rendered once by the pipeline, and every subscribed session gets a
// shared_ptr to that same string (serialized once, never copied).
//
// No Beast: sessions are seen through the FeedSession interface that
// websocket_session.cc implements. Web thread only, except where a method
// says "any thread". Trace queries and exports run on the Server's worker
// pools (RunQuery, RunExport), which touch nothing here but the options,
// the pipeline's trace store (it locks for itself) and stopping().
#ifndef LIVEPROF_WEB_SHARED_STATE_H_
#define LIVEPROF_WEB_SHARED_STATE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "pipeline/pipeline.h"
#include "web/protocol.h"
#include "web/server.h"

namespace liveprof {

// One view frame handed to a session: the topic's JSON and what it reflects.
struct ViewFrame {
  Topic topic = Topic::kOverview;
  std::shared_ptr<const std::string> json;  // aliases the snapshot: no copy.
  uint64_t watermark_ns = 0;
};

// A subscribed WebSocket connection, as the shared state drives it.
class FeedSession {
 public:
  virtual ~FeedSession() = default;
  virtual const TopicSet& topics() const = 0;
  // Queues the frame; a pending frame of the same topic is replaced.
  virtual void SendView(const ViewFrame& frame) = 0;
  // Queues a binary events frame built from the chunk (after its filter and
  // rate cap), or counts it dropped when the queue is full.
  virtual void SendEvents(const EventChunk& chunk, const NameDirectory& names, uint64_t now_ns) = 0;
  // Closes the connection if a write has been pending past the deadline.
  virtual void CheckDeadline(uint64_t now_ns) = 0;
  // Closes the connection (server stop).
  virtual void Close() = 0;
};

// Latency of the feed: from an event's end to the completed write of the
// first view frame reflecting it. A frame reflects the events that ended in
// (previous frame's watermark, its watermark]; the recorder spreads that
// interval evenly over 1 ms bins (events arrive at a steady rate), so the
// percentiles are per event, not per frame. Any thread.
class LatencyRecorder {
 public:
  void Record(uint64_t prev_watermark_ns, uint64_t watermark_ns, uint64_t sent_ns);
  void Reset();
  // Percentile q in (0, 1], ms; 0 without samples.
  double Percentile(double q) const;
  double Max() const;
  uint64_t samples() const;

 private:
  static constexpr size_t kBins = 60'000;  // 1 ms each, up to a minute.
  mutable std::mutex mu_;
  std::vector<uint64_t> bins_ = std::vector<uint64_t>(kBins + 1, 0);
  uint64_t samples_ = 0;
  uint64_t max_bin_ = 0;
};

// The server's counters, written on the web thread, read from any.
struct ServerCounters {
  std::atomic<uint64_t> connections_accepted{0}, connections_refused{0}, connections_evicted{0}, connections_open{0},
      websocket_sessions{0}, view_frames_sent{0}, event_frames_sent{0}, trace_tiles_sent{0}, view_frames_replaced{0},
      sessions_closed_blocked{0}, bad_messages{0};
};

class SharedState {
 public:
  SharedState(Pipeline& pipeline, ServerOptions options);

  const ServerOptions& options() const { return options_; }
  Pipeline& pipeline() { return pipeline_; }
  // What each publication renders (REST answers other windows by request).
  const RenderOptions& pipeline_render() const { return pipeline_.options().render; }
  ServerCounters& counters() { return counters_; }
  LatencyRecorder& latency() { return latency_; }

  // A new TCP connection from `address`: false (refuse it) over a cap that
  // no waiting connection could make room under (below).
  bool Admit(const std::string& address);
  void Release(const std::string& address);

  // A connection waiting for a request (HTTP, between requests or before
  // its first). At a cap (per address, or in all) the oldest waiting one
  // gives way to the new connection: first those that never completed a
  // request (idle or slow openers: an attacker's, or a half-open socket's),
  // then those kept alive between requests. A connection busy with a
  // request, or a WebSocket, is never asked to. GiveWay() releases the
  // connection's slot (Release) before it returns, and closes it.
  class Waiter {
   public:
    virtual void GiveWay() = 0;

   protected:
    ~Waiter() = default;
  };
  void Waiting(Waiter* w, const std::string& address, bool kept_alive);
  void NotWaiting(Waiter* w);

  void Join(FeedSession* session);
  void Leave(FeedSession* session);
  // A session's topics changed: the pipeline's event tap follows whether
  // anyone wants events.
  void SubscriptionsChanged();

  // Closes the sessions whose write is pending past the send deadline (on
  // each publication, and on the server's timer when publications stall).
  void CheckDeadlines(uint64_t now_ns);

  // Publications, posted here from the pipeline thread.
  void OnSnapshot(std::shared_ptr<const PipelineSnapshot> snapshot);
  void OnChunk(std::shared_ptr<const EventChunk> chunk);

  // The newest publication (null before the first), and the frame of one of
  // its view topics.
  const std::shared_ptr<const PipelineSnapshot>& latest() const { return latest_; }
  ViewFrame LatestFrame(Topic topic) const;
  const NameDirectory& names() const { return names_; }

  // The server's counters as ServerStats (set by the Server).
  void set_stats_source(std::function<ServerStats()> f) { stats_source_ = std::move(f); }
  ServerStats stats() const { return stats_source_ ? stats_source_() : ServerStats{}; }

  // Closes every session (server stop).
  void CloseAll();

  // Trace work off the web thread, on the Server's pools: a query
  // (/api/trace*, a WebSocket trace tile: short, a few at a time) or an
  // export (streamed, held by its reader's pace). A job posts its answer
  // back to its session's executor. Without pools (no Server), a job runs
  // at once on the calling thread. Any thread.
  using Job = std::function<void()>;
  void set_workers(std::function<void(Job)> queries, std::function<void(Job)> exports) {
    run_query_ = std::move(queries);
    run_export_ = std::move(exports);
  }
  void RunQuery(Job job) { run_query_ ? run_query_(std::move(job)) : job(); }
  void RunExport(Job job) { run_export_ ? run_export_(std::move(job)) : job(); }
  // Set when the server stops: an export waiting for its reader gives up.
  // Any thread.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  void set_stopping() { stopping_.store(true, std::memory_order_release); }

 private:
  Pipeline& pipeline_;
  ServerOptions options_;
  ServerCounters counters_;
  LatencyRecorder latency_;
  std::shared_ptr<const PipelineSnapshot> latest_;
  NameDirectory names_;
  std::unordered_set<FeedSession*> sessions_;
  std::map<std::string, size_t> per_address_;
  size_t connections_ = 0;
  // The waiting connections, by when they began to wait.
  struct WaitingConnection {
    Waiter* waiter;
    std::string address;
    bool kept_alive;
  };
  std::map<uint64_t, WaitingConnection> waiting_;
  std::unordered_map<Waiter*, uint64_t> waiting_since_;
  uint64_t waits_ = 0;
  // Makes one waiting connection (of `address`, when not null) give way:
  // false when there is none.
  bool EvictWaiting(const std::string* address);
  std::function<ServerStats()> stats_source_;
  std::function<void(Job)> run_query_, run_export_;
  std::atomic<bool> stopping_{false};
};

}  // namespace liveprof

#endif  // LIVEPROF_WEB_SHARED_STATE_H_
