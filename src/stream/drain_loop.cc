#include "stream/drain_loop.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>

namespace liveprof {

namespace {
constexpr uint64_t kPairPeriodNs = 100'000'000;        // a TSC/host pair every 100 ms.
constexpr uint64_t kInitialCalibrationNs = 1'000'000;  // first two pairs 1 ms apart.
}  // namespace

DrainLoop::DrainLoop(Stream& stream, Options options, Consumer consumer)
    : stream_(stream),
      options_(options),
      consumer_(std::move(consumer)),
      reorder_(options.reorder, &stream.diagnostics()) {
  // Two pairs a millisecond apart give a first slope good to ~1e-5; the
  // pairs added every 100 ms refine it.
  const TscPair first = ReadTscPair();
  tsc_map_.AddPair(first.tsc, first.host_ns);
  while (HostNowNs() - first.host_ns < kInitialCalibrationNs) {
  }
  const TscPair second = ReadTscPair();
  tsc_map_.AddPair(second.tsc, second.host_ns);
  last_pair_ns_ = second.host_ns;
}

DrainLoop::~DrainLoop() { Stop(); }

void DrainLoop::Start() {
  stop_.store(false, std::memory_order_relaxed);
  if (options_.handoff_events > 0) {
    handing_off_ = true;  // before either thread starts: both read it.
    drain_done_ = false;
    consumer_thread_ = std::thread([this] { RunConsumer(); });
  }
  thread_ = std::thread([this] { Run(); });
}

void DrainLoop::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_relaxed);
  thread_.join();  // its last batch is queued (handoff) or consumed.
  if (consumer_thread_.joinable()) consumer_thread_.join();
  handing_off_ = false;
}

void DrainLoop::Run() {
  pthread_setname_np(pthread_self(), "liveprof drain");
  // Sleep as long as asked, not the default 50 us of timer slack more: the
  // rings are sized for the sleep we ask for.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  while (!stop_.load(std::memory_order_relaxed)) {
    // A full handoff queue: the events stay in the rings (which push back or
    // drop) until the consumer has taken some.
    if (handing_off_ && handoff_queued_.load(std::memory_order_relaxed) >= options_.handoff_events) {
      std::this_thread::sleep_for(options_.idle_sleep);
      continue;
    }
    bool busy = false;
    const uint64_t now = Now();
    DrainRings(now, &busy);
    if (!Deliver(now)) PublishIdle(reorder_.watermark());
    // A backlog left in the reorder buffer: drain the rings and go on at once.
    if (!busy && !reorder_.has_backlog()) std::this_thread::sleep_for(options_.idle_sleep);
  }
  Flush();
  if (handing_off_) {
    {
      std::lock_guard<std::mutex> lock(handoff_mu_);
      drain_done_ = true;
    }
    handoff_cv_.notify_all();
  }
}

void DrainLoop::RunConsumer() {
  pthread_setname_np(pthread_self(), "liveprof pipe");
  for (;;) {
    std::unique_ptr<Handoff> h;
    {
      std::unique_lock<std::mutex> lock(handoff_mu_);
      handoff_cv_.wait(lock, [this] { return !handoff_.empty() || drain_done_; });
      if (handoff_.empty()) return;  // the drain thread is done, and so are we.
      h = std::move(handoff_.front());
      handoff_.pop_front();
      handoff_queued_.fetch_sub(h->size(), std::memory_order_relaxed);
    }
    consumer_(Batch{h->definitions, h->events, h->late, h->watermark_ns, h->now_ns});
    for (const auto& [ring, drained] : h->drained) {
      ring->handled_ns.store(h->through, std::memory_order_release);
      ring->handled_events.store(drained, std::memory_order_release);
    }
    h->drained.clear();  // the rings' references: a closed ring may go.
    std::lock_guard<std::mutex> lock(handoff_mu_);
    --handoff_in_flight_;
    // Kept for reuse unless it grew past a normal round's size (after a
    // stall): the backlog's memory is given back once it is digested.
    constexpr size_t kKeepCapacity = size_t{1} << 16;
    if (handoff_free_.size() < 32 && h->events.capacity() <= kKeepCapacity) handoff_free_.push_back(std::move(h));
  }
}

