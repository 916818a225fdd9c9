#include "aggregators/catalog.h"

namespace liveprof {

const TrackDef Catalog::kUnknownTrack{};

std::string_view Catalog::ProcessLabel(uint32_t process) const {
  for (const TrackDef& t : tracks_) {
    if (t.defined && t.type == TrackType::kProcess && t.process == process) return t.name;
  }
  return {};
}

void Catalog::DefineProcess(const TrackDef& t) {
  const size_t cut = t.name.rfind(kHelperLabelSeparator);
  if (cut == std::string::npos) {
    // A process that may be served: the helpers defined before it (a worker
    // that connected first) are its now.
    std::erase_if(unresolved_helpers_, [&](const std::pair<uint32_t, std::string>& h) {
      if (h.second != t.name || h.first == t.process) return false;
      Serve(h.first, t.process);
      return true;
    });
    return;
  }
  if (t.process >= helper_.size()) helper_.resize(t.process + 1, false);
  helper_[t.process] = true;
  const std::string_view served_label = std::string_view(t.name).substr(0, cut);
  for (const TrackDef& other : tracks_) {
    if (other.defined && other.type == TrackType::kProcess && other.process != t.process &&
        other.name == served_label) {
      Serve(t.process, other.process);
      return;
    }
  }
  if (unresolved_helpers_.size() < 4096) unresolved_helpers_.emplace_back(t.process, std::string(served_label));
}

void Catalog::Serve(uint32_t helper, uint32_t served) {
  if (helper >= served_.size()) served_.resize(helper + 1, kNoProcess);
  served_[helper] = served;
}

void Catalog::DefineName(NameId id, std::string_view name) {
  if (id >= names_.size()) {
    names_.resize(id + 1);
    defined_.resize(id + 1, false);
  }
  names_[id].assign(name);
  defined_[id] = true;
}

std::string Catalog::DisplayName(NameId id) const {
  if (id < defined_.size() && defined_[id]) return names_[id];
  return "#" + std::to_string(id);
}

void Catalog::Consume(std::span<const Event> events) {
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::kNameDef:
        DefineName(e.name, e.payload.name_def.data == nullptr
                               ? std::string_view()
                               : std::string_view(e.payload.name_def.data, e.payload.name_def.size));
        break;
      case EventKind::kTrackDef: {
        if (e.track >= tracks_.size()) tracks_.resize(e.track + 1);
        TrackDef& t = tracks_[e.track];
        t.name.assign(Name(e.name));
        t.type = e.payload.track_def.type;
        t.os_id = e.payload.track_def.os_tid;
        t.device = e.device;
        t.process = e.payload.track_def.process;
        multi_process_ = multi_process_ || t.process != 0;
        t.defined = true;
        if (t.type == TrackType::kProcess) DefineProcess(t);
        break;
      }
      case EventKind::kDeviceInfo: {
        DeviceDef d;
        d.ordinal = e.device;
        d.name.assign(Name(e.name));
        d.memory_bytes = e.payload.device_info.memory_bytes;
        d.sm_count = e.payload.device_info.sm_count;
        d.cc_major = e.payload.device_info.cc_major;
        d.cc_minor = e.payload.device_info.cc_minor;
        bool replaced = false;
        for (DeviceDef& old : devices_) {
          if (old.ordinal == d.ordinal) {
            old = d;
            replaced = true;
          }
        }
        if (!replaced) devices_.push_back(std::move(d));
        break;
      }
      default: break;
    }
  }
}

const DeviceDef* Catalog::Device(uint8_t ordinal) const {
  for (const DeviceDef& d : devices_) {
    if (d.ordinal == ordinal) return &d;
  }
  return nullptr;
}

}  // namespace liveprof
