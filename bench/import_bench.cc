// Importing Chrome trace JSON: BM_ImportChromeJson, target
// >= 400 MB/s of uncompressed JSON all the way into liveprof events, over a
// real trace of ../shared/data/traces (skipped when that folder is absent).
//   /gzip:0  the JSON already in memory (splitter + simdjson + mapping)
//   /gzip:1  the .json.gz file from disk (inflation included, on its own thread:
//            real time, not CPU time)
#include <benchmark/benchmark.h>
#include <zlib.h>

#include <filesystem>
#include <string>

#include "import/chrome_trace.h"
#include "import/chunk_reader.h"

namespace liveprof {
namespace {

// The largest Kineto trace of the folder: 54 MB of JSON, 216,092 events.
const char kTrace[] = "facebookresearch__HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz";

std::string TracePath() {
  const std::filesystem::path p =
      std::filesystem::path(LIVEPROF_SOURCE_DIR) / ".." / "shared" / "data" / "traces" / kTrace;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

std::string Inflated(const std::string& path) {
  ChunkReader reader;
  std::string all;
  std::string_view chunk;
  if (!reader.Open(path)) return all;
  while (reader.Next(&chunk) && !chunk.empty()) all.append(chunk);
  return all;
}

void BM_ImportChromeJson(benchmark::State& state) {
  const std::string path = TracePath();
  if (path.empty()) {
    state.SkipWithError("../shared/data/traces is absent");
    return;
  }
  const bool gzip = state.range(0) != 0;
  const std::string text = gzip ? std::string() : Inflated(path);
  uint64_t bytes = 0, events = 0;
  for (auto _ : state) {
    ChromeTraceImporter importer;
    ImportReport report;
    std::string error;
    uint64_t n = 0;
    auto sink = [&](std::span<const Event>, std::span<const Event> ev) { n += ev.size(); };
    const bool ok =
        gzip ? importer.ImportFile(path, sink, &report, &error) : importer.ImportText(text, sink, &report, &error);
    if (!ok) {
      state.SkipWithError(error.c_str());
      return;
    }
    bytes += report.bytes;
    events = n;
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_ImportChromeJson)->ArgName("gzip")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
