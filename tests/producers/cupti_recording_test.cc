// The CUPTI producer on what a real GPU produced: the recordings of an
// NVIDIA H200 in ../shared/data/gpu (its README.md), read by the same
// parser as live buffers. Every expected number comes from the recording's
// truth file or from PyTorch's own profiler run of the same script.
#include "producers/cupti_recording.h"

#include <cupti_activity.h>
#include <doctest/doctest.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "import/chunk_reader.h"
#include "import/cupti_recording_file.h"
#include "import/trace_analysis.h"
#include "ingest/global_sender.h"
#include "ingest/ingest_server.h"
#include "pipeline/pipeline.h"
#include "producers/cupti_records.h"
#include "producers/host_api.h"
#include "real_traces.h"
#include "stream/clock.h"
#include "stream/stream.h"

namespace liveprof::cupti_recording_test {
namespace {

using nlohmann::json;

constexpr uint64_t kClockToleranceNs = 1000;  // the 1 us.

std::string ReadText(const std::string& path) {
  ChunkReader reader;
  std::string text;
  if (!reader.Open(path)) return text;
  std::string_view chunk;
  while (reader.Next(&chunk) && !chunk.empty()) text.append(chunk);
  return text;
}

// CUPTI 13.0's record size of each kind the H200 recordings hold (what
// cuptiActivityGetNextRecord steps by on them); 0 for another kind.
size_t RecordSize(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: return sizeof(CUpti_ActivityMemoryPool3);
    default: return 0;
  }
}

// Every event the parser makes of `recording`, through a ring as the
// producer writes them; *stats: the parser's counts.
std::vector<Event> ParseAll(const CuptiRecording& recording, Stream& stream, RecordedCupti& input,
                            CuptiRecordParser::Stats* stats = nullptr) {
  CuptiRecordParser parser(stream, input.parser_options());
  std::unique_ptr<SpscRing> ring = SpscRing::Create(size_t{1} << 20);
  std::vector<Event> events;
  for (const CuptiRecording::Buffer& b : recording.buffers) {
    const CuptiRecordParser::Result r = parser.Parse(b.data(), b.size, *ring);
    CHECK(r.complete);
    CHECK(r.ring_full == 0);
    ring->Drain([&](std::span<Event> part) { events.insert(events.end(), part.begin(), part.end()); });
  }
  if (stats != nullptr) *stats = parser.stats();
  return events;
}

// "regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z" -> fields.
struct Launch {
  uint32_t regs = 0, static_shared = 0, dynamic_shared = 0;
  uint32_t grid[3] = {}, block[3] = {};
  bool operator==(const Launch&) const = default;
};
Launch ParseDetails(std::string_view text) {
  Launch l;
  const std::string s(text);
  std::sscanf(s.c_str(), "regs:%u static_shared:%u dynamic_shared:%u grid:%u,%u,%u block:%u,%u,%u", &l.regs,
              &l.static_shared, &l.dynamic_shared, &l.grid[0], &l.grid[1], &l.grid[2], &l.block[0], &l.block[1],
              &l.block[2]);
  return l;
}

struct Loop {
  CuptiRecording recording;
  json truth;
};
bool LoadLoop(Loop* loop) {
  const std::string bin = test::GpuDataPath("h200/h200_loop.bin");
  const std::string truth = test::GpuDataPath("h200/h200_loop.truth.json");
  if (bin.empty() || truth.empty()) return false;
  std::string error;
  REQUIRE_MESSAGE(ReadCuptiRecordingFile(bin, &loop->recording, &error), error);
  loop->truth = json::parse(ReadText(truth));
  return true;
}

// What the loop did, whole run, from its truth file.
struct Totals {
  uint64_t kernels = 0, copies = 0, memsets = 0;
  uint64_t mallocs = 0, frees = 0, async = 0, host = 0;  // cudaMalloc (+ before), cudaFree, pool, pinned
};
Totals TotalsOf(const json& truth) {
  const uint64_t steps = truth["steps"].get<uint64_t>();
  const json& per_step = truth["per_step"];
  const json& before = truth["before_loop"];
  Totals t;
  for (const auto& [name, k] : per_step["kernels"].items()) t.kernels += k["count"].get<uint64_t>() * steps;
  for (const auto& [dir, sizes] : per_step["memcpy"].items()) t.copies += sizes.size() * steps;
  t.memsets = per_step["memset"].size() * steps + before["memset"].size();
  t.mallocs = per_step["cudaMalloc"].size() * steps + before["cudaMalloc"].size();
  t.frees = per_step["cudaFree"].size() * steps;
  t.async = per_step["cudaMallocAsync"].size() * steps;
  t.host = before["cudaMallocHost"].size();
  return t;
}

}  // namespace

