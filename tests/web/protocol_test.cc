// The WebSocket feed's protocol without sockets: topics and kind names,
// control-message decoding (every error code, with what and where, and every
// limit at and over its edge), the server's JSON messages parsed back, and
// the events topic's binary frames (filter, rate cap with a fabricated clock,
// names sent once, verified and decoded back to the same events).
#include "web/protocol.h"

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "event_builder.h"
#include "stream/liveprof_generated.h"
#include "stream/wire_event.h"

namespace liveprof::protocol_test {
namespace {

using nlohmann::json;

// Time values of the rate-cap tests.
constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kT0 = 5 * kSecond;
constexpr uint64_t kChunkSeq = 42;
constexpr uint64_t kWatermark = 7 * kSecond;

ControlMessage Decoded(std::string_view text) {
  auto r = DecodeControlMessage(text);
  if (auto* e = std::get_if<DecodeError>(&r)) FAIL("unexpected error ", e->code, ": ", e->message);
  return std::get<ControlMessage>(r);
}

DecodeError Refused(std::string_view text) {
  auto r = DecodeControlMessage(text);
  if (std::holds_alternative<ControlMessage>(r)) FAIL("decoded, expected an error: ", std::string(text));
  return std::get<DecodeError>(r);
}

TopicSet Topics(std::initializer_list<Topic> topics) {
  TopicSet s;
  for (Topic t : topics) s.set(static_cast<size_t>(t));
  return s;
}

// ---- Topics and kinds ----

TEST_CASE("protocol: topics are the table's views on the feed, then events, names parse back") {
  // The table's views by name, then "events".
  std::vector<std::string> names;
  for (const ViewInfo& v : kViews) names.emplace_back(v.name);
  names.emplace_back("events");
  REQUIRE(kTopicCount == names.size());
  CHECK(names[0] == "overview");
  for (size_t i = 0; i < kTopicCount; ++i) {
    const Topic t = static_cast<Topic>(i);
    CAPTURE(names[i]);
    CHECK(TopicName(t) == names[i]);
    // A view rendered on request only (the PyTorch breakdown): no topic.
    const bool on_feed = t == Topic::kEvents || kViews[i].feed();
    CHECK(IsSubscribable(t) == on_feed);
    CHECK(IsViewTopic(t) == (on_feed && t != Topic::kEvents));
    CHECK(ParseTopic(names[i]).has_value() == on_feed);
    if (on_feed) CHECK(*ParseTopic(names[i]) == t);
  }
  CHECK(!IsSubscribable(Topic::kPytorch));
  CHECK(!ParseTopic("Overview").has_value());
  CHECK(!ParseTopic("").has_value());
}

TEST_CASE("protocol: a view's JSON is its table row's string in a rendered set") {
  RenderedViews v;
  v.kernel_stats = "{\"type\":\"kernel_stats\"}";
  v.pytorch = "{\"type\":\"pytorch\"}";
  CHECK(ViewJson(v, Topic::kKernelStats) == v.kernel_stats);
  CHECK(&v.json(View::kKernelStats) == &v.kernel_stats);
  CHECK(ViewJson(v, Topic::kPytorch).empty());  // not on the feed.
  CHECK(ViewJson(v, Topic::kEvents).empty());
}

TEST_CASE("protocol: ParseEventKindName is EventKindName's inverse") {
  size_t named = 0;
  for (size_t k = 0; k < kEventKindCount; ++k) {
    const auto kind = static_cast<EventKind>(k);
    const std::string_view name = EventKindName(kind);
    if (name == "unknown") {
      CHECK(!StreamedKinds().test(k));
      continue;
    }
    ++named;
    REQUIRE(ParseEventKindName(name).has_value());
    CHECK(*ParseEventKindName(name) == kind);
  }
  CHECK(named == 22);
  CHECK(!ParseEventKindName("unknown").has_value());
  CHECK(!ParseEventKindName("Kernel").has_value());
  CHECK(*ParseEventKindName("memcpy_h2d") == EventKind::kMemcpyHtoD);
  // Definitions travel as names and tracks, never as events.
  CHECK(StreamedKinds().count() == 19);
  CHECK(!IsStreamedKind(EventKind::kNameDef));
  CHECK(!IsStreamedKind(EventKind::kTrackDef));
  CHECK(!IsStreamedKind(EventKind::kInvalid));
  CHECK(IsStreamedKind(EventKind::kDeviceInfo));
}

// ---- Control messages ----

TEST_CASE("protocol: a subscribe with every filter decodes to its values") {
  const ControlMessage m = Decoded(R"({"type":"subscribe","topics":["overview","events"],
      "filters":{"kinds":["kernel","memcpy_h2d"],"tracks":[4,3,4],"name_prefix":"volta_",
                 "max_events_per_second":10000}})");
  CHECK(m.type == ControlMessage::Type::kSubscribe);
  CHECK(m.topics == Topics({Topic::kOverview, Topic::kEvents}));
  REQUIRE(m.filter.has_value());
  CHECK(m.filter->kinds.count() == 2);
  CHECK(m.filter->kinds.test(static_cast<size_t>(EventKind::kKernel)));
  CHECK(m.filter->kinds.test(static_cast<size_t>(EventKind::kMemcpyHtoD)));
  CHECK(m.filter->tracks == std::vector<TrackId>{3, 4});  // sorted, unique.
  CHECK(m.filter->name_prefix == "volta_");
  CHECK(m.filter->max_events_per_second == 10000);
}

TEST_CASE("protocol: filters are optional, and a key left out takes its default") {
  ControlMessage m = Decoded(R"({"type":"subscribe","topics":["steps"]})");
  CHECK(m.topics == Topics({Topic::kSteps}));
  CHECK(!m.filter.has_value());

  m = Decoded(R"({"topics":["events","events"],"filters":{"tracks":[]},"type":"subscribe"})");
  CHECK(m.topics == Topics({Topic::kEvents}));
  REQUIRE(m.filter.has_value());
  CHECK(*m.filter == EventFilter{});
  CHECK(m.filter->kinds == StreamedKinds());
  CHECK(m.filter->max_events_per_second == kDefaultMaxEventsPerSecond);

  m = Decoded(R"({"type":"unsubscribe","topics":["alerts","memory"]})");
  CHECK(m.type == ControlMessage::Type::kUnsubscribe);
  CHECK(m.topics == Topics({Topic::kAlerts, Topic::kMemory}));
  CHECK(!m.filter.has_value());
}

TEST_CASE("protocol: every error code says what and where") {
  struct Case {
    std::string text;
    const char* code;
    const char* message;
  };
  const Case cases[] = {
      {R"({"type":"subscribe",)", "bad_json", "bad JSON at byte 21: "},
      {R"({"type" "subscribe"})", "bad_json", "bad JSON at byte 19: syntax error while parsing object separator"},
      {"", "bad_json", "bad JSON at byte 1: "},
      {R"({"n":1e999})", "bad_json", "bad JSON: number overflow parsing '1e999'"},
      {R"([])", "bad_message", "the message: expected a JSON object, got array"},
      {R"("subscribe")", "bad_message", "the message: expected a JSON object, got string"},
      {R"({"topics":["steps"]})", "bad_message", R"(type: missing ("subscribe", "unsubscribe" or "trace"))"},
      {R"({"type":1,"topics":["steps"]})", "bad_message", "type: expected a string, got number"},
      {R"({"type":"sub","topics":["steps"]})", "bad_message",
       "type: unknown message type 'sub' (known: subscribe, unsubscribe, trace)"},
      {R"({"type":"subscribe","topics":["steps"],"id":7})", "bad_message",
       "the message: unknown key 'id' (known: type, topics, filters)"},
      {R"({"type":"subscribe"})", "bad_message", "topics: missing (an array of: overview, steps, "},
      {R"({"type":"subscribe","topics":"steps"})", "bad_message", "topics: expected an array, got string"},
      {R"({"type":"subscribe","topics":[]})", "bad_message", "topics: empty: name at least one topic"},
      {R"({"type":"subscribe","topics":["steps",3]})", "bad_message",
       "topics[1]: expected a topic name (a string), got number"},
      {R"({"type":"subscribe","topics":["steps","memory","foo"]})", "unknown_topic",
       "topics[2]: unknown topic 'foo' (known: overview, steps, input_pipeline, tf_stats, kernel_stats, "
       "memory, alerts, status, pod, modules, annotations, events)"},
      {R"({"type":"unsubscribe","topics":["events"],"filters":{}})", "bad_message",
       "filters: only a subscribe takes filters"},
      {R"({"type":"subscribe","topics":["events"],"filters":[]})", "bad_message",
       "filters: expected an object, got array"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"kind":["kernel"]}})", "bad_message",
       "filters: unknown key 'kind' (known: kinds, tracks, name_prefix, max_events_per_second)"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"kinds":[]}})", "bad_message",
       "filters.kinds: empty: leave the key out for every kind"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"kinds":["kernel",null]}})", "bad_message",
       "filters.kinds[1]: expected a kind name (a string), got null"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"kinds":["kernel","gpu"]}})", "unknown_kind",
       "filters.kinds[1]: unknown kind 'gpu' (known: device_info, host_span, step, "},
      {R"({"type":"subscribe","topics":["events"],"filters":{"kinds":["name_def"]}})", "unknown_kind",
       "filters.kinds[0]: kind 'name_def' is not streamed as events"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"tracks":[1,-1]}})", "bad_message",
       "filters.tracks[1]: expected a track id (an integer 0..4294967295), got -1"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"tracks":[4294967296]}})", "bad_message",
       "filters.tracks[0]: expected a track id (an integer 0..4294967295), got 4294967296"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"tracks":[2.5]}})", "bad_message",
       "filters.tracks[0]: expected a track id (an integer 0..4294967295), got 2.5"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"tracks":["3"]}})", "bad_message",
       "filters.tracks[0]: expected a track id (an integer 0..4294967295), got the string '3'"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"tracks":3}})", "bad_message",
       "filters.tracks: expected an array, got number"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"name_prefix":7}})", "bad_message",
       "filters.name_prefix: expected a string, got number"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"max_events_per_second":0}})", "bad_message",
       "filters.max_events_per_second: 0 is out of range 1..1000000"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"max_events_per_second":1000001}})", "bad_message",
       "filters.max_events_per_second: 1000001 is out of range 1..1000000"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"max_events_per_second":-5}})", "bad_message",
       "filters.max_events_per_second: -5 is out of range 1..1000000"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"max_events_per_second":10.5}})", "bad_message",
       "filters.max_events_per_second: expected an integer 1..1000000, got 10.5"},
      {R"({"type":"subscribe","topics":["events"],"filters":{"max_events_per_second":"10"}})", "bad_message",
       "filters.max_events_per_second: expected an integer 1..1000000, got the string '10'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const DecodeError e = Refused(c.text);
    CHECK(e.code == c.code);
    CHECK_MESSAGE(e.message.starts_with(c.message), e.message);
  }
}

