// Catalog: what the stream's definitions said, for the analyses. It reads the
// kNameDef, kTrackDef and kDeviceInfo events of a batch and answers "what is
// name 17", "which thread is track 3", "which GPU is device 0". Every
// aggregator holds a const pointer to the one Catalog that the pipeline feeds
// first, so strings are stored once.
//
// Pure: Consume() and lookups, no I/O, no locks. Pipeline thread only.
#ifndef LIVEPROF_AGGREGATORS_CATALOG_H_
#define LIVEPROF_AGGREGATORS_CATALOG_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stream/event.h"

namespace liveprof {

struct TrackDef {
  std::string name;
  TrackType type = TrackType::kHostThread;
  uint64_t os_id = 0;  // OS thread id, or the stream id of a GPU stream.
  uint8_t device = 0;
  uint32_t process = 0;  // 0: this process; else the worker id of an ingest source.
  bool defined = false;
};

struct DeviceDef {
  uint8_t ordinal = 0;
  std::string name;  // "NVIDIA A100-SXM4-40GB"
  uint64_t memory_bytes = 0;
  uint32_t sm_count = 0;
  uint8_t cc_major = 0;
  uint8_t cc_minor = 0;
};

class Catalog {
 public:
  // Reads the definitions among `events`; ignores every other kind.
  void Consume(std::span<const Event> events);
  // Adds one definition directly (tests, replay).
  void DefineName(NameId id, std::string_view name);

  // The string of `id`; "" for an id never defined.
  std::string_view Name(NameId id) const {
    return id < names_.size() ? std::string_view(names_[id]) : std::string_view();
  }
  uint32_t name_count() const { return static_cast<uint32_t>(names_.size()); }
  // The string of `id`, or "#<id>" for an id the stream never defined.
  std::string DisplayName(NameId id) const;
  // True once a definition of `id` was seen. A defined name never changes
  // (the stream defines each id once), so what is derived from it may be
  // cached by id.
  bool Defined(NameId id) const { return id < defined_.size() && defined_[id]; }
  // The track's definition; an undefined one (defined == false) if unknown.
  const TrackDef& Track(TrackId id) const { return id < tracks_.size() ? tracks_[id] : kUnknownTrack; }
  // True once a track of another process (process != 0) was defined.
  bool multi_process() const { return multi_process_; }
  // The label of worker `process` (its kProcess track's name), or "".
  std::string_view ProcessLabel(uint32_t process) const;
  // The process `process` serves, when it is a helper ("rank 0 · loader 1"
  // serves "rank 0": kHelperLabelSeparator), else kNoProcess.
  static constexpr uint32_t kNoProcess = UINT32_MAX;
  uint32_t ServedProcess(uint32_t process) const { return process < served_.size() ? served_[process] : kNoProcess; }
  // True once `process` was defined as a helper, its served process known
  // yet or not.
  bool IsHelper(uint32_t process) const { return process < helper_.size() && helper_[process]; }
  // GPUs described by kDeviceInfo, by ordinal.
  const std::vector<DeviceDef>& devices() const { return devices_; }
  const DeviceDef* Device(uint8_t ordinal) const;

 private:
  static const TrackDef kUnknownTrack;
  void DefineProcess(const TrackDef& t);
  void Serve(uint32_t helper, uint32_t served);
  std::vector<std::string> names_;
  std::vector<bool> defined_;  // by id: a kNameDef was seen.
  std::vector<TrackDef> tracks_;
  bool multi_process_ = false;
  std::vector<uint32_t> served_;  // by process: ServedProcess().
  std::vector<bool> helper_;      // by process: IsHelper().
  // Helpers whose served process was not defined yet: (process, its label), bounded.
  std::vector<std::pair<uint32_t, std::string>> unresolved_helpers_;
  std::vector<DeviceDef> devices_;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_CATALOG_H_
