// A doctest case that could not run for want of ../shared/data tells ctest
// it was skipped, not passed: SharedDataPath (real_traces.h) records why,
// and main.cc's listener prints "LIVEPROF-SKIP: <why>" to stdout at the
// case's end, only if the case had no failure. tests/CMakeLists.txt sets
// SKIP_REGULAR_EXPRESSION on that marker for every doctest-registered test
// (ctest's skip takes precedence over a failure, so the marker is printed
// only for a case that did not fail). docs/testing.md.
#ifndef LIVEPROF_TESTS_DATA_SKIP_H_
#define LIVEPROF_TESTS_DATA_SKIP_H_

#include <string>

namespace liveprof::test {

// Why the running case skipped part of itself; "" when it skipped nothing.
// Cleared at each case's start. The test thread only.
inline std::string& DataSkipReason() {
  static std::string reason;
  return reason;
}

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_DATA_SKIP_H_