TEST_CASE("protocol: limits are accepted at their edge and refused past it as too_large") {
  // The whole message: 64 KiB exactly (padded with spaces) is read.
  std::string text = R"({"type":"subscribe","topics":["steps"]})";
  text.append(kMaxControlMessageBytes - text.size(), ' ');
  CHECK(Decoded(text).topics == Topics({Topic::kSteps}));
  text.push_back(' ');
  DecodeError e = Refused(text);
  CHECK(e.code == "too_large");
  CHECK(e.message == "the message: 65537 bytes, over the limit of 65536");

  // 16 topic entries.
  std::string topics = R"({"type":"subscribe","topics":["steps")";
  for (int i = 1; i < 16; ++i) topics += R"(,"steps")";
  CHECK(Decoded(topics + "]}").topics == Topics({Topic::kSteps}));
  e = Refused(topics + R"(,"steps"]})");
  CHECK(e.code == "too_large");
  CHECK(e.message == "topics: 17 entries, over the limit of 16");

  // 1024 tracks.
  auto with_tracks = [](size_t n) {
    std::string t = R"({"type":"subscribe","topics":["events"],"filters":{"tracks":[)";
    for (size_t i = 0; i < n; ++i) t += (i ? "," : "") + std::to_string(i);
    return t + "]}}";
  };
  CHECK(Decoded(with_tracks(kMaxFilterTracks)).filter->tracks.size() == kMaxFilterTracks);
  e = Refused(with_tracks(kMaxFilterTracks + 1));
  CHECK(e.code == "too_large");
  CHECK(e.message == "filters.tracks: 1025 entries, over the limit of 1024");

  // 256 bytes of name prefix.
  auto with_prefix = [](size_t n) {
    return R"({"type":"subscribe","topics":["events"],"filters":{"name_prefix":")" + std::string(n, 'a') + R"("}})";
  };
  CHECK(Decoded(with_prefix(kMaxNamePrefixBytes)).filter->name_prefix.size() == kMaxNamePrefixBytes);
  e = Refused(with_prefix(kMaxNamePrefixBytes + 1));
  CHECK(e.code == "too_large");
  CHECK(e.message == "filters.name_prefix: 257 bytes, over the limit of 256");

  // 64 kind entries.
  std::string kinds = R"({"type":"subscribe","topics":["events"],"filters":{"kinds":["kernel")";
  for (size_t i = 1; i < kMaxFilterKinds; ++i) kinds += R"(,"kernel")";
  CHECK(Decoded(kinds + "]}}").filter->kinds.count() == 1);
  e = Refused(kinds + R"(,"kernel"]}})");
  CHECK(e.code == "too_large");
  CHECK(e.message == "filters.kinds: 65 entries, over the limit of 64");

  // The rate cap's edges.
  CHECK(Decoded(R"({"type":"subscribe","topics":["events"],"filters":{"max_events_per_second":1}})")
            .filter->max_events_per_second == 1);
  CHECK(Decoded(R"({"type":"subscribe","topics":["events"],"filters":{"max_events_per_second":1000000}})")
            .filter->max_events_per_second == kMaxEventsPerSecondCap);
}