TEST_CASE("CUPTI recording (H200 loop): the file reads whole, as its README describes") {
  Loop loop;
  if (!LoadLoop(&loop)) return;
  const CuptiRecording& r = loop.recording;
  CHECK(r.cupti_version == loop.truth["cupti_version"].get<uint32_t>());
  CHECK(r.buffers.size() == loop.truth["buffers"].get<size_t>());
  size_t bytes = 0;
  for (const auto& b : r.buffers) bytes += b.size;
  CHECK(bytes == loop.truth["bytes"].get<size_t>());
  // A pair before the loop and one after each step.
  CHECK(r.clock_pairs.size() == loop.truth["steps"].get<size_t>() + 1);
  CHECK(!r.has_names);  // made with plain CUPTI calls: no liveprof names section.
}

TEST_CASE("CUPTI recording (H200 loop): every kernel, copy, memset and allocation, exact from the truth") {
  Loop loop;
  if (!LoadLoop(&loop)) return;
  const json& truth = loop.truth;
  const uint64_t steps = truth["steps"].get<uint64_t>();
  const json& per_step = truth["per_step"];
  Stream stream;
  // The loop pushed CUSTOM0 = 1000 * step + k around its launches (k = 1
  // first matmul, 2 relu, 3 second matmul): the ops are named for that.
  RecordedCupti::Options options;
  options.op_external_kind = 3;  // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0
  options.op_name = [](uint64_t id) { return "op " + std::to_string(id); };
  RecordedCupti input(loop.recording, stream.names(), options);
  CuptiRecordParser::Stats stats;
  std::vector<Event> events = ParseAll(loop.recording, stream, input, &stats);
  CHECK(stats.ring_full == 0);
  CHECK(stream.diagnostics().Get(Diag::cupti_unknown_record) == 0);
  CHECK(stream.diagnostics().Get(Diag::cupti_truncated_buffer) == 0);
  CHECK(stream.diagnostics().Get(Diag::cupti_no_timestamp) == 0);
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
  const NameTable& names = stream.names();

  SUBCASE("kernels: names by their recorded pointer, launch dims, the op of each") {
    std::map<std::string, std::vector<const Event*>> by_name;
    for (const Event& e : events) {
      if (e.kind == EventKind::kKernel) by_name[std::string(names.Get(e.name))].push_back(&e);
    }
    // Three kernels ran: three name pointers.
    REQUIRE(by_name.size() == per_step["kernels"].size());
    uint64_t total = 0;
    std::map<std::string, std::string> truth_of;  // recorded name -> truth's name
    for (const auto& [name, list] : by_name) {
      CHECK(name.starts_with("kernel 0x"));
      total += list.size();
      const Launch first = ParseDetails(names.Get(list.front()->payload.kernel.details));
      for (const Event* e : list) CHECK(ParseDetails(names.Get(e->payload.kernel.details)) == first);
      CHECK(first.regs > 0);
      // Which kernel it is: matmul by its dims; relu by its op; sgd has none.
      const NameId op = list.front()->payload.kernel.op;
      const std::string op_name = op != 0 ? std::string(names.Get(op)) : "";
      std::string which;
      if (first.grid[0] == 32) {
        which = "matmul_tiled";
      } else if (op_name.empty()) {
        which = "sgd_update";
      } else {
        which = "relu_inplace";
      }
      truth_of[name] = which;
      const json& k = per_step["kernels"][which];
      CHECK(list.size() == k["count"].get<uint64_t>() * steps);
      for (int d = 0; d < 3; ++d) {
        CHECK(first.grid[d] == k["grid"][d].get<uint32_t>());
        CHECK(first.block[d] == k["block"][d].get<uint32_t>());
      }
      CHECK(first.static_shared == k.value("static_smem", 0u));
      CHECK(first.dynamic_shared == 0);
      // The op by the external correlation id: step s's first matmul under
      // 1000 s + 1, its second under + 3, relu under + 2, sgd under none.
      for (size_t i = 0; i < list.size(); ++i) {
        const NameId got = list[i]->payload.kernel.op;
        if (which == "matmul_tiled") {
          const uint64_t s = i / 2, k_of = i % 2 == 0 ? 1 : 3;
          CHECK(std::string(names.Get(got)) == "op " + std::to_string(1000 * s + k_of));
        } else if (which == "relu_inplace") {
          CHECK(std::string(names.Get(got)) == "op " + std::to_string(1000 * i + 2));
        } else {
          CHECK(got == 0);
        }
      }
    }
    CHECK(total == TotalsOf(truth).kernels);
    std::set<std::string> found;
    for (const auto& [name, which] : truth_of) found.insert(which);
    CHECK(found.size() == 3);  // each truth kernel once
  }

  SUBCASE("copies and memsets: directions and bytes") {
    std::map<EventKind, std::map<uint64_t, uint64_t>> copies;  // kind -> bytes -> count
    std::map<uint64_t, uint64_t> memsets;
    for (const Event& e : events) {
      if (IsMemcpyKind(e.kind)) ++copies[e.kind][e.payload.copy.bytes];
      if (e.kind == EventKind::kMemset) ++memsets[e.payload.copy.bytes];
    }
    const json& m = per_step["memcpy"];
    CHECK(copies.size() == 3);
    for (const auto& [kind, key] :
         {std::pair{EventKind::kMemcpyHtoD, "HtoD"}, std::pair{EventKind::kMemcpyDtoH, "DtoH"},
          std::pair{EventKind::kMemcpyDtoD, "DtoD"}}) {
      std::map<uint64_t, uint64_t> expected;
      for (const json& b : m[key]) expected[b.get<uint64_t>()] += steps;
      CHECK(copies[kind] == expected);
    }
    std::map<uint64_t, uint64_t> expected_memsets;
    for (const json& b : per_step["memset"]) expected_memsets[b.get<uint64_t>()] += steps;
    for (const json& b : truth["before_loop"]["memset"]) expected_memsets[b.get<uint64_t>()] += 1;
    CHECK(memsets == expected_memsets);
    uint64_t n = 0;
    for (const auto& [bytes, count] : memsets) n += count;
    CHECK(n == TotalsOf(truth).memsets);
  }

  SUBCASE("allocations: cudaMalloc / cudaFree, the stream-ordered pool, pinned host memory") {
    // (allocator, kind, sub) -> bytes -> count
    std::map<std::string, std::map<uint64_t, uint64_t>> got;
    std::map<uint64_t, uint64_t> live;  // address -> bytes
    uint64_t unknown_frees = 0;
    for (const Event& e : events) {
      if (e.kind != EventKind::kAlloc && e.kind != EventKind::kFree) continue;
      const std::string key = std::string(e.kind == EventKind::kAlloc ? "alloc " : "free ") +
                              std::string(names.Get(e.name)) + " " + std::to_string(e.sub);
      ++got[key][e.payload.memory.bytes];
      if (e.kind == EventKind::kAlloc) {
        live[e.payload.memory.address] = e.payload.memory.bytes;
      } else if (live.erase(e.payload.memory.address) == 0) {
        ++unknown_frees;
      }
    }
    CHECK(unknown_frees == 0);
    const json& before = truth["before_loop"];
    std::map<uint64_t, uint64_t> malloc_bytes, free_bytes, async_bytes, host_bytes;
    for (const json& b : per_step["cudaMalloc"]) malloc_bytes[b.get<uint64_t>()] += steps;
    for (const json& b : before["cudaMalloc"]) malloc_bytes[b.get<uint64_t>()] += 1;
    for (const json& b : per_step["cudaFree"]) free_bytes[b.get<uint64_t>()] += steps;
    for (const json& b : per_step["cudaMallocAsync"]) async_bytes[b.get<uint64_t>()] += steps;
    for (const json& b : before["cudaMallocHost"]) host_bytes[b.get<uint64_t>()] += 1;
    const std::string device = std::to_string(static_cast<int>(MemoryKind::kDevice));
    const std::string pinned = std::to_string(static_cast<int>(MemoryKind::kPinned));
    CHECK(got["alloc cuda " + device] == malloc_bytes);
    CHECK(got["free cuda " + device] == free_bytes);
    CHECK(got["alloc cuda_async " + device] == async_bytes);
    CHECK(got["free cuda_async " + device] == async_bytes);
    CHECK(got["alloc cuda " + pinned] == host_bytes);
    CHECK(got.size() == 5);
  }

  SUBCASE("every event is on a track the stream defined") {
    for (const Event& e : events) {
      CHECK(e.track != 0);
      CHECK(e.track < stream.track_count());
      if (IsDeviceKind(e.kind)) CHECK(stream.track(e.track).type == TrackType::kGpuStream);
    }
  }
}

