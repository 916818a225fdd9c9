// What liveprof itself costs the process it runs in, read from the process
// (never estimated from benchmarks): the CPU time of each of its threads,
// from /proc/self/task/<tid>/stat (utime + stime), and the process's
// resident memory, from /proc/self/statm. The server samples it about once
// a second (Pipeline::Publish); the status view and /metrics show it.
#ifndef LIVEPROF_BASE_SELF_COST_H_
#define LIVEPROF_BASE_SELF_COST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace liveprof {

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

}  // namespace liveprof

#endif  // LIVEPROF_BASE_SELF_COST_H_
