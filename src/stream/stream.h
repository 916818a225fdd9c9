// Stream: the registry of producer rings, the name table, the track table
// and the diagnostics of one profiling session. Producers add a ring each
// (one per producer thread) and write only to it; the drain loop (drain_loop.h)
// is the single consumer of every ring.
#ifndef LIVEPROF_STREAM_STREAM_H_
#define LIVEPROF_STREAM_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stream/diagnostics.h"
#include "stream/event.h"
#include "stream/name_table.h"
#include "stream/spsc_ring.h"

namespace liveprof {

// The unit of Event::ts / Event::dur inside a ring, before the drain loop.
enum class TimeDomain : uint8_t {
  kHostNs = 0,    // already host-clock nanoseconds.
  kTscTicks = 1,  // raw TSC ticks; the drain loop maps them (clock.h).
};

// What the drain loop may assume about the times of a ring's events, so that
// it can release them before the reorder window closes (reorder_buffer.h).
enum class RingProgress : uint8_t {
  kUnknown = 0,      // nothing: the reorder window decides.
  kWritesAtEnd = 1,  // each event is written as it ends (the host API): once
                     // drained, nothing older than the drain (less a slack) comes.
  kDeclared = 2,     // the producer says so with Ring::DeclareProgress (CUPTI,
                     // replay, the socket ingest).
};

// One producer's ring with what the drain loop needs to know about it.
struct Ring {
  std::unique_ptr<SpscRing> queue;
  uint32_t serial = 0;  // unique per stream, never reused.
  std::string name;     // "thread 1234", "cupti", "replay"...
  TimeDomain domain = TimeDomain::kHostNs;
  TrackId track = 0;  // the track its events default to (a host thread's row).
  // Set by the producer when it will write no more (its thread is exiting).
  // The drain loop removes the ring once closed and drained.
  std::atomic<bool> closed{false};
  RingProgress progress = RingProgress::kUnknown;
  // Its producer waits for room instead of dropping (the socket ingest: the
  // sender keeps what the server has not taken). The drain loop leaves its
  // events in the ring while the reorder buffer holds a backlog, so the
  // wait reaches the producer instead of piling up in the pipeline.
  // (ReorderBuffer::has_backlog: its last release stopped at max_release.)
  bool pushes_back = false;
  // kDeclared: every event ending at or before this (host ns) has been
  // written. The producer's thread; it only moves forward.
  void DeclareProgress(uint64_t host_ns) { declared_ns.store(host_ns, std::memory_order_release); }
  std::atomic<uint64_t> declared_ns{0};
  // What the consumer has been handed (the trace store has written it to
  // the run folder by then, if there is one): every event of the first
  // `handled_events` the ring published (SpscRing::published) that ends at
  // or before `handled_ns`. The drain loop sets both after each round's
  // delivery; read together in any order they hold (Handled). The socket
  // ingest acknowledges a batch once it is handled (docs/ingest.md).
  std::atomic<uint64_t> handled_events{0};
  std::atomic<uint64_t> handled_ns{0};
  // Whether events up to the ring position `events`, none ending after
  // `end_ns`, have all been handed to the consumer.
  bool Handled(uint64_t events, uint64_t end_ns) const {
    return end_ns <= handled_ns.load(std::memory_order_acquire) &&
           events <= handled_events.load(std::memory_order_acquire);
  }
};

struct TrackInfo {
  NameId name = 0;
  TrackType type = TrackType::kHostThread;
  uint64_t os_id = 0;  // OS thread id, or stream id for a GPU stream.
  uint8_t device = 0;
  uint32_t process = 0;  // 0: this process; else a worker id (event.h, track_def).
};

// The definition events a consumer learns names and tracks from (kNameDef,
// kTrackDef): the drain loop emits them for the stream's tables, an importer
// for its own. `name` must outlive the event (a NameTable's strings do).
Event NameDefEvent(NameId id, std::string_view name);
Event TrackDefEvent(TrackId id, const TrackInfo& info);

class Stream {
 public:
  struct Options {
    size_t ring_capacity = size_t{1} << 16;  // events per ring by default (3 MiB).
  };

  Stream() : Stream(Options{}) {}
  explicit Stream(Options options);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  struct RingOptions {
    std::string name;
    TimeDomain domain = TimeDomain::kHostNs;
    size_t capacity = 0;  // 0: the stream's default.
    TrackId track = 0;    // 0: none given; host threads get one from AddTrack.
    RingProgress progress = RingProgress::kUnknown;
    bool pushes_back = false;  // Ring::pushes_back.
  };
  // Registers a ring for one producer thread. Any thread; takes a mutex (do it
  // once per thread, off the hot path). On a bad capacity or no memory, returns
  // null, counts ring_create_failed and sets *error.
  std::shared_ptr<Ring> AddRing(const RingOptions& options, std::string* error = nullptr);

  // Registers a track (a timeline row) and returns its id; ids are dense from
  // 1. Any thread. The drain loop announces each new track once (kTrackDef).
  TrackId AddTrack(const TrackInfo& info);
  // Number of tracks + 1 (ids are 1..n) and one track's info. Any thread.
  uint32_t track_count() const;
  TrackInfo track(TrackId id) const;

  NameTable& names() { return names_; }
  const NameTable& names() const { return names_; }
  Diagnostics& diagnostics() { return diag_; }
  const Diagnostics& diagnostics() const { return diag_; }
  const Options& options() const { return options_; }

  // Drain thread only: the current rings, refreshed when one was added; the
  // generation changes on every add.
  uint64_t ring_generation() const { return ring_generation_.load(std::memory_order_acquire); }
  void CopyRings(std::vector<std::shared_ptr<Ring>>* out) const;
  // Drain thread only: forgets a closed, drained ring (its counts are kept).
  void RemoveRing(const Ring* ring);

  struct RingStats {
    std::string name;
    uint32_t serial;
    TrackId track;
    uint64_t published;
    uint64_t dropped;
    size_t capacity;
    bool closed;
  };
  // Per-ring counters of the live rings. Any thread.
  std::vector<RingStats> Stats() const;
  // Every event accepted / dropped since the stream began, rings since
  // removed included; dropped also counts events lost for want of a ring.
  // Any thread.
  uint64_t TotalPublished() const;
  uint64_t TotalDropped() const;

  // fork(2) (pthread_atfork, host_api.cc): the forking thread takes the
  // stream's locks before the fork, so that no other thread holds one in
  // the child, and gives them back after it in each process. In the child,
  // AfterForkInChild also forgets what the parent recorded: its rings (their
  // threads are not in the child; their unsent events are the parent's to
  // send), its tracks and its counts. The names stay, so that ids a program
  // cached keep their meaning. Only the forking thread, in this order.
  void LockForFork();
  void UnlockAfterFork();
  void AfterForkInChild();

 private:
  Options options_;
  Diagnostics diag_;
  NameTable names_;

  mutable std::mutex mu_;  // guards everything below.
  std::vector<std::shared_ptr<Ring>> rings_;
  std::vector<TrackInfo> tracks_;  // index = TrackId; [0] is unused.
  uint32_t next_serial_ = 1;
  uint64_t retired_published_ = 0;
  uint64_t retired_dropped_ = 0;
  std::atomic<uint64_t> ring_generation_{0};
};

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_STREAM_H_