TEST_CASE("protocol: a quoted value in an error is cut and made valid UTF-8") {
  const std::string long_topic(500, 'x');
  DecodeError e = Refused(R"({"type":"subscribe","topics":[")" + long_topic + R"("]})");
  CHECK(e.code == "unknown_topic");
  CHECK(e.message.starts_with("topics[0]: unknown topic '" + std::string(61, 'x') + "...'"));

  // Invalid UTF-8 is bad JSON; the error reply is still valid JSON text.
  e = Refused("{\"type\":\"subscribe\",\"topics\":[\"\xff\xfe\"]}");
  CHECK(e.code == "bad_json");
  const json reply = json::parse(EncodeError(e));  // throws on invalid UTF-8.
  CHECK(reply["code"] == "bad_json");

  // A caller's own invalid text is repaired too.
  const json repaired = json::parse(EncodeError({"bad_message", "x\xc3(y"}));
  CHECK(repaired["message"] == "x\xef\xbf\xbd(y");
}

TEST_CASE("protocol: subscribed round-trips: what it says decodes back to the same request") {
  const ControlMessage m = Decoded(R"({"type":"subscribe","topics":["events","tf_stats"],
      "filters":{"kinds":["step","kernel"],"tracks":[9,2],"name_prefix":"sgemm\"\\\n","max_events_per_second":7}})");
  const std::string reply = EncodeSubscribed(m.topics, &*m.filter);
  json j = json::parse(reply);
  CHECK(j["type"] == "subscribed");
  CHECK(j["v"] == kProtocolVersion);
  CHECK(j["topics"] == json::array({"tf_stats", "events"}));
  CHECK(j["filters"]["kinds"] == json::array({"step", "kernel"}));
  CHECK(j["filters"]["tracks"] == json::array({2, 9}));
  CHECK(j["filters"]["name_prefix"] == "sgemm\"\\\n");
  CHECK(j["filters"]["max_events_per_second"] == 7);

  j["type"] = "subscribe";
  j.erase("v");
  const ControlMessage again = Decoded(j.dump());
  CHECK(again.topics == m.topics);
  CHECK(again.filter == m.filter);

  // Without a filter, no "filters"; the default filter lists every kind.
  j = json::parse(EncodeSubscribed(Topics({Topic::kOverview}), nullptr));
  CHECK(j == json::parse(R"({"type":"subscribed","v":1,"topics":["overview"]})"));
  const EventFilter all;
  j = json::parse(EncodeSubscribed(Topics({Topic::kEvents}), &all));
  CHECK(j["filters"]["kinds"].size() == StreamedKinds().count());
  CHECK(j["filters"]["tracks"] == json::array());
  CHECK(j["filters"]["name_prefix"] == "");
  CHECK(j["filters"]["max_events_per_second"] == kDefaultMaxEventsPerSecond);
}

