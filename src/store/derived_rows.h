// DerivedRows: the trace viewer's per-device rows that no producer writes,
// made from the events that pass (tf-profiler-semantics.md §9.5, as xprof's
// derived_timeline.cc):
//
//   "Steps"          every step marker, on each GPU seen so far: the steps
//                    over the device's streams, as TF's Steps line.
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
// Events on the reserved track ids below are not derived from (the store
// does not keep them either).
//
// Their track ids are reserved at the top of what the store takes:
// kFirstDerivedTrack + device * kRowsPerDevice + row. Pure; one thread.
#ifndef LIVEPROF_STORE_DERIVED_ROWS_H_
#define LIVEPROF_STORE_DERIVED_ROWS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "stream/event.h"
#include "stream/stream.h"

namespace liveprof {

class DerivedRows {
 public:
  enum class Row : uint8_t { kSteps = 0, kFrameworkOps = 1, kMemory = 2 };
  static constexpr uint32_t kRowsPerDevice = 3;
  static constexpr uint32_t kDevices = 256;  // Event::device is 8 bits.
  // Producers number tracks from 1 up; the last kDevices * kRowsPerDevice
  // ids below 8192 (event ids stay under 2^53, trace_store.h) are these.
  static constexpr TrackId kFirstDerivedTrack = 8192 - kDevices * kRowsPerDevice;

  static TrackId TrackOf(uint8_t device, Row row) {
    return kFirstDerivedTrack + device * kRowsPerDevice + static_cast<uint32_t>(row);
  }
  static bool IsDerived(TrackId id) { return id >= kFirstDerivedTrack && id < kFirstDerivedTrack + kDevices * kRowsPerDevice; }
  static uint8_t DeviceOf(TrackId id) { return static_cast<uint8_t>((id - kFirstDerivedTrack) / kRowsPerDevice); }
  static Row RowOf(TrackId id) { return static_cast<Row>((id - kFirstDerivedTrack) % kRowsPerDevice); }

  // A track definition: GPU streams make their device known.
  void Define(TrackId id, const TrackInfo& info);
  // The derived events of `events`, appended to `out` (cleared first).
  void Derive(std::span<const Event> events, std::vector<Event>* out);
  // The ops held open, ended now (a run that stops; tests).
  void Flush(std::vector<Event>* out);

 private:
  struct OpenOp {
    NameId op = 0;
    uint64_t ts = 0, end = 0;
  };
  void Close(uint8_t device, std::vector<Event>* out);
  void SeeDevice(uint8_t device);
  void Memory(const Event& e, std::vector<Event>* out);

  std::vector<uint8_t> devices_;                    // GPUs seen, in order.
  std::array<bool, kDevices> seen_{};
  std::array<std::optional<OpenOp>, kDevices> open_{};
  std::array<uint64_t, kDevices> in_use_{};                            // bytes, per device.
  std::array<std::unordered_map<uint64_t, uint64_t>, kDevices> live_;  // address -> bytes.
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_DERIVED_ROWS_H_
