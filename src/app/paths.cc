#include "app/paths.h"

#include <unistd.h>

#ifndef LIVEPROF_STATIC_DIR
#define LIVEPROF_STATIC_DIR ""
#endif

namespace liveprof {

std::string ExecutableDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::string DefaultStaticDir() {
  const std::string exe_dir = ExecutableDir();
  if (!exe_dir.empty()) {
    const std::string beside = exe_dir + "/../static";
    if (access((beside + "/index.html").c_str(), R_OK) == 0) return beside;
  }
  return LIVEPROF_STATIC_DIR;
}

}  // namespace liveprof