TEST_CASE("protocol: hello and error parse back with their fields") {
  json hello = json::parse(EncodeHello("0.1.0", kDefaultMaxEventsPerSecond, 10));
  // The topics: the table's views on the feed, then events.
  json topics = json::array();
  for (const ViewInfo& v : kViews) {
    if (v.feed()) topics.push_back(v.name);
  }
  topics.push_back("events");
  CHECK(hello["topics"] == topics);
  // Every view of the table with its row's flags (the dashboard reads them).
  REQUIRE(hello["views"].size() == kViewCount);
  CHECK(hello["views"]["tf_stats"] ==
        json::parse(R"({"delivery":"feed","csv":true,"last":false,"last_s":true,"include_idle":true})"));
  CHECK(hello["views"]["steps"] ==
        json::parse(R"({"delivery":"feed","csv":false,"last":true,"last_s":true,"include_idle":false})"));
  CHECK(hello["views"]["pytorch"]["delivery"] == "request");
  for (const ViewInfo& v : kViews) {
    CAPTURE(v.name);
    const json& row = hello["views"][std::string(v.name)];
    CHECK(row["delivery"] == (v.feed() ? "feed" : "request"));
    CHECK(row["csv"] == !v.csv.empty());
    CHECK(row["last"] == v.steps_window);
    CHECK(row["last_s"] == v.time_window);
    CHECK(row["include_idle"] == v.idle);
  }
  hello.erase("topics");
  hello.erase("views");
  CHECK(hello == json::parse(R"({"type":"hello","v":1,"protocol":"liveprof","server":"0.1.0",
      "events":{"encoding":"flatbuffers","schema":"liveprof.fbs","file_identifier":"LPF1",
                "kinds":{"0":"invalid","1":"name_def","2":"track_def","3":"device_info","10":"host_span",
                         "11":"step","12":"input","13":"framework_op","14":"runtime_api","20":"kernel",
                         "21":"memcpy_h2d","22":"memcpy_d2h","23":"memcpy_d2d","24":"memcpy_h2h",
                         "25":"memcpy_p2p","26":"memcpy_other","27":"memset","30":"alloc","31":"free",
                         "40":"counter","41":"instant","42":"flow"},
                "frame_version":1,"max_events_per_second":100000,
                "max_events_per_second_cap":1000000,"frame_hz":10},
      "trace":{"encoding":"flatbuffers","body":"TraceTile","max_width_px":65536},
      "limits":{"max_control_message_bytes":65536}})"));

  const json error = json::parse(EncodeError(Refused(R"({"type":"subscribe","topics":["nope"]})")));
  CHECK(error["type"] == "error");
  CHECK(error["v"] == 1);
  CHECK(error["code"] == "unknown_topic");
  CHECK(error["message"].get<std::string>().starts_with("topics[0]: unknown topic 'nope'"));
}

