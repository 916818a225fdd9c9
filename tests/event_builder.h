// Builders for fabricated events in tests: named arguments instead of
// 48-byte struct literals.
#ifndef LIVEPROF_TESTS_EVENT_BUILDER_H_
#define LIVEPROF_TESTS_EVENT_BUILDER_H_

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

// An instant carrying a sequence number in `corr` (loss/duplication checks).
inline Event Seq(uint64_t ts, uint32_t seq, TrackId track) {
  Event e = Instant(ts, 0, track);
  e.corr = seq;
  return e;
}

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_EVENT_BUILDER_H_
