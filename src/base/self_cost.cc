#include "base/self_cost.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "base/json_writer.h"

namespace liveprof {
namespace {

// A small file's first bytes (a /proc file: one read gives it whole).
std::string ReadSmall(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

bool ParseU64(std::string_view s, uint64_t* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

bool ParseTaskStat(std::string_view line, std::string* comm, uint64_t* ticks) {
  const size_t open = line.find('(');
  const size_t close = line.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return false;
  *comm = std::string(line.substr(open + 1, close - open - 1));
  // After the comm: field 3 (state) onwards, separated by single spaces;
  // utime and stime are fields 14 and 15, the 12th and 13th after it.
  std::string_view rest = line.substr(close + 1);
  uint64_t utime = 0, stime = 0;
  for (int field = 3; field <= 15; ++field) {
    const size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return false;
    rest.remove_prefix(start);
    const size_t end = std::min(rest.find(' '), rest.size());
    const std::string_view value = rest.substr(0, end);
    if (field == 14 && !ParseU64(value, &utime)) return false;
    if (field == 15 && !ParseU64(value, &stime)) return false;
    rest.remove_prefix(end);
  }
  *ticks = utime + stime;
  return true;
}

SelfCostSample ReadSelfCost(uint64_t now_ns, std::string_view prefix) {
  SelfCostSample s;
  s.at_ns = now_ns;
  static const long kTicks = ::sysconf(_SC_CLK_TCK);
  const uint64_t ns_per_tick = kTicks > 0 ? 1'000'000'000ull / static_cast<uint64_t>(kTicks) : 10'000'000ull;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (const dirent* d = ::readdir(dir)) {
      uint64_t tid = 0;
      if (!ParseU64(d->d_name, &tid)) continue;  // ".", ".."
      ThreadCpu t;
      uint64_t ticks = 0;
      if (!ParseTaskStat(ReadSmall(std::string("/proc/self/task/") + d->d_name + "/stat"), &t.name, &ticks)) continue;
      if (!t.name.starts_with(prefix)) continue;
      t.tid = tid;
      t.cpu_ns = ticks * ns_per_tick;
      s.threads.push_back(std::move(t));
    }
    ::closedir(dir);
  }
  std::sort(s.threads.begin(), s.threads.end(), [](const ThreadCpu& a, const ThreadCpu& b) { return a.tid < b.tid; });
  // statm: size resident shared ... in pages.
  const std::string statm = ReadSmall("/proc/self/statm");
  const size_t sp = statm.find(' ');
  if (sp != std::string::npos) {
    const size_t end = statm.find(' ', sp + 1);
    uint64_t pages = 0;
    if (ParseU64(std::string_view(statm).substr(sp + 1, end - sp - 1), &pages)) {
      s.rss_bytes = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    }
  }
  return s;
}

SelfCostInterval CompareSelfCost(const SelfCostSample& prev, const SelfCostSample& now) {
  SelfCostInterval r;
  r.thread_pct.assign(now.threads.size(), -1.0);
  if (prev.at_ns == 0 || now.at_ns <= prev.at_ns) return r;
  const double interval_ns = static_cast<double>(now.at_ns - prev.at_ns);
  r.interval_s = interval_ns / 1e9;
  r.cpu_pct = 0;
  for (size_t i = 0; i < now.threads.size(); ++i) {
    const ThreadCpu& t = now.threads[i];
    uint64_t before = 0;  // a thread started since the last sample: from 0.
    for (const ThreadCpu& p : prev.threads) {
      if (p.tid == t.tid) before = p.cpu_ns;
    }
    r.thread_pct[i] = 100.0 * static_cast<double>(t.cpu_ns - std::min(before, t.cpu_ns)) / interval_ns;
    r.cpu_pct += r.thread_pct[i];
  }
  return r;
}

void WriteSelfCostFields(JsonWriter& w, const SelfCostSample& prev, const SelfCostSample& now) {
  const SelfCostInterval in = CompareSelfCost(prev, now);
  w.KV("rss_bytes", now.rss_bytes);
  w.KV("interval_s", in.interval_s);
  w.Key("threads");
  w.BeginArray();
  for (size_t i = 0; i < now.threads.size(); ++i) {
    const ThreadCpu& t = now.threads[i];
    w.BeginObject();
    w.KV("name", t.name);
    w.KV("tid", t.tid);
    w.KV("cpu_s", static_cast<double>(t.cpu_ns) / 1e9);
    w.KV("cpu_pct", in.thread_pct[i]);
    w.EndObject();
  }
  w.EndArray();
  w.KV("cpu_pct", in.cpu_pct);
}

HookCostInterval CompareHookCost(const SelfCostSample& prev, const SelfCostSample& now) {
  HookCostInterval r;
  if (prev.at_ns == 0 || now.at_ns <= prev.at_ns || now.hook_ns < prev.hook_ns || now.hook_calls < prev.hook_calls ||
      now.steps < prev.steps || now.cupti_overhead_ns < prev.cupti_overhead_ns) {
    return r;
  }
  const double interval_ns = static_cast<double>(now.at_ns - prev.at_ns);
  r.interval_s = interval_ns / 1e9;
  r.steps = now.steps - prev.steps;
  r.calls = now.hook_calls - prev.hook_calls;
  const double hook_ns = static_cast<double>(now.hook_ns - prev.hook_ns);
  r.hook_s = hook_ns / 1e9;
  const double cupti_ns = static_cast<double>(now.cupti_overhead_ns - prev.cupti_overhead_ns);
  r.cupti_s = cupti_ns / 1e9;
  if (now.cupti_overhead_ns != 0 && r.steps > 0) r.cupti_per_step_us = cupti_ns / 1e3 / static_cast<double>(r.steps);
  if (now.hook_calls == 0) return r;  // (no hook in this process: nothing they add)
  r.pct = 100.0 * hook_ns / interval_ns;
  if (r.steps > 0) r.per_step_us = hook_ns / 1e3 / static_cast<double>(r.steps);
  return r;
}

bool TakeSelfCost(SelfCostReadings* r, SelfCostSample s) {
  if (s.at_ns <= r->now.at_ns) return false;
  const bool replace = r->now.at_ns != 0 && s.at_ns - r->now.at_ns < kMinSelfCostIntervalNs;
  // The reading `s` follows, of those kept.
  const SelfCostSample& before = replace ? r->prev : r->now;
  if (s.steps != before.steps) {  // the first reading since a step ended.
    // (The newest it replaces, if that one was such a reading: in its place.)
    if (!(replace && r->steps_now.at_ns == r->now.at_ns)) r->steps_prev = std::move(r->steps_now);
    r->steps_now = s;
  }
  if (!replace) r->prev = std::move(r->now);
  r->now = std::move(s);
  return true;
}

void WriteHookCostFields(JsonWriter& w, const SelfCostReadings& r) {
  const HookCostInterval per_step = CompareHookCost(r.steps_prev, r.steps_now);
  w.KV("hook_s", static_cast<double>(r.now.hook_ns) / 1e9);
  w.KV("hook_calls", r.now.hook_calls);
  w.KV("steps", r.now.steps);
  w.KV("hook_per_step_us", per_step.per_step_us);
  w.KV("hook_per_step_steps", per_step.per_step_us < 0 ? uint64_t{0} : per_step.steps);
  // Their share over the same whole steps: after a job's last step its last
  // interval is idle, and a share over it read 0. A process that marks no
  // steps (a loader worker): over the newest two readings.
  w.KV("hook_pct", per_step.per_step_us >= 0 ? per_step.pct : CompareHookCost(r.prev, r.now).pct);
  w.KV("cupti_overhead_s", static_cast<double>(r.now.cupti_overhead_ns) / 1e9);
  w.KV("cupti_overhead_per_step_us", per_step.cupti_per_step_us);
}

}  // namespace liveprof
