#include "store/device_steps.h"

#include <algorithm>
#include <iterator>

namespace liveprof {

void DeviceSteps::Define(TrackId id, uint32_t process) {
  if (id >= process_of_.size()) process_of_.resize(size_t{id} + 1, 0);
  process_of_[id] = process;
}

DeviceSteps::Process& DeviceSteps::Of(TrackId track) {
  return processes_[track < process_of_.size() ? process_of_[track] : 0];
}

void DeviceSteps::Launch(const Event& api) {
  Process& p = Of(api.track);
  p.launches.try_emplace(api.corr, api.ts);  // (CUPTI's runtime and driver records of one call: the first)
  if (p.launches.size() > p.prune_at) PruneLaunches(p);
}

// Launches before every step still open name no work that could still be
// placed; with no step at all, a bounded number of them is kept.
void DeviceSteps::PruneLaunches(Process& p) {
  const uint64_t cutoff = !p.any ? 0 : p.open.empty() ? p.newest_end : p.open.front().host.ts;
  std::erase_if(p.launches, [&](const auto& kv) { return kv.second < cutoff; });
  if (p.launches.size() > kMaxLaunches) p.launches.clear();  // no step in sight: their work goes by time.
  p.prune_at = std::max<size_t>(4096, 2 * p.launches.size());
}

DeviceSteps::Placed DeviceSteps::Place(Process& p, Waiting w, Step** step) const {
  if (!p.any) return Placed::kWaits;
  if (!w.by_time) {  // the step holding its launch's begin.
    for (auto it = p.open.rbegin(); it != p.open.rend(); ++it) {
      if (it->host.ts <= w.at && w.at < it->host.end()) {
        *step = &*it;
        return Placed::kStep;
      }
      if (it->host.ts <= w.at) break;  // between two steps.
    }
    if (w.at >= p.newest_end) return Placed::kWaits;  // its step has not ended yet.
    if (w.at < p.closed_end) return Placed::kLost;    // (or in a gap before it: rare)
    w.by_time = true;  // launched between steps: by time, as the step assembler.
    w.at = w.begin;
  }
  if (w.at >= p.newest_begin) return Placed::kWaits;  // the newest step's, unless another begins first.
  for (auto it = p.open.rbegin(); it != p.open.rend(); ++it) {
    if (it->host.ts <= w.at) {
      *step = &*it;
      return Placed::kStep;
    }
  }
  return Placed::kLost;  // before every step still open.
}

void DeviceSteps::Add(Process& p, Step& s, const Waiting& w, std::vector<Event>* out) {
  auto it = std::find_if(s.devices.begin(), s.devices.end(), [&](const Extent& x) { return x.device == w.device; });
  if (it == s.devices.end()) {
    s.devices.push_back({w.device, w.begin, w.end});
  } else {
    it->begin = std::min(it->begin, w.begin);
    it->end = std::max(it->end, w.end);
  }
  s.last_end = std::max(s.last_end, w.end);
  p.newest_work_seq = std::max(p.newest_work_seq, s.seq + 1);
  // Rule (a): the device is two steps on.
  while (!p.open.empty() && p.open.front().seq + 3 <= p.newest_work_seq) CloseFront(p, out);
}

void DeviceSteps::CloseFront(Process& p, std::vector<Event>* out) {
  Step& s = p.open.front();
  for (const Extent& x : s.devices) {
    Event e = s.host;
    e.ts = x.begin;
    e.dur = x.end - x.begin;
    e.device = x.device;
    e.corr = 0;  // (no second arrow from a launch)
    out->push_back(e);
  }
  p.closed_end = std::max(p.closed_end, s.host.end());
  p.open.pop_front();
}

void DeviceSteps::HostStep(const Event& step, std::vector<Event>* out) {
  Process& p = Of(step.track);
  if (p.any && step.ts < p.newest_begin) return;
  Step& s = p.open.emplace_back();
  s.host = step;
  s.seq = p.next_seq++;
  s.last_end = step.end();
  p.any = true;
  p.newest_begin = step.ts;
  p.newest_end = std::max(p.newest_end, step.end());
  // The work that waited for it (or, by time, for its successor).
  std::vector<Waiting> waiting;
  waiting.swap(p.waiting);
  for (const Waiting& w : waiting) {
    Step* at = nullptr;
    switch (Place(p, w, &at)) {
      case Placed::kStep: Add(p, *at, w, out); break;
      case Placed::kWaits: p.waiting.push_back(w); break;
      case Placed::kLost: ++late_work_; break;
    }
  }
  while (p.open.size() > kMaxOpenSteps) CloseFront(p, out);  // rule (c)
  if (p.launches.size() > 4096) PruneLaunches(p);
}

void DeviceSteps::Work(const Event& e, std::vector<Event>* out) {
  Process& p = Of(e.track);
  Waiting w{e.ts, true, e.device, e.ts, e.end()};
  if (e.corr != 0) {
    if (const auto it = p.launches.find(e.corr); it != p.launches.end()) w.at = it->second, w.by_time = false;
  }
  Step* at = nullptr;
  switch (Place(p, w, &at)) {
    case Placed::kStep: Add(p, *at, w, out); break;
    case Placed::kLost: ++late_work_; break;
    case Placed::kWaits:
      if (p.waiting.size() >= kMaxWaiting) {  // steps that never come: the oldest half goes.
        late_work_ += p.waiting.size() / 2;
        p.waiting.erase(p.waiting.begin(), p.waiting.begin() + static_cast<ptrdiff_t>(p.waiting.size() / 2));
      }
      p.waiting.push_back(w);
      break;
  }
}

void DeviceSteps::Advance(uint64_t watermark_ns, std::vector<Event>* out) {
  for (auto& [id, p] : processes_) {
    while (!p.open.empty() && p.open.front().last_end + kCloseLagNs <= watermark_ns) CloseFront(p, out);
  }
}

void DeviceSteps::Flush(std::vector<Event>* out) {
  for (auto& [id, p] : processes_) {
    for (Waiting w : p.waiting) {
      // A launch whose step never came is in none: its work goes by time,
      // and the newest step holds what begins after it.
      if (!w.by_time) w.by_time = true, w.at = w.begin;
      Step* at = nullptr;
      if (!p.open.empty() && w.at >= p.newest_begin) {
        Add(p, p.open.back(), w, out);
      } else if (Place(p, w, &at) == Placed::kStep) {
        Add(p, *at, w, out);
      } else {
        ++late_work_;
      }
    }
    p.waiting.clear();
    while (!p.open.empty()) CloseFront(p, out);
  }
}

}  // namespace liveprof
