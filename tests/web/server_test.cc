// The server over real sockets, against hostile peers: an in-process Server
// on port 0 fed by the simulated workload at its own rate, and raw clients
// (ws_raw_client.h) that send what a browser never would. Each case checks
// that the offender gets a clear error or a close, and that a well-behaved
// subscriber, open through the whole case, keeps receiving new view frames
// with increasing seq.
//
// No timing thresholds: every wait is on a condition, bounded generously
// (kPatience) so that a broken server fails instead of hanging.
#include "web/server.h"

#include <doctest/doctest.h>
#include <stdlib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "pipeline/pipeline.h"
#include "producers/simulated_workload.h"
#include "stream/stream.h"
#include "web/test_server.h"
#include "web/ws_raw_client.h"

namespace liveprof::server_test {
namespace {

using std::chrono::milliseconds;
using test::Clock;
using test::HttpReply;
using test::IsJsonError;
using test::kMaxBadMessages;
using test::kPatience;
using test::ParseJson;
using test::RawClient;
using test::ReadEnd;
using test::ShortOptions;
using test::TestServer;
using test::WaitFor;
using test::WsFrame;

constexpr size_t kControlCap = 64 * 1024;

constexpr const char* kAllViewTopics =
    R"({"type":"subscribe","topics":["overview","steps","input_pipeline","tf_stats",)"
    R"("kernel_stats","memory","alerts","status","pod","modules"]})";

// The well-behaved subscriber: its own thread reads every frame, answers
// pings, and records each view frame's seq.
class GoodClient {
 public:
  explicit GoodClient(uint16_t port) : client_(port, milliseconds(100)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~GoodClient() {
    stop_.store(true);
    thread_.join();
  }

  // The newest seq seen (0 before the first view frame).
  uint64_t max_seq() const { return max_seq_.load(); }
  uint64_t view_frames() const { return view_frames_.load(); }
  bool closed() const { return closed_.load(); }
  // Frames of one topic whose seq did not increase.
  uint64_t seq_regressions() const { return regressions_.load(); }
  std::string failure() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }

  bool WaitSubscribed() {
    return WaitFor([&] { return max_seq() > 0 || closed(); }) && !closed();
  }

  // True when, from now on, at least `n` view frames of newer publications
  // arrive, each topic's seq increasing.
  bool KeepsReceiving(uint64_t n = 2) {
    const uint64_t mark = max_seq();
    const bool ok = WaitFor([&] { return max_seq() >= mark + n || closed(); });
    return ok && !closed() && seq_regressions() == 0;
  }

 private:
  void Fail(std::string why) {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = std::move(why);
    closed_.store(true);
  }

  void Run() {
    client_.SetReceiveTimeout(kPatience);
    const HttpReply up = client_.Handshake("/ws");
    if (up.status != 101) return Fail("handshake: " + up.status_line + " " + up.error);
    if (!client_.SendText(R"({"type":"subscribe","topics":["overview","status"]})")) {
      return Fail("subscribe not sent");
    }
    client_.SetReceiveTimeout(milliseconds(100));
    std::map<std::string, uint64_t> last;
    while (!stop_.load()) {
      WsFrame f = client_.ReadMessage(/*answer_pings=*/true);
      if (!f.ok) {
        if (f.end == ReadEnd::kTimeout) continue;
        return Fail(std::string("read: ") + f.error);
      }
      if (f.opcode == test::kOpClose) return Fail("closed by the server: " + std::to_string(f.close_code));
      if (f.opcode != test::kOpText) continue;
      const nlohmann::json j = ParseJson(f.payload);
      if (!j.is_object() || !j.contains("seq")) continue;  // hello, subscribed.
      const std::string type = j.value("type", "");
      const uint64_t seq = j.value("seq", uint64_t{0});
      uint64_t& prev = last[type];
      if (seq <= prev) regressions_.fetch_add(1);
      prev = seq;
      view_frames_.fetch_add(1);
      if (seq > max_seq_.load()) max_seq_.store(seq);
    }
  }

