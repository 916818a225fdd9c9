#include "stream/diagnostics.h"

namespace liveprof {

const DiagInfo& DiagnosticInfo(Diag d) {
  static constexpr DiagInfo kTable[] = {
#define LIVEPROF_DIAG_INFO(name, sev, desc) {#name, Severity::sev, desc},
      LIVEPROF_DIAGNOSTICS(LIVEPROF_DIAG_INFO)
#undef LIVEPROF_DIAG_INFO
  };
  static_assert(std::size(kTable) == static_cast<size_t>(Diag::kCount));
  return kTable[static_cast<size_t>(d)];
}

}  // namespace liveprof
