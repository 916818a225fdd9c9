#include "stream/event.h"

#include <doctest/doctest.h>

#include <cstring>

namespace liveprof::event_test {

TEST_CASE("event: 48 bytes, trivially copyable, payload views share storage") {
  static_assert(sizeof(Event) == 48);
  static_assert(std::is_trivially_copyable_v<Event>);
  Event e;
  e.payload.memory.address = 0x1000;
  e.payload.memory.bytes = 256;
  Event copy;
  std::memcpy(&copy, &e, sizeof e);
  CHECK(copy.payload.memory.address == 0x1000);
  CHECK(copy.payload.memory.bytes == 256);
  CHECK(copy.payload.raw[0] == 0x1000);
}

TEST_CASE("event: end is begin plus duration") {
  Event e;
  e.ts = 1'000;
  e.dur = 250;
  CHECK(e.end() == 1'250);
}

TEST_CASE("event: every kind has a name and span kinds are the timed ones") {
  CHECK(EventKindName(EventKind::kKernel) == "kernel");
  CHECK(EventKindName(EventKind::kMemcpyPtoP) == "memcpy_p2p");
  CHECK(EventKindName(EventKind::kStepMarker) == "step");
  CHECK(EventKindName(static_cast<EventKind>(99)) == "unknown");
  CHECK(IsSpanKind(EventKind::kKernel));
  CHECK(IsSpanKind(EventKind::kMemcpyHtoD));
  CHECK(IsSpanKind(EventKind::kInputSpan));
  CHECK_FALSE(IsSpanKind(EventKind::kAlloc));
  CHECK_FALSE(IsSpanKind(EventKind::kCounter));
  CHECK(IsMemcpyKind(EventKind::kMemcpyDtoD));
  CHECK_FALSE(IsMemcpyKind(EventKind::kMemset));
  for (int k = 0; k < static_cast<int>(kEventKindCount); ++k) {
    // Every named kind fits the kind-indexed tables.
    if (EventKindName(static_cast<EventKind>(k)) != "unknown") CHECK(k < static_cast<int>(kEventKindCount));
  }
}

}  // namespace liveprof::event_test
