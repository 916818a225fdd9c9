// The trace store over real HTTP: /api/trace, /api/trace/event,
// /api/trace/search and /api/export on a server whose pipeline runs the
// simulated workload; what the export serves is gzip Chrome trace JSON that
// the importer reads back, the very events the store holds in that range.
#include "web/trace_api.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

#include "import/chrome_export.h"
#include "import/chrome_trace.h"
#include "web/test_server.h"

namespace liveprof::trace_api_test {
namespace {

using test::ParseJson;
using test::RawClient;

using test::Gunzip;

TEST_CASE("trace api: viewport, one event, search and export over real HTTP") {
  ServerOptions options = test::ShortOptions();
  options.export_trace = ExportStoreRangeStream;
  test::TestServer server(options);
  REQUIRE_MESSAGE(server.started(), server.error());
  const auto [t0, t1] = server.PastTraceRange(50'000);
  const TraceStore* store = server.pipeline().trace_store();
  RawClient c(server.port());

  const auto view = c.HttpGet("/api/trace?t0=" + std::to_string(t0) + "&t1=" + std::to_string(t1) + "&width=800");
  REQUIRE(view.status == 200);
  const nlohmann::json v = ParseJson(view.body);
  REQUIRE(v.is_object());
  CHECK(v["type"] == "trace");
  // The grid: 2^k ns per pixel, the least covering t1 - t0 in 800, from t0
  // rounded down to a pixel edge.
  uint64_t b = 1;
  while (b * 800 < t1 - t0) b *= 2;
  CHECK(v["ns_per_px"].get<double>() == static_cast<double>(b));
  CHECK(v["t0"].get<uint64_t>() == t0 - t0 % b);
  CHECK(v["width_px"] == (t1 - 1 - (t0 - t0 % b)) / b + 1);
  CHECK(v["width_px"].get<uint32_t>() <= 801);
  REQUIRE(!v["tracks"].empty());
  uint64_t kernel_id = 0, items = 0;
  std::string kernel_name;
  for (const auto& t : v["tracks"]) {
    CHECK(t.contains("name"));
    for (const auto& sl : t["slices"]) {
      ++items;
      CHECK(sl[1].get<uint64_t>() < v["t1"].get<uint64_t>());
      if (sl[5] == "kernel" && kernel_id == 0) {
        kernel_id = sl[0].get<uint64_t>();
        kernel_name = v["names"][std::to_string(sl[3].get<uint64_t>())].get<std::string>();
      }
    }
    for (const auto& p : t["summaries"]) {
      ++items;
      CHECK(p[0].get<uint32_t>() < 800);
      CHECK(p[1].get<uint32_t>() >= 1);
    }
  }
  CHECK(items > 0);

  if (kernel_id != 0) {
    const auto one = c.HttpGet("/api/trace/event?id=" + std::to_string(kernel_id));
    REQUIRE(one.status == 200);
    const nlohmann::json e = ParseJson(one.body);
    CHECK(e["id"] == kernel_id);
    CHECK(e["kind"] == "kernel");
    CHECK(e["name"] == kernel_name);
    CHECK(e.contains("details"));
    const auto found = c.HttpGet("/api/trace/search?q=" + kernel_name.substr(0, 6) + "&from=" + std::to_string(t0));
    REQUIRE(found.status == 200);
    CHECK(ParseJson(found.body)["event"].is_object());
  }

  // An area's sums: every event overlapping it, the sub-pixel ones too, per name.
  {
    // (over the viewport's grid: its folds count the events that start in it)
    const uint64_t g0 = v["t0"].get<uint64_t>(), g1 = v["t1"].get<uint64_t>() - 1;
    const auto area = c.HttpGet("/api/trace/area?t0=" + std::to_string(g0) + "&t1=" + std::to_string(g1));
    REQUIRE(area.status == 200);
    const nlohmann::json a = ParseJson(area.body);
    CHECK(a["type"] == "trace_area");
    uint64_t in_view = 0, listed = 0;
    for (const auto& t : v["tracks"]) {
      if (t["type"] == "memory" || t["type"] == "counter") continue;
      in_view += t["slices"].size();
      for (const auto& p : t["summaries"]) in_view += p[1].get<uint64_t>();
    }
    for (const auto& n : a["names"]) {
      listed += n[1].get<uint64_t>();
      CHECK(n[3].get<uint64_t>() <= n[2].get<uint64_t>());  // self <= total
      CHECK(n[4].get<uint64_t>() <= n[2].get<uint64_t>());
    }
    CHECK(listed == a["events"].get<uint64_t>());
    CHECK(a["events"].get<uint64_t>() >= in_view);  // (the view's folds count starts in it; the area, overlaps)
    CHECK(a["events"].get<uint64_t>() == store->SumArea(g0, g1, {}, UINT64_MAX).events);
    CHECK(c.HttpGet("/api/trace/area?t0=9&t1=3").status == 400);
  }

  // Export: gzip Chrome trace JSON of exactly the store's events in range.
  const auto exported = c.HttpGet("/api/export?t0=" + std::to_string(t0) + "&t1=" + std::to_string(t1));
  REQUIRE(exported.status == 200);
  CHECK(exported.Header("Content-Type") == "application/gzip");
  const std::string json = Gunzip(exported.body);
  REQUIRE(!json.empty());
  uint64_t in_store = 0;
  std::set<EventKind> kinds;
  store->ForEach(t0, t1, {}, [&](StoredEventId, const Event& e) {
    in_store += e.kind != EventKind::kDeviceInfo;
    kinds.insert(e.kind);
  });
  ChromeTraceImporter importer;
  ImportReport report;
  std::string error;
  uint64_t imported = 0;
  REQUIRE_MESSAGE(importer.ImportText(
                      json,
                      [&](std::span<const Event>, std::span<const Event> ev) {
                        for (const Event& e : ev) imported += e.kind != EventKind::kDeviceInfo;
                      },
                      &report, &error),
                  error);
  // Nothing left out but the launch → kernel flows the export adds for
  // Perfetto (the importer has the correlation ids for the link).
  const auto flows = report.dropped.find("launch flows (the correlation ids carry the link)");
  REQUIRE(flows != report.dropped.end());
  CHECK(report.dropped_total() == flows->second);
  CHECK(imported == in_store);
  CHECK(kinds.count(EventKind::kKernel) == 1);

  // Bad requests are JSON errors that say what. On a new connection: the
  // import above can outlast the test server's 1.5 s keep-alive idle
  // timeout (ShortOptions) in a TSan build under load, and the server then
  // rightly closes the first one (seen: every reply below empty).
  RawClient d(server.port());
  for (const char* bad : {"/api/trace?width=0", "/api/trace?tracks=a,b", "/api/trace?t0=5&t1=5", "/api/trace?color=red",
                          "/api/trace/event", "/api/trace/search?from=3"}) {
    CAPTURE(bad);
    const auto r = d.HttpGet(bad);
    CHECK(r.status == 400);
    CHECK(test::IsJsonError(r));
  }
  CHECK(d.HttpGet("/api/trace/event?id=99999999999999").status == 404);
}

TEST_CASE("trace api: without an exporter /api/export says so, and routing knows the paths") {
  TraceStore store;
  const Reply r = TraceReply(ParseRequestTarget("/api/export"), &store, {});
  CHECK(r.status == 501);
  CHECK(TraceReply(ParseRequestTarget("/api/trace"), nullptr, {}).status == 404);
  CHECK(RouteRequest("/api/trace?t0=1&t1=2", 100).kind == Route::Kind::kTrace);
  CHECK(RouteRequest("/api/export", 100).kind == Route::Kind::kTrace);
  CHECK(RouteRequest("/api/traces", 100).kind == Route::Kind::kError);
}

}  // namespace
}  // namespace liveprof::trace_api_test
