#include "web/shared_state.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "stream/clock.h"

namespace liveprof {

// ---- LatencyRecorder ----

void LatencyRecorder::Record(uint64_t prev_watermark_ns, uint64_t watermark_ns, uint64_t sent_ns) {
  if (watermark_ns <= prev_watermark_ns || sent_ns < watermark_ns) return;
  constexpr uint64_t kMs = 1'000'000;
  // Events that ended at t in (prev, wm] waited sent - t: from sent - wm
  // (the newest) to sent - prev (the oldest); one sample per ms of t.
  const uint64_t lo = (sent_ns - watermark_ns) / kMs;
  const uint64_t hi = (sent_ns - prev_watermark_ns) / kMs;
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t b = lo; b < std::max(hi, lo + 1); ++b) {
    ++bins_[std::min<uint64_t>(b, kBins)];
    ++samples_;
  }
  max_bin_ = std::max(max_bin_, std::max(hi, lo + 1) - 1);
}

void LatencyRecorder::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  std::fill(bins_.begin(), bins_.end(), 0);
  samples_ = 0;
  max_bin_ = 0;
}

double LatencyRecorder::Percentile(double q) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (samples_ == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(samples_))));
  uint64_t seen = 0;
  for (size_t b = 0; b < bins_.size(); ++b) {
    seen += bins_[b];
    if (seen >= rank) return static_cast<double>(b) + 1.0;  // the bin's upper edge.
  }
  return static_cast<double>(kBins);
}

double LatencyRecorder::Max() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_ ? static_cast<double>(max_bin_) + 1.0 : 0.0;
}

uint64_t LatencyRecorder::samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_;
}

// ---- SharedState ----

SharedState::SharedState(Pipeline& pipeline, ServerOptions options)
    : pipeline_(pipeline), options_(std::move(options)) {}

bool SharedState::Admit(const std::string& address) {
  auto count = [&] {
    const auto it = per_address_.find(address);
    return it == per_address_.end() ? size_t{0} : it->second;
  };
  // At a cap, a waiting connection gives way (of this address for its cap).
  while ((count() >= options_.max_connections_per_address && EvictWaiting(&address)) ||
         (connections_ >= options_.max_connections && EvictWaiting(nullptr))) {
  }
  if (count() >= options_.max_connections_per_address || connections_ >= options_.max_connections) {
    counters_.connections_refused.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  ++per_address_[address];
  counters_.connections_open.store(++connections_, std::memory_order_relaxed);
  counters_.connections_accepted.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void SharedState::Release(const std::string& address) {
  auto it = per_address_.find(address);
  if (it == per_address_.end()) return;
  if (--it->second == 0) per_address_.erase(it);
  counters_.connections_open.store(--connections_, std::memory_order_relaxed);
}

void SharedState::Waiting(Waiter* w, const std::string& address, bool kept_alive) {
  NotWaiting(w);
  const uint64_t since = ++waits_;
  waiting_.emplace(since, WaitingConnection{w, address, kept_alive});
  waiting_since_.emplace(w, since);
}

void SharedState::NotWaiting(Waiter* w) {
  const auto it = waiting_since_.find(w);
  if (it == waiting_since_.end()) return;
  waiting_.erase(it->second);
  waiting_since_.erase(it);
}

bool SharedState::EvictWaiting(const std::string* address) {
  // Oldest first, those that never completed a request before those kept
  // alive (at most the cap's connections are looked at: only at a cap).
  for (const bool kept_alive : {false, true}) {
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      const WaitingConnection& c = it->second;
      if (c.kept_alive != kept_alive || (address != nullptr && c.address != *address)) continue;
      Waiter* w = c.waiter;
      waiting_since_.erase(w);
      waiting_.erase(it);
      counters_.connections_evicted.fetch_add(1, std::memory_order_relaxed);
      w->GiveWay();
      return true;
    }
  }
  return false;
}

void SharedState::Join(FeedSession* session) {
  sessions_.insert(session);
  counters_.websocket_sessions.store(sessions_.size(), std::memory_order_relaxed);
}

void SharedState::Leave(FeedSession* session) {
  sessions_.erase(session);
  counters_.websocket_sessions.store(sessions_.size(), std::memory_order_relaxed);
  SubscriptionsChanged();
}

void SharedState::SubscriptionsChanged() {
  const bool any = std::any_of(sessions_.begin(), sessions_.end(), [](const FeedSession* s) {
    return s->topics().test(static_cast<size_t>(Topic::kEvents));
  });
  pipeline_.SetEventTap(any);
}

ViewFrame SharedState::LatestFrame(Topic topic) const {
  ViewFrame f;
  f.topic = topic;
  if (!latest_) return f;
  f.json = std::shared_ptr<const std::string>(latest_, &ViewJson(latest_->views, topic));
  f.watermark_ns = latest_->watermark_ns;
  return f;
}

void SharedState::CheckDeadlines(uint64_t now_ns) {
  // Copy: a session may close (and Leave) while we go round.
  const std::vector<FeedSession*> sessions(sessions_.begin(), sessions_.end());
  for (FeedSession* s : sessions) {
    if (sessions_.count(s)) s->CheckDeadline(now_ns);
  }
}

void SharedState::OnSnapshot(std::shared_ptr<const PipelineSnapshot> snapshot) {
  latest_ = std::move(snapshot);
  CheckDeadlines(HostNowNs());
  const std::vector<FeedSession*> sessions(sessions_.begin(), sessions_.end());
  for (size_t t = 0; t < kTopicCount; ++t) {
    const Topic topic = static_cast<Topic>(t);
    if (!IsViewTopic(topic)) continue;
    const ViewFrame frame = LatestFrame(topic);
    for (FeedSession* s : sessions) {
      if (sessions_.count(s) && s->topics().test(t)) s->SendView(frame);
    }
  }
}

void SharedState::OnChunk(std::shared_ptr<const EventChunk> chunk) {
  names_.Consume(chunk->definitions);
  const uint64_t now = HostNowNs();
  const std::vector<FeedSession*> sessions(sessions_.begin(), sessions_.end());
  for (FeedSession* s : sessions) {
    if (sessions_.count(s) && s->topics().test(static_cast<size_t>(Topic::kEvents))) {
      s->SendEvents(*chunk, names_, now);
    }
  }
}

void SharedState::CloseAll() {
  const std::vector<FeedSession*> sessions(sessions_.begin(), sessions_.end());
  for (FeedSession* s : sessions) {
    if (sessions_.count(s)) s->Close();
  }
}

}  // namespace liveprof
