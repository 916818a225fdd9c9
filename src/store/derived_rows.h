// DerivedRows: the trace viewer's per-device rows that no producer writes,
// made from the events that pass (docs/semantics-tf.md §9.5, as xprof's
// derived_timeline.cc):
//
//   "Steps"          per GPU, each step over that device's own work, as
//                    TF's Steps line (device_steps.h): from the first begin
//                    to the last end of the work launched in the step, made
//                    once the device is done with it. The steps are the step
//                    markers; in a trace without markers, PyTorch's
//                    ProfilerStep#N spans (a replay's later loops carry their
//                    shift: the event's name reads as the pages number the
//                    step, trace_api.cc).
//   "Framework ops"  per GPU, consecutive kernels (in arrival order, any
//                    stream of the device) launched by the same framework op
//                    merged into one event named by the op, from the first
//                    kernel's start to the latest end; kernels without an op
//                    are skipped. As xprof's GPU planes: merged whatever the
//                    gap between them, within a step: a step marker
//                    closes every open op. The newest op of a device is
//                    held open until a kernel of another op or a step's end
//                    arrives (or Flush). Late kernels (kFlagLate) are left
//                    out: merged, they would stretch an op over others.
//   "Memory in use"  per GPU, a counter (kCounter samples, name 0) of the
//                    bytes its device allocators hold: the sum of kAlloc
//                    less kFree of device memory (MemoryKind kDevice or
//                    kManaged) on that device, one sample per allocation or
//                    free, counted as the memory profile does: a free takes
//                    its allocation's size, a free of an address not seen
//                    allocated is ignored, an address allocated again was
//                    freed unseen (events without an address: by size).
//
// Besides, one row per counter name: the kCounter samples a producer records
// on a thread's track (liveprof.counter("loss"), LIVEPROF_COUNTER), copied
// to a counter row of their own, as Perfetto draws a counter track per name.
// (Samples on a counter-typed track, such as a Chrome trace's "C" events,
// are a row already and are not copied.) At most kCounterRows names; the
// samples of later names stay on their threads' rows only.
//
// Events on the reserved track ids below are not derived from (the store
// does not keep them either).
//
// Their track ids are reserved at the top of what the store takes: first
// the counter rows, kFirstDerivedTrack + slot (slots in the order the names
// were first seen), then the devices' rows, kFirstDeviceRow + device *
// kRowsPerDevice + row. Pure; one thread.
#ifndef LIVEPROF_STORE_DERIVED_ROWS_H_
#define LIVEPROF_STORE_DERIVED_ROWS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/device_steps.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace liveprof {

class DerivedRows {
 public:
  // kCounter: a counter name's row (no device).
  enum class Row : uint8_t { kSteps = 0, kFrameworkOps = 1, kMemory = 2, kCounter = 3 };
  static constexpr uint32_t kRowsPerDevice = 3;
  static constexpr uint32_t kDevices = 256;  // Event::device is 8 bits.
  static constexpr uint32_t kCounterRows = 256;
  // Producers number tracks from 1 up; the last kCounterRows + kDevices *
  // kRowsPerDevice ids below 8192 (event ids stay under 2^53,
  // trace_store.h) are these.
  static constexpr TrackId kEndDerivedTrack = 8192;
  static constexpr TrackId kFirstDeviceRow = kEndDerivedTrack - kDevices * kRowsPerDevice;
  static constexpr TrackId kFirstDerivedTrack = kFirstDeviceRow - kCounterRows;

  static TrackId TrackOf(uint8_t device, Row row) {
    return kFirstDeviceRow + device * kRowsPerDevice + static_cast<uint32_t>(row);
  }
  static TrackId CounterTrack(uint32_t slot) { return kFirstDerivedTrack + slot; }
  static bool IsDerived(TrackId id) { return id >= kFirstDerivedTrack && id < kEndDerivedTrack; }
  static bool IsCounterRow(TrackId id) { return id >= kFirstDerivedTrack && id < kFirstDeviceRow; }
  static uint8_t DeviceOf(TrackId id) {
    return IsCounterRow(id) ? 0 : static_cast<uint8_t>((id - kFirstDeviceRow) / kRowsPerDevice);
  }
  static Row RowOf(TrackId id) {
    return IsCounterRow(id) ? Row::kCounter : static_cast<Row>((id - kFirstDeviceRow) % kRowsPerDevice);
  }

  // A track definition: GPU streams make their device known; a counter-typed
  // track's samples are a row already.
  void Define(TrackId id, const TrackInfo& info);
  // A name definition: ProfilerStep#N names are steps.
  void DefineName(NameId id, std::string_view text);
  // The name of counter row `id`'s samples, if this instance made it (a run
  // read back did not: its samples carry the name).
  std::optional<NameId> CounterName(TrackId id) const;
  // The derived events of `events`, appended to `out` (cleared first).
  // `watermark_ns` (0: not known): every event ending at or before it has
  // come, so steps long done are made (device_steps.h, rule (b)).
  void Derive(std::span<const Event> events, std::vector<Event>* out, uint64_t watermark_ns = 0);
  // The ops and steps held open, ended now (a run that stops; tests).
  void Flush(std::vector<Event>* out);
  // Device events left out of the Steps rows (device_steps.h).
  uint64_t late_step_work() const { return steps_.late_work(); }

 private:
  struct OpenOp {
    NameId op = 0;
    uint64_t ts = 0, end = 0;
  };
  void Close(uint8_t device, std::vector<Event>* out);
  void SeeDevice(uint8_t device);
  void Memory(const Event& e, std::vector<Event>* out);
  void Counter(const Event& e, std::vector<Event>* out);
  void TakeSteps(std::vector<Event>* out);  // steps_'s, onto their rows.

  std::vector<uint8_t> devices_;  // GPUs seen, in order.
  std::array<bool, kDevices> seen_{};
  std::array<std::optional<OpenOp>, kDevices> open_{};
  std::array<uint64_t, kDevices> in_use_{};                            // bytes, per device.
  std::array<std::unordered_map<uint64_t, uint64_t>, kDevices> live_;  // address -> bytes.
  std::vector<bool> step_names_;                                       // by NameId: a ProfilerStep#N.
  bool markers_ = false;                                               // a step marker seen: the steps are the markers.
  DeviceSteps steps_;
  std::vector<Event> made_steps_;                      // steps_'s, reused.
  std::vector<bool> counter_typed_;                    // by TrackId: a counter-typed track.
  std::unordered_map<NameId, uint32_t> counter_slot_;  // counter name -> its row's slot.
  std::vector<NameId> counter_names_;                  // by slot.
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_DERIVED_ROWS_H_
