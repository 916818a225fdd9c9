// Import progress: what a long import has done so far, and the line that
// shows it on stderr ("trace.json.gz: 412 / 1,024 MB (40 %), 3.1 M events/s,
// ETA 6 s"), rewritten in place at most four times a second and only when
// stderr is a terminal (never in logs, pipes or CI output).
#ifndef LIVEPROF_IMPORT_PROGRESS_H_
#define LIVEPROF_IMPORT_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace liveprof {

struct ImportProgress {
  uint64_t file_bytes_read = 0;   // of the file as stored (compressed for .gz).
  uint64_t file_bytes_total = 0;  // its size; 0 when unknown (a pipe).
  uint64_t json_bytes = 0;        // uncompressed text parsed.
  uint64_t events = 0;            // liveprof events made.
  double seconds = 0;             // since the import began.
};
using ImportProgressFn = std::function<void(const ImportProgress&)>;

// "NAME: 412 / 1,024 MB (40 %), 3.1 M events/s, ETA 6 s" (the share and the
// ETA only when the total is known and some time has passed).
std::string FormatImportProgress(std::string_view name, const ImportProgress& p);

// The line on a stream (stderr by default). Inert unless `enabled`.
class ProgressLine {
 public:
  // Enabled when `out` is a terminal.
  explicit ProgressLine(std::string name, std::FILE* out = stderr);
  ProgressLine(std::string name, std::FILE* out, bool enabled);
  ~ProgressLine() { Clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Shows `p` unless the last line is less than 250 ms old.
  void Update(const ImportProgress& p);
  // Replaces the line with `text` (a phase after the import: "sorting").
  void Say(std::string_view text);
  // Erases the line (results follow on stdout, errors on stderr).
  void Clear();
  bool enabled() const { return enabled_; }

 private:
  void Write(std::string_view text);
  std::string name_;
  std::FILE* out_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_PROGRESS_H_
