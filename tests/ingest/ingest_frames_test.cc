// Socket ingest's frames (src/ingest/ingest_frames.h): a byte stream cut
// into frames wherever it was split, a sender's ids and clock mapped to the
// stream's, and every refusal naming the frame and what was wrong.
#include "ingest/ingest_frames.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "stream/liveprof_generated.h"
#include "stream/wire_event.h"

namespace liveprof::ingest_frames_test {
namespace {

using flatbuffers::FlatBufferBuilder;

std::string Finish(FlatBufferBuilder& fbb, wire::Body type, flatbuffers::Offset<void> body) {
  fbb.Finish(wire::CreateFrame(fbb, 1, type, body), wire::FrameIdentifier());
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

std::string Hello(int32_t rank = 3, uint32_t protocol = kIngestProtocol) {
  FlatBufferBuilder fbb;
  const auto body = wire::CreateIngestHelloDirect(fbb, protocol, "node7", 4242, rank, "train.py", 1'000);
  return Finish(fbb, wire::Body::IngestHello, body.Union());
}

struct Def {
  uint32_t id;
  std::string name;
};

std::string Batch(uint64_t seq, const std::vector<Def>& names, const std::vector<wire::Event>& events,
                  const std::vector<std::pair<uint32_t, uint32_t>>& tracks = {}, uint64_t dropped = 0) {
  FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<wire::NameDef>> n;
  for (const Def& d : names) n.push_back(wire::CreateNameDefDirect(fbb, d.id, d.name.c_str()));
  std::vector<flatbuffers::Offset<wire::TrackDef>> t;
  for (const auto& [id, name] : tracks) t.push_back(wire::CreateTrackDef(fbb, id, name, 0, 1000 + id));
  const auto body = wire::CreateIngestBatchDirect(fbb, seq, &n, &t, &events, dropped);
  return Finish(fbb, wire::Body::IngestBatch, body.Union());
}

wire::Event Span(uint64_t ts, uint64_t dur, uint32_t name, uint32_t track, EventKind kind = EventKind::kHostSpan) {
  return wire::Event(ts, dur, name, track, 0, static_cast<uint8_t>(kind), 0, 0, 0, 0, 0);
}

// Size-prefixed, as a sender writes them.
std::string Framed(const std::string& frame) {
  const auto size = static_cast<uint32_t>(frame.size());
  std::string out(4, '\0');
  std::memcpy(out.data(), &size, 4);
  return out + frame;
}

TEST_CASE("ingest frames: a stream cut anywhere gives the same frames") {
  const std::string a = Hello(), b = Batch(1, {{1, "step"}}, {Span(10, 5, 1, 9)}, {{9, 1}});
  const std::string bytes = Framed(a) + Framed(b) + Framed(a);
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{7}, bytes.size()}) {
    CAPTURE(chunk);
    FrameSplitter s;
    std::vector<std::string> got;
    std::vector<uint64_t> begins;
    for (size_t at = 0; at < bytes.size(); at += chunk) {
      s.Feed(std::string_view(bytes).substr(at, chunk));
      while (auto f = s.Next()) got.emplace_back(*f), begins.push_back(s.frame_begin());
    }
    REQUIRE(got.size() == 3);
    CHECK(got[0] == a);
    CHECK(got[1] == b);
    CHECK(got[2] == a);
    CHECK(begins == std::vector<uint64_t>{0, 4 + a.size(), 8 + a.size() + b.size()});
    CHECK(s.pending_bytes() == 0);
    CHECK(s.error().empty());
  }
  // Half a frame held: what a sender gone mid-frame leaves (none of it taken).
  FrameSplitter s;
  s.Feed(bytes.substr(0, 4 + a.size() + 10));
  CHECK(s.Next().has_value());
  CHECK(!s.Next().has_value());
  CHECK(s.pending_bytes() == 10);
}

TEST_CASE("ingest frames: received straight into the splitter, frames come whole, aligned, in order") {
  // Frames padded as both ends write them (AppendIngestFrame: prefix and
  // frame a whole multiple of 8 bytes) each start on an 8-byte boundary in
  // the splitter (decoded in place), however the bytes came and however the
  // buffer moved and grew meanwhile.
  auto padded = [](const std::string& frame) {
    std::string p = frame + std::string((8 - (4 + frame.size()) % 8) % 8, '\0');
    REQUIRE((4 + p.size()) % 8 == 0);
    return p;
  };
  const std::string a = padded(Hello());
  std::vector<wire::Event> many;
  for (uint32_t i = 0; i < 3000; ++i) many.push_back(Span(10 + i, 5, 1, 9));
  const std::string big = padded(Batch(1, {{1, "step"}}, many, {{9, 1}}));
  std::string bytes;
  for (int i = 0; i < 40; ++i) bytes += Framed(i % 7 == 3 ? big : a);
  FrameSplitter s;
  size_t frames = 0, misaligned = 0;
  CHECK(!s.has_frame());
  for (size_t at = 0, chunk = 1000; at < bytes.size(); at += chunk, chunk = chunk * 3 % 70'001 + 1) {
    const size_t n = std::min(chunk, bytes.size() - at);
    std::memcpy(s.Reserve(65536 > n ? 65536 : n), bytes.data() + at, n);
    s.Commit(n);
    while (s.has_frame()) {
      const auto f = s.Next();
      REQUIRE(f.has_value());
      misaligned += reinterpret_cast<uintptr_t>(f->data()) % 8 != 0 ? 1 : 0;
      CHECK(*f == (frames % 7 == 3 ? big : a));
      ++frames;
    }
    CHECK(!s.Next().has_value());  // has_frame said no: none whole.
  }
  CHECK(frames == 40);
  CHECK(misaligned == 0);
  CHECK(s.pending_bytes() == 0);
  CHECK(s.frame_end() == bytes.size());
}

TEST_CASE("ingest frames: a size of 0 or past the limit breaks the stream, and says where") {
  FrameSplitter s;
  const std::string a = Hello();
  s.Feed(Framed(a));
  const uint32_t huge = kMaxIngestFrameBytes + 1;
  std::string prefix(4, '\0');
  std::memcpy(prefix.data(), &huge, 4);
  s.Feed(prefix + "junk");
  CHECK(s.Next().has_value());
  CHECK(!s.Next().has_value());
  CHECK(s.error() == "frame 2 (byte " + std::to_string(4 + a.size()) + "): a size of 16777217 bytes (1..16777216)");
  s.Feed(Framed(a));  // nothing after a broken size is read.
  CHECK(!s.Next().has_value());
  FrameSplitter zero;
  zero.Feed(std::string(4, '\0'));
  CHECK(!zero.Next().has_value());
  CHECK(zero.error() == "frame 1 (byte 0): a size of 0 bytes (1..16777216)");
}

TEST_CASE("ingest frames: a sender's names, tracks and clock become the stream's") {
  Stream stream;
  const NameId existing = stream.names().Intern("already here");
  IngestDecoder d(stream);
  std::vector<Event> out;
  REQUIRE(d.Decode(Hello(3), "frame 1", &out));
  CHECK(d.has_hello());
  CHECK(d.source().host == "node7");
  CHECK(d.source().pid == 4242);
  CHECK(d.source().rank == 3);
  CHECK(d.source().program == "train.py");
  CHECK(d.source().label == "rank 3");
  CHECK(out.empty());

  d.set_clock_offset_ns(-400);
  wire::Event kernel(2'000, 50, 3, 2, 77, static_cast<uint8_t>(EventKind::kKernel), 0, 0, 1, 0, 0);
  Event k;  // its payload: details and op as name ids (the sender's).
  k.payload.kernel.details = 4;
  k.payload.kernel.op = 1;
  kernel = wire::Event(2'000, 50, 3, 2, 77, static_cast<uint8_t>(EventKind::kKernel), 0, 0, 1, k.payload.raw[0],
                       k.payload.raw[1]);
  REQUIRE(
      d.Decode(Batch(1, {{1, "MatMul"}, {2, "loader"}, {3, "gemm"}, {4, "grid:1"}, {5, "already here"}},
                     {Span(1'000, 900, 1, 1, EventKind::kFrameworkOp), kernel, Span(1'500, 0, 5, 1)}, {{1, 2}, {2, 3}}),
               "frame 2", &out));
  REQUIRE(out.size() == 3);
  // Ids: the stream's, whatever the sender's were.
  CHECK(stream.names().Get(out[0].name) == "MatMul");
  CHECK(out[2].name == existing);
  CHECK(stream.names().Get(out[1].payload.kernel.details) == "grid:1");
  CHECK(stream.names().Get(out[1].payload.kernel.op) == "MatMul");
  CHECK(out[1].corr == 77);
  CHECK(out[1].device == 1);
  // Rows of their own, named for the sender.
  const TrackInfo loader = stream.track(out[0].track);
  CHECK(stream.names().Get(loader.name) == "rank 3 · loader");
  CHECK(loader.os_id == 1001);
  CHECK(stream.names().Get(stream.track(out[1].track).name) == "rank 3 · gemm");
  CHECK(out[0].track != out[1].track);
  // Times: the sender's clock plus the offset.
  CHECK(out[0].ts == 600);
  CHECK(out[0].dur == 900);
  CHECK(out[1].ts == 1'600);
  CHECK(d.events() == 3);

  // Later batches use the ids defined before; a gap in seq counts lost batches.
  REQUIRE(d.Decode(Batch(4, {}, {Span(3'000, 10, 3, 2)}, {}, 17), "frame 3", &out));
  CHECK(out.size() == 4);
  CHECK(out[3].track == out[1].track);
  CHECK(d.lost_batches() == 2);
  CHECK(d.sender_dropped() == 17);
  CHECK(d.batches() == 2);

  // A pong: no events, its readings for the clock estimate.
  {
    FlatBufferBuilder fbb;
    const std::string pong = Finish(fbb, wire::Body::IngestPong, wire::CreateIngestPong(fbb, 9, 5'000, 7'500).Union());
    REQUIRE(d.Decode(pong, "frame 4", &out));
    REQUIRE(d.pong().has_value());
    CHECK(d.pong()->id == 9);
    CHECK(d.pong()->server_ns == 5'000);
    CHECK(d.pong()->sender_ns == 7'500);
    CHECK(out.size() == 4);
    REQUIRE(d.Decode(Batch(5, {}, {}), "frame 5", &out));
    CHECK(!d.pong().has_value());
  }

  // Offsets held inside the clock, whatever they are; the late flag is the server's.
  {
    IngestDecoder e(stream);
    std::vector<Event> got;
    REQUIRE(e.Decode(Hello(4), "frame 1", &got));
    wire::Event late(0, UINT64_MAX, 1, 1, 0, static_cast<uint8_t>(EventKind::kHostSpan), 0, kFlagLate | kFlag16Bit, 0,
                     0, 0);
    e.set_clock_offset_ns(INT64_MAX);
    REQUIRE(e.Decode(Batch(1, {{1, "x"}}, {late, Span(UINT64_MAX - 10, 10, 1, 1)}, {{1, 1}}), "frame 2", &got));
    CHECK(got[0].ts == 0);  // ends at 2^64 - 1 already: it cannot move.
    CHECK(got[0].flags == kFlag16Bit);
    CHECK(got[1].ts == UINT64_MAX - 10);
    e.set_clock_offset_ns(INT64_MIN);
    REQUIRE(e.Decode(Batch(2, {}, {Span(5, 1, 1, 1)}), "frame 3", &got));
    CHECK(got[2].ts == 0);
  }

  // No rank: host:pid.
  IngestDecoder other(stream);
  REQUIRE(other.Decode(Hello(-1), "frame 1", &out));
  CHECK(other.source().label == "node7:4242");
}

// An allocation flagged kFlagAllocAnnotation carries a name in corr (what
// TensorFlow said of it, event.h): mapped to the stream's like any name, and
// refused when never defined; any other allocation's corr (CUPTI's
// correlation id) is left as it is.
TEST_CASE("ingest frames: an annotated allocation's corr is a name, mapped and checked") {
  Stream stream;
  stream.names().Intern("taken first");  // the sender's ids are not the stream's.
  IngestDecoder d(stream);
  std::vector<Event> out;
  REQUIRE(d.Decode(Hello(), "frame 1", &out));
  const std::string note = std::string("MatMul\x1foutput\x1f") + "float\x1f[4]\x1f" + "16";
  auto alloc = [](uint32_t corr, uint8_t flags) {
    Event m;
    m.payload.memory = {0x1000, 16};
    return wire::Event(1'000, 0, 1, 9, corr, static_cast<uint8_t>(EventKind::kAlloc), 1, flags, 0, m.payload.raw[0],
                       m.payload.raw[1]);
  };
  REQUIRE(d.Decode(Batch(1, {{1, "GPU_0_bfc"}, {2, note}, {3, "allocations"}},
                         {alloc(2, kFlagAllocAnnotation), alloc(70, 0), alloc(33, kFlagAllocAnnotation)}, {{9, 3}}),
                   "frame 2", &out));
  REQUIRE(out.size() == 2);
  CHECK(stream.names().Get(out[0].corr) == note);
  CHECK(out[0].corr != 2);
  CHECK(out[0].flags == kFlagAllocAnnotation);
  CHECK(out[1].corr == 70);
  REQUIRE(d.refusals().size() == 1);
  CHECK(d.refusals()[0].reason == "undefined_name");
  CHECK(d.refusals()[0].example ==
        "frame 2: event 2: name id 1 or the allocation's annotation, name id 33, was never defined");
}

TEST_CASE("ingest frames: each refusal names the frame and what is wrong, and takes nothing") {
  Stream stream;
  struct Case {
    std::vector<std::string> before;
    std::string frame;
    std::string error;
  };
  const std::string hello = Hello();
  const std::vector<Case> cases = {
      {{},
       "garbage that is not a frame at all",
       "f: not a liveprof frame (the FlatBuffers verifier refused it, or no \"LPF1\")"},
      {{}, Hello(0, 2), "f: ingest protocol 2; this server speaks 1"},
      {{}, Batch(1, {}, {}), "f: a batch before the hello"},
      {{hello}, hello, "f: a second hello"},
      {{hello}, Batch(1, {}, {}, {{1, 8}}), "f: track 1: name id 8 was never defined"},
      {{hello, Batch(5, {}, {})}, Batch(5, {}, {}), "f: batch seq 5 after 5"},
      {{hello}, Batch(0, {}, {Span(1, 1, 0, 1)}), "f: a batch of seq 0 (definitions only) with events"},
      // New names and tracks in a frame refused for its definitions: none taken.
      {{hello, Batch(1, {{1, "a"}}, {})},
       Batch(2, {{2, "fresh"}, {1, "b"}}, {}, {{4, 2}}),
       "f: name id 1 defined again as another string"},
      {{hello, Batch(1, {{1, "a"}}, {})}, Batch(2, {{1, "b"}}, {}), "f: name id 1 defined again as another string"},
      {{hello}, Batch(1, {{1, "a"}, {1, "b"}}, {}), "f: name id 1 defined again as another string"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.error);
    IngestDecoder d(stream);
    std::vector<Event> out;
    for (const std::string& b : c.before) REQUIRE(d.Decode(b, "before", &out));
    const size_t had = out.size();
    const uint32_t names = stream.names().size(), tracks = stream.track_count();
    CHECK(!d.Decode(c.frame, "f", &out));
    CHECK(d.error() == c.error);
    CHECK(out.size() == had);
    CHECK(stream.names().size() == names);  // nothing of it taken.
    CHECK(stream.track_count() == tracks);
  }
  // A body type with no body.
  {
    FlatBufferBuilder fbb;
    fbb.Finish(wire::CreateFrame(fbb, 1, wire::Body::IngestHello, 0), wire::FrameIdentifier());
    IngestDecoder d(stream);
    std::vector<Event> out;
    CHECK(!d.Decode(std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()), "f", &out));
    CHECK(d.error() == "f: a frame without a body");
  }
  // A hello in a frame of another version (it used to be taken).
  {
    FlatBufferBuilder fbb;
    const auto hello = wire::CreateIngestHelloDirect(fbb, kIngestProtocol, "node7", 4242, 3, "train.py", 1'000);
    fbb.Finish(wire::CreateFrame(fbb, 2, wire::Body::IngestHello, hello.Union()), wire::FrameIdentifier());
    IngestDecoder d(stream);
    std::vector<Event> out;
    CHECK(!d.Decode(std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()), "f", &out));
    CHECK(d.error() == "f: frame version 2; this server reads version 1");
    CHECK(!d.has_hello());
  }
  // An events frame (the WebSocket feed's) is not an ingest frame.
  FlatBufferBuilder fbb;
  const std::string events = Finish(fbb, wire::Body::EventFrame, wire::CreateEventFrame(fbb).Union());
  IngestDecoder d(stream);
  std::vector<Event> out;
  CHECK(!d.Decode(events, "frame 1 (bytes 0..40)", &out));
  CHECK(d.error() ==
        "frame 1 (bytes 0..40): a frame of body type 1 (an ingest connection sends IngestHello, then IngestBatch, "
        "IngestPong and IngestState)");
}

// What the real GPU sent: one event on track 0, never defined,
// in a batch of good ones. The event is refused alone; the batch is taken.
TEST_CASE("ingest frames: a malformed event is refused alone and counted by reason, the rest of its batch is taken") {
  Stream stream;
  IngestDecoder d(stream);
  std::vector<Event> out;
  REQUIRE(d.Decode(Hello(), "frame 1", &out));
  std::vector<wire::Event> events;
  for (uint32_t i = 0; i < 100; ++i) events.push_back(Span(1'000 + i, 5, 1, i == 57 ? 0 : 9));
  const uint32_t names = stream.names().size(), tracks = stream.track_count();
  REQUIRE(d.Decode(Batch(1, {{1, "memcpy"}, {2, "stream 7"}}, events, {{9, 2}}), "frame 2 (bytes 8..96)", &out));
  CHECK(d.error().empty());
  CHECK(out.size() == 99);
  CHECK(d.events() == 99);
  CHECK(d.batches() == 1);
  CHECK(d.last_seq() == 1);
  CHECK(d.refused_events() == 1);
  REQUIRE(d.refusals().size() == 1);
  CHECK(d.refusals()[0].reason == "undefined_track");
  CHECK(d.refusals()[0].events == 1);
  CHECK(d.refusals()[0].example == "frame 2 (bytes 8..96): event 57: track 0 was never defined");
  CHECK(d.batch_refused().events == 1);
  CHECK(d.batch_refused().reason == "undefined_track");
  CHECK(d.batch_refused().message == "event 57: track 0 was never defined");
  // Its definitions were taken, and its good events, in order, on the row.
  CHECK(stream.names().size() == names + 3);  // with the row's, "rank 3 · stream 7".
  CHECK(stream.track_count() == tracks + 1);
  CHECK(out[56].ts == 1'056);
  CHECK(out[57].ts == 1'058);
  for (const Event& e : out) CHECK(stream.names().Get(stream.track(e.track).name) == "rank 3 · stream 7");

  // The next batch is taken whole; the counts stay.
  out.clear();
  std::vector<wire::Event> good(100, Span(2'000, 5, 1, 9));
  REQUIRE(d.Decode(Batch(2, {}, good), "frame 3", &out));
  CHECK(out.size() == 100);
  CHECK(d.events() == 199);
  CHECK(d.batch_refused().events == 0);
  CHECK(d.batch_refused().reason.empty());
  CHECK(d.refused_events() == 1);

  // Every reason, each counted apart, its first event the example; the
  // batch's first refusal is what the sender is told.
  out.clear();
  Event k;
  k.payload.kernel.details = 66;  // never defined.
  k.payload.kernel.op = 1;
  const wire::Event kernel(3'000, 5, 1, 9, 0, static_cast<uint8_t>(EventKind::kKernel), 0, 0, 0, k.payload.raw[0],
                           k.payload.raw[1]);
  REQUIRE(d.Decode(Batch(3, {},
                         {Span(3'000, 5, 1, 9, EventKind::kNameDef), Span(3'000, 5, 1, 9),
                          Span(UINT64_MAX - 5, 10, 1, 9), Span(3'000, 5, 42, 9), kernel, Span(3'000, 5, 1, 3),
                          Span(3'000, 5, 1, 4), wire::Event(3'000, 5, 1, 9, 0, 250, 0, 0, 0, 0, 0)}),
                   "frame 4", &out));
  CHECK(out.size() == 1);
  CHECK(d.events() == 200);
  CHECK(d.refused_events() == 8);
  CHECK(d.batch_refused().events == 7);
  CHECK(d.batch_refused().reason == "bad_kind");
  CHECK(d.batch_refused().message == "event 0: kind 1 (names and tracks travel as NameDef / TrackDef)");
  REQUIRE(d.refusals().size() == 5);
  const std::vector<std::pair<std::string, uint64_t>> by_reason = {{"undefined_track", 3},
                                                                   {"bad_kind", 2},
                                                                   {"time_overflow", 1},
                                                                   {"undefined_name", 1},
                                                                   {"undefined_kernel_name", 1}};
  for (size_t i = 0; i < by_reason.size(); ++i) {
    CHECK(d.refusals()[i].reason == by_reason[i].first);
    CHECK(d.refusals()[i].events == by_reason[i].second);
  }
  CHECK(d.refusals()[0].example == "frame 2 (bytes 8..96): event 57: track 0 was never defined");
  CHECK(d.refusals()[2].example == "frame 4: event 2: ts + dur past 2^64 ns");
  CHECK(d.refusals()[3].example == "frame 4: event 3: name id 42 was never defined");
  CHECK(d.refusals()[4].example == "frame 4: event 4: a kernel's details or op name id was never defined");

  // A batch taken on an earlier connection, sent again: skipped, its refusals not counted twice.
  IngestDecoder again(stream);
  REQUIRE(again.Decode(Hello(), "frame 1", &out));
  again.set_resume_seq(1);
  out.clear();
  REQUIRE(again.Decode(Batch(1, {{1, "memcpy"}, {2, "stream 7"}}, events, {{9, 2}}), "frame 2", &out));
  CHECK(out.empty());
  CHECK(again.duplicate_batches() == 1);
  CHECK(again.refused_events() == 0);
  CHECK(again.batch_refused().events == 0);
}

TEST_CASE("ingest frames: a reconnecting sender's definitions (seq 0), batches taken before (skipped), its state") {
  Stream stream;
  std::unordered_map<std::string, TrackId> rows;
  std::vector<Event> out;
  TrackId first_row = 0;
  {  // The first connection: batches 1 and 2 taken.
    IngestDecoder d(stream);
    d.set_worker(5, &rows);
    REQUIRE(d.Decode(Hello(), "f1", &out));
    REQUIRE(d.Decode(Batch(1, {{1, "step"}, {2, "loader"}}, {Span(10, 5, 1, 9)}, {{9, 2}}), "f2", &out));
    REQUIRE(d.Decode(Batch(2, {}, {Span(20, 5, 1, 9)}), "f3", &out));
    REQUIRE(out.size() == 2);
    first_row = out[0].track;
    CHECK(stream.track(first_row).process == 5);
    CHECK(stream.names().Get(stream.track(first_row).name) == "rank 3 · loader");
  }
  // The second: told that 2 was taken; the sender restates its names (seq
  // 0), sends 2 again (skipped, its definitions taken) and then 3.
  IngestDecoder d(stream);
  d.set_worker(5, &rows);
  d.set_resume_seq(2);
  REQUIRE(d.Decode(Hello(), "f1", &out));
  REQUIRE(d.Decode(Batch(0, {{1, "step"}}, {}), "f2", &out));
  CHECK(d.batches() == 0);
  REQUIRE(d.Decode(Batch(2, {{2, "loader"}}, {Span(20, 5, 1, 9)}, {{9, 2}}), "f3", &out));
  CHECK(out.size() == 2);  // skipped,
  CHECK(d.duplicate_batches() == 1);
  REQUIRE(d.Decode(Batch(3, {}, {Span(30, 5, 1, 9)}), "f4", &out));
  REQUIRE(out.size() == 3);
  CHECK(out[2].ts == 30);
  CHECK(out[2].track == first_row);  // the worker's row again, not a new one.
  CHECK(d.lost_batches() == 0);
  CHECK(d.Decode(Batch(1, {}, {Span(30, 5, 1, 9)}), "f5", &out));  // at or below the resume point: skipped too.
  CHECK(out.size() == 3);
  CHECK(d.duplicate_batches() == 2);
  CHECK(!d.Decode(Batch(0, {}, {Span(30, 5, 1, 9)}), "f6", &out));
  CHECK(d.error() == "f6: a batch of seq 0 (definitions only) with events");

  // Its state: what it records now.
  FlatBufferBuilder fbb;
  const std::string state =
      Finish(fbb, wire::Body::IngestState, wire::CreateIngestState(fbb, 7, 1, false, true, true, 12345).Union());
  IngestDecoder e(stream);
  CHECK(!e.Decode(state, "g1", &out));
  CHECK(e.error() == "g1: a state before the hello");
  REQUIRE(e.Decode(Hello(), "g1", &out));
  REQUIRE(e.Decode(state, "g2", &out));
  REQUIRE(e.state().has_value());
  CHECK(e.state()->control_id == 7);
  CHECK(e.state()->host_level == 1);
  CHECK(!e.state()->python_scopes);
  CHECK(e.state()->gpu);
  CHECK(e.state()->until_ns == 12345);
}

TEST_CASE("ingest frames: a hello's host, program and helper are short and printable") {
  Stream stream;
  std::vector<Event> out;
  for (const std::string& host : {std::string(257, 'h'), std::string("node\n7")}) {
    FlatBufferBuilder fbb;
    const std::string hello =
        Finish(fbb, wire::Body::IngestHello,
               wire::CreateIngestHelloDirect(fbb, kIngestProtocol, host.c_str(), 1, -1, "x", 0).Union());
    IngestDecoder d(stream);
    CHECK(!d.Decode(hello, "f1", &out));
    CHECK(d.error() == "f1: a hello's host, program or helper over 256 bytes or with control characters");
  }
  {
    FlatBufferBuilder fbb;
    const std::string hello =
        Finish(fbb, wire::Body::IngestHello,
               wire::CreateIngestHelloDirect(fbb, kIngestProtocol, "n", 1, -1, "x", 0, 0, "loader\t1", 7).Union());
    IngestDecoder d(stream);
    CHECK(!d.Decode(hello, "f2", &out));
    CHECK(d.error() == "f2: a hello's host, program or helper over 256 bytes or with control characters");
  }
  // A helper is named after the process it serves: its rank, else host:pid of that process.
  for (const auto& [rank, label] : {std::pair<int, std::string>{3, "rank 3 · loader 1"}, {-1, "n:7 · loader 1"}}) {
    FlatBufferBuilder fbb;
    IngestDecoder d(stream);
    REQUIRE(d.Decode(
        Finish(fbb, wire::Body::IngestHello,
               wire::CreateIngestHelloDirect(fbb, kIngestProtocol, "n", 12, rank, "x", 0, 0, "loader 1", 7).Union()),
        "f3", &out));
    CHECK(d.source().label == label);
    CHECK(d.source().pid == 12);
  }
  FlatBufferBuilder fbb;
  IngestDecoder d(stream);
  CHECK(d.Decode(Finish(fbb, wire::Body::IngestHello,
                        wire::CreateIngestHelloDirect(fbb, kIngestProtocol, "nœud-7", 1, -1, "x", 0).Union()),
                 "f1", &out));  // UTF-8 is fine.
  CHECK(d.source().label == "nœud-7:1");
}

TEST_CASE("ingest frames: the wire's Event is liveprof::Event byte for byte (the sender copies it whole)") {
  Event e;
  e.ts = 0x0102030405060708;
  e.dur = 0x1112131415161718;
  e.name = 0x21222324;
  e.track = 0x31323334;
  e.corr = 0x41424344;
  e.kind = EventKind::kKernel;
  e.sub = 0x51;
  e.flags = 0x61;
  e.device = 0x71;
  e.payload.raw[0] = 0x8182838485868788;
  e.payload.raw[1] = 0x9192939495969798;
  const wire::Event w = ToWire(e);
  CHECK(std::memcmp(&w, &e, sizeof e) == 0);
}

TEST_CASE("ingest frames: a better clock offset applies from its exchange on, earlier times keep theirs") {
  Stream stream;
  IngestDecoder d(stream);
  std::vector<Event> out;
  REQUIRE(d.Decode(Hello(), "f1", &out));
  d.set_clock_offset_ns(-400);          // the hello's estimate, for every time,
  d.set_clock_offset_ns(-300, 10'000);  // a pong's from sender time 10 us,
  d.set_clock_offset_ns(-350, 20'000);  // a better one from 20 us.
  REQUIRE(d.Decode(
      Batch(1, {{1, "x"}},
            {Span(5'000, 10, 1, 9), Span(10'000, 10, 1, 9), Span(15'000, 10, 1, 9), Span(25'000, 10, 1, 9)}, {{9, 1}}),
      "f2", &out));
  REQUIRE(out.size() == 4);
  CHECK(out[0].ts == 4'600);
  CHECK(out[1].ts == 9'700);
  CHECK(out[2].ts == 14'700);
  CHECK(out[3].ts == 24'650);
  CHECK(d.clock_offset_ns() == -350);
  // The same sender time, sent later, maps the same way.
  REQUIRE(d.Decode(Batch(2, {}, {Span(15'000, 10, 1, 9)}), "f3", &out));
  CHECK(out[4].ts == 14'700);
}

TEST_CASE("ingest frames: a sender time maps, for its progress, by the least offset from it on") {
  Stream stream;
  IngestDecoder d(stream);
  d.set_clock_offset_ns(1'000);
  d.set_clock_offset_ns(400, 100);  // a better estimate from the sender's 100 on,
  d.set_clock_offset_ns(700, 200);  // and another from 200 (larger: it does not bound).
  CHECK(d.EarliestServerNs(50) == 50 + 400);
  CHECK(d.EarliestServerNs(150) == 150 + 400);
  CHECK(d.EarliestServerNs(250) == 250 + 700);
  d.set_clock_offset_ns(-1'000, 300);
  CHECK(d.EarliestServerNs(250) == 0);  // (held at 0, not below)
}

TEST_CASE("ingest frames: a span across an offset change ends where the span begun at its end begins") {
  // A step [5 us, 15 us) and the next step's input from 15 us (the same
  // reading): the offset changed at 10 us. Mapping the end by the begin's
  // offset would end the step 100 ns after the input begins, and the input
  // would fall in the wrong step.
  Stream stream;
  IngestDecoder d(stream);
  std::vector<Event> out;
  REQUIRE(d.Decode(Hello(), "f1", &out));
  d.set_clock_offset_ns(-300);
  d.set_clock_offset_ns(-400, 10'000);  // a smaller offset from 10 us,
  d.set_clock_offset_ns(-200, 20'000);  // a larger one from 20 us.
  REQUIRE(d.Decode(
      Batch(1, {{1, "x"}},
            {Span(5'000, 10'000, 1, 9), Span(15'000, 2'000, 1, 9), Span(15'000, 10'000, 1, 9), Span(19'990, 20, 1, 9)},
            {{9, 1}}),
      "f2", &out));
  REQUIRE(out.size() == 4);
  CHECK(out[0].ts == 4'700);
  CHECK(out[0].end() == 14'600);  // 15 us - 400 ns,
  CHECK(out[1].ts == 14'600);     // where the input begins.
  CHECK(out[1].end() == 16'600);
  CHECK(out[2].end() == 24'800);  // 25 us - 200 ns: longer by the change.
  // Across a rise of 200 ns: 20 ns become 220.
  CHECK(out[3].ts == 19'590);
  CHECK(out[3].end() == 19'810);
  // An offset drop across a short span: it never ends before it begins.
  d.set_clock_offset_ns(-1'000, 30'000);
  REQUIRE(d.Decode(Batch(2, {}, {Span(29'900, 200, 1, 9)}), "f3", &out));
  CHECK(out[4].ts == 29'700);
  CHECK(out[4].dur == 0);
}

}  // namespace
}  // namespace liveprof::ingest_frames_test
