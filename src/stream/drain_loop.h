// DrainLoop: the pipeline thread's inner loop. It drains every producer ring
// in bulk, maps TSC ticks onto the host clock, restores completion order in a
// ReorderBuffer, and hands the consumer time-ordered batches.
//
// One round:
//   1. refresh the ring list if a ring was added; add a TSC/host clock pair
//      every 100 ms;
//   2. drain each ring (closed rings are drained one last time, then removed)
//      and tell the reorder buffer how far each ring has got, if its producer
//      can say (RingProgress);
//   3. collect a kNameDef for every name and a kTrackDef for every track
//      registered since the last round (read after the drain, so every id a
//      drained event uses is defined in the same or an earlier batch);
//   4. release everything older than the reorder window and call the
//      consumer with one Batch;
//   5. tell each ring how far its events have been handled (Ring::Handled:
//      the socket ingest acknowledges what the consumer has had).
// The thread sleeps `idle_sleep` between rounds unless some ring was more
// than a quarter full, in which case it goes again at once.
//
// With Options::handoff_events set (the Pipeline's), the consumer runs on a
// thread of its own: the drain thread copies each batch into a queue (no
// more drained once it holds that many events) and goes back to the rings, so a consumer that
// stalls for a second (no core to run on, a slow batch) leaves its backlog
// in that queue instead of overflowing the rings. Step 5 then happens after
// the consumer has had the batch. A full queue stops the drain: rings that
// push back wait, the others fill and drop (counted), as without it.
#ifndef LIVEPROF_STREAM_DRAIN_LOOP_H_
#define LIVEPROF_STREAM_DRAIN_LOOP_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "stream/clock.h"
#include "stream/event.h"
#include "stream/reorder_buffer.h"
#include "stream/stream.h"

namespace liveprof {

struct Batch {
  // kNameDef and kTrackDef events for every name and track registered since
  // the last batch: a consumer reads these first.
  std::span<const Event> definitions;
  // Events in completion order, all ending at or before `watermark_ns`.
  std::span<const Event> events;
  // Events that arrived after the window closed over them, flagged kFlagLate,
  // in arrival order. Also counted in Diag::late_events.
  std::span<const Event> late;
  // Every event ending at or before this has been delivered (or was late).
  uint64_t watermark_ns = 0;
  uint64_t now_ns = 0;
};

class DrainLoop {
 public:
  struct Options {
    ReorderBuffer::Options reorder;
    std::chrono::microseconds idle_sleep{1000};
    // A batch goes out at least this often, even with no events, so that
    // consumers see the watermark move (and can close steps).
    std::chrono::milliseconds heartbeat{50};
    // A ring whose events are written as they end (RingProgress::kWritesAtEnd)
    // is taken to be complete up to the drain's time less this: the time a
    // producer may take between reading its clock and publishing the event
    // (a preemption). Later than that, an event is late (counted, flagged).
    uint64_t writes_at_end_slack_ns = 10'000'000;
    // The stream's time: what the reorder window, the progress of
    // writes-at-end rings and the batches' now_ns are measured on. Empty: the
    // host clock. A replay runs the stream on its own clock (its position in
    // the trace), so that windows and alerts keep the trace's time at any
    // speed. Called on the pipeline thread (and on the owner's after
    // Stop()); must not block. Only declared-progress rings should feed a
    // stream on another clock: a writes-at-end ring's progress is read on it.
    std::function<uint64_t()> clock;
    // 0: the consumer runs on the drain thread. Else on a second thread, fed
    // through a queue; the drain waits while it holds this many events (a
    // round's release may take it past that once).
    size_t handoff_events = 0;
  };
  // Called for each batch, on the drain thread (or the consumer thread, with
  // handoff_events); the spans live until it returns.
  using Consumer = std::function<void(const Batch&)>;

  DrainLoop(Stream& stream, Options options, Consumer consumer);
  ~DrainLoop();
  DrainLoop(const DrainLoop&) = delete;
  DrainLoop& operator=(const DrainLoop&) = delete;

  // Starts the drain thread (and the consumer thread, with handoff_events).
  // Call once, from the owner's thread.
  void Start();
  // Stops the threads after a last drain of every ring, a flush of the
  // reorder buffer and the consumer's last batch. Idempotent; from the
  // owner's thread.
  void Stop();

