// web_feed_bench: the web feed under load, end to end and in one process.
// The issue's target: 100 WebSocket clients subscribed to every view topic
// (10 Hz) while the pipeline ingests 5 M events/s from the simulated
// workload: 0 ingest drops, p99 latency from an event's end to the frame
// that first reflects it <= 150 ms (server-side timestamps: the completed
// write, LatencyRecorder in web/shared_state.h), and the web thread's CPU.
//
//   Stream -> SimulatedWorkload (paced, --rate, device batches every 10 ms)
//          -> Pipeline (publishes every 100 ms) -> Server (port 0)
//          -> --clients WebSocket clients, all driven by ONE thread with
//             epoll over non-blocking sockets: frame headers parsed,
//             payloads counted and dropped, pings answered.
//
// Not Google Benchmark: one long run with a warm-up, figures printed with a
// PASS/MISS line per target. `--clients 0` is the baseline (no feed).
//
//   web_feed_bench [--clients 100] [--rate 5e6] [--seconds 10] [--warmup 3]
//                  [--ring-capacity 1048576] [--flush-ms 10]
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/self_cost.h"
#include "pipeline/pipeline.h"
#include "producers/simulated_workload.h"
#include "stream/stream.h"
#include "web/server.h"
#include "web/ws_raw_client.h"

namespace liveprof {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kTargetP99Ms = 150;
constexpr const char* kAllViewTopics =
    R"({"type":"subscribe","topics":["overview","steps","input_pipeline","tf_stats",)"
    R"("kernel_stats","memory","alerts","status"]})";

struct Flags {
  size_t clients = 100;
  double rate = 5e6;
  double seconds = 10;
  double warmup = 3;
  size_t ring_capacity = size_t{1} << 20;
  double flush_ms = 10;
  double slack_ms = 10;  // DrainLoop::Options::writes_at_end_slack_ns.
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "web_feed_bench: %s\nusage: web_feed_bench [--clients N] [--rate EV_PER_S] [--seconds S] "
               "[--warmup S] [--ring-capacity N] [--flush-ms MS] [--slack-ms MS]\n",
               why);
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) Usage("a flag without its value");
    char* end = nullptr;
    const double v = std::strtod(argv[++i], &end);
    if (end == argv[i] || *end != '\0' || !(v >= 0)) Usage("a value is not a number");
    if (a == "--clients") f.clients = static_cast<size_t>(v);
    else if (a == "--rate") f.rate = v;
    else if (a == "--seconds") f.seconds = v;
    else if (a == "--warmup") f.warmup = v;
    else if (a == "--ring-capacity") f.ring_capacity = static_cast<size_t>(v);
    else if (a == "--flush-ms") f.flush_ms = v;
    else if (a == "--slack-ms") f.slack_ms = v;
    else Usage("unknown flag");
  }
  if (f.seconds <= 0) Usage("--seconds must be > 0");
  return f;
}

// ---- Per-thread CPU (base/self_cost.h: /proc/self/task/*/stat) ----

std::set<int> Tids() {
  std::set<int> tids;
  for (const ThreadCpu& t : ReadSelfCost(0, "").threads) tids.insert(static_cast<int>(t.tid));
  return tids;
}

