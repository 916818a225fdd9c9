// The trace store's run folder (trace_store.h, trace_segments.h): chunks
// spilled past the memory budget and read back, a run reopened, a torn or
// damaged segment, the disk budget, and a kill -9 in the middle of a run.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "aggregators/trace_samples.h"
#include "producers/stderr_capture.h"
#include "store/trace_store.h"

namespace liveprof::trace_store_disk_test {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the system's temporary one, removed after.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "liveprof-run-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path() const { return path_; }
  std::string run() const { return path_ + "/run"; }  // not there yet: Create makes it.

 private:
  std::string path_;
};

TraceStore::Options InFolder(const std::string& dir, uint64_t max_bytes, uint64_t segment_bytes = 256 * 1024) {
  TraceStore::Options o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.segment_bytes = segment_bytes;
  return o;
}

std::vector<fs::path> Segments(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".lps") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Queries a store answers as it should: the whole range, a middle and a
// deep zoom, and random views.
std::vector<TraceQuery> SomeQueries(uint64_t end, uint64_t seed) {
  std::vector<TraceQuery> q = {
      {{}, 0, end, 2000}, {{}, end / 2, end / 2 + end / 40, 1500}, {{}, end / 3, end / 3 + 20'000, 1000}};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 8; ++i) {
    const uint64_t a = rng() % end, len = 1 + rng() % (end >> (rng() % 14));
    q.push_back({{}, a, a + len, static_cast<uint32_t>(1 + rng() % 2500)});
  }
  return q;
}

// Every event of `store` by track, in arrival order (ForEach).
std::map<TrackId, std::vector<Event>> ByTrack(const TraceStore& store) {
  std::map<TrackId, std::vector<Event>> out;
  store.ForEach(0, UINT64_MAX, {}, [&](StoredEventId id, const Event& e) {
    if (id != kNoEventId) out[e.track].push_back(e);
  });
  return out;
}

bool SameEvent(const Event& a, const Event& b) {
  return a.ts == b.ts && a.dur == b.dur && a.name == b.name && a.kind == b.kind && a.corr == b.corr &&
         a.payload.raw[0] == b.payload.raw[0] && a.payload.raw[1] == b.payload.raw[1];
}

TEST_CASE("trace store disk: chunks past the memory budget are read back from the run folder") {
  TempDir tmp;
  const Trace trace = MakeTrace(31, 3, 60'000, 5'000);
  // Small segments: more than the 32 whose files stay open (older ones are
  // opened per read).
  TraceStore store(InFolder(tmp.run(), 100'000, 24 * 1024));
  std::string error;
  REQUIRE(store.Create(&error));
  AppendInBatches(store, trace, 900);
  const TraceStore::Stats s = store.stats();
  CHECK(s.events == trace.events.size());
  CHECK(s.dropped_events == 0);  // on disk, not dropped.
  CHECK(s.spilled_chunks > s.chunks / 2);
  CHECK(s.segments > 40);
  CHECK(s.disk_bytes > 400'000);
  CHECK(s.bytes < 100'000 + 64 * 1024 + s.chunks * 240);  // the budget, open chunks, the index, the mipmaps.
  CHECK(s.spill_error.empty());
  const std::vector<Event> all = WithDerived(trace.events);
  for (const TraceQuery& q : SomeQueries(s.last_ns, 31)) {
    CAPTURE(q.t0);
    CAPTURE(q.t1);
    ExpectSame(store.Query(q), BruteForce(all, q));
  }
  // Every event by id, from RAM or disk, whole.
  std::map<TrackId, uint64_t> index;
  for (const Event& e : trace.events) {
    const std::optional<Event> got = store.Get((uint64_t{e.track} << 40) | index[e.track]++);
    REQUIRE(got.has_value());
    CHECK(SameEvent(*got, e));
  }
  const auto found = store.Search("name_5", 0, true);
  REQUIRE(found.has_value());
  uint64_t first = UINT64_MAX;
  for (const Event& e : trace.events) first = e.name == 5 ? std::min(first, e.ts) : first;
  CHECK(found->second.ts == first);
  CHECK(store.stats().read_errors == 0);
}

TEST_CASE("trace store disk: a run folder read back holds every event, names and tracks") {
  TempDir tmp;
  Trace trace = MakeTrace(32, 2, 20'000);
  trace.defs.push_back(TrackDefEvent(3, TrackInfo{/*name=*/4, TrackType::kGpuStream, /*os_id=*/7, /*device=*/1}));
  Event device;
  device.kind = EventKind::kDeviceInfo;
  device.device = 1;
  device.payload.device_info.sm_count = 108;
  trace.events.insert(trace.events.begin(), device);
  // A track of a type this build does not know (a newer writer's): read back
  // as a plain row, and said.
  trace.defs.push_back(TrackDefEvent(60, TrackInfo{5, static_cast<TrackType>(9), 1, 0}));
  Event on_it = trace.events.back();
  on_it.kind = EventKind::kHostSpan, on_it.track = 60, on_it.ts = on_it.end(), on_it.dur = 10, on_it.corr = 0;
  on_it.payload.raw[0] = on_it.payload.raw[1] = 0;
  trace.events.push_back(on_it);
  {
    TraceStore store(InFolder(tmp.run(), UINT64_MAX));
    std::string error;
    REQUIRE(store.Create(&error));
    AppendInBatches(store, trace, 1000);
  }  // a clean stop: the open chunks are written too.
  TraceStore reopened(InFolder(tmp.run(), 0));
  std::string error;
  REQUIRE(reopened.Open(&error));
  const std::vector<std::string> problems = reopened.problems();
  REQUIRE(!problems.empty());
  for (const std::string& p : problems) {
    CHECK(p.ends_with(": track 60: type 9 unknown, shown as a host thread"));  // (once per segment)
  }
  bool plain = false;
  for (const auto& [id, info] : reopened.Tracks()) plain |= id == 60 && info.type == TrackType::kHostThread;
  CHECK(plain);
  const TraceStore::Stats s = reopened.stats();
  CHECK(s.events == trace.events.size() - 1);  // the device's description is not on a timeline.
  CHECK(reopened.Name(7) == "name_7");
  bool found_track = false;
  for (const auto& [id, info] : reopened.Tracks()) {
    if (id == 3) found_track = info.type == TrackType::kGpuStream && info.os_id == 7 && info.name == 4;
  }
  CHECK(found_track);
  // The events, in arrival order per track, as they went in.
  std::map<TrackId, std::vector<Event>> want;
  for (const Event& e : trace.events) {
    if (e.kind != EventKind::kDeviceInfo) want[e.track].push_back(e);
  }
  const auto got = ByTrack(reopened);
  REQUIRE(got.size() == want.size());
  for (const auto& [track, events] : want) {
    REQUIRE(got.at(track).size() == events.size());
    for (size_t i = 0; i < events.size(); ++i) CHECK(SameEvent(got.at(track)[i], events[i]));
  }
  int devices = 0;
  reopened.ForEach(0, 1, {}, [&](StoredEventId id, const Event& e) {
    devices += id == kNoEventId && e.payload.device_info.sm_count == 108;
  });
  CHECK(devices == 1);
  const std::vector<Event> all =
      WithDerived(std::vector<Event>(trace.events.begin() + 1, trace.events.end()), /*stopped=*/true);
  for (const TraceQuery& q : SomeQueries(s.last_ns, 32)) ExpectSame(reopened.Query(q), BruteForce(all, q));
  // Read-only: appends are ignored.
  reopened.Append({}, std::span<const Event>(trace.events.data() + 1, 10));
  CHECK(reopened.stats().events == s.events);
}

TEST_CASE("trace store disk: a torn or damaged segment loses only its own records, and says where") {
  TempDir tmp;
  const Trace trace = MakeTrace(33, 2, 30'000);
  {
    TraceStore store(InFolder(tmp.run(), UINT64_MAX, 128 * 1024));
    std::string error;
    REQUIRE(store.Create(&error));
    AppendInBatches(store, trace, 2000);
  }
  const std::vector<fs::path> segments = Segments(tmp.run());
  REQUIRE(segments.size() >= 3);
  // The last record cut short, as a kill in the middle of a write leaves it.
  fs::resize_file(segments.back(), fs::file_size(segments.back()) - 10);
  // A byte flipped in the middle of the first segment.
  {
    std::fstream f(segments.front(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(60'000);
    char c = 0;
    f.get(c);
    f.seekp(60'000);
    f.put(static_cast<char>(c ^ 0x40));
  }
  TraceStore reopened(InFolder(tmp.run(), 0));
  std::string error;
  REQUIRE(reopened.Open(&error));
  const std::vector<std::string> problems = reopened.problems();
  REQUIRE(problems.size() >= 2);
  bool cut = false, damaged = false;
  for (const std::string& p : problems) {
    cut |= p.find("cut short") != std::string::npos && p.find(segments.back().filename().string()) != std::string::npos;
    damaged |= p.find("checksum") != std::string::npos;
  }
  CHECK(cut);
  CHECK(damaged);
  // The rest is there: a first segment's tail and a last chunk are lost, at
  // most one segment's worth, and what is left is whole.
  const uint64_t events = reopened.stats().events;
  CHECK(events < trace.events.size());
  CHECK(events > trace.events.size() / 2);
  CHECK(ProducerEvents(reopened.Query({{}, 0, reopened.stats().last_ns + 1, 700})) <= events);
  CHECK(reopened.stats().read_errors == 0);

  // No run there, or a run there already: clear errors.
  TraceStore nothing(InFolder(tmp.path() + "/none", 0));
  CHECK(!nothing.Open(&error));
  CHECK(error.find("holds no trace segments") != std::string::npos);
  TraceStore again(InFolder(tmp.run(), 0));
  CHECK(!again.Create(&error));
  CHECK(error.find("holds a run already") != std::string::npos);
}

TEST_CASE("trace store disk: past its disk budget the oldest segments go, and it says so") {
  TempDir tmp;
  const Trace trace = MakeTrace(34, 2, 80'000);
  TraceStore::Options o = InFolder(tmp.run(), 50'000, 64 * 1024);
  o.max_disk_bytes = 300'000;
  TraceStore store(o);
  std::string error;
  REQUIRE(store.Create(&error));
  AppendInBatches(store, trace, 1000);
  const TraceStore::Stats s = store.stats();
  CHECK(s.disk_bytes <= o.max_disk_bytes + o.segment_bytes);
  CHECK(s.segments == Segments(tmp.run()).size());
  CHECK(s.dropped_events > trace.events.size() / 3);
  CHECK(s.dropped_until_ns > 0);
  const uint64_t seen = ProducerEvents(store.Query({{}, 0, s.last_ns + 1, 900}));
  CHECK(seen == s.events - s.dropped_events);
  uint64_t each = 0;
  store.ForEach(0, UINT64_MAX, {}, [&](StoredEventId, const Event&) { ++each; });
  CHECK(each == seen);
  CHECK(s.read_errors == 0);
}

TEST_CASE("trace store disk: when the folder stops taking chunks, what it lost is gone from queries too") {
  TempDir tmp;
  const Trace trace = MakeTrace(36, 2, 60'000);
  TraceStore store(InFolder(tmp.run(), 60'000, 64 * 1024));
  std::string error;
  REQUIRE(store.Create(&error));
  // Segment 2 is there already: the first rotation fails, and the log with it.
  std::ofstream(tmp.run() + "/seg-00000002.lps") << "in the way";
  {
    StderrCapture console;
    AppendInBatches(store, trace, 1000);
    // Said once on the console, with the path.
    const std::string said = console.Text();
    CHECK(said.find("liveprof: the trace folder takes no more events: ") != std::string::npos);
    CHECK(said.find("seg-00000002.lps") != std::string::npos);
    CHECK(said.find("the trace folder") == said.rfind("the trace folder"));
  }
  const TraceStore::Stats s = store.stats();
  CHECK(s.spill_error.find("seg-00000002.lps") != std::string::npos);
  CHECK(s.dropped_events > trace.events.size() / 3);
  // Every query agrees with what is left: the lost chunks are out of the index.
  CHECK(ProducerEvents(store.Query({{}, 0, s.last_ns + 1, 800})) == s.events - s.dropped_events);
  uint64_t each = 0;
  store.ForEach(0, UINT64_MAX, {}, [&](StoredEventId id, const Event&) { each += id != kNoEventId; });
  CHECK(each == s.events - s.dropped_events);
  CHECK(store.Search("name_3", s.last_ns / 2, true).has_value());  // in what is left.
  CHECK(store.stats().read_errors == 0);
}

// The child appends the trace batch by batch and tells the parent, after
// each, how many events it has appended; the parent kills it with SIGKILL
// after some batches, wherever it is, then reads the folder back: every
// event of the batches it was told of must be there, as it went in: the
// sealed chunks' and the open ones' (their tail records). The
// segments are small: each new one restates the open chunks.
TEST_CASE("trace store disk: a kill -9 loses no event appended, sealed or in an open chunk") {
  TempDir tmp;
  const Trace trace = MakeTrace(35, 3, 200'000);
  constexpr size_t kBatch = 500;
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(pipe_fds[0]);
    TraceStore* store = new TraceStore(InFolder(tmp.run(), 200'000, 512 * 1024));  // never destroyed.
    std::string error;
    if (!store->Create(&error)) _exit(3);
    for (size_t i = 0; i < trace.events.size(); i += kBatch) {
      store->Append(i == 0 ? std::span<const Event>(trace.defs) : std::span<const Event>(),
                    std::span<const Event>(trace.events.data() + i, std::min(kBatch, trace.events.size() - i)));
      const uint64_t appended = std::min(i + kBatch, trace.events.size());
      if (write(pipe_fds[1], &appended, sizeof appended) != sizeof appended) _exit(4);
    }
    for (;;) pause();  // killed here at the latest.
  }
  close(pipe_fds[1]);
  uint64_t told = 0;
  for (int batches = 0; batches < 400; ++batches) {
    REQUIRE(read(pipe_fds[0], &told, sizeof told) == sizeof told);
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  close(pipe_fds[0]);
  CHECK(WIFSIGNALED(status));

  TraceStore reopened(InFolder(tmp.run(), 0));
  std::string error;
  REQUIRE(reopened.Open(&error));
  std::map<TrackId, std::vector<Event>> sent;  // per track, the first `told` events.
  for (size_t i = 0; i < told; ++i) sent[trace.events[i].track].push_back(trace.events[i]);
  const auto got = ByTrack(reopened);
  for (const auto& entry : sent) {
    const auto& track = entry.first;
    const auto& events = entry.second;
    CAPTURE(track);
    REQUIRE(got.count(track) == 1);
    const std::vector<Event>& back = got.at(track);
    CHECK(back.size() >= events.size());
    // What came back is the track's events from the first, in order (the
    // child went on after what it told, so there may be more).
    std::vector<Event> all_of_track;
    for (const Event& e : trace.events) {
      if (e.track == track) all_of_track.push_back(e);
    }
    REQUIRE(back.size() <= all_of_track.size());
    for (size_t i = 0; i < back.size(); ++i) REQUIRE(SameEvent(back[i], all_of_track[i]));
  }
  CHECK(reopened.stats().events >= told);
  CHECK(reopened.problems().empty());
}

}  // namespace
}  // namespace liveprof::trace_store_disk_test
