// libFuzzer target: Chrome trace JSON import (src/import/). Any bytes must
// give a clean error or an import, never a crash, a sanitizer report or a
// hang; and cutting the text into chunks anywhere must not change what the
// splitter finds (a differential check: it aborts if the two disagree).
// Built and run by fuzz/build_and_run.sh chrome_trace.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "import/chrome_trace.h"
#include "import/decimal.h"
#include "import/json_splitter.h"

namespace {

struct Seen {
  uint64_t events = 0;
  std::string members;
  bool ok = false;
  std::string error;
};

// The splitter over `text` fed in pieces of `step` bytes (0: one piece).
Seen Split(std::string_view text, size_t step) {
  Seen s;
  liveprof::TraceJsonSplitter splitter(
      [&](std::string_view json, size_t count) {
        if (json.empty() || json.front() != '[' || json.back() != ']') std::abort();
        s.events += count;
        return true;
      },
      [&](std::string_view key, std::string_view value) {
        s.members.append(key).append("=").append(value).append(";");
        return true;
      },
      liveprof::TraceJsonSplitter::Options{.batch_bytes = 256});
  bool fed = true;
  if (step == 0) {
    fed = splitter.Feed(text);
  } else {
    for (size_t at = 0; fed && at < text.size(); at += step) fed = splitter.Feed(text.substr(at, step));
  }
  s.ok = fed && splitter.Finish();
  s.error = splitter.error();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // The whole import: events, names, tracks, the report.
  liveprof::ChromeTraceImporter importer;
  liveprof::ImportReport report;
  std::string error;
  uint64_t events = 0;
  const bool ok = importer.ImportText(
      text,
      [&](std::span<const liveprof::Event> defs, std::span<const liveprof::Event> batch) {
        for (const liveprof::Event& d : defs) {
          if (d.kind != liveprof::EventKind::kNameDef && d.kind != liveprof::EventKind::kTrackDef) std::abort();
        }
        events += batch.size();
      },
      &report, &error);
  if (ok != error.empty()) std::abort();  // an error always says why, success never does.
  if (report.events_out != events) std::abort();

  // Cut anywhere, the splitter finds the same (the first byte picks the cut).
  const Seen whole = Split(text, 0);
  const Seen cut = Split(text, size == 0 ? 1 : 1 + data[0] % 13);
  if (whole.ok != cut.ok || whole.events != cut.events || whole.members != cut.members) std::abort();
  if (whole.ok && whole.error != cut.error) std::abort();

  // Exact decimals: whatever the text, no UB; a result is in range.
  (void)liveprof::MicrosTextToNs(text.substr(0, 64));
  return 0;
}