// ---- Names ----

TEST_CASE("protocol: the name directory takes kNameDef and kTrackDef events") {
  static const char kGemm[] = "volta_sgemm";
  Event name;
  name.kind = EventKind::kNameDef;
  name.name = 7;
  name.payload.name_def.data = kGemm;
  name.payload.name_def.size = sizeof(kGemm) - 1;
  Event track;
  track.kind = EventKind::kTrackDef;
  track.track = 3;
  track.name = 7;
  track.payload.track_def.type = TrackType::kGpuStream;
  track.payload.track_def.os_tid = 13;
  const Event other = test::Instant(1, 9, 9);
  NameDirectory d;
  const Event defs[] = {name, track, other};
  d.Consume(defs);
  CHECK(d.Name(7) == "volta_sgemm");
  CHECK(d.Name(8) == "");
  CHECK(!d.HasName(9));
  REQUIRE(d.Track(3) != nullptr);
  CHECK(d.Track(3)->name == 7);
  CHECK(d.Track(3)->type == TrackType::kGpuStream);
  CHECK(d.Track(3)->os_tid == 13);
  CHECK(d.Track(9) == nullptr);
  CHECK(d.name_count() == 1);
  CHECK(d.track_count() == 1);
}

// ---- The events topic ----

// Names and tracks of the feed tests.
enum : NameId { kGemm = 1, kGemv = 2, kMain = 3, kStream7 = 4, kMatMul = 5, kDetails = 6 };
enum : TrackId { kHostTrack = 10, kGpuTrack = 20 };

NameDirectory Directory() {
  NameDirectory d;
  d.Define(kGemm, "volta_sgemm_128x64");
  d.Define(kGemv, "gemv2T_kernel");
  d.Define(kMain, "main");
  d.Define(kStream7, "stream 7");
  d.Define(kMatMul, "MatMul");
  d.Define(kDetails, "regs:32 grid:1,1,1 block:128,1,1");
  d.DefineTrack(kHostTrack, kMain, TrackType::kHostThread, 4242);
  d.DefineTrack(kGpuTrack, kStream7, TrackType::kGpuStream, 7);
  return d;
}

