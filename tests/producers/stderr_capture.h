// StderrCapture: what this process writes on stderr (fd 2, any thread)
// while it lives, for tests of what a component says on the console (the
// ingest server's and sender's one-line notices). Test threads only; one at
// a time.
#ifndef LIVEPROF_TESTS_PRODUCERS_STDERR_CAPTURE_H_
#define LIVEPROF_TESTS_PRODUCERS_STDERR_CAPTURE_H_

#include <unistd.h>

#include <cstdio>
#include <string>

namespace liveprof {

class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    if (file_ != nullptr) ::dup2(::fileno(file_), 2);
  }
  ~StderrCapture() {
    Restore();
    if (file_ != nullptr) std::fclose(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Everything written so far (the capture goes on).
  std::string Text() const {
    std::string out;
    if (file_ == nullptr) return out;
    std::fflush(stderr);
    char buf[4096];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(::fileno(file_), buf, sizeof buf, at);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      at += n;
    }
    return out;
  }
  // How many times `needle` occurs in Text().
  size_t Count(const std::string& needle) const {
    const std::string text = Text();
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
    return n;
  }
  // Back to the real stderr (then the text is kept).
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }

 private:
  std::FILE* file_;
  int saved_ = -1;
};

}  // namespace liveprof

#endif  // LIVEPROF_TESTS_PRODUCERS_STDERR_CAPTURE_H_
