// liveprof's own cost as /proc says it: a task's stat line parsed (a comm
// with spaces and parentheses), and a named thread's CPU read back.
#include "base/self_cost.h"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "doctest/doctest.h"

namespace liveprof {
namespace {

uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

TEST_CASE("self cost: a task's stat line gives its comm and utime + stime") {
  std::string comm;
  uint64_t ticks = 0;
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
  REQUIRE(ParseTaskStat("4242 (liveprof pipe) S 1 4242 4242 0 -1 4194368 812 0 3 0 157 23 0 0 20 0 9 0 123 456",
                        &comm, &ticks));
  CHECK(comm == "liveprof pipe");
  CHECK(ticks == 180);
  REQUIRE(ParseTaskStat("7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0", &comm, &ticks));
  CHECK(comm == "a (b) c");
  CHECK(ticks == 11);
  CHECK_FALSE(ParseTaskStat("", &comm, &ticks));
  CHECK_FALSE(ParseTaskStat("7 (short) R 1 2", &comm, &ticks));
  CHECK_FALSE(ParseTaskStat("7 (x) R 1 7 7 0 -1 0 0 0 0 0 five 6", &comm, &ticks));
}

TEST_CASE("self cost: a named thread's CPU is read back from /proc, other threads left out by prefix") {
  std::atomic<uint64_t> burned{0};
  std::atomic<bool> read{false};
  std::thread t([&] {
    pthread_setname_np(pthread_self(), "lpcosttest spin");
    volatile uint64_t x = 0;
    while (ThreadCpuNs() < 200'000'000) x = x + 1;  // 200 ms of this thread's own CPU.
    burned = ThreadCpuNs();
    while (!read) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // (no CPU)
  });
  while (burned == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const SelfCostSample s = ReadSelfCost(123, "lpcosttest");
  read = true;
  t.join();
  CHECK(s.at_ns == 123);
  REQUIRE(s.threads.size() == 1);
  CHECK(s.threads[0].name == "lpcosttest spin");
  // /proc counts in clock ticks (10 ms at USER_HZ 100): within two of them.
  CHECK(s.threads[0].cpu_ns + 20'000'000 >= burned.load());
  CHECK(s.threads[0].cpu_ns <= burned.load() + 20'000'000);
  CHECK(s.rss_bytes > 0);
  // No prefix: every thread, this one among them.
  CHECK(ReadSelfCost(0, "").threads.size() >= 1);
}

}  // namespace
}  // namespace liveprof
