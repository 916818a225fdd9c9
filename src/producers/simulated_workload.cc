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

SimulatedModel SimulatedWorkload::MakeModel(const Lane& lane) { return SimulatedModel(lane.model, &stream_.names()); }

bool SimulatedWorkload::AddLane(uint32_t process, const std::string& label, SimulatedModelOptions m) {
  NameTable& names = stream_.names();
  // Process 0 keeps the names of a single-process run; a rank's are prefixed.
  const std::string prefix = process == 0 ? "sim: " : label + ": ";
  const std::string ring_prefix = process == 0 ? "sim " : "sim " + label + " ";
  if (process != 0) {
    stream_.AddTrack({names.Intern(label), TrackType::kProcess, 1000 + process, 0, process});
  }
  m.streams = std::clamp<uint32_t>(m.streams, 1, 3);
  m.main_track = stream_.AddTrack({names.Intern(prefix + "training thread"), TrackType::kHostThread, 1, 0, process});
  m.loader_track = stream_.AddTrack({names.Intern(prefix + "data loader"), TrackType::kHostThread, 2, 0, process});
  for (uint32_t s = 0; s < m.streams; ++s) {
    const std::string name =
        (process == 0 ? "" : prefix) + "GPU " + std::to_string(m.device) + " stream " + std::to_string(7 + s);
    m.stream_tracks[s] = stream_.AddTrack({names.Intern(name), TrackType::kGpuStream, 7 + s, m.device, process});
  }
  auto lane = std::make_unique<Lane>();
  lane->model = std::move(m);
  // Paced, the host side writes each event as it ends and the device side
  // says how far each batch got, so the pipeline need not wait a whole
  // reorder window; unpaced times are not wall-clock times: nothing is said.
  // Each ring holds a quarter second of the whole rate (the stream's
  // default at the model's own rate): one simulated thread at 1 M events/s
  // would fill a default ring (65,536 events) in 65 ms, less than a 2-core
  // machine can leave the pipeline thread waiting for a core (the soak's
  // drops in bursts: bench/RESULTS.md, "Soak"). A real thread's ring is the
  // stream's default, or LIVEPROF_RING_CAPACITY. At most 262,144 events
  // (12 MiB) a ring: each of --workers' ranks has two, each at the rate.
  const size_t capacity = std::max(stream_.options().ring_capacity,
                                   std::min(static_cast<size_t>(options_.events_per_second / 4), size_t{1} << 18));
  lane->host_ring = stream_.AddRing({ring_prefix + "host", TimeDomain::kHostNs, capacity, lane->model.main_track,
                                     options_.paced ? RingProgress::kWritesAtEnd : RingProgress::kUnknown});
  lane->device_ring = stream_.AddRing({ring_prefix + "gpu", TimeDomain::kHostNs, capacity, lane->model.stream_tracks[0],
                                       options_.paced ? RingProgress::kDeclared : RingProgress::kUnknown});
  const bool ok = lane->host_ring != nullptr && lane->device_ring != nullptr;
  lanes_.push_back(std::move(lane));
  return ok;  // a failed ring is counted by the stream.
}

void SimulatedWorkload::Start() {
  if (started_) return;
  started_ = true;
  const uint32_t workers = std::min(options_.workers, kMaxSimulatedWorkers);
  if (workers == 0) {
    if (!AddLane(0, "", options_.model)) return;
  } else {
    for (uint32_t rank = 0; rank < workers; ++rank) {
      SimulatedModelOptions m = options_.model;
      m.seed = options_.model.seed + rank;
      if (static_cast<int64_t>(rank) == options_.straggler) {
        m.step_ns = static_cast<uint64_t>(static_cast<double>(m.step_ns) * std::max(1.0, options_.straggler_factor));
      }
      if (!AddLane(rank + 1, "rank " + std::to_string(rank), std::move(m))) return;
    }
  }

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
  for (const auto& lane : lanes_) {
    Lane* l = lane.get();
    l->host_thread = std::thread([this, l] { RunHost(*l); });
    l->device_thread = std::thread([this, l] { RunDevice(*l); });
  }
}

uint64_t SimulatedWorkload::steps_done() const {
  uint64_t n = lanes_.empty() ? 0 : ~uint64_t{0};
  for (const auto& lane : lanes_) n = std::min(n, lane->host_steps.load(std::memory_order_relaxed));
  return n;
}

void SimulatedWorkload::Wait() {
  for (const auto& lane : lanes_) {
    if (lane->host_thread.joinable()) lane->host_thread.join();
    if (lane->device_thread.joinable()) lane->device_thread.join();
    if (lane->host_ring) lane->host_ring->closed.store(true, std::memory_order_release);
    if (lane->device_ring) lane->device_ring->closed.store(true, std::memory_order_release);
  }
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
  for (uint64_t now = HostNowNs(); now < ns && !stop.load(std::memory_order_relaxed); now = HostNowNs()) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(ns - now, 2'000'000)));
  }
}

}  // namespace

void SimulatedWorkload::RunHost(Lane& lane) {
  SimulatedModel model = MakeModel(lane);
  uint64_t start = model_t0_;
  for (uint64_t i = 0; options_.steps == 0 || i < options_.steps; ++i) {
    if (stop_.load(std::memory_order_relaxed)) return;
    const SimulatedStep step = model.Next(start);
    start = step.end_ns;
    for (const Event& e : step.host) {
      if (options_.paced) SleepUntil(Scaled(e).end(), stop_);
      if (stop_.load(std::memory_order_relaxed)) return;
      Write(*lane.host_ring, e);
    }
    lane.host_steps.fetch_add(1, std::memory_order_relaxed);
  }
}

void SimulatedWorkload::RunDevice(Lane& lane) {
  SimulatedModel model = MakeModel(lane);
  Ring& ring = *lane.device_ring;
  Write(ring, model.DeviceInfo(model_t0_));
  uint64_t start = model_t0_;
  uint64_t generated = 0;
  auto more = [&] { return options_.steps == 0 || generated < options_.steps; };
  if (!options_.paced) {
    for (; more(); ++generated) {
      const SimulatedStep step = model.Next(start);
      start = step.end_ns;
      for (const Event& e : step.device) {
        if (!Write(ring, e)) return;
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
    const uint64_t delivered = now > options_.device_delay_ns ? now - options_.device_delay_ns : 0;
    while (next < due.size() && Scaled(due[next]).end() <= delivered) Write(ring, due[next++]);
    due.erase(due.begin(), due.begin() + static_cast<ptrdiff_t>(next));
    next = 0;
    // Everything that ended before `delivered` and before the first event
    // still held back has been written.
    uint64_t progress = delivered;
    for (const Event& e : due) progress = std::min(progress, Scaled(e).end() - 1);
    ring.DeclareProgress(progress);
    if (!more() && due.empty()) return;
    SleepUntil(now + options_.flush_period_ns, stop_);
  }
}

}  // namespace liveprof
