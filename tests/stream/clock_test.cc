#include "stream/clock.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

namespace liveprof::clock_test {

namespace {
constexpr uint64_t kHostOffsetNs = 5'000'000'000;  // the other clock started 5 s later.
constexpr double kSkew = 1.0001;                   // it runs 100 ppm slow.
uint64_t HostOf(uint64_t other) {
  return kHostOffsetNs + static_cast<uint64_t>(std::llround(static_cast<double>(other) * kSkew));
}
}  // namespace

TEST_CASE("clock map: recovers a known skew and offset from noisy pairs") {
  ClockMap map(64);
  std::srand(7);
  constexpr uint64_t kStart = 1'000'000'000'000;  // the other clock's reading at the first pair.
  constexpr uint64_t kPeriod = 100'000'000;       // a pair every 100 ms.
  for (int i = 0; i < 64; ++i) {
    const uint64_t other = kStart + i * kPeriod;
    const int noise = std::rand() % 41 - 20;  // +-20 ns reading jitter.
    map.AddPair(other, HostOf(other) + noise);
  }
  CHECK(map.slope() == doctest::Approx(kSkew).epsilon(1e-8));
  CHECK(map.rms_residual_ns() < 20.0);
  // Inside the fitted range and 1 s past it, the mapping is good to ~20 ns.
  for (const uint64_t other : {kStart, kStart + uint64_t{3'000'000'000}, kStart + uint64_t{7'300'000'000}}) {
    const int64_t err = static_cast<int64_t>(map.ToHost(other) - HostOf(other));
    CHECK(std::llabs(err) < 25);
  }
  CHECK(map.DurationToHost(1'000'000) == 1'000'100);
}

TEST_CASE("clock map: one pair uses the nominal slope, old pairs age out") {
  ClockMap map(4, 2.0);
  map.AddPair(100, 1'000);
  CHECK(map.ToHost(150) == 1'100);  // 1000 + 2.0 * 50
  // A clock whose rate changes: after 4 new pairs only the new rate counts.
  for (uint64_t i = 1; i <= 4; ++i) map.AddPair(100 + i * 1000, 1'000 + i * 3000);
  for (uint64_t i = 5; i <= 8; ++i) map.AddPair(100 + i * 1000, 13'000 + (i - 4) * 5000);
  CHECK(map.pairs() == 4);
  CHECK(map.slope() == doctest::Approx(5.0));
}

TEST_CASE("clock map: a reading maps to the same time before and after a refit, and the map stays monotonic") {
  ClockMap map(8);
  std::srand(11);
  constexpr uint64_t kPeriod = 100'000'000;
  std::vector<uint64_t> readings;  // every 7 ms, converted as they come and again later.
  std::vector<uint64_t> first;
  for (int i = 0; i < 40; ++i) {
    const uint64_t other = 1'000'000 + i * kPeriod;
    map.AddPair(other, HostOf(other) + (std::rand() % 2001 - 1000));  // +-1 us of jitter: refits move.
    if (i == 0) continue;  // one pair is a guess (the nominal slope): the second starts the map afresh.
    for (uint64_t r = other; r < other + kPeriod; r += 7'000'000) {
      readings.push_back(r);
      first.push_back(map.ToHost(r));
    }
  }
  uint64_t last = 0;
  for (size_t i = 0; i < readings.size(); ++i) {
    INFO("reading " << readings[i]);
    CHECK(map.ToHost(readings[i]) == first[i]);  // the same, 40 refits later.
    CHECK(first[i] >= last);
    last = first[i];
  }
  // And it still follows the clock: within the jitter of the truth.
  const uint64_t now = 1'000'000 + 40 * kPeriod;
  CHECK(std::llabs(static_cast<int64_t>(map.ToHost(now) - HostOf(now))) < 3'000);
}

TEST_CASE("clock: TSC mapped by two real pairs agrees with CLOCK_MONOTONIC") {
  ClockMap map;
  const TscPair a = ReadTscPair();
  while (HostNowNs() - a.host_ns < 2'000'000) {
  }
  const TscPair b = ReadTscPair();
  map.AddPair(a.tsc, a.host_ns);
  map.AddPair(b.tsc, b.host_ns);
  const TscPair c = ReadTscPair();
  // Not a speed check: a correctness tolerance of 1 ms, far above any error
  // of a working map, far below what a wrong unit or sign would give.
  const int64_t err = static_cast<int64_t>(map.ToHost(c.tsc) - c.host_ns);
  CHECK(std::llabs(err) < 1'000'000);
  CHECK(HostNowNs() >= c.host_ns);
}

}  // namespace liveprof::clock_test