struct DecodedFrame {
  uint32_t version = 0;
  uint64_t seq = 0, watermark_ns = 0, dropped = 0, dropped_total = 0;
  uint32_t max_events_per_second = 0;
  std::vector<Event> events;
  std::map<NameId, std::string> names;
  std::map<TrackId, std::tuple<NameId, uint8_t, uint64_t>> tracks;
};

// Verifies `bytes` as the FlatBuffers verifier would for a received buffer,
// then reads it back.
DecodedFrame Decode(const std::string& bytes) {
  DecodedFrame out;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  flatbuffers::Verifier verifier(data, bytes.size());
  REQUIRE(wire::VerifyFrameBuffer(verifier));
  REQUIRE(flatbuffers::BufferHasIdentifier(data, "LPF1"));
  const wire::Frame* frame = wire::GetFrame(data);
  out.version = frame->version();
  REQUIRE(frame->body_type() == wire::Body::EventFrame);
  const wire::EventFrame* f = frame->body_as_EventFrame();
  out.seq = f->seq();
  out.watermark_ns = f->watermark_ns();
  out.dropped = f->dropped();
  out.dropped_total = f->dropped_total();
  out.max_events_per_second = f->max_events_per_second();
  if (f->events()) {
    for (const wire::Event* w : *f->events()) out.events.push_back(FromWire(*w));
  }
  if (f->names()) {
    for (const wire::NameDef* n : *f->names()) out.names[n->id()] = n->name() ? n->name()->str() : "";
  }
  if (f->tracks()) {
    for (const wire::TrackDef* t : *f->tracks()) out.tracks[t->id()] = {t->name(), t->type(), t->os_tid()};
  }
  return out;
}

bool Same(const Event& a, const Event& b) { return std::memcmp(&a, &b, sizeof(Event)) == 0; }

std::vector<Event> MixedEvents() {
  std::vector<Event> v;
  v.push_back(test::Kernel(100, 50, kGemm, /*corr=*/11, kGpuTrack, /*op=*/kMatMul, /*details=*/kDetails, 1));
  v.push_back(test::Kernel(200, 50, kGemv, 12, kGpuTrack));
  v.push_back(test::Copy(EventKind::kMemcpyHtoD, 300, 20, 1 << 20, 13, kGpuTrack));
  v.push_back(test::Op(50, 400, kMatMul, kHostTrack));
  v.push_back(test::Step(0, 1000, 77, kHostTrack));
  Event counter = test::Instant(500, kMain, kHostTrack);
  counter.kind = EventKind::kCounter;
  counter.payload.counter.value = 0.25;
  counter.flags = kFlagLate;
  v.push_back(counter);
  return v;
}

TEST_CASE("event feed: every kind by default, frames verify and decode back to the same events") {
  const NameDirectory names = Directory();
  EventFeed feed{EventFilter{}};
  const std::vector<Event> events = MixedEvents();
  const std::string bytes = feed.Encode(events, names, kChunkSeq, kWatermark, kT0);
  const DecodedFrame f = Decode(bytes);
  CHECK(f.version == kFrameVersion);
  CHECK(f.seq == kChunkSeq);
  CHECK(f.watermark_ns == kWatermark);
  CHECK(f.dropped == 0);
  CHECK(f.dropped_total == 0);
  CHECK(f.max_events_per_second == kDefaultMaxEventsPerSecond);
  REQUIRE(f.events.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) CHECK(Same(f.events[i], events[i]));
  CHECK(f.events[0].payload.kernel.op == kMatMul);
  // The packing docs/protocol.md gives: 32-bit fields low half first.
  CHECK((f.events[0].payload.raw[0] & 0xffffffff) == kDetails);
  CHECK((f.events[0].payload.raw[1] >> 32) == kMatMul);
  CHECK(f.events[2].payload.raw[0] == 1 << 20);  // a copy's bytes.
  CHECK(f.events[4].payload.step.step_num == 77);
  CHECK(f.events[5].payload.counter.value == 0.25);
  // Every name the events use (a kernel's op and details too), every track
  // and its name.
  CHECK(f.names == std::map<NameId, std::string>{{kGemm, "volta_sgemm_128x64"},
                                                 {kGemv, "gemv2T_kernel"},
                                                 {kMain, "main"},
                                                 {kStream7, "stream 7"},
                                                 {kMatMul, "MatMul"},
                                                 {kDetails, "regs:32 grid:1,1,1 block:128,1,1"}});
  CHECK(f.tracks.size() == 2);
  CHECK(f.tracks.at(kHostTrack) == std::make_tuple(NameId{kMain}, uint8_t{0}, uint64_t{4242}));
  CHECK(f.tracks.at(kGpuTrack) == std::make_tuple(NameId{kStream7}, uint8_t{1}, uint64_t{7}));
  CHECK(feed.events_sent() == events.size());

  // A damaged buffer does not verify.
  std::string bad = bytes;
  bad[4] = 'X';  // the file identifier.
  flatbuffers::Verifier v1(reinterpret_cast<const uint8_t*>(bad.data()), bad.size());
  CHECK(!wire::VerifyFrameBuffer(v1));
  bad = bytes.substr(0, bytes.size() / 2);
  flatbuffers::Verifier v2(reinterpret_cast<const uint8_t*>(bad.data()), bad.size());
  CHECK(!wire::VerifyFrameBuffer(v2));
}

