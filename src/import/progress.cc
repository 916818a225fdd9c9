#include "import/progress.h"

#include <unistd.h>

#include <cinttypes>
#include <cmath>

namespace liveprof {

namespace {

// 1234567 -> "1,234,567".
std::string Grouped(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Megabytes(uint64_t bytes) { return Grouped((bytes + 500'000) / 1'000'000); }

}  // namespace

std::string FormatImportProgress(std::string_view name, const ImportProgress& p) {
  std::string line(name);
  line += ": ";
  line += Megabytes(p.file_bytes_read);
  if (p.file_bytes_total != 0) {
    line += " / " + Megabytes(p.file_bytes_total) + " MB";
    const double pct = 100.0 * static_cast<double>(p.file_bytes_read) / static_cast<double>(p.file_bytes_total);
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.0f %%)", std::floor(pct));
    line += buf;
  } else {
    line += " MB";
  }
  if (p.seconds > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ", %.1f M events/s", static_cast<double>(p.events) / p.seconds / 1e6);
    line += buf;
    if (p.file_bytes_total != 0 && p.file_bytes_read != 0 && p.file_bytes_read < p.file_bytes_total) {
      const double left = p.seconds * static_cast<double>(p.file_bytes_total - p.file_bytes_read) /
                          static_cast<double>(p.file_bytes_read);
      std::snprintf(buf, sizeof buf, ", ETA %.0f s", std::ceil(left));
      line += buf;
    }
  }
  return line;
}

ProgressLine::ProgressLine(std::string name, std::FILE* out)
    : ProgressLine(std::move(name), out, out != nullptr && isatty(fileno(out)) == 1) {}

ProgressLine::ProgressLine(std::string name, std::FILE* out, bool enabled)
    : name_(std::move(name)), out_(out), enabled_(enabled && out != nullptr) {}

void ProgressLine::Update(const ImportProgress& p) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && now - last_ < std::chrono::milliseconds(250)) return;
  last_ = now;
  Write(FormatImportProgress(name_, p));
}

void ProgressLine::Say(std::string_view text) {
  if (!enabled_) return;
  Write(name_ + ": " + std::string(text));
}

void ProgressLine::Clear() {
  if (!enabled_ || !shown_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  shown_ = false;
}

void ProgressLine::Write(std::string_view text) {
  // Carriage return, the text, then erase what a longer line left.
  std::fprintf(out_, "\r%.*s\033[K", static_cast<int>(text.size()), text.data());
  std::fflush(out_);
  shown_ = true;
}

}  // namespace liveprof
