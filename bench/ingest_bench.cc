// ingest_bench: the target for socket ingest, end to end. N sender
// processes (fork()ed first, each its own host API, rings and sender thread:
// ingest_sender.h) record R events/s each and send them over unix sockets
// to one server process (this one): IngestServer -> a ring per source ->
// the whole Pipeline (analyses and trace store, as `liveprof serve`).
//
// Targets: 0 events lost anywhere (sender rings, unacknowledged batches,
// server rings, lost batches) and the server taking them as fast as they
// come (its steady rate at least 99 % of the offered one: the server reads a
// source no faster than its pipeline drains it, so a server that cannot keep
// up shows as a lower rate while the senders buffer, then as the senders'
// drops); the server's CPU (this process: ingest thread + pipeline thread,
// getrusage) per 1 M events/s, and each of its threads' (/proc/self/task,
// the lines `  thread TID NAME LABEL PCT%` as web_feed_bench prints them).
//
// Each sender's step (10 ms) is an input span then framework-op spans, so the
// analyses have real work. Not Google Benchmark: one run with a warm-up.
//
//   ingest_bench [--senders 8] [--rate 500000] [--seconds 10] [--warmup 2]
//                [--ring-capacity 65536]   (a sender's thread ring, events)
//                [--trace-store 0]         (0: the pipeline keeps no trace store,
//                                           to see what the store costs)
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/self_cost.h"
#include "ingest/global_sender.h"
#include "ingest/ingest_server.h"
#include "pipeline/pipeline.h"
#include "producers/host_api.h"
#include "store/trace_store.h"
#include "stream/clock.h"

