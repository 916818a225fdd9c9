#include "stream/event.h"

namespace liveprof {

std::string_view EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kInvalid: return "invalid";
    case EventKind::kNameDef: return "name_def";
    case EventKind::kTrackDef: return "track_def";
    case EventKind::kDeviceInfo: return "device_info";
    case EventKind::kHostSpan: return "host_span";
    case EventKind::kStepMarker: return "step";
    case EventKind::kInputSpan: return "input";
    case EventKind::kFrameworkOp: return "framework_op";
    case EventKind::kRuntimeApi: return "runtime_api";
    case EventKind::kKernel: return "kernel";
    case EventKind::kMemcpyHtoD: return "memcpy_h2d";
    case EventKind::kMemcpyDtoH: return "memcpy_d2h";
    case EventKind::kMemcpyDtoD: return "memcpy_d2d";
    case EventKind::kMemcpyHtoH: return "memcpy_h2h";
    case EventKind::kMemcpyPtoP: return "memcpy_p2p";
    case EventKind::kMemcpyOther: return "memcpy_other";
    case EventKind::kMemset: return "memset";
    case EventKind::kAlloc: return "alloc";
    case EventKind::kFree: return "free";
    case EventKind::kCounter: return "counter";
    case EventKind::kInstant: return "instant";
    case EventKind::kFlow: return "flow";
  }
  return "unknown";
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
