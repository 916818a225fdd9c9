#include "stream/event.h"

#include "stream/liveprof_generated.h"

namespace liveprof {

// liveprof.fbs declares the kinds; this enum must say the same, value by value.
#define LIVEPROF_SAME_KIND(ours, wire_name) \
  static_assert(static_cast<uint8_t>(EventKind::ours) == static_cast<uint8_t>(wire::EventKind::wire_name))
LIVEPROF_SAME_KIND(kInvalid, invalid);
LIVEPROF_SAME_KIND(kNameDef, name_def);
LIVEPROF_SAME_KIND(kTrackDef, track_def);
LIVEPROF_SAME_KIND(kDeviceInfo, device_info);
LIVEPROF_SAME_KIND(kHostSpan, host_span);
LIVEPROF_SAME_KIND(kStepMarker, step);
LIVEPROF_SAME_KIND(kInputSpan, input);
LIVEPROF_SAME_KIND(kFrameworkOp, framework_op);
LIVEPROF_SAME_KIND(kRuntimeApi, runtime_api);
LIVEPROF_SAME_KIND(kKernel, kernel);
LIVEPROF_SAME_KIND(kMemcpyHtoD, memcpy_h2d);
LIVEPROF_SAME_KIND(kMemcpyDtoH, memcpy_d2h);
LIVEPROF_SAME_KIND(kMemcpyDtoD, memcpy_d2d);
LIVEPROF_SAME_KIND(kMemcpyHtoH, memcpy_h2h);
LIVEPROF_SAME_KIND(kMemcpyPtoP, memcpy_p2p);
LIVEPROF_SAME_KIND(kMemcpyOther, memcpy_other);
LIVEPROF_SAME_KIND(kMemset, memset);
LIVEPROF_SAME_KIND(kAlloc, alloc);
LIVEPROF_SAME_KIND(kFree, free);
LIVEPROF_SAME_KIND(kCounter, counter);
LIVEPROF_SAME_KIND(kInstant, instant);
LIVEPROF_SAME_KIND(kFlow, flow);
#undef LIVEPROF_SAME_KIND
static_assert(kEventKindCount == static_cast<size_t>(wire::EventKind::MAX) + 1);

std::string_view EventKindName(EventKind kind) {
  // The schema's names (flatc's generated table; "" between values).
  const auto value = static_cast<uint8_t>(kind);
  if (value > static_cast<uint8_t>(wire::EventKind::MAX)) return "unknown";
  const std::string_view name = wire::EnumNameEventKind(static_cast<wire::EventKind>(value));
  return name.empty() ? std::string_view("unknown") : name;
}

std::optional<EventKind> ParseEventKindName(std::string_view name) {
  for (size_t k = 0; k < kEventKindCount; ++k) {
    const auto kind = static_cast<EventKind>(k);
    const std::string_view known = EventKindName(kind);
    if (known != "unknown" && known == name) return kind;
  }
  return std::nullopt;
}

}  // namespace liveprof
