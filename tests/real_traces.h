// The real data of ../shared/data, for the tests that read it: the traces
// of ../shared/data/traces (its MANIFEST.md) and the recordings of a real
// GPU in ../shared/data/gpu (its README.md). Absent on a developer's
// machine, a test skips: ctest reports it "Skipped" (data_skip.h); under
// CI=true an absent file fails the test instead, so that CI never passes
// without having read them. LIVEPROF_SHARED_DATA, when set, replaces
// ../shared/data (e.g. a missing folder, to see the skip). docs/testing.md.
#ifndef LIVEPROF_TESTS_REAL_TRACES_H_
#define LIVEPROF_TESTS_REAL_TRACES_H_

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "data_skip.h"

namespace liveprof::test {

// The path of `relative` in ../shared/data/`folder`, or "" without it (a
// skip, or a failure under CI=true).
inline std::string SharedDataPath(const std::string& folder, const std::string& relative) {
  const char* root = std::getenv("LIVEPROF_SHARED_DATA");
  const std::filesystem::path p =
      (root != nullptr && *root != 0 ? std::filesystem::path(root)
                                     : std::filesystem::path(LIVEPROF_SOURCE_DIR) / ".." / "shared" / "data") /
      folder / relative;
  if (std::filesystem::exists(p)) return p.string();
  const char* ci = std::getenv("CI");
  if (ci != nullptr && std::strcmp(ci, "true") == 0) {
    FAIL_CHECK(p.string() << " is absent, and CI=true: CI must read ../shared/data/" << folder);
  } else {
    MESSAGE("skipped: " << p.string() << " is absent (the real data lives in ../shared/data/" << folder << ")");
    DataSkipReason() = p.string() + " is absent";
  }
  return "";
}

// A trace of ../shared/data/traces.
inline std::string TracePath(const std::string& relative) { return SharedDataPath("traces", relative); }

// A recording of ../shared/data/gpu.
inline std::string GpuDataPath(const std::string& relative) { return SharedDataPath("gpu", relative); }

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_REAL_TRACES_H_
