// The real traces of ../shared/data/traces (see its MANIFEST.md), for the
// tests that read them: they skip, with a message, where the folder is absent.
#ifndef LIVEPROF_TESTS_REAL_TRACES_H_
#define LIVEPROF_TESTS_REAL_TRACES_H_

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

namespace liveprof::test {

// The path of `relative` in the traces folder beside the repository, or ""
// (with a message) without it.
inline std::string TracePath(const std::string& relative) {
  const std::filesystem::path p =
      std::filesystem::path(LIVEPROF_SOURCE_DIR) / ".." / "shared" / "data" / "traces" / relative;
  if (!std::filesystem::exists(p)) {
    MESSAGE("skipped: " << p.string() << " is absent (the real traces live in ../shared/data/traces)");
    return "";
  }
  return p.string();
}

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_REAL_TRACES_H_