TEST_CASE("CUPTI recording (H200 loop): CUPTI's clock lands on the host's within 1 us of every recorded pair") {
  Loop loop;
  if (!LoadLoop(&loop)) return;
  Stream stream;
  RecordedCupti input(loop.recording, stream.names());
  REQUIRE(loop.recording.clock_pairs.size() > 2);
  for (const auto& [cupti, host] : loop.recording.clock_pairs) {
    const int64_t error = static_cast<int64_t>(input.clock().ToHost(cupti) - host);
    CHECK(std::abs(error) <= static_cast<int64_t>(kClockToleranceNs));
  }
  // Every kernel's begin and end as the parser wrote them, against the
  // recorded pairs themselves: the line through the two pairs around its
  // CUPTI reading (computed here, not by the ClockMap), within 1 us.
  const auto& pairs = loop.recording.clock_pairs;
  auto interpolate = [&](uint64_t cupti) {
    size_t i = 1;
    while (i + 1 < pairs.size() && pairs[i].first < cupti) ++i;
    const double f = (static_cast<double>(cupti) - static_cast<double>(pairs[i - 1].first)) /
                     (static_cast<double>(pairs[i].first) - static_cast<double>(pairs[i - 1].first));
    return static_cast<double>(pairs[i - 1].second) +
           f * (static_cast<double>(pairs[i].second) - static_cast<double>(pairs[i - 1].second));
  };
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> raw;  // corr -> CUPTI start, end
  for (const CuptiRecording::Buffer& b : loop.recording.buffers) {
    for (size_t at = 0; at + sizeof(uint32_t) <= b.size;) {
      uint32_t kind;
      std::memcpy(&kind, b.data() + at, sizeof kind);
      const size_t size = RecordSize(kind);
      REQUIRE(size != 0);
      if (kind == 10) {  // CONCURRENT_KERNEL: CUpti_ActivityKernel10
        const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(b.data() + at);
        raw[k.correlationId] = {k.start, k.end};
      }
      at += size;
    }
  }
  std::vector<Event> events = ParseAll(loop.recording, stream, input);
  size_t kernels = 0;
  double worst_ns = 0;
  for (const Event& e : events) {
    if (e.kind != EventKind::kKernel) continue;
    REQUIRE(raw.count(e.corr) == 1);
    const auto [start, end] = raw.at(e.corr);
    worst_ns = std::max({worst_ns, std::abs(static_cast<double>(e.ts) - interpolate(start)),
                         std::abs(static_cast<double>(e.end()) - interpolate(end))});
    ++kernels;
  }
  CHECK(kernels == raw.size());
  CHECK(worst_ns <= static_cast<double>(kClockToleranceNs));
  MESSAGE("worst clock error over every kernel begin and end: " << worst_ns << " ns");
}

