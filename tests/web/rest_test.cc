// REST routing, the access checks, and the feed's latency recorder: the
// server's decisions, without sockets.
#include "web/rest.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "web/shared_state.h"
#include "web/static_files.h"

namespace liveprof::rest_test {
namespace {

constexpr uint32_t kPublishedSteps = 100;

TEST_CASE("rest: every view endpoint routes to its topic") {
  const std::pair<const char*, Topic> cases[] = {
      {"/api/overview", Topic::kOverview},
      {"/api/steps", Topic::kSteps},
      {"/api/input_pipeline", Topic::kInputPipeline},
      {"/api/tf_stats", Topic::kTfStats},
      {"/api/kernel_stats", Topic::kKernelStats},
      {"/api/memory", Topic::kMemory},
      {"/api/alerts", Topic::kAlerts},
      {"/api/status", Topic::kStatus},
      {"/api/pod", Topic::kPod},
  };
  for (const auto& [target, topic] : cases) {
    const Route r = RouteRequest(target, kPublishedSteps);
    CHECK(r.kind == Route::Kind::kView);
    CHECK(r.topic == topic);
    CHECK(!NeedsRender(r));
  }
  // The PyTorch view: rendered for each request (a batch recompute), never
  // published; its reply is the rendered view's JSON.
  const Route py = RouteRequest("/api/pytorch", kPublishedSteps);
  REQUIRE(py.kind == Route::Kind::kView);
  CHECK(NeedsRender(py));
  CHECK(RenderOptionsFor(py, RenderOptions{}).on_request);
  CHECK_FALSE(RenderOptionsFor(RouteRequest("/api/steps?last=20", kPublishedSteps), RenderOptions{}).on_request);
  RenderedViews views;
  views.pytorch = R"({"type":"pytorch","v":1,"seq":3,"steps":{}})";
  const Reply reply = ViewReply(py, views, "");
  CHECK(reply.status == 200);
  CHECK(reply.body == views.pytorch);
  CHECK(ViewReply(py, RenderedViews{}, "").status == 404);  // a server with no PyTorch view.
  CHECK(RouteRequest("/api/pytorch?format=csv", kPublishedSteps).status == 400);
  CHECK(RouteRequest("/metrics", kPublishedSteps).kind == Route::Kind::kMetrics);
  CHECK(RouteRequest("/api", kPublishedSteps).kind == Route::Kind::kIndex);
  CHECK(RouteRequest("/", kPublishedSteps).kind == Route::Kind::kStatic);
  CHECK(RouteRequest("/app.js", kPublishedSteps).kind == Route::Kind::kStatic);
}

TEST_CASE("rest: steps?last=N and format=csv ask for a render with those options") {
  Route r = RouteRequest("/api/steps?last=20", kPublishedSteps);
  REQUIRE(r.kind == Route::Kind::kView);
  CHECK(r.last_steps == 20);
  CHECK(NeedsRender(r));
  const RenderOptions o = RenderOptionsFor(r, RenderOptions{});
  CHECK(o.steps.last_steps == 20);
  CHECK(!o.advance_seq);
  // The published window needs no render.
  CHECK(!NeedsRender(RouteRequest("/api/steps?last=100", kPublishedSteps)));

  r = RouteRequest("/api/tf_stats?format=csv", kPublishedSteps);
  CHECK(r.csv);
  CHECK(NeedsRender(r));
  CHECK(RenderOptionsFor(r, RenderOptions{}).csv);
  CHECK(!RouteRequest("/api/tf_stats?format=json", kPublishedSteps).csv);
}

TEST_CASE("rest: last_s=T windows steps and tables by time, include_idle=false drops IDLE") {
  Route r = RouteRequest("/api/kernel_stats?last_s=30", kPublishedSteps);
  REQUIRE(r.kind == Route::Kind::kView);
  CHECK(r.last_ns == 30'000'000'000ull);
  CHECK(NeedsRender(r));
  RenderOptions o = RenderOptionsFor(r, RenderOptions{});
  CHECK(o.table_window_ns == 30'000'000'000ull);
  CHECK(o.steps.last_ns == 30'000'000'000ull);
  CHECK(o.steps.last_steps == 0);  // the steps of the last 30 s, however many.

  // last=N with last_s=T: the steps of the last T seconds, at most N.
  o = RenderOptionsFor(RouteRequest("/api/overview?last=20&last_s=5", kPublishedSteps), RenderOptions{});
  CHECK(o.steps.last_steps == 20);
  CHECK(o.steps.last_ns == 5'000'000'000ull);
  CHECK(o.steps.offset_steps == 0);

  // last=N windows the step views; the tables have no step window.
  CHECK(RouteRequest("/api/input_pipeline?last=20", kPublishedSteps).last_steps == 20);
  CHECK(RouteRequest("/api/overview?last=20", kPublishedSteps).last_steps == 20);
  CHECK(RouteRequest("/api/tf_stats?last=20", kPublishedSteps).status == 400);

  r = RouteRequest("/api/tf_stats?include_idle=false", kPublishedSteps);
  CHECK(r.exclude_idle);
  CHECK(NeedsRender(r));
  CHECK(!RenderOptionsFor(r, RenderOptions{}).include_idle);
  CHECK(!NeedsRender(RouteRequest("/api/tf_stats?include_idle=true", kPublishedSteps)));

  r = RouteRequest("/api/tf_stats?include_idle=no", kPublishedSteps);
  CHECK(r.status == 400);
  CHECK(r.message == "include_idle='no': expected true or false");
  r = RouteRequest("/api/memory?last_s=0", kPublishedSteps);
  CHECK(r.status == 400);
  CHECK(r.message.find("last_s='0'") != std::string::npos);
  CHECK(RouteRequest("/api/memory?last_s=1.5", kPublishedSteps).status == 400);
  CHECK(RouteRequest("/api/alerts?last_s=5", kPublishedSteps).status == 400);
  CHECK(RouteRequest("/api/kernel_stats?include_idle=false", kPublishedSteps).status == 400);
}

TEST_CASE("rest: the token guards the data, not the dashboard's files") {
  for (const char* path : {"/api", "/api/", "/api/status", "/api/nope", "/metrics", "/ws"}) {
    CAPTURE(path);
    CHECK(NeedsToken(path));
  }
  for (const char* path : {"/", "/index.html", "/app.js", "/vendor/uPlot.esm.js", "/apix", "/metrics.html", "/wss"}) {
    CAPTURE(path);
    CHECK(!NeedsToken(path));
  }
}

TEST_CASE("rest: bad requests are refused with what and where") {
  auto error = [](const char* target) { return RouteRequest(target, kPublishedSteps); };
  Route r = error("/api/nope");
  CHECK(r.kind == Route::Kind::kError);
  CHECK(r.status == 404);
  CHECK(r.message.find("/api/nope") != std::string::npos);

  r = error("/api/steps?last=0");
  CHECK(r.status == 400);
  CHECK(r.message.find("last='0'") != std::string::npos);
  CHECK(error("/api/steps?last=12x").status == 400);
  CHECK(error("/api/steps?last=100001").status == 400);

  r = error("/api/overview?format=csv");
  CHECK(r.status == 400);
  CHECK(r.message.find("/api/overview has no table") != std::string::npos);
  // The views with a table, from the table of views.
  CHECK(r.message.find("csv is offered on input_pipeline, tf_stats, kernel_stats, memory") != std::string::npos);
  r = error("/api/tf_stats?format=xml");
  CHECK(r.message.find("format='xml'") != std::string::npos);
  r = error("/api/alerts?colour=red");
  CHECK(r.message.find("unknown query parameter 'colour'") != std::string::npos);
  CHECK(error("/metrics?x=1").status == 400);
  r = error("/api/steps?last=%zz");
  CHECK(r.status == 400);
  CHECK(r.message.find("malformed %-escape") != std::string::npos);
  // The token parameter is not an unknown parameter.
  CHECK(RouteRequest("/api/alerts?token=abc", kPublishedSteps).kind == Route::Kind::kView);
}

TEST_CASE("rest: percent-decoding") {
  CHECK(PercentDecode("a%20b%2Fc") == std::optional<std::string>("a b/c"));
  CHECK(PercentDecode("%2e%2E") == std::optional<std::string>(".."));
  CHECK(!PercentDecode("%"));
  CHECK(!PercentDecode("%4"));
  CHECK(!PercentDecode("%g0"));
  CHECK(PercentDecode("a+b") == std::optional<std::string>("a+b"));
  CHECK(PercentDecode("a%00b") == std::optional<std::string>(std::string("a\0b", 3)));
  CHECK(PercentDecode("") == std::optional<std::string>(""));
  const RequestTarget t = ParseRequestTarget("/api/steps?last=5&token=a%26b");
  CHECK(t.path == "/api/steps");
  CHECK(t.Param("last") == std::optional<std::string_view>("5"));
  CHECK(t.Param("token") == std::optional<std::string_view>("a&b"));
  CHECK(!t.Param("nope"));
}

TEST_CASE("rest: request targets through Boost.URL: '+', empty and repeated parameters") {
  // In the query '+' is a space (URLSearchParams sends "a b" as "a+b"); %2B
  // is a '+'. In the path '+' stays '+'.
  RequestTarget t = ParseRequestTarget("/api/trace/search?q=all+reduce&token=a%2Bb");
  CHECK(t.error.empty());
  CHECK(t.Param("q") == std::optional<std::string_view>("all reduce"));
  CHECK(t.Param("token") == std::optional<std::string_view>("a+b"));
  CHECK(ParseRequestTarget("/api/a+b").path == "/api/a+b");
  CHECK(ParseRequestTarget("/api/a%20b%2Fc").path == "/api/a b/c");
  // Empty parameters are skipped; one without '=' has an empty value;
  // repeated ones are all kept, in order, and Param gives the first.
  t = ParseRequestTarget("/api/steps?&&last=5&flag&last=7&=x&");
  CHECK(t.error.empty());
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"last", "5"}, {"flag", ""}, {"last", "7"}, {"", "x"}};
  CHECK(t.query == expected);
  CHECK(t.Param("last") == std::optional<std::string_view>("5"));
  CHECK(ParseRequestTarget("/api/steps?").query.empty());
  // A '?' or '/' inside the query is data.
  CHECK(ParseRequestTarget("/api/x?q=a/b?c").Param("q") == std::optional<std::string_view>("a/b?c"));
  CHECK(RouteRequest("/api/alerts?colour=red&colour=blue", kPublishedSteps).message ==
        "unknown query parameter 'colour' for /api/alerts");
}

TEST_CASE("rest: a malformed target says what and where, keeping the parameters before it") {
  RequestTarget t = ParseRequestTarget("/api/steps?token=s3cret&last=%zz&format=csv");
  CHECK(t.path == "/api/steps");
  CHECK(t.error == "malformed %-escape '%zz' in query parameter 'last'");
  CHECK(t.Param("token") == std::optional<std::string_view>("s3cret"));  // so a 400, not a 401.
  CHECK(!t.Param("format"));
  CHECK(ParseRequestTarget("/api/steps?last=5%4").error == "malformed %-escape '%4' in query parameter 'last'");
  CHECK(ParseRequestTarget("/api/steps?%zz=1").error == "malformed %-escape '%zz' in query parameter '%zz'");
  // RFC 3986 bytes that must be escaped are refused, naming the byte.
  CHECK(ParseRequestTarget("/api/trace/search?q=a|b").error ==
        "'|' (0x7C) must be percent-encoded in query parameter 'q'");
  CHECK(ParseRequestTarget("/api/trace/search?q=a%7Cb").Param("q") == std::optional<std::string_view>("a|b"));
  CHECK(ParseRequestTarget("/api/steps?last=5#top").error ==
        "'#' (0x23) must be percent-encoded in query parameter 'last'");
  t = ParseRequestTarget("/api/st eps");
  CHECK(t.error == "0x20 must be percent-encoded in the path, at byte 7");
  CHECK(t.path == "/api/st eps");
  CHECK(ParseRequestTarget("/api/\xC3\xA9").error == "0xC3 must be percent-encoded in the path, at byte 5");
  // A malformed path has no path: static files refuse it on their own.
  t = ParseRequestTarget("/api/%zz");
  CHECK(t.path.empty());
  CHECK(t.error == "malformed %-escape '%zz' in the path, at byte 5");
  CHECK(RouteRequest("/api/%zz", kPublishedSteps).kind == Route::Kind::kStatic);
  // Not origin-form: routed to the static files, which refuse it.
  t = ParseRequestTarget("*");
  CHECK(t.path == "*");
  CHECK(t.error == "the path must start with '/'");
  CHECK(RouteRequest("*", kPublishedSteps).kind == Route::Kind::kStatic);
  CHECK(RouteRequest("http://evil/api/status", kPublishedSteps).kind == Route::Kind::kStatic);
  const Route r = RouteRequest("/api/trace/search?q=a|b", kPublishedSteps);
  CHECK(r.kind == Route::Kind::kError);
  CHECK(r.status == 400);
  CHECK(r.message == "'|' (0x7C) must be percent-encoded in query parameter 'q'");
}

TEST_CASE("rest: views, CSV, and the status view with the server's counters") {
  RenderedViews v;
  v.overview = R"({"type":"overview","v":1,"seq":3})";
  v.status = R"({"type":"status","v":1,"seq":3,"events_consumed":10})";
  v.tf_stats_csv = "rank,side\n1,device\n";
  Reply r = ViewReply(RouteRequest("/api/overview", kPublishedSteps), v);
  CHECK(r.status == 200);
  CHECK(r.content_type == "application/json");
  CHECK(r.body == v.overview);
  r = ViewReply(RouteRequest("/api/tf_stats?format=csv", kPublishedSteps), v);
  CHECK(r.content_type == "text/csv; charset=utf-8");
  CHECK(r.body == v.tf_stats_csv);

  ServerStats stats;
  stats.websocket_sessions = 4;
  stats.latency_p99_ms = 87;
  r = ViewReply(RouteRequest("/api/status", kPublishedSteps), v, ServerStatsJson(stats));
  const nlohmann::json status = nlohmann::json::parse(r.body);
  CHECK(status["events_consumed"] == 10);
  CHECK(status["server"]["websocket_sessions"] == 4);
  CHECK(status["server"]["feed_latency_ms"]["p99"] == 87.0);
  CHECK(!status["server"].contains("ingest"));  // no ingest: no key.
  stats.ingest_json = R"([{"id":1,"label":"rank 0","connected":true}])";
  const nlohmann::json with_ingest =
      nlohmann::json::parse(ViewReply(RouteRequest("/api/status", kPublishedSteps), v, ServerStatsJson(stats)).body);
  CHECK(with_ingest["server"]["ingest"][0]["label"] == "rank 0");
  CHECK(with_ingest["server"]["websocket_sessions"] == 4);

  const nlohmann::json err = nlohmann::json::parse(ErrorReply(404, "no \"x\"").body);
  CHECK(err["type"] == "error");
  CHECK(err["code"] == "404");
  CHECK(err["message"] == "no \"x\"");
  const nlohmann::json index = nlohmann::json::parse(IndexReply().body);
  // Every view of the table (views.h), in its order, then the trace store's
  // 5 paths and /metrics.
  REQUIRE(index["endpoints"].size() == kViewCount + 6);
  for (size_t i = 0; i < kViewCount; ++i) {
    CHECK(index["endpoints"][i]["path"] == std::string(kViews[i].rest_path));
    CHECK(index["endpoints"][i]["csv"] == !kViews[i].csv.empty());
  }
  CHECK(index["endpoints"][kViewCount]["path"] == "/api/trace");
  CHECK(index["endpoints"][kViewCount + 1]["path"] == "/api/trace/event");
  CHECK(index["endpoints"][kViewCount + 5]["path"] == "/metrics");
}

TEST_CASE("rest: the token is taken from the header, the query or the subprotocol") {
  const RequestTarget none = ParseRequestTarget("/api/status");
  const RequestTarget query = ParseRequestTarget("/api/status?token=s3cret");
  const RequestTarget wrong = ParseRequestTarget("/api/status?token=s3cre");
  CHECK(TokenAccepted("", "", none, ""));  // no token configured.
  CHECK(!TokenAccepted("s3cret", "", none, ""));
  CHECK(TokenAccepted("s3cret", "Bearer s3cret", none, ""));
  CHECK(!TokenAccepted("s3cret", "Bearer s3cret2", none, ""));
  CHECK(!TokenAccepted("s3cret", "Basic s3cret", none, ""));
  CHECK(TokenAccepted("s3cret", "", query, ""));
  CHECK(!TokenAccepted("s3cret", "", wrong, ""));
  CHECK(TokenAccepted("s3cret", "", none, "liveprof, liveprof.token.s3cret"));
  CHECK(!TokenAccepted("s3cret", "", none, "liveprof.token.nope"));
}

TEST_CASE("rest: Origin is the server's own, an allowed one, or absent") {
  const std::vector<std::string> none;
  CHECK(OriginAllowed("", "127.0.0.1:8080", none));
  CHECK(OriginAllowed("http://127.0.0.1:8080", "127.0.0.1:8080", none));
  CHECK(OriginAllowed("https://127.0.0.1:8080", "127.0.0.1:8080", none));
  CHECK(!OriginAllowed("http://evil.example", "127.0.0.1:8080", none));
  CHECK(!OriginAllowed("http://127.0.0.1:8081", "127.0.0.1:8080", none));
  CHECK(!OriginAllowed("http://127.0.0.1:8080.evil", "127.0.0.1:8080", none));
  CHECK(OriginAllowed("http://dash.example", "127.0.0.1:8080", {"http://dash.example"}));
  CHECK(OriginAllowed("http://any.example", "127.0.0.1:8080", {"*"}));
  CHECK(ChooseSubprotocol("liveprof.token.x, liveprof") == "liveprof");
  CHECK(ChooseSubprotocol("liveprof.token.x") == "liveprof.token.x");
  CHECK(ChooseSubprotocol("chat") == "");
}

TEST_CASE("rest: without a token only loopback Host names are answered (DNS rebinding)") {
  CHECK(HostAllowed("127.0.0.1:8080", false));
  CHECK(HostAllowed("localhost:8080", false));
  CHECK(HostAllowed("LocalHost", false));
  CHECK(HostAllowed("[::1]:8080", false));
  CHECK(HostAllowed("", false));
  CHECK(!HostAllowed("evil.example:8080", false));
  CHECK(!HostAllowed("127.0.0.1.evil.example", false));
  CHECK(!HostAllowed("localhost.evil.example:80", false));
  CHECK(!HostAllowed("[::1", false));
  CHECK(HostAllowed("evil.example:8080", true));  // the token protects.
}

TEST_CASE("latency recorder: a frame's interval of events is spread over 1 ms bins") {
  LatencyRecorder r;
  constexpr uint64_t kMs = 1'000'000;
  // Events that ended in (1000 ms, 1100 ms], sent at 1150 ms: latencies 50..150 ms.
  r.Record(1000 * kMs, 1100 * kMs, 1150 * kMs);
  CHECK(r.samples() == 100);
  CHECK(r.Percentile(0.5) == doctest::Approx(100).epsilon(0.02));
  CHECK(r.Percentile(0.99) == doctest::Approx(149).epsilon(0.02));
  CHECK(r.Max() == 150);
  // Nothing new (same watermark) is no sample.
  r.Record(1100 * kMs, 1100 * kMs, 1200 * kMs);
  CHECK(r.samples() == 100);
  r.Reset();
  CHECK(r.samples() == 0);
  CHECK(r.Percentile(0.99) == 0);
}

TEST_CASE("rest: /api/capture takes a source and what to change, and refuses the rest") {
  Route r = RouteRequest("/api/capture?source=3&host_level=1&python_scopes=0&gpu=1&gpu_level=full&seconds=30",
                         kPublishedSteps);
  REQUIRE(r.kind == Route::Kind::kCapture);
  CHECK(r.capture.source == 3);
  CHECK(r.capture.host_level == 1);
  CHECK(r.capture.python_scopes == 0);
  CHECK(r.capture.gpu == 1);
  CHECK(r.capture.gpu_level == 1);
  CHECK(r.capture.duration_ns == 30'000'000'000ull);
  r = RouteRequest("/api/capture?source=5&gpu_level=default", kPublishedSteps);
  REQUIRE(r.kind == Route::Kind::kCapture);
  CHECK(r.capture.gpu_level == 0);
  CHECK(r.capture.gpu == -1);
  r = RouteRequest("/api/capture?source=4", kPublishedSteps);  // the rest unchanged.
  REQUIRE(r.kind == Route::Kind::kCapture);
  CHECK(r.capture.host_level == 0);
  CHECK(r.capture.python_scopes == -1);
  CHECK(r.capture.gpu == -1);
  CHECK(r.capture.gpu_level == -1);
  CHECK(r.capture.duration_ns == 0);
  const std::pair<const char*, const char*> refused[] = {
      {"/api/capture", "/api/capture needs source=ID (/api/status: server.ingest[].id)"},
      {"/api/capture?source=0", "source='0': expected a source id (/api/status: server.ingest[].id)"},
      {"/api/capture?source=1&host_level=4",
       "host_level='4': expected 1 (steps, input, counters, memory), 2 (+ ops and scopes) or 3 (+ PyTorch modules)"},
      {"/api/capture?source=1&gpu=on", "gpu='on': expected 0 (off) or 1 (on)"},
      {"/api/capture?source=1&gpu_level=1",
       "gpu_level='1': expected default or full (the GPU producer's capture level)"},
      {"/api/capture?source=1&seconds=86401",
       "seconds='86401': expected a whole number of seconds in 0..86400 (0: until the next capture)"},
      {"/api/capture?source=1&level=2", "unknown query parameter 'level' for /api/capture"},
  };
  for (const auto& entry : refused) {
    const auto& target = entry.first;
    const auto& message = entry.second;
    INFO(target);
    r = RouteRequest(target, kPublishedSteps);
    CHECK(r.kind == Route::Kind::kError);
    CHECK(r.status == 400);
    CHECK(r.message == message);
  }
}

}  // namespace
}  // namespace liveprof::rest_test
