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

#include <nlohmann/json.hpp>

#include "base/json_writer.h"
#include "doctest/doctest.h"

namespace liveprof::self_cost_test {
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
  REQUIRE(ParseTaskStat("4242 (liveprof pipe) S 1 4242 4242 0 -1 4194368 812 0 3 0 157 23 0 0 20 0 9 0 123 456", &comm,
                        &ticks));
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

// A profiled process's reading as its sender sends it (IngestCost): at
// `at_ns`, its hooks' time, calls and the steps it marked, since it started.
SelfCostSample HookReading(uint64_t at_ns, uint64_t hook_ns, uint64_t calls, uint64_t steps) {
  SelfCostSample s;
  s.at_ns = at_ns;
  s.hook_ns = hook_ns;
  s.hook_calls = calls;
  s.steps = steps;
  return s;
}

constexpr uint64_t kSecond = 1'000'000'000;

TEST_CASE("self cost: two readings give the hooks' time per step and their share of the wall time") {
  // A second apart: 40 steps, 200 hook calls, 4.8 ms of hooks: 120 µs a step, 0.48 %.
  const HookCostInterval in =
      CompareHookCost(HookReading(10 * kSecond, 1'000'000, 100, 60), HookReading(11 * kSecond, 5'800'000, 300, 100));
  CHECK(in.interval_s == doctest::Approx(1.0));
  CHECK(in.steps == 40);
  CHECK(in.calls == 200);
  CHECK(in.hook_s == doctest::Approx(0.0048));
  CHECK(in.per_step_us == doctest::Approx(120.0));
  CHECK(in.pct == doctest::Approx(0.48));
  // No step in between (a loader worker; evaluation): no figure per step, the share still.
  const HookCostInterval idle =
      CompareHookCost(HookReading(10 * kSecond, 1'000'000, 100, 60), HookReading(12 * kSecond, 3'000'000, 150, 60));
  CHECK(idle.per_step_us == -1);
  CHECK(idle.pct == doctest::Approx(0.1));
  // No hook ever (a program without liveprof's hooks: the host API's steps): neither.
  const HookCostInterval none =
      CompareHookCost(HookReading(10 * kSecond, 0, 0, 60), HookReading(11 * kSecond, 0, 0, 80));
  CHECK(none.steps == 20);
  CHECK(none.per_step_us == -1);
  CHECK(none.pct == -1);
  // No interval: one reading, the same one twice, counters that went back.
  CHECK(CompareHookCost(SelfCostSample{}, HookReading(11 * kSecond, 5, 1, 1)).per_step_us == -1);
  CHECK(CompareHookCost(HookReading(11 * kSecond, 5, 1, 1), HookReading(11 * kSecond, 9, 2, 2)).pct == -1);
  CHECK(CompareHookCost(HookReading(10 * kSecond, 9, 2, 2), HookReading(11 * kSecond, 5, 3, 3)).per_step_us == -1);
}

// What the server shows: the JSON of a source's readings.
std::string HookFields(const SelfCostReadings& r) {
  JsonWriter w;
  w.BeginObject();
  WriteHookCostFields(w, r);
  w.EndObject();
  return w.str();
}

TEST_CASE("self cost: the server's readings of a source, its hooks' time over whole steps") {
  SelfCostReadings r;
  // Fast steps (50 a second): each reading comes after steps ended; the
  // figure is over the newest two.
  CHECK(TakeSelfCost(&r, HookReading(10 * kSecond, 0, 0, 0)));
  CHECK(TakeSelfCost(&r, HookReading(11 * kSecond, 2'000'000, 250, 50)));
  CHECK(HookFields(r).find("\"hook_per_step_us\":-1") != std::string::npos);  // one reading after steps.
  CHECK(TakeSelfCost(&r, HookReading(12 * kSecond, 7'000'000, 500, 100)));
  CHECK(r.steps_prev.at_ns == 11 * kSecond);
  CHECK(r.steps_now.at_ns == 12 * kSecond);
  CHECK(HookFields(r) ==
        "{\"hook_s\":0.007,\"hook_calls\":500,\"steps\":100,\"hook_per_step_us\":100,"
        "\"hook_per_step_steps\":50,\"hook_pct\":0.5,\"cupti_overhead_s\":0,\"cupti_overhead_per_step_us\":-1}");
  // An older or equal reading (a batch sent again after a reconnect): not taken.
  CHECK_FALSE(TakeSelfCost(&r, HookReading(12 * kSecond, 1, 1, 1)));
  CHECK_FALSE(TakeSelfCost(&r, HookReading(11 * kSecond + 1, 1, 1, 1)));
  CHECK(r.now.hook_ns == 7'000'000);

  // Slow steps (one every 3 s): the readings between them change nothing
  // per step; the figure is over the whole step, between the readings that
  // each came first after a step ended.
  CHECK(TakeSelfCost(&r, HookReading(13 * kSecond, 7'100'000, 505, 100)));
  CHECK(TakeSelfCost(&r, HookReading(14 * kSecond, 7'200'000, 510, 100)));
  CHECK(TakeSelfCost(&r, HookReading(15 * kSecond, 7'600'000, 520, 101)));
  CHECK(r.steps_prev.at_ns == 12 * kSecond);
  CHECK(r.steps_now.at_ns == 15 * kSecond);
  CHECK(CompareHookCost(r.steps_prev, r.steps_now).per_step_us == doctest::Approx(600.0));
  CHECK(CompareHookCost(r.prev, r.now).pct == doctest::Approx(0.04));  // the share: the newest second.
  CHECK(TakeSelfCost(&r, HookReading(16 * kSecond, 7'700'000, 525, 101)));
  CHECK(r.steps_now.at_ns == 15 * kSecond);  // (no step ended: kept)

  // The sender's last reading at its stop, 0.2 s after its newest: it takes
  // that one's place, so that the interval stays a second and more long,
  // and it has the last steps.
  CHECK(TakeSelfCost(&r, HookReading(17 * kSecond, 8'000'000, 540, 102)));
  CHECK(TakeSelfCost(&r, HookReading(17 * kSecond + 200'000'000, 8'100'000, 545, 103)));
  CHECK(r.prev.at_ns == 16 * kSecond);
  CHECK(r.now.at_ns == 17 * kSecond + 200'000'000);
  CHECK(r.now.steps == 103);
  // The replaced reading came first after a step: the last one takes its place.
  CHECK(r.steps_prev.at_ns == 15 * kSecond);
  CHECK(r.steps_now.at_ns == 17 * kSecond + 200'000'000);
  CHECK(CompareHookCost(r.steps_prev, r.steps_now).per_step_us == doctest::Approx(250.0));
  CHECK(CompareHookCost(r.prev, r.now).interval_s == doctest::Approx(1.2));

  // The job ended; a reading a while later, no hook ran and no step: its
  // interval is idle, so the share shown is over the same whole steps as
  // the figure per step (15 s to 17.2 s: 0.5 ms of hooks in 2.2 s), not 0.
  CHECK(TakeSelfCost(&r, HookReading(19 * kSecond, 8'100'000, 545, 103)));
  CHECK(CompareHookCost(r.prev, r.now).pct == doctest::Approx(0.0));
  const nlohmann::json fields = nlohmann::json::parse(HookFields(r));
  CHECK(fields["hook_pct"].get<double>() == doctest::Approx(100.0 * 500'000 / 2.2e9));
  CHECK(fields["hook_per_step_us"].get<double>() == doctest::Approx(250.0));
}

TEST_CASE("self cost: CUPTI's own time per step, over the same whole steps as the hooks'") {
  auto reading = [](uint64_t at, uint64_t hook_ns, uint64_t steps, uint64_t cupti_ns) {
    SelfCostSample s = HookReading(at, hook_ns, steps * 5, steps);
    s.cupti_overhead_ns = cupti_ns;
    return s;
  };
  // The first buffers' requests at the start (20 ms), then 1.5 ms over the
  // 50 steps from 11 s to 12 s: 30 µs a step.
  const HookCostInterval in = CompareHookCost(reading(11 * kSecond, 1'000'000, 50, 20'000'000),
                                              reading(12 * kSecond, 6'000'000, 100, 21'500'000));
  CHECK(in.cupti_s == doctest::Approx(0.0015));
  CHECK(in.cupti_per_step_us == doctest::Approx(30.0));
  CHECK(in.per_step_us == doctest::Approx(100.0));  // the hooks' apart.
  // None in the interval, some before: 0 a step, a figure.
  CHECK(CompareHookCost(reading(11 * kSecond, 0, 50, 20'000'000), reading(12 * kSecond, 0, 60, 20'000'000))
            .cupti_per_step_us == 0);
  // A process without CUPTI (none ever), no step, or a counter that went back: none.
  CHECK(CompareHookCost(reading(11 * kSecond, 0, 50, 0), reading(12 * kSecond, 0, 60, 0)).cupti_per_step_us == -1);
  CHECK(CompareHookCost(reading(11 * kSecond, 0, 50, 5), reading(12 * kSecond, 0, 50, 9)).cupti_per_step_us == -1);
  CHECK(CompareHookCost(reading(11 * kSecond, 0, 50, 9), reading(12 * kSecond, 0, 60, 5)).cupti_per_step_us == -1);

  // The server's fields: totals, and per step over the steps the hooks' are.
  SelfCostReadings r;
  CHECK(TakeSelfCost(&r, reading(10 * kSecond, 0, 0, 20'000'000)));
  CHECK(TakeSelfCost(&r, reading(11 * kSecond, 1'000'000, 50, 20'000'000)));
  CHECK(TakeSelfCost(&r, reading(12 * kSecond, 6'000'000, 100, 21'500'000)));
  const nlohmann::json fields = nlohmann::json::parse(HookFields(r));
  CHECK(fields["cupti_overhead_s"].get<double>() == doctest::Approx(0.0215));
  CHECK(fields["cupti_overhead_per_step_us"].get<double>() == doctest::Approx(30.0));
  CHECK(fields["hook_per_step_us"].get<double>() == doctest::Approx(100.0));
  CHECK(fields["hook_per_step_steps"].get<uint64_t>() == 50);
}

TEST_CASE("self cost: a process that marks no steps has its hooks' share over the newest readings") {
  SelfCostReadings r;  // a loader worker: fetch hooks, no step.
  CHECK(TakeSelfCost(&r, HookReading(10 * kSecond, 1'000'000, 40, 0)));
  CHECK(TakeSelfCost(&r, HookReading(11 * kSecond, 3'000'000, 80, 0)));
  const nlohmann::json fields = nlohmann::json::parse(HookFields(r));
  CHECK(fields["hook_per_step_us"].get<double>() == -1);
  CHECK(fields["hook_pct"].get<double>() == doctest::Approx(0.2));
}

}  // namespace
}  // namespace liveprof::self_cost_test