size_t DrainLoop::RunOnce(uint64_t now_ns) {
  bool busy = false;
  const size_t n = DrainRings(now_ns, &busy);
  if (!Deliver(now_ns)) PublishIdle(reorder_.watermark());
  return n;
}

void DrainLoop::Flush() {
  bool busy = false;
  DrainRings(Now(), &busy, /*all=*/true);
  definitions_.clear();
  EmitDefinitions();
  const ReorderBuffer::Released r = reorder_.Flush();
  // Everything drained goes out.
  if (!definitions_.empty() || !r.events.empty() || !r.late.empty()) {
    Emit(Batch{definitions_, r.events, r.late, reorder_.watermark(), Now()}, UINT64_MAX);
  } else {
    PublishIdle(UINT64_MAX);
  }
}

void DrainLoop::Emit(const Batch& b, uint64_t through) {
  if (!handing_off_) {
    consumer_(b);
    PublishHandled(through);
    return;
  }
  std::unique_ptr<Handoff> h;
  {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    if (!handoff_free_.empty()) {
      h = std::move(handoff_free_.back());
      handoff_free_.pop_back();
    }
  }
  if (!h) h = std::make_unique<Handoff>();
  h->definitions.assign(b.definitions.begin(), b.definitions.end());
  h->events.assign(b.events.begin(), b.events.end());
  h->late.assign(b.late.begin(), b.late.end());
  h->watermark_ns = b.watermark_ns;
  h->now_ns = b.now_ns;
  h->through = through;
  for (const std::shared_ptr<Ring>& ring : rings_) h->drained.emplace_back(ring, ring->queue->drained());
  const size_t size = h->size();
  {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    handoff_.push_back(std::move(h));
    ++handoff_in_flight_;
    const uint64_t queued = handoff_queued_.fetch_add(size, std::memory_order_relaxed) + size;
    if (queued > handoff_max_queued_.load(std::memory_order_relaxed)) {
      handoff_max_queued_.store(queued, std::memory_order_relaxed);
    }
  }
  handoff_cv_.notify_one();
}

void DrainLoop::PublishIdle(uint64_t through) {
  if (!handing_off_) {
    PublishHandled(through);
    return;
  }
  // With batches still queued or being consumed, their consumer publishes
  // (older marks); these would run ahead of them.
  std::lock_guard<std::mutex> lock(handoff_mu_);
  if (handoff_in_flight_ == 0) PublishHandled(through);
}

// After a delivery (or a round with nothing to deliver): every event drained
// from a ring that ends at or before `through` (the watermark) has been
// handed to the consumer, which has returned (Ring::Handled).
void DrainLoop::PublishHandled(uint64_t through) {
  for (const std::shared_ptr<Ring>& ring : rings_) {
    ring->handled_ns.store(through, std::memory_order_release);
    ring->handled_events.store(ring->queue->drained(), std::memory_order_release);
  }
}

