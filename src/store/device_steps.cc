#include "store/device_steps.h"

#include <algorithm>
#include <iterator>

namespace liveprof {

void DeviceSteps::Define(TrackId id, uint32_t process) {
  if (id >= process_of_.size()) process_of_.resize(size_t{id} + 1, 0);
  process_of_[id] = process;
}

void LaunchTable::TryEmplace(uint32_t corr, uint64_t begin) {
  if (corr == 0) return;  // no correlation: nothing to name it (and 0 marks an empty slot).
  if (4 * (size_ + 1) > 3 * slots_.size()) Rebuild(std::max<size_t>(64, 2 * slots_.size()), 0);
  const size_t mask = slots_.size() - 1;
  for (size_t i = Hash(corr) & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.corr == corr) return;  // the first wins.
    if (s.corr == 0) {
      s.corr = corr;
      s.begin = begin;
      ++size_;
      min_begin_ = std::min(min_begin_, begin);
      return;
    }
  }
}

const uint64_t* LaunchTable::Find(uint32_t corr) const {
  if (corr == 0 || slots_.empty()) return nullptr;  // (0: never held)
  const size_t mask = slots_.size() - 1;
  for (size_t i = Hash(corr) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.corr == corr) return &s.begin;
    if (s.corr == 0) return nullptr;
  }
}

void LaunchTable::Rebuild(size_t capacity, uint64_t keep_from) {
  std::vector<Slot> old(capacity);
  old.swap(slots_);
  const size_t mask = capacity - 1;
  uint64_t min_begin = UINT64_MAX;
  size_ = 0;
  for (const Slot& o : old) {
    if (o.corr == 0 || o.begin < keep_from) continue;
    size_t at = Hash(o.corr) & mask;
    while (slots_[at].corr != 0) at = (at + 1) & mask;
    slots_[at] = o;
    ++size_;
    min_begin = std::min(min_begin, o.begin);
  }
  min_begin_ = min_begin;
}

void LaunchTable::EraseBefore(uint64_t t) {
  if (min_begin_ >= t) return;  // none goes.
  // The survivors into a table of their size (at most a quarter full: a
  // later prune's scan stays in proportion to what is held).
  size_t keep = 0;
  for (const Slot& s : slots_) keep += s.corr != 0 && s.begin >= t;
  size_t capacity = 64;
  while (capacity < 4 * keep) capacity *= 2;
  Rebuild(capacity, t);
}

void LaunchTable::Clear() {
  if (size_ != 0) std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
  min_begin_ = UINT64_MAX;
}

DeviceSteps::Process& DeviceSteps::Of(TrackId track) {
  const uint32_t id = track < process_of_.size() ? process_of_[track] : 0;
  if (last_.p == nullptr || id != last_.id) last_.p = &processes_[id], last_.id = id;
  return *last_.p;
}

void DeviceSteps::Launch(const Event& api) {
  Process& p = Of(api.track);
  p.launches.TryEmplace(api.corr, api.ts);  // (CUPTI's runtime and driver records of one call: the first)
  if (p.launches.size() > p.prune_at) PruneLaunches(p);
}

// Launches before every step still open name no work that could still be
// placed; with no step at all, a bounded number of them is kept.
void DeviceSteps::PruneLaunches(Process& p) {
  const uint64_t cutoff = !p.any ? 0 : p.open.empty() ? p.newest_end : p.open.front().host.ts;
  p.launches.EraseBefore(cutoff);
  if (p.launches.size() > kMaxLaunches) p.launches.Clear();  // no step in sight: their work goes by time.
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
    w.by_time = true;                                 // launched between steps: by time, as the step assembler.
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
    if (const uint64_t* begin = p.launches.Find(e.corr)) w.at = *begin, w.by_time = false;
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