// Thread `tid`'s CPU seconds in `s` (0: not there yet).
double ThreadSeconds(const SelfCostSample& s, uint64_t tid) {
  for (const ThreadCpu& t : s.threads) {
    if (t.tid == tid) return static_cast<double>(t.cpu_ns) / 1e9;
  }
  return 0;
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// ---- The clients ----

struct FeedClient {
  std::unique_ptr<test::RawClient> socket;
  test::FrameScanner scanner;
  std::atomic<uint64_t> frames{0}, bytes{0}, pings{0};
  std::atomic<bool> closed{false};
  uint16_t close_code = 0;
};

// Drives every client from one thread: epoll, non-blocking reads, frame
// headers only.
class ClientDriver {
 public:
  explicit ClientDriver(std::vector<std::unique_ptr<FeedClient>>* clients) : clients_(*clients) {}

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int tid() const { return tid_.load(); }

 private:
  void Consume(FeedClient& c, const char* data, size_t size) {
    const bool ok = c.scanner.Feed(data, size, [&](uint8_t opcode, bool, uint64_t payload, std::string_view control) {
      if (opcode == test::kOpPing) {
        c.pings.fetch_add(1, std::memory_order_relaxed);
        c.socket->SendPong(control);
      } else if (opcode == test::kOpClose) {
        c.close_code =
            control.size() >= 2
                ? static_cast<uint16_t>((static_cast<uint8_t>(control[0]) << 8) | static_cast<uint8_t>(control[1]))
                : 0;
        c.closed.store(true);
      } else if (opcode == test::kOpText || opcode == test::kOpBinary) {
        c.frames.fetch_add(1, std::memory_order_relaxed);
        c.bytes.fetch_add(payload, std::memory_order_relaxed);
      }
    });
    if (!ok) c.closed.store(true);
  }

  void Run() {
    pthread_setname_np(pthread_self(), "bench clients");
    tid_.store(static_cast<int>(syscall(SYS_gettid)));
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    for (size_t i = 0; i < clients_.size(); ++i) {
      FeedClient& c = *clients_[i];
      // What the handshake read past the 101.
      const std::string early = c.socket->buffered();
      Consume(c, early.data(), early.size());
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      epoll_ctl(ep, EPOLL_CTL_ADD, c.socket->fd(), &ev);
    }
    std::vector<char> buf(256 * 1024);
    std::vector<epoll_event> events(256);
    while (!stop_.load(std::memory_order_relaxed)) {
      const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 50);
      for (int k = 0; k < n; ++k) {
        FeedClient& c = *clients_[events[k].data.u64];
        for (;;) {
          const ssize_t got = ::recv(c.socket->fd(), buf.data(), buf.size(), 0);
          if (got > 0) {
            Consume(c, buf.data(), static_cast<size_t>(got));
            if (static_cast<size_t>(got) < buf.size()) break;
            continue;
          }
          if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          if (got < 0 && errno == EINTR) continue;
          c.closed.store(true);  // EOF or error.
          epoll_ctl(ep, EPOLL_CTL_DEL, c.socket->fd(), nullptr);
          break;
        }
      }
    }
    close(ep);
  }

  std::vector<std::unique_ptr<FeedClient>>& clients_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> tid_{0};
};

// What the pipeline contributes to the latency: per publication, how far
// its watermark lags its publication (published_ns - watermark_ns). Sampled
// from Pipeline::Latest() by the main thread.
class PublicationLag {
 public:
  void Poll(const Pipeline& pipeline) {
    const std::shared_ptr<const PipelineSnapshot> s = pipeline.Latest();
    if (!s || s->views.seq == last_seq_) return;
    last_seq_ = s->views.seq;
    if (s->published_ns > s->watermark_ns)
      lags_ms_.push_back(static_cast<double>(s->published_ns - s->watermark_ns) / 1e6);
    if (prev_published_ns_ != 0 && s->published_ns > prev_published_ns_) {
      periods_ms_.push_back(static_cast<double>(s->published_ns - prev_published_ns_) / 1e6);
    }
    prev_published_ns_ = s->published_ns;
    render_ms_.push_back(static_cast<double>(s->render_ns) / 1e6);
    const RenderedViews& v = s->views;
    view_kb_.push_back(static_cast<double>(v.overview.size() + v.steps.size() + v.input_pipeline.size() +
                                           v.tf_stats.size() + v.kernel_stats.size() + v.memory.size() +
                                           v.alerts.size() + v.status.size()) /
                       1e3);
  }
  void Reset() {
    lags_ms_.clear();
    periods_ms_.clear();
    render_ms_.clear();
    view_kb_.clear();
  }
  static double Quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1);
    return v[i];
  }
  const std::vector<double>& lags_ms() const { return lags_ms_; }
  const std::vector<double>& periods_ms() const { return periods_ms_; }
  const std::vector<double>& render_ms() const { return render_ms_; }
  const std::vector<double>& view_kb() const { return view_kb_; }

 private:
  uint64_t last_seq_ = 0;
  uint64_t prev_published_ns_ = 0;
  std::vector<double> lags_ms_;
  std::vector<double> periods_ms_;
  std::vector<double> render_ms_;  // per publication: render + metrics on the pipeline thread.
  std::vector<double> view_kb_;    // per publication: the 8 views' JSON, KB.
};

struct Sample {
  Clock::time_point wall;
  uint64_t published = 0, dropped = 0, late = 0;
  ServerStats server;
  uint64_t frames = 0, bytes = 0;
  double process_cpu = 0;
  SelfCostSample threads;  // (by tid)
  std::vector<uint64_t> per_client_frames;
};

Sample Take(const Stream& stream, Server& server, const std::vector<std::unique_ptr<FeedClient>>& clients) {
  Sample s;
  s.wall = Clock::now();
  s.published = stream.TotalPublished();
  s.dropped = stream.TotalDropped();
  s.late = stream.diagnostics().Get(Diag::late_events);
  s.server = server.stats();
  for (const auto& c : clients) {
    const uint64_t f = c->frames.load(std::memory_order_relaxed);
    s.frames += f;
    s.bytes += c->bytes.load(std::memory_order_relaxed);
    s.per_client_frames.push_back(f);
  }
  s.process_cpu = ProcessCpuSeconds();
  s.threads = ReadSelfCost(0, "");
  return s;
}

