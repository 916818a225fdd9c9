#include "producers/simulated_workload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "stream/clock.h"

namespace liveprof {

SimulatedWorkload::SimulatedWorkload(Stream& stream, SimulatedWorkloadOptions options)
    : stream_(stream), options_(std::move(options)) {}

SimulatedWorkload::~SimulatedWorkload() { Stop(); }

SimulatedModel SimulatedWorkload::MakeModel() {
  return SimulatedModel(options_.model, &stream_.names());
}

void SimulatedWorkload::Start() {
  if (host_ring_ != nullptr) return;
  NameTable& names = stream_.names();
  SimulatedModelOptions& m = options_.model;
  m.streams = std::clamp<uint32_t>(m.streams, 1, 3);
  m.main_track = stream_.AddTrack({names.Intern("sim: training thread"), TrackType::kHostThread, 1, 0});
  m.loader_track = stream_.AddTrack({names.Intern("sim: data loader"), TrackType::kHostThread, 2, 0});
  for (uint32_t s = 0; s < m.streams; ++s) {
    const std::string name = "GPU " + std::to_string(m.device) + " stream " + std::to_string(7 + s);
    m.stream_tracks[s] = stream_.AddTrack({names.Intern(name), TrackType::kGpuStream, 7 + s, m.device});
  }
  // Paced, the host side writes each event as it ends and the device side
  // says how far each batch got, so the pipeline need not wait a whole
  // reorder window; unpaced times are not wall-clock times: nothing is said.
  host_ring_ = stream_.AddRing({"sim host", TimeDomain::kHostNs, 0, m.main_track,
                                options_.paced ? RingProgress::kWritesAtEnd : RingProgress::kUnknown});
  device_ring_ = stream_.AddRing({"sim gpu", TimeDomain::kHostNs, 0, m.stream_tracks[0],
                                  options_.paced ? RingProgress::kDeclared : RingProgress::kUnknown});
  if (host_ring_ == nullptr || device_ring_ == nullptr) return;  // counted by the stream.

  // The time mapping: the model's step 0 begins at its own t0; scale from
  // the rate of its first step, measured on a throwaway model.
  model_t0_ = 1'000'000'000;
  t0_ = options_.paced || options_.start_ns == 0 ? HostNowNs() + 1'000'000 : options_.start_ns;
  scale_ = 1;
  if (options_.events_per_second > 0) {
    // The model's own rate over one cycle of its schedule (scenarios differ
    // in events per second), on a throwaway model.
    NameTable scratch_names;
    SimulatedModel probe(options_.model, &scratch_names);
    uint64_t cycle = 0;
    for (const ScenarioPhase& p : options_.model.schedule) cycle += std::max<uint32_t>(p.steps, 1);
    uint64_t events = 0, start = model_t0_;
    for (uint64_t i = 0; i < std::clamp<uint64_t>(cycle, 1, 1000); ++i) {
      const SimulatedStep s = probe.Next(start);
      start = s.end_ns;
      events += s.host.size() + s.device.size();
    }
    const double natural = static_cast<double>(events) / (static_cast<double>(start - model_t0_) / 1e9);
    scale_ = std::max(1.0, options_.events_per_second / natural);
  }
  host_thread_ = std::thread([this] { RunHost(); });
  device_thread_ = std::thread([this] { RunDevice(); });
}

void SimulatedWorkload::Wait() {
  if (host_thread_.joinable()) host_thread_.join();
  if (device_thread_.joinable()) device_thread_.join();
  if (host_ring_) host_ring_->closed.store(true, std::memory_order_release);
  if (device_ring_) device_ring_->closed.store(true, std::memory_order_release);
}

void SimulatedWorkload::Stop() {
  stop_.store(true, std::memory_order_relaxed);
  Wait();
}

Event SimulatedWorkload::Scaled(const Event& e) const {
  Event out = e;
  if (scale_ == 1) {
    out.ts = e.ts - model_t0_ + t0_;
    return out;
  }
  const auto scale = [this](uint64_t ns) {
    return static_cast<uint64_t>(std::llround(static_cast<double>(ns) / scale_));
  };
  out.ts = t0_ + scale(e.ts - model_t0_);
  out.dur = scale(e.end() - model_t0_) - scale(e.ts - model_t0_);  // ends stay in order.
  return out;
}

bool SimulatedWorkload::Write(Ring& ring, const Event& e) {
  if (!options_.paced) {
    // Never drop: wait for the drain loop to make room.
    while (ring.queue->size() >= ring.queue->capacity()) {
      if (stop_.load(std::memory_order_relaxed)) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  return ring.queue->TryPush(Scaled(e));  // a full ring drops and counts.
}

namespace {

// Paced: sleeps until the host clock reaches `ns` (or a stop), in slices.
void SleepUntil(uint64_t ns, const std::atomic<bool>& stop) {
  for (uint64_t now = HostNowNs(); now < ns && !stop.load(std::memory_order_relaxed);
       now = HostNowNs()) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(ns - now, 2'000'000)));
  }
}

}  // namespace

void SimulatedWorkload::RunHost() {
  SimulatedModel model = MakeModel();
  uint64_t start = model_t0_;
  for (uint64_t i = 0; options_.steps == 0 || i < options_.steps; ++i) {
    if (stop_.load(std::memory_order_relaxed)) return;
    const SimulatedStep step = model.Next(start);
    start = step.end_ns;
    for (const Event& e : step.host) {
      if (options_.paced) SleepUntil(Scaled(e).end(), stop_);
      if (stop_.load(std::memory_order_relaxed)) return;
      Write(*host_ring_, e);
    }
    host_steps_.fetch_add(1, std::memory_order_relaxed);
  }
}

void SimulatedWorkload::RunDevice() {
  SimulatedModel model = MakeModel();
  Write(*device_ring_, model.DeviceInfo(model_t0_));
  uint64_t start = model_t0_;
  uint64_t generated = 0;
  auto more = [&] { return options_.steps == 0 || generated < options_.steps; };
  if (!options_.paced) {
    for (; more(); ++generated) {
      const SimulatedStep step = model.Next(start);
      start = step.end_ns;
      for (const Event& e : step.device) {
        if (!Write(*device_ring_, e)) return;
      }
    }
    return;
  }
  // Paced: every flush period, one batch of what has ended by then (CUPTI
  // hands over its activity buffers the same way).
  std::vector<Event> due;  // generated, not yet written, by end.
  size_t next = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint64_t now = HostNowNs();
    while (more() && Scaled(Event{.ts = start}).ts <= now) {
      const SimulatedStep step = model.Next(start);
      start = step.end_ns;
      ++generated;
      due.insert(due.end(), step.device.begin(), step.device.end());
    }
    while (next < due.size() && Scaled(due[next]).end() <= now) Write(*device_ring_, due[next++]);
    due.erase(due.begin(), due.begin() + static_cast<ptrdiff_t>(next));
    next = 0;
    // Everything that ended before now and before the first event still held
    // back has been written.
    uint64_t progress = now;
    for (const Event& e : due) progress = std::min(progress, Scaled(e).end() - 1);
    device_ring_->DeclareProgress(progress);
    if (!more() && due.empty()) return;
    SleepUntil(now + options_.flush_period_ns, stop_);
  }
}

}  // namespace liveprof
