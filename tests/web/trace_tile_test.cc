// Trace-viewer tiles (web/trace_tile.h): a real TraceStore's viewport,
// encoded as a binary Frame{TraceTile}, passes the FlatBuffers verifier and
// decodes back to the query's answer field for field, and to the JSON
// /api/trace gives for the same query; the grid is the answer's, never
// recomputed; a `trace` request is answered from the store or refused with
// its id. The control message's decoding is in trace_request_test.cc.
#include "web/trace_tile.h"

#include <doctest/doctest.h>
#include <flatbuffers/flatbuffers.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "stream/liveprof_generated.h"
#include "stream/stream.h"
#include "web/trace_api.h"

namespace liveprof::trace_tile_test {
namespace {

using nlohmann::json;

// The layouts static/trace/tile_reader.js reads by hand.
static_assert(sizeof(wire::TileSlice) == 32);
static_assert(sizeof(wire::TileSummary) == 24);
static_assert(sizeof(wire::TileCounterValue) == 16);
static_assert(sizeof(wire::TileFlow) == 16);
static_assert(sizeof(wire::TileFlowEnd) == 40);
static_assert(static_cast<uint8_t>(wire::Body::TraceTile) == 2);

constexpr uint64_t kBase = 1'000'000'000;  // the fixture's first ns.
constexpr uint64_t kStepNs = 2'000'000;
constexpr uint64_t kLaunchEvery = 100'000;
constexpr uint64_t kLaunchNs = 10'000;  // a slice at the widths below (a pixel is at most 4096 ns)
constexpr uint64_t kKernelNs = 60'000;
constexpr uint64_t kTinyNs = 20;  // folded at any width below ~100'000 px.
constexpr uint32_t kRequestId = 4'000'000'007;

constexpr TrackId kHost = 1, kStream = 2, kCounterTrack = 3, kUndefined = 4;
enum : NameId { kStep = 1, kMatmul, kLaunch, kTiny, kTrainer, kStreamName, kQueueDepth, kGhost, kAllocator };

// Names, three defined tracks and one with no definition; a step on the host
// with launches (flows to their kernels on the stream) and tiny spans, a
// counter's samples, device allocations (the GPU's Memory in use row), a
// few spans on the undefined track. In completion order.
struct Fixture {
  std::vector<std::string> names = {"",         "train_step",  "matmul", "cudaLaunchKernel", "tiny", "trainer",
                                    "stream 7", "queue depth", "ghost",  "gpu0_bfc"};
  std::vector<Event> defs, events;
  TraceStore store;