int Run(const Flags& flags) {
  std::printf(
      "web_feed_bench: %zu clients x 8 view topics, %.2f M events/s asked, device flush %.0f ms, "
      "ring capacity %zu, warm-up %.1f s, measured %.1f s, %u CPUs online\n",
      flags.clients, flags.rate / 1e6, flags.flush_ms, flags.ring_capacity, flags.warmup, flags.seconds,
      static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN)));

  std::map<int, std::string> labels;
  auto label_new = [&](const std::set<int>& before, const std::string& what) {
    for (int tid : Tids()) {
      if (!before.count(tid) && !labels.count(tid)) labels[tid] = what;
    }
  };
  labels[static_cast<int>(getpid())] = "main (bench)";

  Stream::Options so;
  so.ring_capacity = flags.ring_capacity;
  Stream stream(so);
  Pipeline::Options po;
  po.drain.writes_at_end_slack_ns = static_cast<uint64_t>(flags.slack_ms * 1e6);
  Pipeline pipeline(stream, po);
  ServerOptions o;
  o.port = 0;
  o.max_connections_per_address = 256;
  o.version = "bench";
  Server server(pipeline, o);
  std::string error;
  std::set<int> before = Tids();
  if (!server.Start(&error)) {
    std::fprintf(stderr, "web_feed_bench: %s\n", error.c_str());
    return 1;
  }
  label_new(before, "web (server)");
  before = Tids();
  pipeline.Start();
  label_new(before, "pipeline");
  SimulatedWorkloadOptions wo;
  wo.model.schedule = DefaultSchedule();
  wo.events_per_second = flags.rate;
  wo.flush_period_ns = static_cast<uint64_t>(flags.flush_ms * 1e6);
  SimulatedWorkload workload(stream, wo);
  before = Tids();
  workload.Start();
  label_new(before, "sim producer");
  std::printf("workload  time scale 1/%.0f (model time runs %.0fx faster than at its own rate)\n",
              workload.time_scale(), workload.time_scale());

  std::vector<std::unique_ptr<FeedClient>> clients;
  for (size_t i = 0; i < flags.clients; ++i) {
    auto c = std::make_unique<FeedClient>();
    c->socket = std::make_unique<test::RawClient>(server.port(), std::chrono::seconds(10));
    const test::HttpReply up = c->socket->Handshake("/ws");
    if (up.status != 101) {
      std::fprintf(stderr, "web_feed_bench: client %zu: upgrade failed: %s %s\n", i, up.status_line.c_str(),
                   up.error.c_str());
      return 1;
    }
    if (!c->socket->SendText(kAllViewTopics) || !c->socket->SetNonBlocking()) {
      std::fprintf(stderr, "web_feed_bench: client %zu: subscribe failed\n", i);
      return 1;
    }
    clients.push_back(std::move(c));
  }
  ClientDriver driver(&clients);
  if (!clients.empty()) {
    driver.Start();
    while (driver.tid() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    labels[driver.tid()] = "bench clients";
  }

  PublicationLag lag;
  auto run_for = [&](double seconds) {
    const auto until =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (Clock::now() < until) {
      lag.Poll(pipeline);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  run_for(flags.warmup);

  server.ResetLatency();
  lag.Reset();
  const Sample a = Take(stream, server, clients);
  const uint64_t publications_before = pipeline.publications();
  run_for(flags.seconds);
  const Sample b = Take(stream, server, clients);
  const uint64_t publications = pipeline.publications() - publications_before;

  driver.Stop();
  workload.Stop();
  pipeline.Stop();
  server.Stop();

  const double wall = std::chrono::duration<double>(b.wall - a.wall).count();
  const uint64_t published = b.published - a.published;
  const uint64_t dropped = b.dropped - a.dropped;
  const double frames_per_s = static_cast<double>(b.frames - a.frames) / wall;
  const double mb_per_s = static_cast<double>(b.bytes - a.bytes) / wall / 1e6;
  size_t closed = 0;
  double min_client = 1e300, max_client = 0;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (clients[i]->closed.load()) ++closed;
    const double f = static_cast<double>(b.per_client_frames[i] - a.per_client_frames[i]) / wall;
    min_client = std::min(min_client, f);
    max_client = std::max(max_client, f);
  }
  if (clients.empty()) min_client = 0;
  const ServerStats& s = b.server;
  const double web_cpu = (b.server.web_thread_cpu_seconds - a.server.web_thread_cpu_seconds) / wall;
  const double process_cpu = (b.process_cpu - a.process_cpu) / wall;

  std::printf("ingest    %.3f M events/s achieved (%" PRIu64 " events in %.2f s), %" PRIu64 " dropped, %" PRIu64
              " late (past the watermark; slack %.0f ms)\n",
              static_cast<double>(published) / wall / 1e6, published, wall, dropped, b.late - a.late, flags.slack_ms);
  std::printf(
      "feed      %.1f frames/s, %.2f MB/s delivered; per client %.1f..%.1f frames/s; %zu of %zu clients "
      "closed\n",
      frames_per_s, mb_per_s, min_client, max_client, closed, clients.size());
  std::printf("server    view frames sent %" PRIu64 ", replaced %" PRIu64 ", sessions closed blocked %" PRIu64
              ", websocket sessions %" PRIu64 "\n",
              s.view_frames_sent - a.server.view_frames_sent, s.view_frames_replaced - a.server.view_frames_replaced,
              s.sessions_closed_blocked - a.server.sessions_closed_blocked, s.websocket_sessions);
  std::printf("latency   event end -> frame written: p50 %.0f ms, p99 %.0f ms, max %.0f ms (%" PRIu64 " samples)\n",
              s.latency_p50_ms, s.latency_p99_ms, s.latency_max_ms, s.latency_samples);
  std::printf("pipeline  %" PRIu64
              " publications (%.1f/s); publication lag (published - watermark) over %zu: p50 %.1f ms, p99 %.1f ms, "
              "max %.1f ms; publish period p50 %.1f ms, max %.1f ms\n",
              publications, static_cast<double>(publications) / wall, lag.lags_ms().size(),
              PublicationLag::Quantile(lag.lags_ms(), 0.5), PublicationLag::Quantile(lag.lags_ms(), 0.99),
              PublicationLag::Quantile(lag.lags_ms(), 1.0), PublicationLag::Quantile(lag.periods_ms(), 0.5),
              PublicationLag::Quantile(lag.periods_ms(), 1.0));
  if (!lag.render_ms().empty()) {
    std::printf("render    p50 %.1f ms, p99 %.1f ms, max %.1f ms per publication; views %.0f KB first, %.0f KB last\n",
                PublicationLag::Quantile(lag.render_ms(), 0.5), PublicationLag::Quantile(lag.render_ms(), 0.99),
                PublicationLag::Quantile(lag.render_ms(), 1.0), lag.view_kb().front(), lag.view_kb().back());
  }
  std::printf("cpu       web thread %.1f%% of one core; process %.1f%% (of %ld00%%)\n", web_cpu * 100,
              process_cpu * 100, sysconf(_SC_NPROCESSORS_ONLN));
  for (const ThreadCpu& t : b.threads.threads) {
    const double used = (static_cast<double>(t.cpu_ns) / 1e9 - ThreadSeconds(a.threads, t.tid)) / wall;
    const int tid = static_cast<int>(t.tid);
    const auto label = labels.find(tid);
    std::printf("  thread %-7d %-16s %-14s %5.1f%%\n", tid, t.name.c_str(),
                label == labels.end() ? "" : label->second.c_str(), used * 100);
  }
  std::printf("diag     ");
  for (size_t d = 0; d < static_cast<size_t>(Diag::kCount); ++d) {
    if (const uint64_t v = stream.diagnostics().Get(static_cast<Diag>(d))) {
      std::printf(" %s=%" PRIu64, std::string(DiagnosticInfo(static_cast<Diag>(d)).name).c_str(), v);
    }
  }
  std::printf("\n");
  const bool drops_ok = dropped == 0;
  const bool p99_ok = s.latency_samples > 0 && s.latency_p99_ms <= kTargetP99Ms;
  std::printf("%s  ingest drops == 0 (%" PRIu64 ")\n", drops_ok ? "PASS" : "MISS", dropped);
  if (clients.empty()) {
    std::printf("n/a   p99 latency <= %.0f ms (no clients)\n", kTargetP99Ms);
  } else {
    std::printf("%s  p99 latency <= %.0f ms (%.0f ms)\n", p99_ok ? "PASS" : "MISS", kTargetP99Ms, s.latency_p99_ms);
  }
  return 0;
}

}  // namespace
}  // namespace liveprof

int main(int argc, char** argv) { return liveprof::Run(liveprof::ParseFlags(argc, argv)); }
