// EventFeed (protocol.h): the events topic's binary frames, one connection's
// filter, rate cap and names-sent set. FlatBuffers lives here only; the
// control messages (protocol.cc) do not need it.
#include <algorithm>
#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "stream/liveprof_generated.h"
#include "stream/wire_event.h"
#include "web/protocol.h"

namespace liveprof {

namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000;

// payload0 / payload1 are Event::payload.raw[0] / raw[1] as they lie in
// memory; docs/protocol.md's packing (32-bit fields low half first) is a
// little-endian host's.
static_assert(std::endian::native == std::endian::little, "payload packing assumes little-endian");

// The budget the cap allows at most: one second of `rate`, in event-ns.
uint64_t BudgetCap(uint32_t rate) { return uint64_t{rate} * kNsPerSecond; }

// Collects the names and tracks a frame must define: those its events use
// and the connection has not been sent yet (and the directory knows).
class Definitions {
 public:
  Definitions(const NameDirectory& names, std::unordered_set<NameId>* sent_names,
              std::unordered_set<TrackId>* sent_tracks)
      : names_(names), sent_names_(*sent_names), sent_tracks_(*sent_tracks) {}

  void UseName(NameId id) {
    // 0 is the empty name by convention: never defined on the wire.
    if (id == 0 || !names_.HasName(id) || !sent_names_.insert(id).second) return;
    new_names_.push_back(id);
  }

  void UseTrack(TrackId id) {
    const NameDirectory::TrackEntry* track = names_.Track(id);
    if (track == nullptr || !sent_tracks_.insert(id).second) return;
    new_tracks_.push_back(id);
    UseName(track->name);
  }

  void Use(const Event& e) {
    UseName(e.name);
    UseTrack(e.track);
    if (e.kind == EventKind::kKernel) {
      UseName(e.payload.kernel.op);
      UseName(e.payload.kernel.details);
    }
    if (e.kind == EventKind::kAlloc && (e.flags & kFlagAllocAnnotation) != 0) UseName(e.corr);  // a name (event.h)
  }

  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<wire::NameDef>>> BuildNames(
      flatbuffers::FlatBufferBuilder& fbb) const {
    if (new_names_.empty()) return 0;
    std::vector<flatbuffers::Offset<wire::NameDef>> defs;
    defs.reserve(new_names_.size());
    for (NameId id : new_names_) {
      const std::string_view name = names_.Name(id);
      const auto str = fbb.CreateString(name.data(), name.size());
      defs.push_back(wire::CreateNameDef(fbb, id, str));
    }
    return fbb.CreateVector(defs);
  }

  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<wire::TrackDef>>> BuildTracks(
      flatbuffers::FlatBufferBuilder& fbb) const {
    if (new_tracks_.empty()) return 0;
    std::vector<flatbuffers::Offset<wire::TrackDef>> defs;
    defs.reserve(new_tracks_.size());
    for (TrackId id : new_tracks_) {
      const NameDirectory::TrackEntry& t = *names_.Track(id);
      defs.push_back(wire::CreateTrackDef(fbb, id, t.name, static_cast<uint8_t>(t.type), t.os_tid));
    }
    return fbb.CreateVector(defs);
  }

 private:
  const NameDirectory& names_;
  std::unordered_set<NameId>& sent_names_;
  std::unordered_set<TrackId>& sent_tracks_;
  std::vector<NameId> new_names_;
  std::vector<TrackId> new_tracks_;
};

// `f` with its tracks sorted and unique (Matches searches them) and its rate
// within 1..kMaxEventsPerSecondCap.
EventFilter Normalized(EventFilter f) {
  std::sort(f.tracks.begin(), f.tracks.end());
  f.tracks.erase(std::unique(f.tracks.begin(), f.tracks.end()), f.tracks.end());
  f.max_events_per_second = std::clamp<uint32_t>(f.max_events_per_second, 1, kMaxEventsPerSecondCap);
  return f;
}

}  // namespace

EventFeed::EventFeed(EventFilter filter)
    : filter_(Normalized(std::move(filter))), budget_(BudgetCap(filter_.max_events_per_second)) {}

void EventFeed::SetFilter(EventFilter filter) {
  filter_ = Normalized(std::move(filter));
  budget_ = std::min(budget_, BudgetCap(filter_.max_events_per_second));
}

void EventFeed::AddDropped(uint64_t n) {
  dropped_since_frame_ += n;
  dropped_total_ += n;
}

void EventFeed::DropMatching(std::span<const Event> events, const NameDirectory& names) {
  uint64_t n = 0;
  for (const Event& e : events) n += IsStreamedKind(e.kind) && filter_.Matches(e, names);
  AddDropped(n);
}

void EventFeed::Refill(uint64_t now_ns) {
  if (!clock_started_) {
    clock_started_ = true;
    last_refill_ns_ = now_ns;
    return;
  }
  if (now_ns <= last_refill_ns_) return;  // no time passed (or the clock stepped back).
  // At most one second counts: the budget never holds more than that.
  const uint64_t elapsed = std::min(now_ns - last_refill_ns_, kNsPerSecond);
  last_refill_ns_ = now_ns;
  const uint64_t cap = BudgetCap(filter_.max_events_per_second);
  budget_ = std::min(cap, budget_ + elapsed * filter_.max_events_per_second);
}

std::string EventFeed::Encode(std::span<const Event> events, const NameDirectory& names, uint64_t chunk_seq,
                              uint64_t watermark_ns, uint64_t now_ns) {
  Refill(now_ns);
  std::vector<wire::Event> out;
  out.reserve(std::min<uint64_t>(events.size(), budget_ / kNsPerSecond));
  Definitions defs(names, &sent_names_, &sent_tracks_);
  for (const Event& e : events) {
    if (!IsStreamedKind(e.kind) || !filter_.Matches(e, names)) continue;
    if (budget_ < kNsPerSecond) {
      ++dropped_since_frame_;
      ++dropped_total_;
      continue;
    }
    budget_ -= kNsPerSecond;
    out.push_back(ToWire(e));
    defs.Use(e);
  }
  if (out.empty() && dropped_since_frame_ == 0) return {};

  flatbuffers::FlatBufferBuilder fbb(256 + out.size() * sizeof(wire::Event));
  const auto name_defs = defs.BuildNames(fbb);
  const auto track_defs = defs.BuildTracks(fbb);
  const auto event_vec = fbb.CreateVectorOfStructs(out.data(), out.size());
  const auto frame = wire::CreateEventFrame(fbb, chunk_seq, watermark_ns, event_vec, name_defs, track_defs,
                                            dropped_since_frame_, dropped_total_, filter_.max_events_per_second);
  wire::FinishFrameBuffer(fbb, wire::CreateFrame(fbb, kFrameVersion, wire::Body::EventFrame, frame.Union()));
  events_sent_ += out.size();
  dropped_since_frame_ = 0;
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace liveprof