namespace liveprof {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int senders = 8;
  double rate = 500'000;  // events/s per sender.
  double seconds = 10;
  double warmup = 2;
  bool trace_store = true;
  size_t ring_capacity = size_t{1} << 16;  // events per thread ring in a sender (the default).
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Thread `tid`'s CPU seconds in `s` (0: not there yet).
double ThreadSeconds(const SelfCostSample& s, uint64_t tid) {
  for (const ThreadCpu& t : s.threads) {
    if (t.tid == tid) return static_cast<double>(t.cpu_ns) / 1e9;
  }
  return 0;
}

// One sender process: waits for the go byte, records for warmup + seconds,
// sends, and writes its counters to `report` (one line).
[[noreturn]] void Sender(const Args& a, const std::string& address, int rank, int go, int report) {
  char byte;
  if (::read(go, &byte, 1) != 1) std::_Exit(3);
  Stream::Options so;
  so.ring_capacity = a.ring_capacity;
  ConfigureGlobalStream(so);
  SenderOptions o;
  o.address = address;
  o.rank = rank;
  o.program = "ingest_bench";
  std::string error;
  if (!ConnectGlobalStream(o, &error)) {
    std::fprintf(stderr, "sender %d: %s\n", rank, error.c_str());
    std::_Exit(2);
  }
  const NameId step = InternName("train");
  const NameId input = InternName("IteratorGetNext");
  NameId ops[16];
  for (int i = 0; i < 16; ++i) ops[i] = InternName("op_" + std::to_string(i));
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(a.warmup + a.seconds);
  const double per_step = a.rate / 100;  // 10 ms steps.
  uint64_t recorded = 0;
  for (int64_t n = 0;; ++n) {
    const auto step_start = start + std::chrono::microseconds(10'000 * n);
    if (step_start >= end) break;
    std::this_thread::sleep_until(step_start);
    StepScope s(n, step);
    { Scope in(input, EventKind::kInputSpan); }
    // The step's ops, paced in slices of 1 ms so the rate is even.
    const uint64_t ops_in_step = static_cast<uint64_t>(per_step) - 2;
    for (int slice = 0; slice < 10; ++slice) {
      std::this_thread::sleep_until(step_start + std::chrono::microseconds(1000 * slice));
      for (uint64_t i = slice * ops_in_step / 10; i < (slice + 1) * ops_in_step / 10; ++i) {
        Scope op(ops[i & 15], EventKind::kFrameworkOp);
      }
    }
    recorded += ops_in_step + 2;
  }
  DisconnectGlobalStream(10'000'000'000);
  const SenderStatus st = GlobalSenderStatus();
  const uint64_t ring_dropped = GlobalStream().TotalDropped();
  char line[256];
  const int len =
      std::snprintf(line, sizeof line, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", recorded,
                    st.events_sent, ring_dropped, st.batches_dropped, st.batches_sent - st.batches_acked);
  [[maybe_unused]] const ssize_t w = ::write(report, line, static_cast<size_t>(len));
  std::_Exit(0);
}

int Main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (k == "--senders") a.senders = static_cast<int>(v);
    else if (k == "--rate") a.rate = v;
    else if (k == "--seconds") a.seconds = v;
    else if (k == "--warmup") a.warmup = v;
    else if (k == "--ring-capacity") a.ring_capacity = static_cast<size_t>(v);
    else if (k == "--trace-store") a.trace_store = v != 0;
    else {
      std::fprintf(stderr, "ingest_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const std::string path = "/tmp/liveprof-ingest-bench-" + std::to_string(::getpid()) + ".sock";
  // Fork first: the children must not inherit threads.
  int go[2], report[2];
  if (::pipe(go) != 0 || ::pipe(report) != 0) return 1;
  std::vector<pid_t> children;
  for (int r = 0; r < a.senders; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) Sender(a, "unix:" + path, r, go[0], report[1]);
    children.push_back(pid);
  }

  Stream stream;
  IngestServer::Options io;
  IngestEndpoint e;
  std::string error;
  ParseIngestEndpoint("unix:" + path, &e, &error);
  io.endpoints = {e};
  io.ring_capacity = size_t{1} << 18;
  IngestServer server(stream, io);
  Pipeline::Options po;
  if (!a.trace_store) po.trace_store_bytes = 0;
  Pipeline pipeline(stream, po);
  pipeline.Start();
  if (!server.Start(&error)) {
    std::fprintf(stderr, "ingest_bench: %s\n", error.c_str());
    return 1;
  }
  std::printf("ingest_bench: %d senders x %.0f events/s over %s, %.0f s (+%.0f s warm-up), sender rings of %zu\n",
              a.senders, a.rate, e.ToString().c_str(), a.seconds, a.warmup, a.ring_capacity);
  std::fflush(stdout);
  const std::string bytes(static_cast<size_t>(a.senders), 'g');
  [[maybe_unused]] const ssize_t w = ::write(go[1], bytes.data(), bytes.size());

  std::this_thread::sleep_for(std::chrono::duration<double>(a.warmup));
  const double cpu0 = CpuSeconds();
  const SelfCostSample threads0 = ReadSelfCost(0, "");
  const auto t0 = Clock::now();
  uint64_t events0 = 0;
  for (const auto& s : server.Sources()) events0 += s.events;
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  const double cpu1 = CpuSeconds();
  const SelfCostSample threads1 = ReadSelfCost(0, "");
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  uint64_t events1 = 0;
  for (const auto& s : server.Sources()) events1 += s.events;

  // The senders finish, flush and report.
  uint64_t recorded = 0, sent = 0, sender_ring_dropped = 0, unacked_dropped = 0, unacked = 0;
  FILE* in = fdopen(report[0], "r");
  for (int r = 0; r < a.senders; ++r) {
    uint64_t v[5] = {};
    if (std::fscanf(in, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &v[0], &v[1], &v[2], &v[3],
                    &v[4]) != 5) {
      std::fprintf(stderr, "ingest_bench: a sender did not report\n");
      return 1;
    }
    recorded += v[0], sent += v[1], sender_ring_dropped += v[2], unacked_dropped += v[3], unacked += v[4];
  }
  for (const pid_t pid : children) ::waitpid(pid, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last batches through the pipeline.
  uint64_t received = 0, server_ring_dropped = 0, lost_batches = 0, duplicates = 0, connects = 0;
  for (const auto& s : server.Sources()) {
    received += s.events, server_ring_dropped += s.ring_dropped, lost_batches += s.lost_batches;
    duplicates += s.duplicate_batches, connects += s.label.empty() ? 0 : 1;
  }
  const struct mallinfo2 heap = mallinfo2();  // (every arena) before the pipeline lets go of anything.
  server.Stop();
  pipeline.Stop();

  const double rate = (events1 - events0) / wall;
  const double cpu = (cpu1 - cpu0) / wall;  // cores.
  // Recorded but never taken by the server (whatever the cause: the sender
  // rings, unacknowledged or lost batches, listed apart below), plus what the
  // server took and its rings dropped. (The causes are not added to the
  // difference: they are in it already.)
  const uint64_t lost = (recorded > received ? recorded - received : 0) + server_ring_dropped;
  std::printf("recorded %" PRIu64 ", sent %" PRIu64 ", received %" PRIu64 " (%" PRIu64 " connections)\n", recorded,
              sent, received, connects);
  std::printf("lost: sender rings %" PRIu64 ", unacknowledged %" PRIu64 " (+%" PRIu64 " dropped), server rings %" PRIu64
              ", lost batches %" PRIu64 ", duplicates skipped %" PRIu64 "\n",
              sender_ring_dropped, unacked, unacked_dropped, server_ring_dropped, lost_batches, duplicates);
  std::printf("steady: %.2f M events/s into the server, its CPU %.2f cores = %.3f cores per 1 M events/s\n", rate / 1e6,
              cpu, cpu / (rate / 1e6));
  for (const ThreadCpu& t : threads1.threads) {  // (by tid)
    const double used = (static_cast<double>(t.cpu_ns) / 1e9 - ThreadSeconds(threads0, t.tid)) / wall;
    const int tid = static_cast<int>(t.tid);
    std::printf("  thread %-7d %-16s %-14s %5.1f%%\n", tid, t.name.c_str(), tid == ::getpid() ? "main" : "server",
                used * 100);
  }
  std::printf("pipeline: %" PRIu64 " publications, stream dropped %" PRIu64 "\n", pipeline.publications(),
              stream.TotalDropped());
  if (const TraceStore* store = pipeline.trace_store()) {
    const TraceStore::Stats ts = store->stats();
    std::printf("trace store: %" PRIu64 " events in %.0f MiB (%.1f bytes each), %" PRIu64 " freed by its budget\n",
                ts.events, ts.bytes / 1048576.0, ts.events ? double(ts.bytes) / ts.events : 0.0, ts.dropped_events);
  }
  std::printf("malloc: %.0f MiB in use, %.0f MiB free in its heaps, %.0f MiB mapped apart\n", heap.uordblks / 1048576.0,
              heap.fordblks / 1048576.0, heap.hblkhd / 1048576.0);
  // (the stream's drops include the server rings' counted above)
  const uint64_t total_lost =
      lost + (stream.TotalDropped() > server_ring_dropped ? stream.TotalDropped() - server_ring_dropped : 0);
  const double offered = a.senders * a.rate;
  const bool kept_up = rate >= 0.99 * offered;
  const bool pass = total_lost == 0 && kept_up;
  std::printf("%s: 0 events lost (%" PRIu64 " lost), taken as they come (%.2f of %.2f M events/s)\n",
              pass ? "PASS" : "MISS", total_lost, rate / 1e6, offered / 1e6);
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace liveprof

int main(int argc, char** argv) { return liveprof::Main(argc, argv); }
