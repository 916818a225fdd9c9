// ChromeTraceImporter's entry points: a file (plain or gzip, read in chunks
// with progress) and a string in memory. The parsing is chrome_trace.cc's.
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "import/chrome_trace.h"
#include "import/chunk_reader.h"

namespace liveprof {

bool ChromeTraceImporter::ImportFile(const std::string& path, const Sink& sink, ImportReport* report,
                                     std::string* error, const ImportProgressFn& progress) {
  ChunkReader reader;
  if (!reader.Open(path)) {
    *error = reader.error();
    return false;
  }
  std::error_code size_error;
  const uintmax_t size = std::filesystem::file_size(path, size_error);
  const auto start = std::chrono::steady_clock::now();
  bool read_ok = true;
  auto next = [&](std::string_view* c) {
    if (progress) {
      progress({reader.file_bytes_read(), size_error ? 0 : static_cast<uint64_t>(size), reader.bytes_out(),
                report->events_out, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
    }
    return read_ok = reader.Next(c);
  };
  const bool ok = Run(next, sink, report, error);
  if (!read_ok) {
    *error = reader.error();
    return false;
  }
  if (!ok) *error = path + ": " + *error;
  return ok;
}

bool ChromeTraceImporter::ImportText(std::string_view text, const Sink& sink, ImportReport* report,
                                     std::string* error) {
  bool given = false;
  return Run(
      [&](std::string_view* c) {
        *c = given ? std::string_view() : text;
        given = true;
        return true;
      },
      sink, report, error);
}

}  // namespace liveprof
