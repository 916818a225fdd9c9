// fleet_bench: the fleet's target, end to end on loopback. One
// nats-server (Debian's, JetStream, its store in a temporary folder); a child
// process of agents (--ranks ranks, --ranks-per-agent to an agent, each agent
// a FleetAgent with its own NATS connection, as one per host would be), fed
// synthetic steps: every rank ends a step every 1/--steps-per-s seconds; this
// process is the fleet view (FleetView: the durable consumer, the state, a
// render every 250 ms, as `liveprof fleet`).
//
// Targets: the lag from a step's end to the first fleet view render that
// holds it, p99 <= 1 s; 0 summaries lost (the view holds exactly what the
// agents published, no rank missing a sequence number or holding one twice).
// Reported: the view's CPU (this process) and peak RSS, nats-server's CPU
// and RSS, the agents' CPU per rank (the child's), the render's time.
//
//   fleet_bench [--ranks 1000] [--ranks-per-agent 8] [--steps-per-s 10]
//               [--seconds 30] [--warmup 5] [--nats-server /usr/sbin/nats-server]
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fleet/fleet_agent.h"
#include "fleet/fleet_view.h"
#include "fleet/nats_test_server.h"

namespace liveprof {
namespace {

struct Args {
  int ranks = 1000, ranks_per_agent = 8;
  double steps_per_s = 10, seconds = 30, warmup = 5;
  std::string nats_server = "/usr/sbin/nats-server";
};

uint64_t MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

double CpuSeconds(int who) {
  rusage ru{};
  getrusage(who, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// utime + stime of `pid` (s), from /proc.
double ProcCpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  unsigned long long utime = 0, stime = 0;
  // fields after ") ": state(3) ... utime(14) stime(15)
  std::sscanf(s.c_str() + close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime);
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A /proc/PID/status field in MiB (VmRSS, VmHWM).
double ProcMiB(pid_t pid, const char* field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) == 0) return std::strtod(line.c_str() + std::strlen(field) + 1, nullptr) / 1024.0;
  }
  return 0;
}

// One agent's ranks: each ends a step every `period_ns`, the ranks spread
// over the period.
class Ranks {
 public:
  Ranks(int first_rank, int n, uint64_t period_ns, uint64_t start_ns) : period_ns_(period_ns) {
    for (int i = 0; i < n; ++i) {
      const int rank = first_rank + i;
      ranks_.push_back(
          {"rank " + std::to_string(rank), start_ns + period_ns * static_cast<uint64_t>(rank % 97) / 97, 0});
    }
  }
  std::vector<PodNewStep> Take(uint64_t* dropped) {
    *dropped = 0;
    std::vector<PodNewStep> out;
    const uint64_t now = MonoNs();
    for (Rank& r : ranks_) {
      while (r.next_end_ns <= now) {
        PodNewStep s;
        s.label = r.label;
        s.step_num = r.step++;
        s.cell.end_ns = r.next_end_ns;
        s.cell.step_ns = period_ns_;
        s.cell.bucket_ns[static_cast<size_t>(Bucket::kDeviceCompute)] = period_ns_ * 8 / 10;
        s.cell.bucket_ns[static_cast<size_t>(Bucket::kInput)] = period_ns_ / 10;
        out.push_back(std::move(s));
        r.next_end_ns += period_ns_;
      }
    }
    return out;
  }

