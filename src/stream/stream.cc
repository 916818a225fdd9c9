#include "stream/stream.h"

#include <algorithm>

namespace liveprof {

Stream::Stream(Options options) : options_(options), names_(&diag_) {
  tracks_.push_back(TrackInfo{});  // TrackId 0 means "no track".
}

std::shared_ptr<Ring> Stream::AddRing(const RingOptions& options, std::string* error) {
  const size_t capacity = options.capacity != 0 ? options.capacity : options_.ring_capacity;
  std::string why;
  std::unique_ptr<SpscRing> queue = SpscRing::Create(capacity, &why);
  if (queue == nullptr) {
    diag_.Add(Diag::ring_create_failed);
    if (error) *error = "ring '" + options.name + "': " + why;
    return nullptr;
  }
  auto ring = std::make_shared<Ring>();
  ring->queue = std::move(queue);
  ring->name = options.name;
  ring->domain = options.domain;
  ring->track = options.track;
  ring->progress = options.progress;
  ring->pushes_back = options.pushes_back;
  std::lock_guard<std::mutex> lock(mu_);
  ring->serial = next_serial_++;
  rings_.push_back(ring);
  ring_generation_.fetch_add(1, std::memory_order_release);
  return ring;
}

TrackId Stream::AddTrack(const TrackInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  tracks_.push_back(info);
  return static_cast<TrackId>(tracks_.size() - 1);
}

uint32_t Stream::track_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(tracks_.size());
}

TrackInfo Stream::track(TrackId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id < tracks_.size() ? tracks_[id] : TrackInfo{};
}

void Stream::CopyRings(std::vector<std::shared_ptr<Ring>>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  *out = rings_;
}

void Stream::RemoveRing(const Ring* ring) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(rings_.begin(), rings_.end(), [&](const std::shared_ptr<Ring>& r) { return r.get() == ring; });
  if (it == rings_.end()) return;
  retired_published_ += (*it)->queue->published();
  retired_dropped_ += (*it)->queue->dropped();
  rings_.erase(it);
  ring_generation_.fetch_add(1, std::memory_order_release);
}

std::vector<Stream::RingStats> Stream::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RingStats> out;
  out.reserve(rings_.size());
  for (const auto& r : rings_) {
    out.push_back({r->name, r->serial, r->track, r->queue->published(), r->queue->dropped(), r->queue->capacity(),
                   r->closed.load(std::memory_order_relaxed)});
  }
  return out;
}

uint64_t Stream::TotalPublished() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = retired_published_;
  for (const auto& r : rings_) n += r->queue->published();
  return n;
}

uint64_t Stream::TotalDropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = retired_dropped_ + diag_.Get(Diag::no_ring_dropped);
  for (const auto& r : rings_) n += r->queue->dropped();
  return n;
}

void Stream::LockForFork() {
  names_.LockForFork();
  mu_.lock();
}

void Stream::UnlockAfterFork() {
  mu_.unlock();
  names_.UnlockAfterFork();
}

void Stream::AfterForkInChild() {
  // (The locks are this thread's, taken by LockForFork before the fork.)
  rings_.clear();  // (the parent's sender, not in the child, may hold copies: they stay with it)
  tracks_.resize(1);
  retired_published_ = 0;
  retired_dropped_ = 0;
  diag_.Reset();
  ring_generation_.fetch_add(1, std::memory_order_release);
  UnlockAfterFork();
}

Event NameDefEvent(NameId id, std::string_view name) {
  Event e;
  e.kind = EventKind::kNameDef;
  e.name = id;
  e.payload.name_def.data = name.data();
  e.payload.name_def.size = name.size();
  return e;
}

Event TrackDefEvent(TrackId id, const TrackInfo& info) {
  Event e;
  e.kind = EventKind::kTrackDef;
  e.track = id;
  e.name = info.name;
  e.device = info.device;
  e.payload.track_def.os_tid = info.os_id;
  e.payload.track_def.type = info.type;
  e.payload.track_def.process = info.process;
  return e;
}

}  // namespace liveprof
