// The `trace` control message (protocol.h, docs/protocol.md): what decodes
// and to what, the defaults /api/trace has, and each refusal with its code,
// its message naming the field, and the request's id when it had a valid one.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <variant>

#include "web/protocol.h"

namespace liveprof::trace_request_test {
namespace {

TraceRequest DecodedTrace(std::string_view text) {
  auto r = DecodeControlMessage(text);
  if (auto* e = std::get_if<DecodeError>(&r)) FAIL("unexpected error ", e->code, ": ", e->message);
  const ControlMessage& m = std::get<ControlMessage>(r);
  CHECK(m.type == ControlMessage::Type::kTrace);
  CHECK(m.topics.none());
  CHECK(!m.filter.has_value());
  return m.trace;
}

TEST_CASE("trace request: decodes with /api/trace's defaults") {
  TraceRequest r = DecodedTrace(R"({"type":"trace","id":7,"t0":1000,"t1":2000000,"width":800,"tracks":[9,3,9]})");
  CHECK(r.id == 7);
  CHECK(r.t0 == 1000u);
  CHECK(r.t1 == 2'000'000u);
  CHECK(r.width_px == 800);
  CHECK(r.tracks == std::vector<TrackId>{9, 3, 9});  // as sent: the store counts repeats once.

  r = DecodedTrace(R"({"id":0,"type":"trace"})");  // any key order.
  CHECK(r.id == 0);
  CHECK(!r.t0.has_value());
  CHECK(!r.t1.has_value());
  CHECK(r.width_px == kDefaultTraceWidthPx);
  CHECK(r.tracks.empty());

  // The edges: the largest id, times and width; t1 one past t0; no tracks = all.
  r = DecodedTrace(R"({"type":"trace","id":4294967295,"t0":18446744073709551614,"t1":18446744073709551615,)"
                   R"("width":65536,"tracks":[]})");
  CHECK(r.id == 4'294'967'295u);
  CHECK(r.t0 == 18'446'744'073'709'551'614u);
  CHECK(r.t1 == 18'446'744'073'709'551'615u);
  CHECK(r.width_px == kMaxTraceWidthPx);
  r = DecodedTrace(R"({"type":"trace","id":1,"width":1,"t1":5})");
  CHECK(r.width_px == 1);
  CHECK(r.t1 == 5u);
  CHECK(!r.t0.has_value());
}

TEST_CASE("trace request: every refusal names the field, and carries the id it could read") {
  struct Case {
    std::string text;
    const char* code;
    const char* message;
    std::optional<uint32_t> id;
  };
  const Case cases[] = {
      {R"({"type":"trace"})", "bad_message", "id: missing (an integer 0..4294967295 that the reply carries)", {}},
      {R"({"type":"trace","id":"7"})",
       "bad_message",
       "id: expected a request id (an integer 0..4294967295), got the string '7'",
       {}},
      {R"({"type":"trace","id":1.5})",
       "bad_message",
       "id: expected a request id (an integer 0..4294967295), got 1.5",
       {}},
      {R"({"type":"trace","id":-1})", "bad_message", "id: -1 is out of range 0..4294967295", {}},
      {R"({"type":"trace","id":4294967296})", "bad_message", "id: 4294967296 is out of range 0..4294967295", {}},
      {R"({"type":"trace","id":3,"topics":["steps"]})", "bad_message",
       "the message: unknown key 'topics' (known: type, id, t0, t1, width, tracks)", 3},
      {R"({"type":"trace","id":3,"widht":100})", "bad_message",
       "the message: unknown key 'widht' (known: type, id, t0, t1, width, tracks)", 3},
      {R"({"type":"trace","id":3,"t0":-5})", "bad_message", "t0: -5 is out of range 0..18446744073709551615", 3},
      {R"({"type":"trace","id":3,"t0":"0"})", "bad_message",
       "t0: expected a time in ns (an integer 0..18446744073709551615), got the string '0'", 3},
      {R"({"type":"trace","id":3,"t1":1e3})", "bad_message",
       "t1: expected a time in ns (an integer 0..18446744073709551615), got 1000.0", 3},
      {R"({"type":"trace","id":3,"t0":500,"t1":500})", "bad_message", "t1: 500 is not after t0 (500)", 3},
      {R"({"type":"trace","id":3,"t0":500,"t1":20})", "bad_message", "t1: 20 is not after t0 (500)", 3},
      {R"({"type":"trace","id":3,"width":0})", "bad_message", "width: 0 is out of range 1..65536", 3},
      {R"({"type":"trace","id":3,"width":65537})", "bad_message", "width: 65537 is out of range 1..65536", 3},
      {R"({"type":"trace","id":3,"width":null})", "bad_message",
       "width: expected a width in pixels (an integer 1..65536), got null", 3},
      {R"({"type":"trace","id":3,"tracks":4})", "bad_message", "tracks: expected an array, got number", 3},
      {R"({"type":"trace","id":3,"tracks":[1,"2"]})", "bad_message",
       "tracks[1]: expected a track id (an integer 0..4294967295), got the string '2'", 3},
      {R"({"type":"trace","id":3,"tracks":[4294967296]})", "bad_message",
       "tracks[0]: expected a track id (an integer 0..4294967295), got 4294967296", 3},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    auto r = DecodeControlMessage(c.text);
    REQUIRE(std::holds_alternative<DecodeError>(r));
    const DecodeError& e = std::get<DecodeError>(r);
    CHECK(e.code == c.code);
    CHECK(e.message == c.message);
    CHECK(e.id == c.id);
    // On the wire: the id when there is one, so the client can fail that request.
    const nlohmann::json j = nlohmann::json::parse(EncodeError(e));
    CHECK(j["message"] == c.message);
    CHECK(j.contains("id") == c.id.has_value());
    if (c.id) CHECK(j["id"] == *c.id);
  }

  // Over the track limit: too_large, like a filter's.
  std::string many = R"({"type":"trace","id":2,"tracks":[0)";
  for (size_t i = 1; i <= kMaxTraceTracks; ++i) many += "," + std::to_string(i);
  auto r = DecodeControlMessage(many + "]}");
  REQUIRE(std::holds_alternative<DecodeError>(r));
  CHECK(std::get<DecodeError>(r).code == "too_large");
  CHECK(std::get<DecodeError>(r).message == "tracks: 1025 entries, over the limit of 1024");
  CHECK(std::get<DecodeError>(r).id == 2u);
  // At the limit: read.
  many = R"({"type":"trace","id":2,"tracks":[0)";
  for (size_t i = 1; i < kMaxTraceTracks; ++i) many += "," + std::to_string(i);
  CHECK(DecodedTrace(many + "]}").tracks.size() == kMaxTraceTracks);
}

}  // namespace
}  // namespace liveprof::trace_request_test