TEST_CASE("event feed: names and tracks are sent once per connection") {
  const NameDirectory names = Directory();
  EventFeed feed{EventFilter{}};
  const std::vector<Event> first = {test::Kernel(100, 50, kGemm, 1, kGpuTrack)};
  DecodedFrame f = Decode(feed.Encode(first, names, 1, kWatermark, kT0));
  CHECK(f.names == std::map<NameId, std::string>{{kGemm, "volta_sgemm_128x64"}, {kStream7, "stream 7"}});
  CHECK(f.tracks.size() == 1);

  // The same name and track again, and a new name on a known track.
  const std::vector<Event> second = {test::Kernel(200, 50, kGemm, 2, kGpuTrack),
                                     test::Kernel(300, 50, kGemv, 3, kGpuTrack)};
  f = Decode(feed.Encode(second, names, 2, kWatermark, kT0));
  CHECK(f.events.size() == 2);
  CHECK(f.names == std::map<NameId, std::string>{{kGemv, "gemv2T_kernel"}});
  CHECK(f.tracks.empty());

  // A second connection gets them again.
  EventFeed other{EventFilter{}};
  f = Decode(other.Encode(second, names, 2, kWatermark, kT0));
  CHECK(f.names.size() == 3);
  CHECK(f.tracks.size() == 1);

  // An unknown name or track, and name 0, are not defined (nor remembered).
  const std::vector<Event> unknown = {test::Instant(400, 99, 98), test::Instant(401, 0, kHostTrack)};
  f = Decode(feed.Encode(unknown, names, 3, kWatermark, kT0));
  CHECK(f.events.size() == 2);
  CHECK(f.names == std::map<NameId, std::string>{{kMain, "main"}});
  CHECK(f.tracks.size() == 1);
  CHECK(f.tracks.count(kHostTrack) == 1);
}

TEST_CASE("event feed: the filter selects by kind, track and name prefix") {
  const NameDirectory names = Directory();
  const std::vector<Event> events = MixedEvents();
  auto sent = [&](const EventFilter& filter) {
    EventFeed feed(filter);
    const std::string bytes = feed.Encode(events, names, 1, kWatermark, kT0);
    std::vector<size_t> which;
    if (bytes.empty()) return which;
    for (const Event& e : Decode(bytes).events) {
      for (size_t i = 0; i < events.size(); ++i) {
        if (Same(e, events[i])) which.push_back(i);
      }
    }
    return which;
  };
  EventFilter kinds;
  kinds.kinds.reset();
  kinds.kinds.set(static_cast<size_t>(EventKind::kKernel));
  kinds.kinds.set(static_cast<size_t>(EventKind::kMemcpyHtoD));
  CHECK(sent(kinds) == std::vector<size_t>{0, 1, 2});

  EventFilter tracks;
  tracks.tracks = {kHostTrack};
  CHECK(sent(tracks) == std::vector<size_t>{3, 4, 5});

  EventFilter prefix;
  prefix.name_prefix = "volta_";
  CHECK(sent(prefix) == std::vector<size_t>{0});

  EventFilter all_three = kinds;
  all_three.tracks = {kGpuTrack, kHostTrack, kGpuTrack};  // the feed sorts them.
  all_three.name_prefix = "gemv";
  CHECK(sent(all_three) == std::vector<size_t>{1});

  // Nothing passes and nothing was dropped: nothing to say.
  EventFilter none;
  none.tracks = {12345};
  EventFeed feed(none);
  CHECK(feed.Encode(events, names, 1, kWatermark, kT0).empty());
  CHECK(feed.dropped_total() == 0);

  // Definitions are never sent as events, whatever the filter says.
  Event def;
  def.kind = EventKind::kNameDef;
  def.name = kGemm;
  def.payload.name_def.data = "volta_sgemm_128x64";
  def.payload.name_def.size = 18;
  EventFilter everything;
  everything.kinds.set();
  EventFeed defs(everything);
  const Event only_def[] = {def};
  CHECK(defs.Encode(only_def, names, 1, kWatermark, kT0).empty());
}

