// The import progress line: its text, its throttle, silence when not asked,
// and the importer's calls (monotone, ending at the file's size).
#include "import/progress.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "import/chrome_trace.h"

namespace liveprof::progress_test {
namespace {

std::string ReadAll(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST_CASE("progress: the line says bytes, share, rate and the time left") {
  ImportProgress p{.file_bytes_read = 412'400'000,
                   .file_bytes_total = 1'024'000'000,
                   .json_bytes = 2'000'000'000,
                   .events = 31'000'000,
                   .seconds = 10};
  // 31 M events in 10 s; 611.6 MB left at 41.24 MB/s: 14.8 s -> 15.
  CHECK(FormatImportProgress("t.json.gz", p) == "t.json.gz: 412 / 1,024 MB (40 %), 3.1 M events/s, ETA 15 s");
  p.file_bytes_total = 0;  // a pipe: no share, no ETA.
  CHECK(FormatImportProgress("t", p) == "t: 412 MB, 3.1 M events/s");
  p = ImportProgress{.file_bytes_read = 0, .file_bytes_total = 5'000'000};  // at the start.
  CHECK(FormatImportProgress("t", p) == "t: 0 / 5 MB (0 %)");
}

TEST_CASE("progress: written in place when enabled, throttled, erased, nothing when not") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    ProgressLine line("t", f, /*enabled=*/true);
    line.Update({.file_bytes_read = 1'000'000, .file_bytes_total = 2'000'000});
    line.Update({.file_bytes_read = 1'500'000, .file_bytes_total = 2'000'000});  // within 250 ms: skipped.
    line.Say("sorting");
    line.Clear();
  }
  CHECK(ReadAll(f) == "\rt: 1 / 2 MB (50 %)\033[K\rt: sorting\033[K\r\033[K");
  std::fclose(f);

  std::FILE* g = std::tmpfile();
  REQUIRE(g != nullptr);
  {
    ProgressLine off("t", g, /*enabled=*/false);
    off.Update({.file_bytes_read = 1});
    off.Say("sorting");
  }
  ProgressLine not_a_terminal("t", g);  // a regular file is not a terminal.
  CHECK_FALSE(not_a_terminal.enabled());
  not_a_terminal.Update({.file_bytes_read = 1});
  CHECK(ReadAll(g).empty());
  std::fclose(g);
}

TEST_CASE("progress: the importer reports after each chunk, monotone, up to the file's size") {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "liveprof_progress_test.json";
  {
    std::ofstream out(path);
    out << R"({"traceEvents": [)";
    for (int i = 0; i < 200'000; ++i) {  // ~15 MB: four 4 MiB chunks.
      out << (i ? "," : "") << R"({"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":)" << i
          << R"(,"dur":0.5,"args":{"External id":)" << i << "}}";
    }
    out << "]}";
  }
  const uint64_t size = std::filesystem::file_size(path);
  std::vector<ImportProgress> calls;
  ChromeTraceImporter importer;
  ImportReport report;
  std::string error;
  const bool ok = importer.ImportFile(
      path.string(), [](std::span<const Event>, std::span<const Event>) {}, &report, &error,
      [&](const ImportProgress& p) { calls.push_back(p); });
  std::filesystem::remove(path);
  REQUIRE(ok);
  REQUIRE(calls.size() >= 4);
  for (size_t i = 1; i < calls.size(); ++i) {
    CHECK(calls[i].file_bytes_read >= calls[i - 1].file_bytes_read);
    CHECK(calls[i].events >= calls[i - 1].events);
    CHECK(calls[i].file_bytes_total == size);
  }
  CHECK(calls.back().file_bytes_read == size);
  CHECK(calls.back().json_bytes == size);  // not compressed.
  CHECK(calls.back().events > 0);
  CHECK(calls.back().events <= report.events_out);
}

}  // namespace
}  // namespace liveprof::progress_test
