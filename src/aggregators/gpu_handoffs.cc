// GpuHandoffs (gpu_handoffs.h).
#include "aggregators/gpu_handoffs.h"

#include <algorithm>
#include <string>

namespace liveprof {

GpuHandoffs::Window* GpuHandoffs::Open(uint32_t process) {
  for (auto it = windows_.rbegin(); it != windows_.rend(); ++it) {
    if (it->process == process) return it->to_ns == 0 ? &*it : nullptr;
  }
  return nullptr;
}

void GpuHandoffs::Consume(std::span<const Event> events) {
  // Every event passes here: one branch-free pass for the earliest ts (the
  // smallest ts - 1, unsigned, skips ts 0) and whether any is an instant;
  // the handoff instants are looked at only in a batch that has one.
  uint64_t least = first_ns_ - 1;  // first_ns_ 0 (none yet): the largest value.
  bool instants = false;
  for (const Event& e : events) {
    least = std::min(least, e.ts - 1);
    instants |= e.kind == EventKind::kInstant;
  }
  first_ns_ = least + 1;
  if (!instants) return;
  for (const Event& e : events) {
    if (e.kind != EventKind::kInstant) continue;
    const std::string_view name = catalog_->Name(e.name);
    if (!name.starts_with("GPU data: ")) continue;
    const uint32_t process = catalog_->Track(e.track).process;
    Window* open = Open(process);
    if (name == kBack) {
      if (open != nullptr) open->to_ns = std::max(e.ts, open->from_ns);
    } else if (name.starts_with(kNotRegained)) {
      if (open != nullptr) open->note = "not regained: " + std::string(name.substr(kNotRegained.size()));
    } else if (open == nullptr && (name.starts_with(kTo) || name == kFinalized)) {
      if (windows_.size() == kMaxWindows) windows_.erase(windows_.begin());
      Window w;
      w.process = process;
      w.from_ns = e.ts;
      if (name == kFinalized) {
        w.client = "another CUPTI client";
        w.note = "after a cuptiFinalize";
      } else {
        w.client = std::string(name.substr(kTo.size()));
      }
      windows_.push_back(std::move(w));
      ++windows_total_;
    }
  }
}

void GpuHandoffs::WriteJson(JsonWriter& w) const {
  auto seconds = [this](uint64_t ns) { return ns > first_ns_ ? static_cast<double>(ns - first_ns_) / 1e9 : 0.0; };
  w.BeginArray();
  for (const Window& win : windows_) {
    w.BeginObject();
    w.KV("worker", win.process);
    const std::string_view label = catalog_->ProcessLabel(win.process);
    w.KV("label", label.empty() ? std::string_view("local") : label);
    w.KV("client", win.client);
    w.KV("from_ns", win.from_ns);
    w.KV("to_ns", win.to_ns);
    w.Key("from_s");
    w.Fixed(seconds(win.from_ns), 3);
    w.Key("to_s");
    if (win.to_ns == 0) {
      w.Null();
    } else {
      w.Fixed(seconds(win.to_ns), 3);
    }
    w.KV("note", win.note);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace liveprof
