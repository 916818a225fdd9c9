// liveprof::Event <-> liveprof.fbs's wire::Event, field for field (the
// wire's struct mirrors the C++ one: 48 bytes). The ids stay whatever they
// are: a reader maps names and tracks itself.
#ifndef LIVEPROF_STREAM_WIRE_EVENT_H_
#define LIVEPROF_STREAM_WIRE_EVENT_H_

#include "stream/event.h"
#include "stream/liveprof_generated.h"

namespace liveprof {

static_assert(sizeof(wire::Event) == sizeof(Event), "the wire's Event mirrors liveprof::Event");

inline wire::Event ToWire(const Event& e) {
  return wire::Event(e.ts, e.dur, e.name, e.track, e.corr, static_cast<uint8_t>(e.kind), e.sub, e.flags, e.device,
                     e.payload.raw[0], e.payload.raw[1]);
}

inline Event FromWire(const wire::Event& w) {
  Event e;
  e.ts = w.ts();
  e.dur = w.dur();
  e.name = w.name();
  e.track = w.track();
  e.corr = w.corr();
  e.kind = static_cast<EventKind>(w.kind());
  e.sub = w.sub();
  e.flags = w.flags();
  e.device = w.device();
  e.payload.raw[0] = w.payload0();
  e.payload.raw[1] = w.payload1();
  return e;
}

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_WIRE_EVENT_H_