size_t DrainLoop::DrainRings(uint64_t now_ns, bool* any_ring_busy, bool all) {
  rounds_.fetch_add(1, std::memory_order_relaxed);
  if (const uint64_t gen = stream_.ring_generation(); gen != ring_generation_) {
    ring_generation_ = gen;
    stream_.CopyRings(&rings_);
  }
  // TSC pairs are on the host clock, whatever the stream's clock is.
  if (HostNowNs() - last_pair_ns_ >= kPairPeriodNs) {
    const TscPair p = ReadTscPair();
    tsc_map_.AddPair(p.tsc, p.host_ns);
    last_pair_ns_ = p.host_ns;
  }

  size_t total = 0;
  removed_.clear();
  // A backlog (the last release stopped at max_release: the consumer is
  // behind): rings that can push back keep their events, rather than the
  // reorder buffer growing by hundreds of megabytes. (Events merely waiting
  // for their window, a CUPTI ring's, are no backlog.)
  // Likewise while the consumer thread has a round's worth queued.
  const bool hold = !all && (reorder_.has_backlog() ||
                             handoff_queued_.load(std::memory_order_relaxed) > options_.reorder.max_release);
  for (const std::shared_ptr<Ring>& ring : rings_) {
    if (hold && ring->pushes_back && !ring->closed.load(std::memory_order_acquire)) continue;
    // Read `closed` before draining: everything the producer published before
    // closing is then visible to this drain.
    const bool closed = ring->closed.load(std::memory_order_acquire);
    // Likewise the progress: everything written before it is in this drain.
    uint64_t progress = 0;
    if (ring->progress == RingProgress::kDeclared) {
      progress = ring->declared_ns.load(std::memory_order_acquire);
    } else if (ring->progress == RingProgress::kWritesAtEnd && now_ns > options_.writes_at_end_slack_ns) {
      progress = now_ns - options_.writes_at_end_slack_ns;
    }
    // A ring over a quarter full is busy: come back at once, not after a sleep.
    if (ring->queue->size() * 4 > ring->queue->capacity()) *any_ring_busy = true;
    const size_t n = ring->queue->Drain([&](std::span<Event> events) {
      if (ring->domain == TimeDomain::kTscTicks) {
        for (Event& e : events) {
          // Both ends mapped: a span's end and the next one's begin read at
          // the same tick stay equal.
          const uint64_t begin = tsc_map_.ToHost(e.ts);
          if (e.dur != 0) {
            const uint64_t end = tsc_map_.ToHost(e.ts + e.dur);
            e.dur = end > begin ? end - begin : 0;
          }
          e.ts = begin;
        }
      }
      reorder_.Push(ring->serial, events);
    });
    total += n;
    reorder_.SetProgress(ring->serial, progress);
    if (closed) {
      reorder_.CloseSource(ring->serial);
      stream_.RemoveRing(ring.get());
      removed_.push_back(ring.get());
    }
  }
  if (!removed_.empty()) {
    std::erase_if(rings_, [&](const std::shared_ptr<Ring>& r) {
      return std::find(removed_.begin(), removed_.end(), r.get()) != removed_.end();
    });
  }
  events_drained_.fetch_add(total, std::memory_order_relaxed);
  return total;
}

void DrainLoop::EmitDefinitions() {
  // Read the track count before the name count: a producer interns a track's
  // name before it adds the track, so every name a counted track uses is then
  // below the name count. (The other order let a track slip in, with a name
  // interned after the name count was read, and be defined before its name.)
  const uint32_t track_count = stream_.track_count();
  const NameTable& names = stream_.names();
  for (const uint32_t n = names.size(); names_sent_ < n; ++names_sent_) {
    definitions_.push_back(NameDefEvent(names_sent_, names.Get(names_sent_)));
  }
  for (; tracks_sent_ < track_count; ++tracks_sent_) {
    definitions_.push_back(TrackDefEvent(tracks_sent_, stream_.track(tracks_sent_)));
  }
}

bool DrainLoop::Deliver(uint64_t now_ns) {
  definitions_.clear();
  EmitDefinitions();
  const uint64_t before = reorder_.watermark();
  const ReorderBuffer::Released r = reorder_.Release(now_ns);
  const bool heartbeat_due =
      now_ns - last_delivery_ns_ >= static_cast<uint64_t>(std::chrono::nanoseconds(options_.heartbeat).count());
  if (definitions_.empty() && r.events.empty() && r.late.empty() &&
      !(heartbeat_due && reorder_.watermark() != before)) {
    return false;
  }
  last_delivery_ns_ = now_ns;
  Emit(Batch{definitions_, r.events, r.late, reorder_.watermark(), now_ns}, reorder_.watermark());
  return true;
}

}  // namespace liveprof