  // The stream's time now (Options::clock, else the host clock).
  uint64_t Now() const { return options_.clock ? options_.clock() : HostNowNs(); }

  // One round on the caller's thread at host time `now_ns` (tests, benches).
  // Only while the thread is not running. Returns events drained.
  size_t RunOnce(uint64_t now_ns);
  // Drains every ring and releases everything pending. Only while stopped.
  void Flush();

  // On the thread running the rounds (RunOnce's caller): every event ending
  // at or before this has been handed to the consumer, and no ring will give
  // more (each declared it, or writes its events as they end); 0 when a ring
  // cannot say (CUPTI, a replay) or none is open. Unlike the watermark, a
  // window that closed on a ring still behind does not move it.
  uint64_t complete_through_ns() const {
    return reorder_.progress() == 0 ? 0 : std::min(reorder_.progress(), reorder_.watermark());
  }

  // Any thread.
  uint64_t events_drained() const { return events_drained_.load(std::memory_order_relaxed); }
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }
  // Events drained but not yet handed to the consumer thread (0 without
  // handoff), and the most there have been.
  uint64_t handoff_queued() const { return handoff_queued_.load(std::memory_order_relaxed); }
  uint64_t handoff_max_queued() const { return handoff_max_queued_.load(std::memory_order_relaxed); }

 private:
  // `all`: every ring, even one that pushes back while a backlog waits (the
  // last drain, at Flush).
  size_t DrainRings(uint64_t now_ns, bool* any_ring_busy, bool all = false);
  void EmitDefinitions();
  // Returns whether a batch went to the consumer.
  bool Deliver(uint64_t now_ns);
  // Hands `b` to the consumer: at once, or through the handoff queue. Then
  // every ring's events drained so far that end at or before `through` are
  // handled (PublishHandled, after the consumer has had them).
  void Emit(const Batch& b, uint64_t through);
  // After a round that delivered nothing: the rings' marks, once the
  // consumer has had everything before.
  void PublishIdle(uint64_t through);
  void PublishHandled(uint64_t through);  // Ring::handled_events, handled_ns.
  void Run();
  void RunConsumer();  // the consumer thread's loop (handoff).

  Stream& stream_;
  Options options_;
  Consumer consumer_;
  ReorderBuffer reorder_;
  ClockMap tsc_map_;
  uint64_t last_pair_ns_ = 0;
  uint64_t last_delivery_ns_ = 0;

  uint64_t ring_generation_ = ~uint64_t{0};
  std::vector<std::shared_ptr<Ring>> rings_;
  std::vector<const Ring*> removed_;
  uint32_t names_sent_ = 0;
  uint32_t tracks_sent_ = 1;  // TrackId 0 is "none".
  std::vector<Event> definitions_;

  // The handoff queue (Options::handoff_events): batches copied by the drain
  // thread, each with the rings' marks to publish once it is consumed.
  struct Handoff {
    std::vector<Event> definitions, events, late;
    uint64_t watermark_ns = 0, now_ns = 0, through = 0;
    std::vector<std::pair<std::shared_ptr<Ring>, uint64_t>> drained;  // ring, SpscRing::drained().
    size_t size() const { return definitions.size() + events.size() + late.size(); }
  };
  std::mutex handoff_mu_;  // guards handoff_, handoff_free_, handoff_in_flight_, drain_done_.
  std::condition_variable handoff_cv_;
  std::deque<std::unique_ptr<Handoff>> handoff_;
  std::vector<std::unique_ptr<Handoff>> handoff_free_;  // reused: no allocation a round.
  size_t handoff_in_flight_ = 0;                        // queued, or being consumed.
  bool drain_done_ = false;                             // the drain thread's last batch is queued.
  std::atomic<uint64_t> handoff_queued_{0};             // events queued (not yet taken).
  std::atomic<uint64_t> handoff_max_queued_{0};
  std::thread consumer_thread_;
  bool handing_off_ = false;  // set before the threads start, cleared after they end.

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> events_drained_{0};
  std::atomic<uint64_t> rounds_{0};
};

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_DRAIN_LOOP_H_