namespace {

// The views a recording's kernels and memory show: kernel name -> count,
// and memory id -> (allocations, deallocations).
struct GpuViews {
  std::map<std::string, uint64_t> kernels;
  uint64_t kernel_count = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> memory;
  uint64_t free_unknown = 0;
};
GpuViews ReadViews(const RenderedViews& v) {
  GpuViews g;
  const json ks = json::parse(v.kernel_stats);
  g.kernel_count = ks["kernel_count"].get<uint64_t>();
  for (const json& row : ks["rows"]) g.kernels[row["kernel_name"]] += row["occurrences"].get<uint64_t>();
  const json mem = json::parse(v.memory);
  for (const json& m : mem["memories"]) {
    g.memory[m["id"]] = {m["num_allocations"].get<uint64_t>(), m["num_deallocations"].get<uint64_t>()};
  }
  const json status = json::parse(v.status);
  for (const json& d : status["diagnostics"]) {
    if (d["name"] == "free_unknown_address") g.free_unknown = d["count"].get<uint64_t>();
  }
  return g;
}

}  // namespace

TEST_CASE("CUPTI recording (H200 loop): analyze and the live path (parser -> ring -> drain loop -> analyses) agree") {
  Loop loop;
  if (!LoadLoop(&loop)) return;
  const Totals truth = TotalsOf(loop.truth);
  const std::string bin = test::GpuDataPath("h200/h200_loop.bin");
  TraceAnalysis analysis;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(bin, AnalysesOptions{}, RenderOptions{}, &analysis, &error), error);
  CHECK(analysis.report.events_out > 0);
  CHECK(analysis.report.phases["CONCURRENT_KERNEL"] == truth.kernels);
  CHECK(analysis.report.phases["MEMCPY"] == truth.copies);
  CHECK(analysis.report.phases["MEMSET"] == truth.memsets);
  CHECK(analysis.report.phases["MEMORY2"] == truth.mallocs + truth.frees + 2 * truth.async + truth.host);
  GpuViews batch = ReadViews(analysis.views);
  CHECK(batch.kernel_count == truth.kernels);
  REQUIRE(batch.kernels.size() == loop.truth["per_step"]["kernels"].size());
  std::multiset<uint64_t> counts, expected_counts;
  for (const auto& [name, n] : batch.kernels) counts.insert(n);
  for (const auto& [name, k] : loop.truth["per_step"]["kernels"].items()) {
    expected_counts.insert(k["count"].get<uint64_t>() * loop.truth["steps"].get<uint64_t>());
  }
  CHECK(counts == expected_counts);
  CHECK(batch.free_unknown == 0);
  CHECK(batch.memory["GPU:0 cuda"] == std::pair<uint64_t, uint64_t>{truth.mallocs, truth.frees});
  CHECK(batch.memory["GPU:0 cuda_async"] == std::pair<uint64_t, uint64_t>{truth.async, truth.async});
  CHECK(batch.memory["Host cuda"] == std::pair<uint64_t, uint64_t>{truth.host, 0});

  // Live: the recording played into a stream's ring while its pipeline
  // drains it, on a clock that follows the recording (each buffer is
  // "delivered" once its last event has ended, as CUPTI delivers them).
  CuptiRecording recording;
  REQUIRE_MESSAGE(ReadCuptiRecordingFile(bin, &recording, &error), error);
  Stream stream;
  std::atomic<uint64_t> clock{recording.clock_pairs.front().second};
  Pipeline::Options po;
  po.drain.clock = [&] { return clock.load(); };
  po.publish_period = std::chrono::milliseconds(10);
  po.trace_store_bytes = 0;
  po.render = RenderOptions{};
  Pipeline pipeline(stream, po);
  pipeline.Start();
  const CuptiPlayResult played = PlayCuptiRecording(
      recording, stream, {}, [&](size_t, uint64_t max_end) { clock.store(std::max(clock.load(), max_end)); });
  CHECK(played.complete);
  CHECK(played.buffers == recording.buffers.size());
  // Time goes on past the reorder window (a clock that stood still would
  // leave the last batch unpublished: publications follow batches).
  clock.store(played.max_end_ns + 2'000'000'000);
  std::shared_ptr<const PipelineSnapshot> last;
  for (int i = 0; i < 1000; ++i) {
    last = pipeline.Latest();
    if (last != nullptr && last->metrics.events_consumed >= played.events) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    clock.fetch_add(10'000'000);
  }
  pipeline.Stop();
  REQUIRE(last != nullptr);
  REQUIRE(last->metrics.events_consumed == played.events);
  const GpuViews live = ReadViews(last->views);
  CHECK(live.kernel_count == batch.kernel_count);
  CHECK(live.kernels == batch.kernels);
  CHECK(live.memory == batch.memory);
  CHECK(live.free_unknown == 0);
  CHECK(stream.diagnostics().Get(Diag::late_events) == 0);
}

