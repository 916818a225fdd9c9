#include "stream/reorder_buffer.h"

#include <algorithm>

namespace liveprof {

ReorderBuffer::ReorderBuffer(Options options, Diagnostics* diag)
    : options_(options), diag_(diag) {
  if (options_.max_pending == 0) options_.max_pending = 1;
}

ReorderBuffer::Queue& ReorderBuffer::QueueFor(uint32_t source) {
  for (Queue& q : queues_) {
    if (q.source == source) return q;
  }
  queues_.emplace_back();
  queues_.back().source = source;
  return queues_.back();
}

void ReorderBuffer::Push(uint32_t source, std::span<const Event> events) {
  if (events.empty()) return;
  Queue& q = QueueFor(source);
  q.events.reserve(q.events.size() + events.size());
  size_t late = 0;
  for (const Event& e : events) {
    if (released_any_ && e.end() <= watermark_) {
      late_.push_back(e);
      late_.back().flags |= kFlagLate;
      ++late;
      continue;
    }
    if (q.sorted && q.size() > 0 && CompletionOrderLess(e, q.events.back())) q.sorted = false;
    q.events.push_back(e);
  }
  pending_ += events.size() - late;
  if (late > 0 && diag_ != nullptr) diag_->Add(Diag::late_events, late);
}

void ReorderBuffer::Release(uint64_t now_ns, std::vector<Event>* out, std::vector<Event>* late) {
  const uint64_t cutoff = now_ns > options_.window_ns ? now_ns - options_.window_ns : 0;
  ReleaseUpTo(cutoff, /*force_to_cap=*/true, out);
  late->insert(late->end(), late_.begin(), late_.end());
  late_.clear();
}

void ReorderBuffer::Flush(std::vector<Event>* out, std::vector<Event>* late) {
  ReleaseUpTo(~uint64_t{0}, /*force_to_cap=*/false, out);
  late->insert(late->end(), late_.begin(), late_.end());
  late_.clear();
}

void ReorderBuffer::CloseSource(uint32_t source) {
  for (Queue& q : queues_) {
    if (q.source == source) q.closed = true;
  }
  Compact();
}

void ReorderBuffer::ReleaseUpTo(uint64_t cutoff, bool force_to_cap, std::vector<Event>* out) {
  size_t excess = force_to_cap && pending_ > options_.max_pending ? pending_ - options_.max_pending : 0;

  // Sort the queues whose producer wrote out of order; the rest are runs.
  for (Queue& q : queues_) {
    if (!q.sorted) {
      std::stable_sort(q.events.begin() + static_cast<ptrdiff_t>(q.head), q.events.end(),
                       CompletionOrderLess);
      q.sorted = true;
    }
  }

  // k-way merge over the queue heads: a min-heap of cursors.
  struct Cursor {
    Queue* q;
    size_t pos;
  };
  std::vector<Cursor> heap;
  for (Queue& q : queues_) {
    if (q.size() > 0) heap.push_back({&q, q.head});
  }
  auto greater = [](const Cursor& a, const Cursor& b) {
    return CompletionOrderLess(b.q->events[b.pos], a.q->events[a.pos]);
  };
  std::make_heap(heap.begin(), heap.end(), greater);

  uint64_t limit = cutoff;
  uint64_t max_end = 0;
  size_t forced = 0;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), greater);
    Cursor& c = heap.back();
    const Event& e = c.q->events[c.pos];
    if (e.end() > limit) {
      if (excess == 0) {
        c.q->head = c.pos;  // this queue has nothing more to give under the limit.
        heap.pop_back();
        continue;
      }
      limit = e.end();  // over the cap: move the limit up to this event.
    }
    if (excess > 0) {
      --excess;
      if (e.end() > cutoff) ++forced;
    }
    out->push_back(e);
    max_end = std::max(max_end, e.end());
    --pending_;
    if (++c.pos == c.q->events.size()) {
      c.q->head = c.pos;
      heap.pop_back();
    } else {
      std::push_heap(heap.begin(), heap.end(), greater);
    }
  }
  if (forced > 0 && diag_ != nullptr) diag_->Add(Diag::reorder_forced_release, forced);
  // A flush promises only what it delivered; a timed release promises its limit.
  watermark_ = std::max(watermark_, cutoff == ~uint64_t{0} ? max_end : limit);
  released_any_ = true;
  Compact();
}

void ReorderBuffer::Compact() {
  for (Queue& q : queues_) {
    if (q.head == q.events.size()) {
      q.events.clear();
      q.head = 0;
    } else if (q.head > 4096 && q.head * 2 > q.events.size()) {
      q.events.erase(q.events.begin(), q.events.begin() + static_cast<ptrdiff_t>(q.head));
      q.head = 0;
    }
  }
  std::erase_if(queues_, [](const Queue& q) { return q.closed && q.size() == 0; });
}

}  // namespace liveprof
