#include "store/derived_rows.h"

#include <algorithm>

namespace liveprof {

void DerivedRows::SeeDevice(uint8_t device) {
  if (seen_[device]) return;
  seen_[device] = true;
  devices_.push_back(device);
}

void DerivedRows::Define(TrackId id, const TrackInfo& info) {
  if (info.type == TrackType::kGpuStream) SeeDevice(info.device);
  steps_.Define(id, info.process);
  if (id >= counter_typed_.size()) counter_typed_.resize(size_t{id} + 1, false);
  counter_typed_[id] = info.type == TrackType::kCounter;
}

void DerivedRows::DefineName(NameId id, std::string_view text) {
  if (id >= step_names_.size()) step_names_.resize(size_t{id} + 1, false);
  step_names_[id] = text.starts_with("ProfilerStep#");
}

std::optional<NameId> DerivedRows::CounterName(TrackId id) const {
  if (!IsCounterRow(id) || id - kFirstDerivedTrack >= counter_names_.size()) return std::nullopt;
  return counter_names_[id - kFirstDerivedTrack];
}

void DerivedRows::Counter(const Event& e, std::vector<Event>* out) {
  if (e.track < counter_typed_.size() && counter_typed_[e.track]) return;  // a row already.
  auto it = counter_slot_.find(e.name);
  if (it == counter_slot_.end()) {
    if (counter_names_.size() == kCounterRows) return;  // no row left: on its thread's only.
    it = counter_slot_.emplace(e.name, static_cast<uint32_t>(counter_names_.size())).first;
    counter_names_.push_back(e.name);
  }
  Event c = e;
  c.track = CounterTrack(it->second);
  out->push_back(c);
}

void DerivedRows::Close(uint8_t device, std::vector<Event>* out) {
  std::optional<OpenOp>& open = open_[device];
  if (!open) return;
  Event e;
  e.kind = EventKind::kFrameworkOp;
  e.track = TrackOf(device, Row::kFrameworkOps);
  e.device = device;
  e.name = open->op;
  e.ts = open->ts;
  e.dur = open->end - open->ts;
  out->push_back(e);
  open.reset();
}

void DerivedRows::Memory(const Event& e, std::vector<Event>* out) {
  const auto kind = static_cast<MemoryKind>(e.sub);
  if (kind != MemoryKind::kDevice && kind != MemoryKind::kManaged) return;
  SeeDevice(e.device);
  uint64_t& in_use = in_use_[e.device];
  auto& live = live_[e.device];
  const uint64_t address = e.payload.memory.address;
  const uint64_t bytes = e.payload.memory.bytes;
  if (address == 0) {  // no address (some trace files): sizes alone, never below 0.
    in_use = e.kind == EventKind::kAlloc ? in_use + bytes : in_use - std::min(in_use, bytes);
  } else if (e.kind == EventKind::kAlloc) {
    // As the memory profile: an address allocated again was freed unseen.
    auto [it, added] = live.try_emplace(address, bytes);
    if (!added) in_use -= std::min(in_use, it->second), it->second = bytes;
    in_use += bytes;
  } else if (const auto it = live.find(address); it != live.end()) {
    in_use -= std::min(in_use, it->second);  // the size it was allocated with.
    live.erase(it);
  } else {
    return;  // a free of what was allocated before we saw it: nothing we counted.
  }
  Event c;
  c.kind = EventKind::kCounter;
  c.track = TrackOf(e.device, Row::kMemory);
  c.device = e.device;
  c.ts = e.ts;
  c.payload.counter.value = static_cast<double>(in_use);
  out->push_back(c);
}

void DerivedRows::TakeSteps(std::vector<Event>* out) {
  for (Event& e : made_steps_) {
    SeeDevice(e.device);
    e.track = TrackOf(e.device, Row::kSteps);
    out->push_back(e);
  }
  made_steps_.clear();
}

void DerivedRows::Derive(std::span<const Event> events, std::vector<Event>* out, uint64_t watermark_ns) {
  out->clear();
  made_steps_.clear();
  for (const Event& e : events) {
    if (e.track >= kFirstDerivedTrack) continue;  // not stored: not shown.
    if ((e.kind == EventKind::kHostSpan || e.kind == EventKind::kFrameworkOp) && !markers_ &&
        e.name < step_names_.size() && step_names_[e.name]) {
      steps_.HostStep(e, &made_steps_);  // PyTorch's step: a span.
    } else if (e.kind == EventKind::kStepMarker) {
      markers_ = true;
      // A step ends: its ops are done (xprof merges within a step only).
      for (const uint8_t d : devices_) Close(d, out);
      steps_.HostStep(e, &made_steps_);
    } else if (e.kind == EventKind::kRuntimeApi) {
      if (e.corr != 0) steps_.Launch(e);
    } else if (IsDeviceKind(e.kind) && e.kind != EventKind::kKernel) {  // copies, memsets
      SeeDevice(e.device);
      steps_.Work(e, &made_steps_);
    } else if (e.kind == EventKind::kAlloc || e.kind == EventKind::kFree) {
      Memory(e, out);
    } else if (e.kind == EventKind::kCounter) {
      Counter(e, out);
    } else if (e.kind == EventKind::kKernel) {
      SeeDevice(e.device);
      steps_.Work(e, &made_steps_);  // (late or not: its step may wait for it)
      // Late (past the reorder window): its op's neighbours are gone; merging
      // it would stretch whatever op is open back over others.
      if (e.flags & kFlagLate) continue;
      const NameId op = e.payload.kernel.op;
      if (op == 0) continue;
      std::optional<OpenOp>& open = open_[e.device];
      if (open && open->op == op) {
        open->ts = std::min(open->ts, e.ts);
        open->end = std::max(open->end, e.end());
        continue;
      }
      Close(e.device, out);
      open = OpenOp{op, e.ts, e.end()};
    }
  }
  if (watermark_ns != 0) steps_.Advance(watermark_ns, &made_steps_);
  TakeSteps(out);
}

void DerivedRows::Flush(std::vector<Event>* out) {
  out->clear();
  for (const uint8_t d : devices_) Close(d, out);
  made_steps_.clear();
  steps_.Flush(&made_steps_);
  TakeSteps(out);
}

}  // namespace liveprof
