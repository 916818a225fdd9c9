// How every C++ test waits for something another thread or process does:
// poll a condition until it holds, or give up after a bound. The bound is
// how long a test may hang on a broken build, not a speed: a condition that
// holds returns as soon as it is seen; one that never holds fails the test.
#ifndef LIVEPROF_TESTS_WAIT_FOR_H_
#define LIVEPROF_TESTS_WAIT_FOR_H_

#include <chrono>
#include <thread>

namespace liveprof::test {

// How long any condition may take before the test gives up on it (the
// sanitizer builds and a loaded CI machine included).
inline constexpr std::chrono::milliseconds kPatience{10'000};
// How often it is looked at.
inline constexpr std::chrono::milliseconds kPoll{5};

// True once `done()` holds; false when `patience` passed without it (after
// one last look).
template <typename F>
bool WaitFor(F&& done, std::chrono::milliseconds patience = kPatience) {
  const auto until = std::chrono::steady_clock::now() + patience;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return done();
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_WAIT_FOR_H_
