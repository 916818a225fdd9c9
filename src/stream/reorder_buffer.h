// ReorderBuffer: restores completion order across sources within a bounded
// window.
//
// Each source (a producer ring) delivers its events roughly in completion
// order: the host API writes a span when it ends, CUPTI hands over buffers of
// finished activity 100-200 ms late. The buffer keeps one queue per source and
// releases, by a k-way merge, every event whose end is at or before
//     cutoff = now - window
// in the order (end ascending, begin descending): an event comes after
// everything that finished before it, and a child comes before its parent
// when both end on the same nanosecond.
//
// A source may also say how far it has got (SetProgress: it will deliver no
// more events ending at or before that time). The cutoff is then the least,
// over the open sources, of how far each lets it go:
//   - a source that says nothing: now - window;
//   - a source that has said: its progress (never past now), however far
//     behind now - window, down to now - declared_max_wait.
// So when every open source has said, the events go out as soon as nothing
// older can come, instead of a whole window later; and a source that says it
// is behind is waited for rather than having its events come late. That is
// CUPTI's case: it hands over a buffer only once every record in it is
// complete, and while the GPU runs behind the CPU that can be a second or
// more after a kernel ended (CuptiSource declares how far its buffers are
// delivered). declared_max_wait still bounds the wait, and the memory.
//
// After a release, `watermark()` is the cutoff: every event ending at or
// before it has been delivered. An event that arrives later than that ("late":
// end <= watermark) cannot be put in order any more; it is counted
// (Diag::late_events), flagged kFlagLate and handed out apart, never slipped
// silently into the ordered output.
//
// Memory is bounded: when more than `max_pending` events wait, the oldest are
// released before their window closed (Diag::reorder_forced_release) and the
// watermark moves up to them.
//
// Not thread-safe: owned by the drain thread.
#ifndef LIVEPROF_STREAM_REORDER_BUFFER_H_
#define LIVEPROF_STREAM_REORDER_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "stream/diagnostics.h"
#include "stream/event.h"

namespace liveprof {

// The stream's order: end ascending, then begin descending (children first).
inline bool CompletionOrderLess(const Event& a, const Event& b) {
  if (a.end() != b.end()) return a.end() < b.end();
  return a.ts > b.ts;
}

class ReorderBuffer {
 public:
  struct Options {
    uint64_t window_ns = 250'000'000;  // 250 ms: for sources that say nothing of their progress.
    // A source that declares its progress is waited for up to this long.
    uint64_t declared_max_wait_ns = 3'000'000'000;
    size_t max_pending = size_t{1} << 21;  // 2 Mi events = 96 MiB.
    // A timed release hands out at most this many events (the oldest); the
    // rest wait for the next one. After a stall the drain loop then goes
    // back to the rings between slices of the backlog instead of leaving
    // them to overflow while its consumer digests millions of events.
    size_t max_release = size_t{1} << 18;
  };

  ReorderBuffer(Options options, Diagnostics* diag);

  // Appends events of `source` (any small integer naming a producer; a new
  // one opens a queue). Late events go straight to the late list.
  void Push(uint32_t source, std::span<const Event> events);

  struct Released {
    std::span<const Event> events;  // completion order.
    std::span<const Event> late;    // arrival order, flagged kFlagLate.
  };
  // Releases every event ending at or before the cutoff (above: now_ns -
  // window, or the sources' progress), and, if over
  // max_pending, the oldest beyond it, at most max_release of them (then
  // has_backlog() is true), in completion order, plus the late
  // events pushed since the last release. The spans point into the buffer
  // (no copy when one source has events to give) and stay valid until the
  // next call of a non-const method.
  Released Release(uint64_t now_ns);

  // Releases everything pending, whatever its age (at shutdown). Same spans.
  Released Flush();

  // `source` will deliver no more events ending at or before `progress_ns`
  // (0: it cannot say). Opens the source's queue if it had none.
  void SetProgress(uint32_t source, uint64_t progress_ns);

  // Drops the queue of `source` once it is empty (its producer is gone).
  void CloseSource(uint32_t source);

  uint64_t watermark() const { return watermark_; }
  // At the last release, the least progress the open sources had declared:
  // none of them will deliver more events ending at or before it. 0 when one
  // could not say (or none was open).
  uint64_t progress() const { return progress_; }
  // True when the last timed release stopped at max_release.
  bool has_backlog() const { return backlog_; }
  size_t pending() const { return pending_; }
  const Options& options() const { return options_; }

 private:
  struct Queue {
    uint32_t source;
    bool closed = false;
    uint64_t progress = 0;  // SetProgress; 0: unknown.
    std::vector<Event> events;
    size_t head = 0;  // events before head were released.
    size_t size() const { return events.size() - head; }
  };
  Queue& QueueFor(uint32_t source);
  // Restores the order of q after events were appended at old_size.
  void SortTail(Queue& q, size_t old_size);
  Released ReleaseUpTo(uint64_t cutoff, bool force_to_cap);
  // The runs_ (two or more, none empty; `total` events) into merged_.
  void MergeRuns(size_t total);
  uint64_t ForcedLimit(uint64_t cutoff, size_t excess) const;
  // Pending events ending at or before t (queues must be sorted).
  size_t CountEndingBy(uint64_t t) const;
  // The end of the oldest pending event (~0 when none is pending).
  uint64_t OldestEnd() const;
  // The least end time with at least n pending events ending by it.
  uint64_t NthEnd(size_t n) const;
  // `limit`, or less so that at most `cap` events end at or before it.
  uint64_t CappedLimit(uint64_t limit, size_t cap) const;
  void Compact();

  Options options_;
  Diagnostics* diag_;
  std::vector<Queue> queues_;
  std::vector<Event> late_;
  size_t late_released_ = 0;                  // late_ entries handed out by the last release.
  std::vector<std::span<const Event>> runs_;  // scratch of ReleaseUpTo.
  std::vector<Event> merged_;                 // merge output.
  size_t pending_ = 0;
  uint64_t watermark_ = 0;
  uint64_t progress_ = 0;  // Release's.
  bool released_any_ = false;
  bool backlog_ = false;
};

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_REORDER_BUFFER_H_
