#include "stream/reorder_buffer.h"

#include <algorithm>

namespace liveprof {

ReorderBuffer::ReorderBuffer(Options options, Diagnostics* diag) : options_(options), diag_(diag) {
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
  // Bulk append (geometric growth), then one pass that checks order and
  // lateness; late events are rare and moved out in a second, slow pass.
  const size_t old_size = q.events.size();
  q.events.insert(q.events.end(), events.begin(), events.end());
  const uint64_t late_bound = released_any_ ? watermark_ : 0;
  bool any_late = false;
  bool in_order = true;
  const Event* prev = q.size() > events.size() ? &q.events[old_size - 1] : nullptr;
  for (size_t i = old_size; i < q.events.size(); ++i) {
    const Event& e = q.events[i];
    if (released_any_ && e.end() <= late_bound) {
      any_late = true;
      continue;
    }
    if (prev != nullptr && CompletionOrderLess(e, *prev)) in_order = false;
    prev = &e;
  }
  size_t late = 0;
  if (any_late) {
    size_t keep = old_size;
    for (size_t i = old_size; i < q.events.size(); ++i) {
      Event& e = q.events[i];
      if (e.end() <= late_bound) {
        late_.push_back(e);
        late_.back().flags |= kFlagLate;
        ++late;
      } else {
        q.events[keep++] = e;
      }
    }
    q.events.resize(keep);
    if (diag_ != nullptr) diag_->Add(Diag::late_events, late);
  }
  pending_ += events.size() - late;
  if (!in_order) SortTail(q, old_size);
}

void ReorderBuffer::SortTail(Queue& q, size_t old_size) {
  // Only what just came is out of order: sort it alone, then merge it into
  // the sorted queue from the first old event it precedes (usually the last
  // few milliseconds). Sorting the whole queue at each release instead cost
  // O(n log n) per round over a backlog, and a pipeline that fell behind
  // never caught up.
  const auto head = q.events.begin() + static_cast<ptrdiff_t>(q.head);
  const auto mid = q.events.begin() + static_cast<ptrdiff_t>(std::max(old_size, q.head));
  std::stable_sort(mid, q.events.end(), CompletionOrderLess);
  if (mid != head && mid != q.events.end() && CompletionOrderLess(*mid, *(mid - 1))) {
    const auto from = std::upper_bound(head, mid, *mid, CompletionOrderLess);
    std::inplace_merge(from, mid, q.events.end(), CompletionOrderLess);
  }
}

void ReorderBuffer::SetProgress(uint32_t source, uint64_t progress_ns) {
  Queue& q = QueueFor(source);
  q.progress = std::max(q.progress, progress_ns);
}

ReorderBuffer::Released ReorderBuffer::Release(uint64_t now_ns) {
  const uint64_t window_cutoff = now_ns > options_.window_ns ? now_ns - options_.window_ns : 0;
  // (Never a shorter wait than a silent source gets.)
  const uint64_t wait_floor =
      std::min(window_cutoff, now_ns > options_.declared_max_wait_ns ? now_ns - options_.declared_max_wait_ns : 0);
  // How far each open source lets the release go; the least of them. With
  // no open source, nothing is known: the window decides.
  uint64_t cutoff = ~uint64_t{0};
  uint64_t progress = 0;  // the least declared progress; 0 if one could not say.
  bool any_open = false;
  for (const Queue& q : queues_) {
    if (q.closed) continue;
    const uint64_t declared = std::min(now_ns, q.progress);
    cutoff = std::min(cutoff, q.progress == 0 ? window_cutoff : std::max(declared, wait_floor));
    progress = any_open ? std::min(progress, declared) : declared;
    any_open = true;
  }
  if (!any_open) cutoff = window_cutoff;
  progress_ = progress;
  return ReleaseUpTo(cutoff, /*force_to_cap=*/true);
}

ReorderBuffer::Released ReorderBuffer::Flush() { return ReleaseUpTo(~uint64_t{0}, /*force_to_cap=*/false); }

void ReorderBuffer::CloseSource(uint32_t source) {
  for (Queue& q : queues_) {
    if (q.source == source) q.closed = true;
  }
}

ReorderBuffer::Released ReorderBuffer::ReleaseUpTo(uint64_t cutoff, bool force_to_cap) {
  // The spans of the previous release are dead now: reclaim their space.
  late_.erase(late_.begin(), late_.begin() + static_cast<ptrdiff_t>(late_released_));
  Compact();

  // Every queue is sorted (Push keeps it so): each is a run.
  const size_t excess = force_to_cap && pending_ > options_.max_pending ? pending_ - options_.max_pending : 0;
  uint64_t limit = cutoff;
  if (excess > 0) limit = ForcedLimit(cutoff, excess);
  backlog_ = false;
  if (force_to_cap && pending_ > options_.max_release) {
    const uint64_t capped = CappedLimit(limit, options_.max_release);
    backlog_ = capped < limit;
    limit = capped;
  }

  // Each queue's releasable prefix is a sorted run.
  runs_.clear();
  size_t total = 0;
  uint64_t max_end = 0;
  for (Queue& q : queues_) {
    const auto begin = q.events.begin() + static_cast<ptrdiff_t>(q.head);
    const auto end =
        std::upper_bound(begin, q.events.end(), limit, [](uint64_t t, const Event& e) { return t < e.end(); });
    const size_t n = static_cast<size_t>(end - begin);
    if (n == 0) continue;
    runs_.push_back({&*begin, n});
    max_end = std::max(max_end, (end - 1)->end());
    total += n;
    q.head += n;
  }
  std::span<const Event> events;
  if (runs_.size() == 1) {
    events = runs_[0];  // the common case: no copy at all.
  } else if (runs_.size() > 1) {
    MergeRuns(total);
    events = merged_;
  }
  pending_ -= total;
  if (excess > 0 && diag_ != nullptr) {
    size_t forced = 0;
    for (const Event& e : events) forced += e.end() > cutoff ? 1 : 0;
    diag_->Add(Diag::reorder_forced_release, forced);
  }
  // A flush promises only what it delivered; a timed release promises its limit.
  watermark_ = std::max(watermark_, cutoff == ~uint64_t{0} ? max_end : limit);
  released_any_ = true;
  late_released_ = late_.size();
  return Released{events, late_};
}

namespace {
// A run's next event in the merge, with its order keys at hand.
struct Head {
  uint64_t end, ts;
  uint32_t run;
  size_t pos;
};
// a goes out before b: completion order; equal events by run (as std::merge).
inline bool Before(const Head& a, const Head& b) {
  if (a.end != b.end) return a.end < b.end;
  if (a.ts != b.ts) return a.ts > b.ts;
  return a.run < b.run;
}
}  // namespace

void ReorderBuffer::MergeRuns(size_t total) {
  // One pass, one copy of each event: a binary min-heap of the runs' heads,
  // O(n log k). (Merging run after run into the result copied each event
  // about k/2 times: with 8 ingest sources it was the drain thread's largest
  // cost.)
  std::vector<Head> heap;
  heap.reserve(runs_.size());
  for (uint32_t r = 0; r < runs_.size(); ++r) heap.push_back({runs_[r][0].end(), runs_[r][0].ts, r, 0});
  auto sift_down = [&heap](size_t i) {
    const Head h = heap[i];
    for (size_t child; (child = 2 * i + 1) < heap.size(); i = child) {
      if (child + 1 < heap.size() && Before(heap[child + 1], heap[child])) ++child;
      if (!Before(heap[child], h)) break;
      heap[i] = heap[child];
    }
    heap[i] = h;
  };
  for (size_t i = heap.size() / 2; i-- > 0;) sift_down(i);
  merged_.clear();
  merged_.reserve(total);
  while (heap.size() > 1) {
    Head& top = heap[0];
    const std::span<const Event> run = runs_[top.run];
    merged_.push_back(run[top.pos]);
    if (++top.pos < run.size()) {
      top.end = run[top.pos].end();
      top.ts = run[top.pos].ts;
    } else {
      top = heap.back();
      heap.pop_back();
    }
    sift_down(0);
  }
  const std::span<const Event> last = runs_[heap[0].run].subspan(heap[0].pos);  // the rest of the last run.
  merged_.insert(merged_.end(), last.begin(), last.end());
}

uint64_t ReorderBuffer::CappedLimit(uint64_t limit, size_t cap) const {
  // Count the events ending at or before `limit`; if too many, stop just
  // before the end of the (cap+1)-th oldest (ties with it wait too: never
  // more than the cap).
  if (CountEndingBy(limit) <= cap) return limit;
  const uint64_t nth_end = NthEnd(cap + 1);
  // If the cap+1 oldest all end together, they go together (over the cap)
  // rather than never.
  const uint64_t capped = nth_end > OldestEnd() ? nth_end - 1 : nth_end;
  // Never below what was promised already (the watermark only moves up).
  return std::max(watermark_, std::min(limit, capped));
}

uint64_t ReorderBuffer::ForcedLimit(uint64_t cutoff, size_t excess) const {
  // Releasing up to the end of the excess-th oldest pending event (or the
  // cutoff if that is later) brings the buffer under its cap.
  return std::max(cutoff, NthEnd(excess));
}

size_t ReorderBuffer::CountEndingBy(uint64_t t) const {
  size_t n = 0;
  for (const Queue& q : queues_) {
    const auto begin = q.events.begin() + static_cast<ptrdiff_t>(q.head);
    n += static_cast<size_t>(
        std::upper_bound(begin, q.events.end(), t, [](uint64_t v, const Event& e) { return v < e.end(); }) - begin);
  }
  return n;
}

uint64_t ReorderBuffer::OldestEnd() const {
  uint64_t oldest = ~uint64_t{0};
  for (const Queue& q : queues_) {
    if (q.size() > 0) oldest = std::min(oldest, q.events[q.head].end());
  }
  return oldest;
}

uint64_t ReorderBuffer::NthEnd(size_t n) const {
  // The least end time T with at least n pending events ending by T: a
  // binary search over time, counting with a binary search per (sorted)
  // queue, O(k log^2) whatever the backlog (a k-way walk to the n-th event
  // was O(n log k) per release, and kept a pipeline that fell behind there).
  uint64_t lo = OldestEnd(), hi = 0;
  for (const Queue& q : queues_) {
    if (q.size() > 0) hi = std::max(hi, q.events.back().end());
  }
  if (lo > hi) return 0;  // nothing pending.
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (CountEndingBy(mid) >= n) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

void ReorderBuffer::Compact() {
  for (Queue& q : queues_) {
    if (q.head == q.events.size()) {
      q.events.clear();
      q.head = 0;
    } else if (q.head > 4096 && q.head >= 3 * q.size()) {
      // Moves at most a third of what was released since the last move.
      q.events.erase(q.events.begin(), q.events.begin() + static_cast<ptrdiff_t>(q.head));
      q.head = 0;
    }
  }
  std::erase_if(queues_, [](const Queue& q) { return q.closed && q.size() == 0; });
}

}  // namespace liveprof