TEST_CASE("CUPTI recording (H200 loop): through a sender and an ingest server, the same views, nothing refused") {
  const std::string bin = test::GpuDataPath("h200/h200_loop.bin");
  if (bin.empty()) return;
  TraceAnalysis analysis;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(bin, AnalysesOptions{}, RenderOptions{}, &analysis, &error), error);
  GpuViews batch = ReadViews(analysis.views);
  REQUIRE(batch.kernel_count > 0);

  // The server: `liveprof serve --ingest unix:PATH`'s parts.
  const std::string path = "/tmp/liveprof-cupti-recording-test-" + std::to_string(::getpid()) + ".sock";
  Stream server_stream;
  IngestServer::Options io;
  IngestEndpoint endpoint;
  REQUIRE_MESSAGE(ParseIngestEndpoint("unix:" + path, &endpoint, &error), error);
  io.endpoints = {endpoint};
  io.ping_interval_ns = 50'000'000;
  IngestServer server(server_stream, io);
  REQUIRE_MESSAGE(server.Start(&error), error);
  Pipeline::Options po;
  po.publish_period = std::chrono::milliseconds(20);
  po.trace_store_bytes = 0;
  // A CUPTI ring cannot say how far it got: the server's window decides
  // when its events are in order. 2 s: slow machines (TSan, a loaded CI)
  // must not make them late, which would reorder a free before its alloc.
  po.drain.reorder.window_ns = 2'000'000'000;
  Pipeline pipeline(server_stream, po);
  pipeline.Start();

  // The profiled process: its CUPTI buffers (the recording, played now: its
  // first clock pair 100 ms from now, so that a slow machine's sender and
  // server (TSan) still take them inside the reorder window) parsed into
  // GlobalStream()'s ring, sent.
  SenderOptions so;
  so.address = "unix:" + path;
  so.rank = 5;
  REQUIRE_MESSAGE(ConnectGlobalStream(so, &error), error);
  CuptiRecording recording;
  REQUIRE_MESSAGE(ReadCuptiRecordingFile(bin, &recording, &error), error);
  RecordedCupti::Options ro;
  ro.host_shift_ns =
      static_cast<int64_t>(HostNowNs() + 100'000'000) - static_cast<int64_t>(recording.clock_pairs.front().second);
  const CuptiPlayResult played = PlayCuptiRecording(recording, GlobalStream(), ro);
  CHECK(played.complete);

  std::shared_ptr<const PipelineSnapshot> last;
  GpuViews got;
  // Until every view has all of it (or 20 s).
  for (int i = 0; i < 2000; ++i) {
    last = pipeline.Latest();
    if (last != nullptr) {
      got = ReadViews(last->views);
      if (got.kernel_count >= batch.kernel_count && got.kernels == batch.kernels && got.memory == batch.memory) {
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  DisconnectGlobalStream();
  const std::vector<IngestServer::SourceStatus> sources = server.Sources();
  pipeline.Stop();
  server.Stop();
  REQUIRE(last != nullptr);
  CHECK(got.kernel_count == batch.kernel_count);
  CHECK(got.kernels == batch.kernels);
  CHECK(got.memory == batch.memory);
  CHECK(got.free_unknown == 0);
  // Nothing refused, nothing late, one connection.
  REQUIRE(sources.size() == 1);
  CHECK(sources[0].refused_events == 0);
  CHECK(GlobalSenderStatus().connects == 1);
  CHECK(GlobalSenderStatus().events_refused == 0);
  CHECK(server_stream.diagnostics().Get(Diag::late_events) == 0);
}

TEST_CASE("CUPTI recording (ResNet-18 injected): per kernel name, the counts torch.profiler counted") {
  const std::string bin = test::GpuDataPath("h200/resnet18_8steps_injected.bin.gz");
  const std::string trace = test::GpuDataPath("h200/resnet18_8steps.pt.trace.json.gz");
  const std::string averages = test::GpuDataPath("h200/resnet18_8steps.torch_profiler.key_averages.json");
  if (bin.empty() || trace.empty() || averages.empty()) return;
  CuptiRecording recording;
  std::string error;
  REQUIRE_MESSAGE(ReadCuptiRecordingFile(bin, &recording, &error), error);
  Stream stream;
  RecordedCupti input(recording, stream.names());
  CuptiRecordParser::Stats stats;
  std::vector<Event> events = ParseAll(recording, stream, input, &stats);
  // The README's census, by kind.
  CHECK(stats.by_kind[10] == 3006);  // CONCURRENT_KERNEL
  CHECK(stats.by_kind[1] == 200);    // MEMCPY
  CHECK(stats.by_kind[2] == 68);     // MEMSET
  // (The data's README has these two swapped; CUPTI's own walk,
  // cuptiActivityGetNextRecord, reads kind 5 RUNTIME 36,618 times and kind 4
  // DRIVER 13,351 times, as the parser does.)
  CHECK(stats.by_kind[5] == 36618);  // RUNTIME
  CHECK(stats.by_kind[4] == 13351);  // DRIVER
  CHECK(stats.by_kind[38] == 138);   // SYNCHRONIZATION
  CHECK(stats.by_kind[49] == 982);   // MEMORY2
  CHECK(stats.by_kind[17] == 97);    // OVERHEAD
  for (const Event& e : events) REQUIRE((e.track != 0 && e.track < stream.track_count()));

  // CUPTI's own overhead (its cost per step, HookTotals): of the 97 OVERHEAD
  // records, the 10 of CUPTI's own work (resource 4, instrumentation 2,
  // buffer request 3, buffer flush 1); the rest is CUDA's lazy module and
  // function loading. Their time, as the parser sums it from the records,
  // is the time of their spans on the host clock.
  {
    const std::set<std::string_view> own = {"CUPTI overhead: resource", "CUPTI overhead: instrumentation",
                                            "CUPTI overhead: buffer request", "CUPTI overhead: buffer flush"};
    uint64_t spans = 0, span_ns = 0, all_overhead = 0;
    for (const Event& e : events) {
      const std::string_view name = stream.names().Get(e.name);
      all_overhead += name.starts_with("CUPTI overhead");
      if (own.contains(name)) {
        ++spans;
        span_ns += e.dur;
      }
    }
    CHECK(all_overhead == 97);
    CHECK(spans == 10);
    CHECK(stats.cupti_overheads == 10);
    MESSAGE("CUPTI's own overhead over 8 steps: " << stats.cupti_overhead_ns / 1e6 << " ms");
    CHECK(stats.cupti_overhead_ns > 20'000'000);  // 23.8 ms, most of it the first buffer requests.
    CHECK(static_cast<double>(stats.cupti_overhead_ns) == doctest::Approx(static_cast<double>(span_ns)).epsilon(1e-4));
  }

  // The recorded kernels in launch order, with their launch configuration.
  std::vector<const Event*> kernels;
  for (const Event& e : events) {
    if (e.kind == EventKind::kKernel) kernels.push_back(&e);
  }
  std::stable_sort(kernels.begin(), kernels.end(), [](const Event* a, const Event* b) { return a->corr < b->corr; });
  // PyTorch's trace of the same script: its kernels, by launch order.
  struct TorchKernel {
    int64_t corr;
    std::string name;
    Launch launch;
  };
  std::vector<TorchKernel> torch;
  const json torch_trace = json::parse(ReadText(trace));
  for (const json& e : torch_trace["traceEvents"]) {
    if (e.value("cat", "") != "kernel") continue;
    const json& a = e["args"];
    TorchKernel k{a["correlation"].get<int64_t>(), e["name"], {}};
    k.launch.regs = a["registers per thread"].get<uint32_t>();
    for (int d = 0; d < 3; ++d) {
      k.launch.grid[d] = a["grid"][d].get<uint32_t>();
      k.launch.block[d] = a["block"][d].get<uint32_t>();
    }
    k.launch.static_shared = a["shared memory"].get<uint32_t>();  // static + dynamic (Kineto's sum)
    torch.push_back(std::move(k));
  }
  std::stable_sort(torch.begin(), torch.end(),
                   [](const TorchKernel& a, const TorchKernel& b) { return a.corr < b.corr; });
  REQUIRE(kernels.size() == torch.size());
  // The two runs launched the same kernels in the same order: each pair
  // agrees on its whole launch configuration, and one recorded name
  // pointer is always one PyTorch name.
  std::map<std::string, std::string> name_of;  // recorded -> PyTorch's
  size_t mismatched = 0, ambiguous = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    Launch l = ParseDetails(stream.names().Get(kernels[i]->payload.kernel.details));
    l.static_shared += l.dynamic_shared;
    l.dynamic_shared = 0;
    if (!(l == torch[i].launch)) ++mismatched;
    const auto [it, fresh] = name_of.try_emplace(std::string(stream.names().Get(kernels[i]->name)), torch[i].name);
    if (!fresh && it->second != torch[i].name) ++ambiguous;
  }
  CHECK(mismatched == 0);
  CHECK(ambiguous == 0);
  CHECK(name_of.size() == 58);

  // The kernel stats view of `liveprof analyze` on the recording, named
  // through that correspondence, against torch.profiler's key_averages.
  TraceAnalysis analysis;
  REQUIRE_MESSAGE(AnalyzeTrace(bin, AnalysesOptions{}, RenderOptions{}, &analysis, &error), error);
  const GpuViews views = ReadViews(analysis.views);
  CHECK(views.kernel_count == 3006);
  std::map<std::string, uint64_t> ours;
  for (const auto& [name, n] : views.kernels) {
    REQUIRE(name_of.count(name) == 1);
    ours[name_of[name]] += n;
  }
  std::set<std::string> kernel_names;
  for (const TorchKernel& k : torch) kernel_names.insert(k.name);
  std::map<std::string, uint64_t> theirs;
  for (const json& row : json::parse(ReadText(averages))) {
    if (kernel_names.count(row["name"])) theirs[row["name"]] += row["count"].get<uint64_t>();
  }
  CHECK(theirs.size() == 58);
  CHECK(ours == theirs);
  CHECK(views.free_unknown == 0);
}

}  // namespace liveprof::cupti_recording_test