  RawClient client_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> max_seq_{0};
  std::atomic<uint64_t> view_frames_{0};
  std::atomic<uint64_t> regressions_{0};
  mutable std::mutex mu_;
  std::string failure_;
};

// A client upgraded on /ws that has read its hello.
std::unique_ptr<RawClient> OpenFeed(uint16_t port, int rcvbuf = 0) {
  auto c = std::make_unique<RawClient>(port, kPatience, rcvbuf);
  REQUIRE(c->connected());
  const HttpReply up = c->Handshake("/ws");
  REQUIRE_MESSAGE(up.status == 101, up.status_line, " ", up.error);
  const WsFrame hello = c->ReadMessage();
  REQUIRE(hello.ok);
  REQUIRE(ParseJson(hello.payload).value("type", "") == "hello");
  return c;
}

// The next message, which must be a JSON text one.
nlohmann::json ReadJson(RawClient& c) {
  const WsFrame f = c.ReadMessage();
  REQUIRE_MESSAGE(f.ok, f.error);
  REQUIRE_MESSAGE(f.opcode == test::kOpText, "opcode ", int{f.opcode}, " close code ", f.close_code);
  return ParseJson(f.payload);
}

// Reads (discarding data frames) until a close frame; its code, or 0 when
// the connection ended without one.
uint16_t ReadUntilClose(RawClient& c) {
  for (;;) {
    const WsFrame f = c.ReadMessage();
    if (!f.ok) return 0;
    if (f.opcode == test::kOpClose) {
      c.SendClose(f.close_code);
      return f.close_code;
    }
  }
}

TEST_CASE("server: bad control messages get error replies with their code, then a 1008 close") {
  TestServer ts;
  REQUIRE_SERVER(ts);
  GoodClient good(ts.port());
  REQUIRE_MESSAGE(good.WaitSubscribed(), good.failure());

  auto c = OpenFeed(ts.port());
  struct Bad {
    const char* what;
    std::string text;  // sent as a text frame; empty: binary garbage.
    const char* code;
  };
  const Bad bad[] = {
      {"malformed JSON", R"({"type":"subscribe","topics":[)", "bad_json"},
      {"unknown topic", R"({"type":"subscribe","topics":["overview","no_such_topic"]})", "unknown_topic"},
      {"topics not an array", R"({"type":"subscribe","topics":"overview"})", "bad_message"},
      {"not an object", R"([1,2,3])", "bad_message"},
      {"binary garbage", "", "bad_message"},
  };
  static_assert(std::extent_v<decltype(bad)> == kMaxBadMessages);
  for (size_t i = 0; i < std::size(bad); ++i) {
    CAPTURE(bad[i].what);
    if (bad[i].text.empty()) {
      REQUIRE(c->SendBinary(std::string("\x00\xff\xfe\x80garbage\x01", 12)));
    } else {
      REQUIRE(c->SendText(bad[i].text));
    }
    const nlohmann::json reply = ReadJson(*c);
    CHECK(reply.value("type", "") == "error");
    CHECK(reply.value("code", "") == bad[i].code);
    CHECK(!reply.value("message", "").empty());
    if (std::string(bad[i].code) == "unknown_topic") {
      CHECK(reply.value("message", "").find("no_such_topic") != std::string::npos);
    }
    if (i == 1) {
      // Below the limit the connection still works.
      REQUIRE(c->SendText(R"({"type":"unsubscribe","topics":["overview"]})"));
      CHECK(ReadJson(*c).value("type", "") == "subscribed");
    }
  }
  // The last one reached max_bad_messages: policy violation.
  CHECK(ReadUntilClose(*c) == 1008);
  ReadEnd how = ReadEnd::kNone;
  CHECK(c->WaitClosed(kPatience, &how));
  CHECK(ts.stats().bad_messages >= kMaxBadMessages);
  CHECK_MESSAGE(good.KeepsReceiving(), good.failure());
}

TEST_CASE("server: a message over the 64 KiB cap is closed with 1009, one at the cap is answered") {
  TestServer ts;
  REQUIRE_SERVER(ts);
  GoodClient good(ts.port());
  REQUIRE_MESSAGE(good.WaitSubscribed(), good.failure());

  SUBCASE("at the cap") {
    auto c = OpenFeed(ts.port());
    REQUIRE(c->SendText(std::string(kControlCap, 'x')));
    const nlohmann::json reply = ReadJson(*c);
    CHECK(reply.value("type", "") == "error");
    CHECK(reply.value("code", "") == "bad_json");
  }
  SUBCASE("one frame over the cap") {
    auto c = OpenFeed(ts.port());
    c->SendText(std::string(kControlCap + 1, 'x'));  // the server may close before it all went.
    CHECK(ReadUntilClose(*c) == 1009);
    CHECK(c->WaitClosed(kPatience));
  }
  SUBCASE("fragments that add up to more than the cap") {
    auto c = OpenFeed(ts.port());
    c->SendFrame(test::kOpText, std::string(40 * 1024, ' '), /*fin=*/false);
    c->SendFrame(test::kOpContinuation, std::string(40 * 1024, ' '), /*fin=*/true);
    CHECK(ReadUntilClose(*c) == 1009);
    CHECK(c->WaitClosed(kPatience));
  }
  SUBCASE("a 64-bit length the server never reads") {
    auto c = OpenFeed(ts.port());
    // Header only: text, 2^40 bytes announced, masked.
    std::string header = "\x81\xff";
    for (int shift = 56; shift >= 0; shift -= 8) header.push_back(static_cast<char>((uint64_t{1} << 40) >> shift));
    header += "abcd";
    REQUIRE(c->SendRaw(header));
    CHECK(ReadUntilClose(*c) == 1009);
    CHECK(c->WaitClosed(kPatience));
  }
  CHECK_MESSAGE(good.KeepsReceiving(), good.failure());
}

TEST_CASE("server: protocol violations (unmasked frame, reserved opcode) close the connection") {
  TestServer ts;
  REQUIRE_SERVER(ts);
  GoodClient good(ts.port());
  REQUIRE_MESSAGE(good.WaitSubscribed(), good.failure());

  SUBCASE("unmasked client frame") {
    auto c = OpenFeed(ts.port());
    REQUIRE(c->SendRaw(test::EncodeFrame(test::kOpText, kAllViewTopics, true, /*mask=*/false)));
    CHECK(ReadUntilClose(*c) == 1002);
    CHECK(c->WaitClosed(kPatience));
  }
  SUBCASE("reserved opcode") {
    auto c = OpenFeed(ts.port());
    REQUIRE(c->SendFrame(0x3, "x"));
    CHECK(ReadUntilClose(*c) == 1002);
    CHECK(c->WaitClosed(kPatience));
  }
  SUBCASE("invalid UTF-8 in a text frame") {
    auto c = OpenFeed(ts.port());
    REQUIRE(c->SendText("{\"type\":\"\xc3\x28\"}"));
    CHECK(ReadUntilClose(*c) == 1007);
    CHECK(c->WaitClosed(kPatience));
  }
  CHECK_MESSAGE(good.KeepsReceiving(), good.failure());
}

TEST_CASE("server: a subscriber that never reads is closed after the send deadline") {
  TestServer ts;
  REQUIRE_SERVER(ts);
  GoodClient good(ts.port());
  REQUIRE_MESSAGE(good.WaitSubscribed(), good.failure());

  auto slow = OpenFeed(ts.port(), /*rcvbuf=*/4096);
  REQUIRE(slow->SendText(kAllViewTopics));
  // From here on it never reads. It does send an unsolicited pong now and
  // then (RFC 6455 §5.5.3 allows it): the idle timeout would otherwise close
  // it first, and the point here is the send deadline.
  const uint64_t frames_before = good.view_frames();
  const bool blocked = WaitFor(
      [&] {
        slow->SendPong();
        return ts.stats().sessions_closed_blocked >= 1;
      },
      3 * kPatience);
  CHECK(blocked);
  CHECK(ts.stats().view_frames_replaced > 0);
  // The good client was served while the slow one was stuck.
  CHECK(good.view_frames() > frames_before);
  ReadEnd how = ReadEnd::kNone;
  CHECK(slow->WaitClosed(kPatience, &how));
  CHECK((how == ReadEnd::kEof || how == ReadEnd::kReset));
  CHECK(WaitFor([&] { return ts.stats().websocket_sessions == 1; }));
  CHECK_MESSAGE(good.KeepsReceiving(), good.failure());
}

TEST_CASE("server: half-open and idle connections are closed after their timeouts") {
  TestServer ts;
  REQUIRE_SERVER(ts);
  GoodClient good(ts.port());
  REQUIRE_MESSAGE(good.WaitSubscribed(), good.failure());
  REQUIRE(WaitFor([&] { return ts.stats().websocket_sessions == 1; }));

  // Upgraded, then silent and never reading: a peer that vanished.
  auto half_open = OpenFeed(ts.port());
  // Upgraded and reading, but never answering the server's pings.
  auto deaf = OpenFeed(ts.port());
  // TCP only: no request at all.
  RawClient idle_tcp(ts.port(), kPatience);
  REQUIRE(idle_tcp.connected());
  // Half a request header, then nothing (slowloris).
  RawClient slow_header(ts.port(), kPatience);
  REQUIRE(slow_header.SendRaw("GET /api/status HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  REQUIRE(WaitFor([&] { return ts.stats().websocket_sessions == 3; }));

  bool deaf_saw_ping = false;
  ReadEnd deaf_end = ReadEnd::kNone;
  for (;;) {
    const WsFrame f = deaf->ReadFrame();
    if (!f.ok) {
      deaf_end = f.end;
      break;
    }
    if (f.opcode == test::kOpPing) deaf_saw_ping = true;
    if (f.opcode == test::kOpClose) {
      deaf_end = ReadEnd::kEof;
      break;
    }
  }
  CHECK(deaf_saw_ping);
  CHECK((deaf_end == ReadEnd::kEof || deaf_end == ReadEnd::kReset));

  // The half-open one is gone on the server before it reads a byte.
  CHECK(WaitFor([&] { return ts.stats().websocket_sessions == 1; }));
  ReadEnd how = ReadEnd::kNone;
  CHECK(half_open->WaitClosed(kPatience, &how));
  CHECK((how == ReadEnd::kEof || how == ReadEnd::kReset));

  CHECK(idle_tcp.WaitClosed(kPatience, &how));
  CHECK((how == ReadEnd::kEof || how == ReadEnd::kReset));
  // Closed, with or without a 408/400 first: never served.
  const HttpReply late = slow_header.ReadHttpReply();
  CHECK(late.status != 200);
  CHECK(slow_header.WaitClosed(kPatience, &how));
  CHECK_MESSAGE(good.KeepsReceiving(), good.failure());
}

// A temporary static/ with index.html, and next to it a secret file that
// static/leak.txt links to.
class StaticTree {
 public:
  StaticTree() {
    char tmpl[] = "/tmp/liveprof_server_test_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    root_ = tmpl;
    std::filesystem::create_directories(root_ / "static" / "sub");
    std::ofstream(root_ / "static" / "index.html") << kIndex;
    std::ofstream(root_ / "static" / "sub" / "index.html") << kIndex;
    std::ofstream(root_ / "secret.txt") << kSecret;
    std::filesystem::create_symlink(root_ / "secret.txt", root_ / "static" / "leak.txt");
    std::filesystem::create_symlink("/etc/passwd", root_ / "static" / "passwd");
    std::filesystem::create_directory_symlink(root_, root_ / "static" / "up");
  }
  ~StaticTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::filesystem::path static_dir() const { return root_ / "static"; }

  static constexpr const char* kIndex = "<!doctype html><title>liveprof test index</title>\n";
  static constexpr const char* kSecret = "TOP-SECRET-8d1f0c\n";

 private:
  std::filesystem::path root_;
};

TEST_CASE("server: static files never resolve outside static/ over real HTTP") {
  StaticTree tree;
  ServerOptions o = ShortOptions();
  o.static_dir = tree.static_dir();
  TestServer ts(o);
  REQUIRE_SERVER(ts);
  GoodClient good(ts.port());
  REQUIRE_MESSAGE(good.WaitSubscribed(), good.failure());

  const std::string corpus[] = {
      "/../etc/passwd",
      "/../../../../../../etc/passwd",
      "/%2e%2e/%2e%2e/etc/passwd",
      "/%2E%2E%2Fetc%2Fpasswd",
      "/..%2f..%2fetc/passwd",
      "/%252e%252e/etc/passwd",
      "//etc/passwd",
      "/%2Fetc%2Fpasswd",
      "/static/..\\..\\etc\\passwd",
      "/..%5c..%5cetc%5cpasswd",
      "/%00",
      "/index.html%00.png",
      "/%zz",
      "/%",
      "/" + std::string(4096, 'a'),
      "/leak.txt",
      "/passwd",
      "/up/secret.txt",
      "/sub/../../secret.txt",
      "/./index.html",
      "/api/../../etc/passwd",
      "/nope.html",
  };
  for (const std::string& target : corpus) {
    CAPTURE(target.substr(0, 64));
    RawClient c(ts.port(), kPatience);
    const HttpReply r = c.HttpGet(target);
    CHECK_MESSAGE(r.ok, r.error);
    CHECK((r.status == 400 || r.status == 403 || r.status == 404));
    CHECK(IsJsonError(r));
    CHECK(r.body.find("TOP-SECRET") == std::string::npos);
    CHECK(r.body.find("root:") == std::string::npos);
    CHECK(r.body.find("liveprof test index") == std::string::npos);
  }
  // A link that leads out and back in names a file inside: served.
  for (const char* target : {"/", "/index.html", "/sub/", "/index.html?v=3", "/up/static/index.html"}) {
    CAPTURE(target);
    RawClient c(ts.port(), kPatience);
    const HttpReply r = c.HttpGet(target);
    CHECK(r.status == 200);
    CHECK(r.body == StaticTree::kIndex);
    CHECK(r.Header("Content-Type").starts_with("text/html"));
  }
  CHECK_MESSAGE(good.KeepsReceiving(), good.failure());
}

TEST_CASE("server: with a token, requests without it are refused") {
  CHECK(ValidateServerOptions(ShortOptions()) == "");
  ServerOptions open = ShortOptions();
  open.bind = "0.0.0.0";
  const std::string why = ValidateServerOptions(open);
  CHECK(why.find("--token") != std::string::npos);
  {
    Stream stream;
    Pipeline pipeline(stream, Pipeline::Options{});
    Server refused(pipeline, open);
    std::string error;
    CHECK(!refused.Start(&error));
    CHECK(error.find("--token") != std::string::npos);
  }
  open.token = "t0k";
  CHECK(ValidateServerOptions(open) == "");

  ServerOptions o = ShortOptions();
  o.token = "t0k";
  TestServer ts(o);
  REQUIRE_SERVER(ts);
  REQUIRE(ts.WaitReady({{"Authorization", "Bearer t0k"}}));

  {
    RawClient c(ts.port());
    const HttpReply r = c.HttpGet("/api/status");
    CHECK(r.status == 401);
    CHECK(IsJsonError(r));
    CHECK(r.Header("WWW-Authenticate") == "Bearer");
  }
  for (const test::Headers& h :
       {test::Headers{{"Authorization", "Bearer t0k0"}}, test::Headers{{"Authorization", "Bearer t0"}},
        test::Headers{{"Authorization", "Basic t0k"}}, test::Headers{{"Authorization", "t0k"}}}) {
    CAPTURE(h[0].second);
    RawClient c(ts.port());
    CHECK(c.HttpGet("/api/status", h).status == 401);
  }
  for (const char* target :
       {"/api/status?token=t0", "/api/status?token=", "/api/status?tok=t0k", "/metrics?token=T0K"}) {
    CAPTURE(target);
    RawClient c(ts.port());
    CHECK(c.HttpGet(target).status == 401);
  }
  {
    // The dashboard's files hold no data: served without the token.
    RawClient c(ts.port());
    CHECK(c.HttpGet("/index.html").status != 401);
  }
  {
    RawClient c(ts.port());
    CHECK(c.HttpGet("/api/status", {{"Authorization", "Bearer t0k"}}).status == 200);
    CHECK(c.HttpGet("/api/status?token=t0k").status == 200);  // same connection, kept alive.
  }
  {
    RawClient c(ts.port());
    const HttpReply r = c.Handshake("/ws");
    CHECK(r.status == 401);
  }
  {
    RawClient c(ts.port());
    const HttpReply r = c.Handshake("/ws", {{"Sec-WebSocket-Protocol", "liveprof, liveprof.token.nope"}});
    CHECK(r.status == 401);
  }
  {
    RawClient c(ts.port());
    const HttpReply r = c.Handshake("/ws", {{"Sec-WebSocket-Protocol", "liveprof, liveprof.token.t0k"}});
    CHECK(r.status == 101);
    CHECK(r.Header("Sec-WebSocket-Protocol") == "liveprof");
    const WsFrame hello = c.ReadMessage();
    CHECK(ParseJson(hello.payload).value("type", "") == "hello");
  }
}

TEST_CASE("server: WebSocket upgrades check Origin") {
  TestServer ts;
  REQUIRE_SERVER(ts);
  GoodClient good(ts.port());
  REQUIRE_MESSAGE(good.WaitSubscribed(), good.failure());
  const std::string own = "http://127.0.0.1:" + std::to_string(ts.port());

  for (const std::string& origin :
       {std::string("http://evil.example"), own + ".evil.example", "http://evil.example/" + own, std::string("null"),
        "http://127.0.0.1:" + std::to_string(ts.port() + 1), "ftp://127.0.0.1:" + std::to_string(ts.port())}) {
    CAPTURE(origin);
    RawClient c(ts.port());
    const HttpReply r = c.Handshake("/ws", {{"Origin", origin}});
    CHECK(r.status == 403);
    CHECK(IsJsonError(r));
  }
  {
    RawClient c(ts.port());
    CHECK(c.Handshake("/ws", {{"Origin", own}}).status == 101);
    CHECK(ParseJson(c.ReadMessage().payload).value("type", "") == "hello");
  }
  {
    RawClient c(ts.port());
    CHECK(c.Handshake("/ws").status == 101);
    CHECK(ParseJson(c.ReadMessage().payload).value("type", "") == "hello");
  }
  CHECK_MESSAGE(good.KeepsReceiving(), good.failure());
}

TEST_CASE("server: wrong methods, unknown endpoints and bad parameters get JSON errors") {
  TestServer ts;
  REQUIRE_SERVER(ts);
  REQUIRE(ts.WaitReady());
  GoodClient good(ts.port());
  REQUIRE_MESSAGE(good.WaitSubscribed(), good.failure());

  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH"}) {
    CAPTURE(method);
    RawClient c(ts.port());
    const HttpReply r = c.Request(method, "/api/status");
    CHECK(r.status == 405);
    CHECK(IsJsonError(r));
  }
  {
    RawClient c(ts.port());
    const HttpReply r = c.HttpGet("/api/nope");
    CHECK(r.status == 404);
    CHECK(IsJsonError(r));
    CHECK(ParseJson(r.body).value("message", "").find("/api/nope") != std::string::npos);
  }
  for (const char* target : {"/api/steps?last=0", "/api/steps?last=-1", "/api/steps?last=1e3", "/api/steps?last=100001",
                             "/api/steps?last=99999999999999999999", "/api/status?format=xml",
                             "/api/overview?format=csv", "/api/status?x=1", "/api/status?%zz=1", "/metrics?x=1"}) {
    CAPTURE(target);
    RawClient c(ts.port());
    const HttpReply r = c.HttpGet(target);
    CHECK(r.status == 400);
    CHECK(IsJsonError(r));
  }
  {
    RawClient c(ts.port());
    const HttpReply r = c.Handshake("/api/status");
    CHECK(r.status == 404);
    CHECK(IsJsonError(r));
  }
  {
    RawClient c(ts.port());
    REQUIRE(c.SendRaw("THIS IS NOT HTTP\r\n\r\n"));
    const HttpReply r = c.ReadHttpReply();
    CHECK(r.status == 400);
    CHECK(IsJsonError(r));
  }
  {
    // The same connection serves what follows a refused request.
    RawClient c(ts.port());
    CHECK(c.HttpGet("/api/steps?last=0").status == 400);
    CHECK(c.HttpGet("/api/status").status == 200);
    CHECK(c.HttpGet("/api/steps?last=5").status == 200);
  }
  CHECK_MESSAGE(good.KeepsReceiving(), good.failure());
}

TEST_CASE("server: /metrics counts what the ingest sources had refused, read when asked") {
  ServerOptions o = ShortOptions();
  std::atomic<uint64_t> refused{200};
  o.ingest_refused = [&refused] {
    return std::vector<MetricsRefusal>{{"ingest rank 0", "undefined_track", refused.load()}};
  };
  TestServer ts(o);
  REQUIRE_SERVER(ts);
  REQUIRE(ts.WaitReady());
  for (const uint64_t n : {uint64_t{200}, uint64_t{201}}) {
    refused.store(n);
    RawClient c(ts.port());
    const HttpReply r = c.HttpGet("/metrics");
    CHECK(r.status == 200);
    CHECK(r.body.find("\nliveprof_ingest_refused_events_total{source=\"ingest rank 0\",reason=\"undefined_track\"} " +
                      std::to_string(n) + "\n") != std::string::npos);
  }
}

}  // namespace
}  // namespace liveprof::server_test