  Fixture() {
    for (NameId n = 0; n < names.size(); ++n) defs.push_back(NameDefEvent(n, names[n]));
    defs.push_back(TrackDefEvent(kHost, TrackInfo{kTrainer, TrackType::kHostThread, 4242, 0}));
    defs.push_back(TrackDefEvent(kStream, TrackInfo{kStreamName, TrackType::kGpuStream, 7, 1}));
    defs.push_back(TrackDefEvent(kCounterTrack, TrackInfo{kQueueDepth, TrackType::kCounter, 0, 0}));
    const auto add = [&](EventKind kind, TrackId track, NameId name, uint64_t ts, uint64_t dur) -> Event& {
      Event e;
      e.kind = kind, e.track = track, e.name = name, e.ts = ts, e.dur = dur;
      return events.emplace_back(e);
    };
    uint32_t corr = 100;
    for (uint64_t at = kBase + 1000; at + kLaunchNs + kKernelNs < kBase + kStepNs; at += kLaunchEvery) {
      add(EventKind::kRuntimeApi, kHost, kLaunch, at, kLaunchNs).corr = corr;
      Event& k = add(EventKind::kKernel, kStream, kMatmul, at + kLaunchNs, kKernelNs);
      k.corr = corr++, k.device = 1;
      for (uint64_t t = at + kLaunchNs + 100; t < at + kLaunchEvery - 1000; t += 997) {
        add(EventKind::kHostSpan, kHost, kTiny, t, kTinyNs + t % 7);
      }
    }
    add(EventKind::kHostSpan, kHost, kStep, kBase, kStepNs);
    for (uint64_t i = 0; i < 300; ++i) {
      add(EventKind::kCounter, kCounterTrack, kQueueDepth, kBase + i * 6'661, 0).payload.counter.value =
          static_cast<double>(i % 17) * 1.25 - 7;
      Event& m = add(i % 3 == 2 ? EventKind::kFree : EventKind::kAlloc, kHost, kAllocator, kBase + i * 6'007, 0);
      m.device = 1, m.sub = static_cast<uint8_t>(MemoryKind::kDevice);
      m.payload.memory = {0x1000 + (i % 3 == 2 ? i - 1 : i) * 256, uint64_t{1} << (10 + i % 9)};
    }
    for (uint64_t i = 0; i < 20; ++i) add(EventKind::kHostSpan, kUndefined, kGhost, kBase + i * 90'001, 50'000);
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
    store.Append(defs, events);
  }
};

// The frame's TraceTile, after the verifier said the frame is sound.
const wire::TraceTile* Verified(const std::string& frame) {
  const auto* data = reinterpret_cast<const uint8_t*>(frame.data());
  flatbuffers::Verifier verifier(data, frame.size());
  REQUIRE(wire::VerifyFrameBuffer(verifier));  // the file identifier too
  const wire::Frame* f = wire::GetFrame(data);
  CHECK(f->version() == kFrameVersion);
  REQUIRE(f->body_type() == wire::Body::TraceTile);
  return f->body_as_TraceTile();
}

std::string_view Str(const flatbuffers::String* s) { return s == nullptr ? "" : s->string_view(); }

// `tile` says what `r`, `stats` and the store say, field for field.
void ExpectTileIs(const wire::TraceTile& tile, uint32_t id, const TraceQueryResult& r, const TraceStore::Stats& stats,
                  const TraceStore& store) {
  CHECK(tile.id() == id);
  CHECK(tile.t0() == r.t0);
  CHECK(tile.t1() == r.t1);
  CHECK(tile.width_px() == r.width_px);
  CHECK(tile.ns_per_px() == r.ns_per_px);
  CHECK(tile.first_ns() == stats.first_ns);
  CHECK(tile.last_ns() == stats.last_ns);
  CHECK(tile.events() == stats.events);
  CHECK(tile.dropped_events() == stats.dropped_events);
  CHECK(tile.unstored_events() == stats.unstored_events);
  CHECK(tile.disk_bytes() == stats.disk_bytes);
  CHECK(tile.spilled_chunks() == stats.spilled_chunks);
  CHECK(tile.read_errors() == stats.read_errors);
  CHECK(tile.spill_error() == nullptr);
  const TileTracks described(store);
  REQUIRE(tile.tracks()->size() == r.tracks.size());
  for (size_t t = 0; t < r.tracks.size(); ++t) {
    const TraceQueryResult::Track& want = r.tracks[t];
    const wire::TileTrack& got = *tile.tracks()->Get(static_cast<flatbuffers::uoffset_t>(t));
    CAPTURE(want.track);
    const TileTrackInfo info = described.Describe(want.track);
    CHECK(got.track() == want.track);
    CHECK(static_cast<uint8_t>(got.type()) == static_cast<uint8_t>(info.type));
    CHECK(Str(got.name()) == info.name);
    CHECK(got.device() == info.device);
    CHECK(got.os_id() == info.os_id);
    REQUIRE(got.slices()->size() == want.slices.size());
    for (size_t i = 0; i < want.slices.size(); ++i) {
      const wire::TileSlice& s = *got.slices()->Get(static_cast<flatbuffers::uoffset_t>(i));
      const TraceQueryResult::Slice& w = want.slices[i];
      CHECK(s.id() == w.id);
      CHECK(s.ts() == w.ts);
      CHECK(s.dur() == w.dur);
      CHECK(s.name() == w.name);
      CHECK(s.depth() == w.depth);
      CHECK(s.kind() == static_cast<uint8_t>(w.kind));
    }
    REQUIRE((got.held() != nullptr) == want.held);
    if (want.held) {
      CHECK(got.held()->ts() == want.held_ts);
      CHECK(got.held()->value() == want.held_value);
    }
    REQUIRE(got.summaries()->size() == want.summaries.size());
    REQUIRE((got.values() != nullptr) == info.counter());
    if (info.counter()) REQUIRE(got.values()->size() == want.summaries.size());
    for (size_t i = 0; i < want.summaries.size(); ++i) {
      const auto n = static_cast<flatbuffers::uoffset_t>(i);
      const wire::TileSummary& s = *got.summaries()->Get(n);
      const TraceQueryResult::Summary& w = want.summaries[i];
      CHECK(s.px() == w.px);
      CHECK(s.count() == w.count);
      CHECK(s.busy_e4() == BusyTenThousandths(w.busy));
      CHECK(std::abs(s.busy_e4() / 1e4 - w.busy) <= 0.5e-4 + 1e-12);  // rounded, not cut
      CHECK(s.longest() == w.longest);
      CHECK(s.longest_dur() == w.longest_dur);
      if (info.counter()) {
        CHECK(got.values()->Get(n)->max_value() == w.max_value);
        CHECK(got.values()->Get(n)->last_value() == w.last_value);
      }
    }
  }
  REQUIRE(tile.flows()->size() == r.flows.size());
  for (size_t i = 0; i < r.flows.size(); ++i) {
    CHECK(tile.flows()->Get(static_cast<flatbuffers::uoffset_t>(i))->from() == r.flows[i].from);
    CHECK(tile.flows()->Get(static_cast<flatbuffers::uoffset_t>(i))->to() == r.flows[i].to);
  }
  const std::vector<NameId> used = UsedNames(r);
  REQUIRE(tile.names()->size() == used.size());
  for (size_t i = 0; i < used.size(); ++i) {
    const wire::NameDef& n = *tile.names()->Get(static_cast<flatbuffers::uoffset_t>(i));
    CHECK(n.id() == used[i]);
    CHECK(Str(n.name()) == store.Name(used[i]));
  }
}

TEST_CASE("trace tile: a store's viewport, verified and decoded, is the query's answer field for field") {
  Fixture f;
  const TraceStore::Stats stats = f.store.stats();
  const TraceQueryResult r = f.store.Query({{}, kBase, kBase + kStepNs, 700});
  const std::string frame = EncodeTraceTile(kRequestId, r, stats, f.store);
  const wire::TraceTile* tile = Verified(frame);
  ExpectTileIs(*tile, kRequestId, r, stats, f.store);

  // The fixture reaches every part of a tile: each row type, slices and
  // folded pixels, counter values, flows.
  std::map<TrackId, const TraceQueryResult::Track*> by_track;
  for (const auto& t : r.tracks) by_track[t.track] = &t;
  for (const TrackId t : {kHost, kStream, kCounterTrack, kUndefined}) REQUIRE(by_track.count(t) == 1);
  CHECK(by_track[kHost]->slices.size() > 10);
  CHECK(by_track[kHost]->summaries.size() > 100);
  CHECK(by_track[kCounterTrack]->summaries.size() > 100);
  CHECK(r.flows.size() > 10);
  const TileTracks described(f.store);
  // A track with events but no definition: the store lists it, unnamed.
  CHECK(described.Describe(kUndefined).type == TileTrackType::kHostThread);
  CHECK(described.Describe(kUndefined).name.empty());
  CHECK(described.Describe(kHost).name == "trainer");
  CHECK(described.Describe(kStream).device == 1);
  bool memory_row = false;
  for (const auto& t : r.tracks) memory_row |= described.Describe(t.track).type == TileTrackType::kMemory;
  CHECK(memory_row);
  bool some_busy = false;
  for (const auto& s : by_track[kHost]->summaries) some_busy |= s.busy > 0 && s.busy < 1;
  CHECK(some_busy);

  // From mid-run: the counter rows' levels at t0 too.
  const TraceQueryResult mid = f.store.Query({{}, kBase + kStepNs / 2, kBase + kStepNs, 300});
  ExpectTileIs(*Verified(EncodeTraceTile(kRequestId, mid, stats, f.store)), kRequestId, mid, stats, f.store);
  size_t held = 0;
  for (const auto& t : mid.tracks) held += t.held;
  CHECK(held == 2);  // the counter track and the GPU's memory row.
}

TEST_CASE("trace tile: the tile says what /api/trace's JSON says for the same query") {
  Fixture f;
  const uint64_t t0 = kBase + 123'457, t1 = kBase + kStepNs - 99'991;
  const uint32_t width = 913;
  const Reply reply = TraceReply(ParseRequestTarget("/api/trace?t0=" + std::to_string(t0) +
                                                    "&t1=" + std::to_string(t1) + "&width=" + std::to_string(width)),
                                 &f.store, {});
  REQUIRE(reply.status == 200);
  const json j = json::parse(reply.body);
  auto answer =
      AnswerTraceRequest(TraceRequest{.id = 9, .t0 = t0, .t1 = t1, .width_px = width, .tracks = {}}, &f.store);
  REQUIRE(std::holds_alternative<std::string>(answer));
  const wire::TraceTile& tile = *Verified(std::get<std::string>(answer));

  CHECK(tile.t0() == j["t0"].get<uint64_t>());
  CHECK(tile.t1() == j["t1"].get<uint64_t>());
  CHECK(tile.width_px() == j["width_px"].get<uint32_t>());
  CHECK(tile.ns_per_px() == j["ns_per_px"].get<double>());
  CHECK(tile.events() == j["events"].get<uint64_t>());
  CHECK(tile.first_ns() == j["first_ns"].get<uint64_t>());
  CHECK(tile.last_ns() == j["last_ns"].get<uint64_t>());
  REQUIRE(tile.tracks()->size() == j["tracks"].size());
  size_t summaries = 0, held = 0;
  for (size_t t = 0; t < j["tracks"].size(); ++t) {
    const json& jt = j["tracks"][t];
    const wire::TileTrack& tt = *tile.tracks()->Get(static_cast<flatbuffers::uoffset_t>(t));
    CAPTURE(jt.dump().substr(0, 200));
    CHECK(tt.track() == jt["track"].get<uint32_t>());
    // A track never defined: its id alone, in both.
    REQUIRE(jt.contains("type") == (tt.type() != wire::TileTrackType::none));
    if (jt.contains("type")) {
      CHECK(jt["type"] == std::string(wire::EnumNameTileTrackType(tt.type())));
      CHECK(jt["name"] == std::string(Str(tt.name())));
      CHECK(jt["device"].get<uint32_t>() == tt.device());
      CHECK(jt["os_id"].get<uint64_t>() == tt.os_id());
    }
    REQUIRE(jt["slices"].size() == tt.slices()->size());
    for (size_t i = 0; i < jt["slices"].size(); ++i) {
      const json& js = jt["slices"][i];
      const wire::TileSlice& s = *tt.slices()->Get(static_cast<flatbuffers::uoffset_t>(i));
      CHECK(js == json::array({s.id(), s.ts(), s.dur(), s.name(), s.depth(),
                               std::string(EventKindName(static_cast<EventKind>(s.kind())))}));
    }
    REQUIRE(jt.contains("held") == (tt.held() != nullptr));
    if (tt.held() != nullptr) {
      CHECK(jt["held"] == json::array({tt.held()->ts(), tt.held()->value()}));
      ++held;
    }
    REQUIRE(jt["summaries"].size() == tt.summaries()->size());
    for (size_t i = 0; i < jt["summaries"].size(); ++i, ++summaries) {
      const json& js = jt["summaries"][i];
      const auto n = static_cast<flatbuffers::uoffset_t>(i);
      const wire::TileSummary& s = *tt.summaries()->Get(n);
      CHECK(js[0] == s.px());
      CHECK(js[1] == s.count());
      // The JSON's four decimals parse to the very double busy_e4 / 10000 is.
      CHECK(js[2].get<double>() == s.busy_e4() / 10000.0);
      CHECK(js[3] == s.longest());
      CHECK(js[4] == s.longest_dur());
      REQUIRE(js.size() == (tt.values() != nullptr ? 7u : 5u));
      if (tt.values() != nullptr) {
        CHECK(js[5].get<double>() == tt.values()->Get(n)->max_value());
        CHECK(js[6].get<double>() == tt.values()->Get(n)->last_value());
      }
    }
  }
  CHECK(summaries > 100);
  CHECK(held == 2);  // the counter track's level at t0, and the memory row's.
  REQUIRE(tile.flows()->size() == j["flows"].size());
  for (size_t i = 0; i < j["flows"].size(); ++i) {
    const wire::TileFlow& fl = *tile.flows()->Get(static_cast<flatbuffers::uoffset_t>(i));
    CHECK(j["flows"][i] == json::array({fl.from(), fl.to()}));
  }
  // The flows' ends outside the view: the launch before t0 of the kernel running across it.
  REQUIRE(tile.flow_ends() != nullptr);
  REQUIRE(tile.flow_ends()->size() == j["flow_ends"].size());
  CHECK(j["flow_ends"].size() >= 1);
  for (size_t i = 0; i < j["flow_ends"].size(); ++i) {
    const wire::TileFlowEnd& fe = *tile.flow_ends()->Get(static_cast<flatbuffers::uoffset_t>(i));
    CHECK(j["flow_ends"][i] == json::array({fe.id(), fe.track(), fe.ts(), fe.dur(), fe.name(),
                                            std::string(EventKindName(static_cast<EventKind>(fe.kind())))}));
    CHECK(j["names"].contains(std::to_string(fe.name())));
  }
  REQUIRE(tile.names()->size() == j["names"].size());
  for (const wire::NameDef* n : *tile.names()) {
    CHECK(j["names"][std::to_string(n->id())] == std::string(Str(n->name())));
  }
}

TEST_CASE("trace tile: a flow whose launch is before the view comes with the launch as a flow end") {
  Fixture f;
  // From inside the first kernel: its launch ended before t0.
  const uint64_t t0 = kBase + 1000 + kLaunchNs + 100, t1 = t0 + 50'000;
  const TraceQueryResult r = f.store.Query({{}, t0, t1, 1000});
  REQUIRE(r.flow_ends.size() == 1);
  const auto& end = r.flow_ends[0];
  CHECK(end.track == kHost);
  CHECK(end.ts == kBase + 1000);
  CHECK(end.dur == kLaunchNs);
  CHECK(end.kind == EventKind::kRuntimeApi);
  CHECK(f.store.Name(end.name) == "cudaLaunchKernel");
  REQUIRE(r.flows.size() == 1);
  CHECK(r.flows[0].from == end.id);
  CHECK(f.store.Get(r.flows[0].to)->kind == EventKind::kKernel);
  CHECK(f.store.Get(r.flows[0].to)->corr == f.store.Get(end.id)->corr);
}

TEST_CASE("trace api: search says how many match and which one it found, from_id steps through equal starts") {
  Fixture f;
  const auto get = [&](const std::string& q) {
    const Reply reply = TraceReply(ParseRequestTarget("/api/trace/search?" + q), &f.store, {});
    REQUIRE(reply.status == 200);
    return json::parse(reply.body);
  };
  uint64_t launches = 0;
  for (const Event& e : f.events) launches += e.kind == EventKind::kRuntimeApi;
  REQUIRE(launches > 5);
  json first = get("q=cudaLaunch&dir=next&from=0");
  CHECK(first["matches"] == launches);
  CHECK(first["index"] == 1);
  json second =
      get("q=cudaLaunch&dir=next&from=" + first["event"]["ts"].dump() + "&from_id=" + first["event"]["id"].dump());
  CHECK(second["index"] == 2);
  CHECK(second["event"]["ts"].get<uint64_t>() > first["event"]["ts"].get<uint64_t>());
  json back =
      get("q=cudaLaunch&dir=prev&from=" + second["event"]["ts"].dump() + "&from_id=" + second["event"]["id"].dump());
  CHECK(back["event"]["id"] == first["event"]["id"]);
  json last = get("q=cudaLaunch&dir=prev");
  CHECK(last["index"] == launches);
  json none = get("q=zzzz");
  CHECK(none["matches"] == 0);
  CHECK(!none.contains("index"));
  CHECK(none["event"].is_null());
  const Reply bad = TraceReply(ParseRequestTarget("/api/trace/search?q=a&from_id=x"), &f.store, {});
  CHECK(bad.status == 400);
}

TEST_CASE("trace tile: the grid is the answer's, not the request's, a track the store does not know is bare") {
  // The store may answer on a grid of its own (t0 aligned down, ns_per_px
  // a power of two): the tile reports whatever the answer says.
  Fixture f;
  TraceQueryResult r = f.store.Query({{kStream}, kBase, kBase + kStepNs, 400});
  const uint64_t answered_t0 = r.t0;
  r.t0 -= 4'321;
  r.t1 += 77;
  r.width_px = 123;
  r.ns_per_px = 16'384;
  // A row the store has no description of (as the JSON: no name, no type).
  constexpr TrackId kUnknown = 999;
  r.tracks.push_back({.track = kUnknown,
                      .slices = {{.id = uint64_t{kUnknown} << 40,
                                  .ts = kBase,
                                  .dur = 50'000,
                                  .name = kGhost,
                                  .corr = 0,
                                  .kind = EventKind::kHostSpan,
                                  .depth = 0}},
                      .summaries = {}});
  const TraceStore::Stats stats = f.store.stats();
  const std::string frame = EncodeTraceTile(1, r, stats, f.store);
  const wire::TraceTile* tile = Verified(frame);
  ExpectTileIs(*tile, 1, r, stats, f.store);
  CHECK(tile->t0() == answered_t0 - 4'321);
  CHECK(tile->ns_per_px() == 16'384);
  CHECK(tile->width_px() == 123);
  const wire::TileTrack& bare = *tile->tracks()->Get(tile->tracks()->size() - 1);
  CHECK(bare.track() == kUnknown);
  CHECK(bare.type() == wire::TileTrackType::none);
  CHECK(bare.name() == nullptr);
  CHECK(bare.slices()->size() == 1);
}

TEST_CASE("trace tile: a request is answered from the store, with its defaults, or refused with its id") {
  Fixture f;
  const TraceStore::Stats stats = f.store.stats();
  // No store: an error naming the request.
  auto none = AnswerTraceRequest(TraceRequest{.id = 5}, nullptr);
  REQUIRE(std::holds_alternative<DecodeError>(none));
  CHECK(std::get<DecodeError>(none).code == "no_trace_store");
  CHECK(std::get<DecodeError>(none).id == 5u);
  const json error = json::parse(EncodeError(std::get<DecodeError>(none)));
  CHECK(error["type"] == "error");
  CHECK(error["id"] == 5);
  CHECK(error["message"] == "trace: this server keeps no trace store (started with it off)");

  // Nothing but an id: the whole store at 1000 px, every track; the very
  // bytes of that query's tile.
  auto whole = AnswerTraceRequest(TraceRequest{.id = 6}, &f.store);
  REQUIRE(std::holds_alternative<std::string>(whole));
  const auto [first, last] = WholeRange(stats);
  CHECK(first == kBase);
  const TraceQueryResult r = f.store.Query({{}, first, last, kDefaultTraceWidthPx});
  CHECK(std::get<std::string>(whole) == EncodeTraceTile(6, r, stats, f.store));
  ExpectTileIs(*Verified(std::get<std::string>(whole)), 6, r, stats, f.store);

  // Tracks: those asked for only.
  auto one =
      AnswerTraceRequest(TraceRequest{.id = 7, .t0 = {}, .t1 = {}, .width_px = 50, .tracks = {kStream}}, &f.store);
  REQUIRE(std::holds_alternative<std::string>(one));
  const wire::TraceTile* t = Verified(std::get<std::string>(one));
  REQUIRE(t->tracks()->size() == 1);
  CHECK(t->tracks()->Get(0)->track() == kStream);
  CHECK(t->tracks()->Get(0)->type() == wire::TileTrackType::gpu_stream);

  // A t0 past the store's end, t1 left to its default: nothing to show.
  auto late = AnswerTraceRequest(TraceRequest{.id = 8, .t0 = stats.last_ns + 10}, &f.store);
  REQUIRE(std::holds_alternative<DecodeError>(late));
  CHECK(std::get<DecodeError>(late).code == "bad_message");
  CHECK(std::get<DecodeError>(late).id == 8u);
  CHECK(std::get<DecodeError>(late).message == "t1: " + std::to_string(stats.last_ns + 1) +
                                                   " (just past the store's last event) is not after t0 (" +
                                                   std::to_string(stats.last_ns + 10) + ")");
}

}  // namespace
}  // namespace liveprof::trace_tile_test