TEST_CASE("event feed: the rate cap sends at most its budget and counts every drop exactly") {
  const NameDirectory names = Directory();
  constexpr uint32_t kRate = 10;
  EventFilter filter;
  filter.max_events_per_second = kRate;
  EventFeed feed(filter);
  auto instants = [](size_t n) {
    std::vector<Event> v;
    for (size_t i = 0; i < n; ++i) v.push_back(test::Instant(i, kMain, kHostTrack));
    return v;
  };

  // The budget starts full: one second's worth.
  DecodedFrame f = Decode(feed.Encode(instants(25), names, 1, kWatermark, kT0));
  CHECK(f.events.size() == 10);
  CHECK(f.dropped == 15);
  CHECK(f.dropped_total == 15);
  CHECK(f.max_events_per_second == kRate);

  // Half a second refills half the rate.
  f = Decode(feed.Encode(instants(10), names, 2, kWatermark, kT0 + kSecond / 2));
  CHECK(f.events.size() == 5);
  CHECK(f.dropped == 5);
  CHECK(f.dropped_total == 20);

  // 0.15 s: 1.5 events' worth; one is sent, half an event's budget is kept.
  f = Decode(feed.Encode(instants(3), names, 3, kWatermark, kT0 + kSecond / 2 + 150'000'000));
  CHECK(f.events.size() == 1);
  CHECK(f.dropped == 2);
  f = Decode(feed.Encode(instants(3), names, 4, kWatermark, kT0 + kSecond / 2 + 200'000'000));
  CHECK(f.events.size() == 1);  // 0.5 kept + 0.5 refilled.
  CHECK(f.dropped == 2);
  CHECK(f.dropped_total == 24);

  // A long silence refills one second's worth, no more.
  f = Decode(feed.Encode(instants(30), names, 5, kWatermark, kT0 + 100 * kSecond));
  CHECK(f.events.size() == 10);
  CHECK(f.dropped == 20);
  CHECK(f.dropped_total == 44);

  // The clock stepping back refills nothing.
  f = Decode(feed.Encode(instants(1), names, 6, kWatermark, kT0));
  CHECK(f.events.empty());
  CHECK(f.dropped == 1);

  // Frames the server could not queue are reported by the next frame, even
  // one without events.
  feed.AddDropped(7);
  CHECK(feed.dropped_total() == 52);
  f = Decode(feed.Encode({}, names, 7, kWatermark, kT0 + 100 * kSecond));
  CHECK(f.events.empty());
  CHECK(f.dropped == 7);
  CHECK(f.dropped_total == 52);
  // And then there is nothing to say.
  CHECK(feed.Encode({}, names, 8, kWatermark, kT0 + 101 * kSecond).empty());
  CHECK(feed.events_sent() == 27);
}

TEST_CASE("event feed: a new filter keeps the budget, up to a second of the new rate") {
  const NameDirectory names = Directory();
  EventFilter fast;
  fast.max_events_per_second = 100;
  EventFeed feed(fast);
  std::vector<Event> events(50, test::Instant(1, kMain, kHostTrack));
  CHECK(Decode(feed.Encode(events, names, 1, kWatermark, kT0)).events.size() == 50);  // 50 left.

  EventFilter slow;
  slow.max_events_per_second = 20;
  feed.SetFilter(slow);
  CHECK(feed.filter() == slow);
  DecodedFrame f = Decode(feed.Encode(events, names, 2, kWatermark, kT0));
  CHECK(f.events.size() == 20);  // clamped to one second of 20/s.
  CHECK(f.dropped == 30);
  CHECK(f.max_events_per_second == 20);

  feed.SetFilter(fast);
  f = Decode(feed.Encode(events, names, 3, kWatermark, kT0 + kSecond / 10));
  CHECK(f.events.size() == 10);  // empty, then 0.1 s at 100/s.
}

}  // namespace
}  // namespace liveprof::protocol_test
