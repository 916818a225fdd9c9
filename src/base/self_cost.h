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
  uint64_t at_ns = 0;  // when it was read (CLOCK_MONOTONIC).
  std::vector<ThreadCpu> threads;  // by tid.
  uint64_t rss_bytes = 0;          // the whole process's resident set.
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

}  // namespace liveprof

#endif  // LIVEPROF_BASE_SELF_COST_H_
