// Builders for fabricated events in tests: named arguments instead of
// 48-byte struct literals.
#ifndef LIVEPROF_TESTS_EVENT_BUILDER_H_
#define LIVEPROF_TESTS_EVENT_BUILDER_H_

#include <string>

#include "stream/event.h"

namespace liveprof::test {

inline Event Span(uint64_t ts, uint64_t dur, NameId name = 0, TrackId track = 0,
                  EventKind kind = EventKind::kHostSpan) {
  Event e;
  e.ts = ts;
  e.dur = dur;
  e.name = name;
  e.track = track;
  e.kind = kind;
  return e;
}

inline Event Instant(uint64_t ts, NameId name = 0, TrackId track = 0) {
  return Span(ts, 0, name, track, EventKind::kInstant);
}

inline Event Step(uint64_t ts, uint64_t dur, int64_t step_num, TrackId track = 0) {
  Event e = Span(ts, dur, 0, track, EventKind::kStepMarker);
  e.payload.step.step_num = step_num;
  return e;
}

inline Event Op(uint64_t ts, uint64_t dur, NameId name, TrackId track = 1) {
  return Span(ts, dur, name, track, EventKind::kFrameworkOp);
}

inline Event Input(uint64_t ts, uint64_t dur, NameId name, TrackId track = 1) {
  return Span(ts, dur, name, track, EventKind::kInputSpan);
}

// A CUDA API call on a host thread; its device work carries the same corr.
inline Event Launch(uint64_t ts, uint64_t dur, uint32_t corr, NameId name = 0, TrackId track = 1) {
  Event e = Span(ts, dur, name, track, EventKind::kRuntimeApi);
  e.corr = corr;
  return e;
}

inline Event Kernel(uint64_t ts, uint64_t dur, NameId name, uint32_t corr = 0, TrackId track = 100, NameId op = 0,
                    NameId details = 0, uint8_t device = 0) {
  Event e = Span(ts, dur, name, track, EventKind::kKernel);
  e.corr = corr;
  e.device = device;
  e.payload.kernel.op = op;
  e.payload.kernel.details = details;
  return e;
}

inline Event Copy(EventKind kind, uint64_t ts, uint64_t dur, uint64_t bytes, uint32_t corr = 0, TrackId track = 100,
                  uint8_t device = 0) {
  Event e = Span(ts, dur, 0, track, kind);
  e.corr = corr;
  e.device = device;
  e.payload.copy.bytes = bytes;
  return e;
}

inline Event Alloc(uint64_t ts, NameId allocator, uint64_t address, uint64_t bytes,
                   MemoryKind memory = MemoryKind::kDevice, uint8_t device = 0) {
  Event e = Span(ts, 0, allocator, 0, EventKind::kAlloc);
  e.sub = static_cast<uint8_t>(memory);
  e.device = device;
  e.payload.memory.address = address;
  e.payload.memory.bytes = bytes;
  return e;
}

inline Event Free(uint64_t ts, NameId allocator, uint64_t address, uint64_t bytes = 0,
                  MemoryKind memory = MemoryKind::kDevice, uint8_t device = 0) {
  Event e = Alloc(ts, allocator, address, bytes, memory, device);
  e.kind = EventKind::kFree;
  return e;
}

inline Event Counter(uint64_t ts, NameId name, double value, TrackId track = 0) {
  Event e = Span(ts, 0, name, track, EventKind::kCounter);
  e.payload.counter.value = value;
  return e;
}

inline Event NameDef(NameId id, const char* s, size_t n) {
  Event e;
  e.kind = EventKind::kNameDef;
  e.name = id;
  e.payload.name_def.data = s;
  e.payload.name_def.size = n;
  return e;
}

inline Event NameDef(NameId id, const char* s) { return NameDef(id, s, std::char_traits<char>::length(s)); }

// An instant carrying a sequence number in `corr` (loss/duplication checks).
inline Event Seq(uint64_t ts, uint32_t seq, TrackId track) {
  Event e = Instant(ts, 0, track);
  e.corr = seq;
  return e;
}

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_EVENT_BUILDER_H_
