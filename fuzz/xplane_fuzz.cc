// libFuzzer target: XPlane import (src/import/xplane.cc). Any bytes must
// give a clean error or an import, never a crash, a sanitizer report or a
// hang: protobuf's parser, then the mapping of whatever values a plane holds
// (offsets that overflow, refs to missing metadata, odd plane names).
// Built and run by fuzz/build_and_run.sh xplane.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "import/xplane.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  liveprof::NameTable names;
  liveprof::ImportReport report;
  std::string error;
  uint64_t events = 0;
  const bool ok = liveprof::ImportXPlaneBytes(
      bytes, &names,
      [&](std::span<const liveprof::Event> defs, std::span<const liveprof::Event> batch) {
        for (const liveprof::Event& d : defs) {
          if (d.kind != liveprof::EventKind::kNameDef && d.kind != liveprof::EventKind::kTrackDef) std::abort();
        }
        for (const liveprof::Event& e : batch) {
          if (e.name >= names.size()) std::abort();  // every name defined.
        }
        events += batch.size();
      },
      &report, &error);
  if (ok != error.empty()) std::abort();  // an error always says why, success never does.
  if (report.events_out != events) std::abort();
  return 0;
}
