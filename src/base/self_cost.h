// What liveprof itself costs the process it runs in, read from the process
// (never estimated from benchmarks): the CPU time of each of its threads,
// from /proc/self/task/<tid>/stat (utime + stime), and the process's
// resident memory, from /proc/self/statm. The server samples it about once
// a second (Pipeline::Publish); the status view and /metrics show it. A
// profiled process's sender samples its own (IngestBatch.cost) and the server
// shows each source's (status.server.ingest[].cost).
#ifndef LIVEPROF_BASE_SELF_COST_H_
#define LIVEPROF_BASE_SELF_COST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace liveprof {

class JsonWriter;

struct ThreadCpu {
  uint64_t tid = 0;
  std::string name;     // the thread's comm ("liveprof pipe").
  uint64_t cpu_ns = 0;  // user + system time since the thread started.
};

struct SelfCostSample {
  uint64_t at_ns = 0;              // when it was read (CLOCK_MONOTONIC).
  std::vector<ThreadCpu> threads;  // by tid.
  uint64_t rss_bytes = 0;          // the whole process's resident set.
  // A profiled process's (IngestCost's; 0 in the server's own): the time
  // liveprof's hooks in the program measured themselves spending, since it
  // started, their calls, and the training steps the process marked; and
  // CUPTI's own time in it (its OVERHEAD records of its own work).
  uint64_t hook_ns = 0, hook_calls = 0, steps = 0;
  uint64_t cupti_overhead_ns = 0;
};

// One /proc/<pid>/task/<tid>/stat line: its comm (between the first '(' and
// the last ')': a comm may hold spaces and parentheses) and utime + stime, in
// clock ticks (fields 14 and 15). False for a line that is not one.
bool ParseTaskStat(std::string_view line, std::string* comm, uint64_t* ticks);

// The threads of this process whose name starts with `prefix` ("" = all),
// and the process's resident set. Threads that end while it reads are left
// out. Any thread; tens of microseconds for tens of threads.
SelfCostSample ReadSelfCost(uint64_t now_ns, std::string_view prefix);

// The CPU over the interval between two samples of one process: each of
// `now`'s threads' (by tid; one started since `prev` counts from 0), as % of
// one core, and their sum. Without an interval (`prev` empty, or not older
// than `now`): interval_s 0, every pct -1. Pure.
struct SelfCostInterval {
  double interval_s = 0;
  double cpu_pct = -1;             // the threads' sum.
  std::vector<double> thread_pct;  // now.threads[i]'s.
};
SelfCostInterval CompareSelfCost(const SelfCostSample& prev, const SelfCostSample& now);

// The fields of a cost object in JSON (the caller opens and closes it):
// "rss_bytes", "interval_s", "threads": [{"name", "tid", "cpu_s", "cpu_pct"}],
// "cpu_pct" (CompareSelfCost). The server's status.liveprof_cost and each
// ingest source's cost (docs/protocol.md).
void WriteSelfCostFields(JsonWriter& w, const SelfCostSample& prev, const SelfCostSample& now);

// The hooks' cost in a profiled process between two of its readings: their
// time per training step marked in between (Δhook_ns / Δsteps: what they
// add to a step) and their share of the wall time (Δhook_ns / Δat_ns).
// per_step_us -1: no interval, no step in it, or a process whose hooks
// never ran (none: a program without liveprof's hooks); pct -1: no
// interval, or no hook ever. Counters that went back: no interval. CUPTI's
// own time likewise: cupti_per_step_us -1 with no interval, no step in it,
// or a process where CUPTI never recorded any (no CUPTI in it). Pure.
struct HookCostInterval {
  double interval_s = 0;
  uint64_t steps = 0, calls = 0;  // in the interval.
  double hook_s = 0;              // the hooks' time in it.
  double per_step_us = -1;
  double pct = -1;     // % of the interval.
  double cupti_s = 0;  // CUPTI's own time in it.
  double cupti_per_step_us = -1;
};
HookCostInterval CompareHookCost(const SelfCostSample& prev, const SelfCostSample& now);

// A source's readings as the server keeps them (IngestServer::SourceStatus):
// the newest two (the CPU and the hooks' share are over the interval between
// them), and the newest two that each came first after a step ended (their
// step count differs from the reading before): the hooks' time per step is
// over the whole steps between those, so that steps longer than the
// sender's second between readings are not cut (with faster steps they are
// the newest two).
struct SelfCostReadings {
  SelfCostSample now, prev;
  SelfCostSample steps_now, steps_prev;
};
// A reading sooner than this after the newest (a sender's last, at its
// stop) replaces the newest rather than pushing the older one out: the
// interval stays long enough for /proc's 10 ms CPU ticks.
inline constexpr uint64_t kMinSelfCostIntervalNs = 500'000'000;
// Takes reading `s`; false (nothing kept) if it is not newer than the
// newest (a batch sent again after a reconnect). Pure.
bool TakeSelfCost(SelfCostReadings* r, SelfCostSample s);

// The hooks' fields of a source's cost object in JSON (docs/ingest.md):
// "hook_s", "hook_calls", "steps" (totals since the process started),
// "hook_per_step_us" and "hook_per_step_steps" (the steps it is over:
// steps_prev to steps_now), "hook_pct" (over those steps too; prev to now
// for a process that marks none); "cupti_overhead_s" (CUPTI's own time
// since the process started) and "cupti_overhead_per_step_us" (over the
// same steps).
void WriteHookCostFields(JsonWriter& w, const SelfCostReadings& r);

}  // namespace liveprof

#endif  // LIVEPROF_BASE_SELF_COST_H_