 private:
  struct Rank {
    std::string label;
    uint64_t next_end_ns;
    int64_t step;
  };
  uint64_t period_ns_;
  std::vector<Rank> ranks_;
};

struct AgentsReport {
  uint64_t published = 0, dropped = 0, unsent = 0, resent_windows = 0;
  double cpu_s = 0, seconds = 0;
};

// The child: the agents, for `run_s` seconds; writes its report to `fd`.
[[noreturn]] void RunAgents(const Args& a, const std::string& url, double run_s, int fd) {
  const uint64_t period = static_cast<uint64_t>(1e9 / a.steps_per_s);
  const uint64_t start = MonoNs() + 200'000'000;
  std::vector<std::unique_ptr<Ranks>> sources;
  std::vector<std::unique_ptr<FleetAgent>> agents;
  for (int first = 0, host = 0; first < a.ranks; first += a.ranks_per_agent, ++host) {
    sources.push_back(std::make_unique<Ranks>(first, std::min(a.ranks_per_agent, a.ranks - first), period, start));
    FleetAgent::Options o;
    o.nats.url = url;
    o.job = "bench";
    o.host = "host-" + std::to_string(host);
    o.take_steps = [s = sources.back().get()](uint64_t* dropped) { return s->Take(dropped); };
    agents.push_back(std::make_unique<FleetAgent>(std::move(o)));
    std::string error;
    if (!agents.back()->Start(&error)) {
      std::fprintf(stderr, "agent: %s\n", error.c_str());
      _exit(2);
    }
  }
  const double cpu0 = CpuSeconds(RUSAGE_SELF);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(run_s));
  AgentsReport r;
  r.cpu_s = CpuSeconds(RUSAGE_SELF) - cpu0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& ag : agents) ag->Stop(std::chrono::milliseconds(10000));
  for (auto& ag : agents) {
    const FleetAgent::Stats s = ag->stats();
    r.published += s.steps_published;
    r.dropped += s.steps_dropped + s.source_dropped;
    r.unsent += s.outbox;
    r.resent_windows += s.windows_resent;
  }
  if (write(fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(3);
  _exit(0);
}

int Main(const Args& a) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fleet-bench-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  test::NatsTestServer nats_server(test::FreePort(), dir.string(), a.nats_server);
  if (!nats_server.Start()) {
    std::fprintf(stderr, "fleet_bench: %s does not start\n", a.nats_server.c_str());
    return 2;
  }
  const std::string url = nats_server.url();
  const pid_t nats = nats_server.pid();
  const uint64_t expected_rate = static_cast<uint64_t>(a.ranks * a.steps_per_s);

  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) return 2;
  const double run_s = a.warmup + a.seconds;
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fd[0]);
    RunAgents(a, url, run_s, pipe_fd[1]);
  }
  close(pipe_fd[1]);
  // (the agents are forked before this process touches cnats: a fork
  // copies the library's state without its threads)
  FleetView::Options vo;
  vo.nats.url = url;
  vo.job = "bench";
  vo.state.max_workers = static_cast<size_t>(a.ranks) + 16;
  vo.state.lag_samples = static_cast<size_t>(static_cast<double>(expected_rate) * a.seconds);
  FleetView view(vo);
  std::string error;
  if (!view.Start(&error)) {
    std::fprintf(stderr, "fleet_bench: %s\n", error.c_str());
    return 2;
  }
  std::printf("fleet_bench: %d ranks in %d agents, %g steps/s each (%" PRIu64 " summaries/s), %gs after %gs warm-up\n",
              a.ranks, (a.ranks + a.ranks_per_agent - 1) / a.ranks_per_agent, a.steps_per_s, expected_rate, a.seconds,
              a.warmup);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(a.warmup + 0.2));
  const double view_cpu0 = CpuSeconds(RUSAGE_SELF), nats_cpu0 = ProcCpuSeconds(nats);
  const FleetCounts c0 = view.counts();
  const auto t0 = std::chrono::steady_clock::now();
  double nats_rss_max = 0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(a.seconds)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    nats_rss_max = std::max(nats_rss_max, ProcMiB(nats, "VmRSS:"));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double view_cpu = CpuSeconds(RUSAGE_SELF) - view_cpu0, nats_cpu = ProcCpuSeconds(nats) - nats_cpu0;
  const FleetCounts c1 = view.counts();
  const FleetState::Lag lag = view.lag();
  const FleetView::Stats vs = view.stats();

  AgentsReport r;
  if (read(pipe_fd[0], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) std::fprintf(stderr, "no agents' report\n");
  waitpid(child, nullptr, 0);
  // Every published summary in the view (bounded wait).
  for (int i = 0; i < 200 && view.counts().steps < r.published; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const FleetCounts end = view.counts();
  view.Stop();
  const double view_hwm = ProcMiB(getpid(), "VmHWM:");
  nats_server.Kill(SIGTERM);
  std::filesystem::remove_all(dir);

  const double rate = static_cast<double>(c1.steps - c0.steps) / secs;
  std::printf("  view: %.0f summaries/s applied (offered %" PRIu64
              "), lag step end -> render p50 %.0f ms, p99 %.0f ms, "
              "max %.0f ms (%" PRIu64 " samples)\n",
              rate, expected_rate, lag.p50_ms, lag.p99_ms, lag.max_ms, lag.samples);
  std::printf("  view: CPU %.1f %% of a core, peak RSS %.0f MiB, render %.1f ms (last), %" PRIu64 " renders\n",
              100 * view_cpu / secs, view_hwm, vs.last_render_ms, vs.renders);
  std::printf("  nats-server: CPU %.1f %% of a core, RSS %.0f MiB (max)\n", 100 * nats_cpu / secs, nats_rss_max);
  std::printf("  agents: CPU %.1f %% of a core for %d ranks: %.3f %% of a core per rank; %" PRIu64 " windows resent\n",
              100 * r.cpu_s / r.seconds, a.ranks, 100 * r.cpu_s / r.seconds / a.ranks, r.resent_windows);
  std::printf("  summaries: %" PRIu64 " published, %" PRIu64 " dropped, %" PRIu64 " unsent; the view holds %" PRIu64
              ", %" PRIu64 " missing, %" PRIu64 " twice\n",
              r.published, r.dropped, r.unsent, end.steps, end.missing_steps, end.duplicate_steps);
  const bool lag_ok = lag.samples > 0 && lag.p99_ms <= 1000;
  const bool lost_ok =
      r.dropped == 0 && r.unsent == 0 && end.steps == r.published && end.missing_steps == 0 && end.duplicate_steps == 0;
  std::printf("%s lag p99 <= 1000 ms (%.0f ms)\n", lag_ok ? "PASS" : "MISS", lag.p99_ms);
  std::printf("%s 0 summaries lost (%" PRIu64 " published, %" PRIu64 " held)\n", lost_ok ? "PASS" : "MISS", r.published,
              end.steps);
  return lag_ok && lost_ok ? 0 : 1;
}

}  // namespace
}  // namespace liveprof

int main(int argc, char** argv) {
  liveprof::Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--ranks") a.ranks = std::atoi(v);
    else if (k == "--ranks-per-agent") a.ranks_per_agent = std::max(1, std::atoi(v));
    else if (k == "--steps-per-s") a.steps_per_s = std::strtod(v, nullptr);
    else if (k == "--seconds") a.seconds = std::strtod(v, nullptr);
    else if (k == "--warmup") a.warmup = std::strtod(v, nullptr);
    else if (k == "--nats-server") a.nats_server = v;
    else {
      std::fprintf(stderr, "fleet_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  return liveprof::Main(a);
}
