// Trace tiles over a real WebSocket: an in-process server fed by the
// simulated workload, a raw client (ws_raw_client.h) that sends `trace`
// requests. Each is answered by one binary frame that passes the verifier,
// carries the request's id and holds what /api/trace answers for the same
// query; a bad request gets an error with its id and the session serves on;
// a server without a trace store says so.
#include <doctest/doctest.h>
#include <flatbuffers/flatbuffers.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "pipeline/pipeline.h"
#include "stream/liveprof_generated.h"
#include "stream/stream.h"
#include "web/server.h"
#include "web/test_server.h"
#include "web/ws_raw_client.h"

namespace liveprof::trace_ws_test {
namespace {

using nlohmann::json;
using test::ParseJson;
using test::RawClient;
using test::WsFrame;

// A client upgraded on /ws; returns its hello.
json Open(RawClient& c) {
  REQUIRE(c.connected());
  const test::HttpReply up = c.Handshake("/ws");
  REQUIRE_MESSAGE(up.status == 101, up.status_line, " ", up.error);
  const WsFrame hello = c.ReadMessage();
  REQUIRE(hello.ok);
  return ParseJson(hello.payload);
}

// The next message: JSON text.
json ReadText(RawClient& c) {
  const WsFrame f = c.ReadMessage();
  REQUIRE_MESSAGE(f.ok, f.error);
  REQUIRE_MESSAGE(f.opcode == test::kOpText, "opcode ", int{f.opcode});
  return ParseJson(f.payload);
}

// The next message: a binary frame the verifier passes, with a TraceTile.
// `bytes` keeps the frame the tile points into.
const wire::TraceTile* ReadTile(RawClient& c, std::string* bytes) {
  const WsFrame f = c.ReadMessage();
  REQUIRE_MESSAGE(f.ok, f.error);
  REQUIRE_MESSAGE(f.opcode == test::kOpBinary, "opcode ", int{f.opcode}, ": ", f.payload.substr(0, 300));
  *bytes = f.payload;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes->data());
  flatbuffers::Verifier verifier(data, bytes->size());
  REQUIRE(wire::VerifyFrameBuffer(verifier));
  const wire::Frame* frame = wire::GetFrame(data);
  CHECK(frame->version() == 1);
  REQUIRE(frame->body_type() == wire::Body::TraceTile);
  return frame->body_as_TraceTile();
}

TEST_CASE("trace over the WebSocket: one tile per request, with its id, what /api/trace says") {
  test::TestServer server;
  REQUIRE_MESSAGE(server.started(), server.error());
  const auto [from, to] = server.PastTraceRange(50'000);
  const std::string t0 = std::to_string(from), t1 = std::to_string(to);

  RawClient c(server.port(), test::kPatience);
  const json hello = Open(c);
  CHECK(hello["trace"] == json::parse(R"({"encoding":"flatbuffers","body":"TraceTile","max_width_px":65536})"));
  REQUIRE(c.SendText(R"({"type":"trace","id":42,"t0":)" + t0 + R"(,"t1":)" + t1 + R"(,"width":800})"));
  std::string bytes;
  const wire::TraceTile* tile = ReadTile(c, &bytes);
  CHECK(tile->id() == 42);

  RawClient http(server.port());
  const test::HttpReply reply = http.HttpGet("/api/trace?t0=" + t0 + "&t1=" + t1 + "&width=800");
  REQUIRE(reply.status == 200);
  const json j = ParseJson(reply.body);
  CHECK(tile->t0() == j["t0"].get<uint64_t>());
  CHECK(tile->t1() == j["t1"].get<uint64_t>());
  CHECK(tile->width_px() == j["width_px"].get<uint32_t>());
  CHECK(tile->ns_per_px() == j["ns_per_px"].get<double>());
  REQUIRE(tile->tracks()->size() == j["tracks"].size());
  size_t slices = 0;
  for (size_t t = 0; t < j["tracks"].size(); ++t) {
    const json& jt = j["tracks"][t];
    const wire::TileTrack& tt = *tile->tracks()->Get(static_cast<flatbuffers::uoffset_t>(t));
    CAPTURE(jt["track"]);
    CHECK(tt.track() == jt["track"].get<uint32_t>());
    REQUIRE(tt.slices()->size() == jt["slices"].size());
    slices += tt.slices()->size();
    if (tt.slices()->size() == 0) continue;
    const wire::TileSlice& first = *tt.slices()->Get(0);
    CHECK(jt["slices"][0] == json::array({first.id(), first.ts(), first.dur(), first.name(), first.depth(),
                                          std::string(EventKindName(static_cast<EventKind>(first.kind())))}));
    // Its name, as the tile defines it.
    const wire::NameDef* name = nullptr;
    for (const wire::NameDef* n : *tile->names()) name = n->id() == first.name() ? n : name;
    REQUIRE(name != nullptr);
    CHECK(j["names"][std::to_string(first.name())] == name->name()->str());
  }
  CHECK(slices > 100);

  // A bad request: an error naming the field and the request; nothing else changes.
  REQUIRE(c.SendText(R"({"type":"trace","id":43,"width":0})"));
  json e = ReadText(c);
  CHECK(e["type"] == "error");
  CHECK(e["code"] == "bad_message");
  CHECK(e["id"] == 43);
  CHECK(e["message"] == "width: 0 is out of range 1..65536");
  REQUIRE(c.SendText(R"({"type":"trace","id":44,"t0":9,"t1":9})"));
  e = ReadText(c);
  CHECK(e["id"] == 44);
  CHECK(e["message"] == "t1: 9 is not after t0 (9)");

  // The session serves on: the whole store by default, and a subscribe.
  REQUIRE(c.SendText(R"({"type":"trace","id":45})"));
  tile = ReadTile(c, &bytes);
  CHECK(tile->id() == 45);
  CHECK(tile->events() > 50'000);
  CHECK(tile->t0() <= tile->first_ns());  // the store's stats, then its query over them
  CHECK(tile->t1() >= tile->last_ns());
  REQUIRE(c.SendText(R"({"type":"subscribe","topics":["status"]})"));
  CHECK(ReadText(c)["type"] == "subscribed");
  CHECK(server.stats().trace_tiles_sent == 2);
  const json status = ParseJson(http.HttpGet("/api/status").body);
  CHECK(status["server"]["trace_tiles_sent"] == 2);
}

TEST_CASE("trace over the WebSocket: a server without a trace store says so, and serves on") {
  Stream stream;
  Pipeline::Options po;
  po.trace_store_bytes = 0;  // no store
  Pipeline pipeline(stream, po);
  Server server(pipeline, test::ShortOptions());
  std::string error;
  REQUIRE_MESSAGE(server.Start(&error), error);
  pipeline.Start();
  REQUIRE(pipeline.trace_store() == nullptr);
  {
    RawClient c(server.port(), test::kPatience);
    Open(c);
    REQUIRE(c.SendText(R"({"type":"trace","id":3,"width":10})"));
    const json e = ReadText(c);
    CHECK(e["type"] == "error");
    CHECK(e["code"] == "no_trace_store");
    CHECK(e["id"] == 3);
    REQUIRE(c.SendText(R"({"type":"subscribe","topics":["status"]})"));
    CHECK(ReadText(c)["type"] == "subscribed");
  }
  pipeline.Stop();
  server.Stop();
}

}  // namespace
}  // namespace liveprof::trace_ws_test
