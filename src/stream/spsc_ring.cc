#include "stream/spsc_ring.h"

#include <bit>
#include <new>

namespace liveprof {

std::unique_ptr<SpscRing> SpscRing::Create(size_t capacity, std::string* error) {
  auto fail = [&](std::string why) -> std::unique_ptr<SpscRing> {
    if (error) *error = std::move(why);
    return nullptr;
  };
  if (capacity == 0) return fail("ring capacity 0: a ring must hold at least one event");
  if (capacity > kMaxCapacity) {
    return fail("ring capacity " + std::to_string(capacity) + " is above the maximum of " +
                std::to_string(kMaxCapacity) + " events");
  }
  const size_t rounded = std::bit_ceil(capacity);
  // new[] of a trivially default-constructible aggregate with default member
  // initializers would touch every page; allocate raw storage instead so the
  // OS maps pages as the ring first wraps over them.
  Event* raw = static_cast<Event*>(::operator new[](rounded * sizeof(Event), std::nothrow));
  if (raw == nullptr) {
    return fail("could not allocate " + std::to_string(rounded * sizeof(Event)) + " bytes for a ring of " +
                std::to_string(rounded) + " events");
  }
  return std::unique_ptr<SpscRing>(new SpscRing(Slots(raw), rounded));
}

}  // namespace liveprof
