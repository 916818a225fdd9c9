// /api/export streamed, and trace work off the web thread: the export comes
// as HTTP chunks with the very bytes the whole-file export makes, and while
// a slow reader pulls a large export, another client's view frames keep
// arriving at the publication rate (the export runs on the export pool, a
// piece at a time, never on the web thread).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "import/chrome_export.h"
#include "web/test_server.h"

namespace liveprof::trace_export_test {
namespace {

using std::chrono::milliseconds;
using test::Clock;
using test::ParseJson;
using test::RawClient;

// A /ws client on its own thread, subscribed to overview: when each view
// frame arrived.
class FeedWatcher {
 public:
  explicit FeedWatcher(uint16_t port) : client_(port, test::kPatience) {
    thread_ = std::thread([this] { Run(); });
  }
  ~FeedWatcher() {
    stop_.store(true);
    thread_.join();
  }
  std::vector<Clock::time_point> arrivals() const {
    std::lock_guard lock(mu_);
    return arrivals_;
  }
  size_t frames() const {
    std::lock_guard lock(mu_);
    return arrivals_.size();
  }
  bool failed() const { return failed_.load(); }

 private:
  void Run() {
    if (client_.Handshake("/ws").status != 101 || !client_.SendText(R"({"type":"subscribe","topics":["overview"]})")) {
      failed_.store(true);
      return;
    }
    client_.SetReceiveTimeout(milliseconds(100));
    while (!stop_.load()) {
      const test::WsFrame f = client_.ReadMessage(/*answer_pings=*/true);
      if (!f.ok) {
        if (f.end == test::ReadEnd::kTimeout) continue;
        failed_.store(true);
        return;
      }
      if (f.opcode != test::kOpText) continue;
      const nlohmann::json j = ParseJson(f.payload);
      if (!j.is_object() || j.value("type", "") != "overview" || !j.contains("seq")) continue;
      std::lock_guard lock(mu_);
      arrivals_.push_back(Clock::now());
    }
  }

  RawClient client_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, failed_{false};
  mutable std::mutex mu_;
  std::vector<Clock::time_point> arrivals_;
};

// A chunked HTTP body, decoded as it arrives: Feed() returns true once the
// last chunk has come. (Only what Beast sends: no chunk extensions or trailers.)
class ChunkedBody {
 public:
  bool Feed(std::string_view bytes) {
    raw_.append(bytes);
    for (;;) {
      if (!headers_done_) {
        const size_t end = raw_.find("\r\n\r\n");
        if (end == std::string::npos) return false;
        headers_ = raw_.substr(0, end);
        raw_.erase(0, end + 4);
        headers_done_ = true;
      }
      const size_t eol = raw_.find("\r\n");
      if (eol == std::string::npos) return false;
      const size_t size = std::strtoull(raw_.substr(0, eol).c_str(), nullptr, 16);
      if (raw_.size() < eol + 2 + size + 2) return false;
      body_.append(raw_, eol + 2, size);
      raw_.erase(0, eol + 2 + size + 2);
      if (size == 0) return true;
      ++chunks_;
    }
  }
  const std::string& headers() const { return headers_; }
  const std::string& body() const { return body_; }
  uint64_t chunks() const { return chunks_; }

 private:
  std::string raw_, headers_, body_;
  bool headers_done_ = false;
  uint64_t chunks_ = 0;
};

std::string ExportUrl(uint64_t t0, uint64_t t1) {
  return "/api/export?t0=" + std::to_string(t0) + "&t1=" + std::to_string(t1);
}

bool Gunzips(const std::string& gz) { return !test::Gunzip(gz).empty(); }

#if defined(LIVEPROF_SANITIZED_THREAD) || defined(LIVEPROF_SANITIZED_ADDRESS)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("export: streamed in HTTP chunks, byte for byte the whole-file export") {
  ServerOptions options = test::ShortOptions();
  options.export_trace = ExportStoreRangeStream;
  test::TestServer server(options, /*events_per_second=*/100'000);
  REQUIRE_MESSAGE(server.started(), server.error());
  const auto [t0, t1] = server.PastTraceRange(200'000);
  const TraceStore* store = server.pipeline().trace_store();
  // The range is in the past, but a name or track defined meanwhile (the
  // export writes every one the store knows) would change the bytes: then
  // both are taken again.
  bool same = false;
  for (int attempt = 0; attempt < 5 && !same; ++attempt) {
    RawClient c(server.port());
    const test::HttpReply streamed = c.HttpGet(ExportUrl(t0, t1));
    REQUIRE_MESSAGE(streamed.ok, streamed.error);
    REQUIRE(streamed.status == 200);
    CHECK(streamed.Header("Content-Type") == "application/gzip");
    CHECK(streamed.Header("Transfer-Encoding") == "chunked");
    CHECK(streamed.Header("Content-Length").empty());
    CHECK(streamed.chunks >= 2);  // pieces, not one string.
    // The connection stays usable after the last chunk (keep-alive): asked
    // at once, within the server's idle timeout.
    CHECK(c.HttpGet("/api/status").status == 200);
    std::string whole, error;
    REQUIRE_MESSAGE(ExportStoreRange(*store, t0, t1, {}, &whole, &error), error);
    same = streamed.body == whole;
    if (same) CHECK(Gunzips(streamed.body));
  }
  CHECK(same);
  // The checks before the stream are answers as before.
  RawClient d(server.port());
  CHECK(d.HttpGet("/api/export?t0=5&t1=5").status == 400);
  CHECK(d.HttpGet("/api/export?color=red").status == 400);
  CHECK(d.Request("HEAD", ExportUrl(t0, t1)).status == 200);
}

TEST_CASE("export: without an exporter, a streaming server still says 501") {
  test::TestServer server;  // no export_trace.
  REQUIRE_MESSAGE(server.started(), server.error());
  REQUIRE(server.WaitReady());
  RawClient c(server.port());
  CHECK(c.HttpGet("/api/export").status == 501);
}

TEST_CASE("export: a slow reader's large export does not hold up another client's view frames") {
  ServerOptions options = test::ShortOptions();
  options.export_trace = ExportStoreRangeStream;
  options.http_timeout = milliseconds(10'000);  // the slow reader is slow, not gone.
  // An export of ~750 k events; under a sanitizer, whose build records and
  // compresses 5-20 times slower, ~75 k of a workload 10 times lighter (the
  // pipeline must keep publishing at its rate for the frames to say anything).
  test::TestServer server(options, /*events_per_second=*/kSanitized ? 50'000 : 500'000);
  REQUIRE_MESSAGE(server.started(), server.error());
  const auto [t0, t1] = server.PastTraceRange(kSanitized ? 150'000 : 1'500'000);

  FeedWatcher feed(server.port());
  REQUIRE(test::WaitFor([&] { return feed.frames() >= 3 || feed.failed(); }));
  REQUIRE(!feed.failed());
  // The feed's own pace with no export running, in this build on this
  // machine: the frames of the next 2 s and their longest gap.
  const size_t baseline_first = feed.frames();
  std::this_thread::sleep_for(milliseconds(2000));
  const std::vector<Clock::time_point> baseline = feed.arrivals();
  const double baseline_rate = static_cast<double>(baseline.size() - baseline_first) / 2.0;
  double baseline_gap = 0;
  for (size_t i = baseline_first + 1; i < baseline.size(); ++i) {
    baseline_gap = std::max(baseline_gap, std::chrono::duration<double>(baseline[i] - baseline[i - 1]).count());
  }

  // The slow reader: a small receive buffer, 16 KiB every 2 ms at most (a
  // sanitized build's smaller export: 4 KiB every 5 ms, so that it still
  // lasts over half a second, several publications).
  const size_t read_bytes = kSanitized ? 4096 : 16384;
  const milliseconds read_pause(kSanitized ? 5 : 2);
  RawClient slow(server.port(), test::kPatience, /*rcvbuf=*/16384);
  REQUIRE(slow.connected());
  REQUIRE(slow.SendRaw("GET " + ExportUrl(t0, t1) + " HTTP/1.1\r\nHost: " + slow.host() + "\r\n\r\n"));
  ChunkedBody body;
  const auto start = Clock::now();
  const size_t frames_before = feed.frames();
  bool done = false;
  char buf[16384];
  while (!done && Clock::now() - start < std::chrono::seconds(60)) {
    const ssize_t n = ::recv(slow.fd(), buf, read_bytes, 0);
    if (n <= 0) break;
    done = body.Feed(std::string_view(buf, static_cast<size_t>(n)));
    std::this_thread::sleep_for(read_pause);
  }
  const auto end = Clock::now();
  REQUIRE(done);
  CHECK(body.headers().find("200 OK") != std::string::npos);
  CHECK(body.chunks() >= 2);
  CHECK(Gunzips(body.body()));
  const double seconds = std::chrono::duration<double>(end - start).count();
  const std::vector<Clock::time_point> arrivals = feed.arrivals();
  const size_t during = arrivals.size() - frames_before;
  // Publications come at 10 Hz: ~10 frames a second. Generous bounds, from
  // the feed's pace before the export (which, run on the web thread, took
  // every frame until it ended): at least half the frames the same time gave
  // before it, and no gap over 2 s or 3 times the longest before.
  MESSAGE("export: ", body.body().size(), " bytes in ", body.chunks(), " chunks over ", seconds, " s; ", during,
          " overview frames meanwhile; before: ", baseline_rate, " a second, longest gap ", baseline_gap, " s");
  CHECK(seconds > 0.5);           // slow enough to say something.
  REQUIRE(baseline_rate >= 2.0);  // the feed itself keeps its pace here.
  // Under a sanitizer (Beast at -O0 in the ASan build: docs/ci.md) the two
  // cores are the export's, the pipeline's and the web thread's, and the
  // share of frames measures that contention more than any wait: a quarter
  // there (an export that held the web thread would leave none, and the gap
  // below).
  const double min_share = kSanitized ? 0.25 : 0.5;
  CHECK(static_cast<double>(during) >= min_share * baseline_rate * seconds);
  double max_gap = 0;
  for (size_t i = frames_before + 1; i < arrivals.size(); ++i) {
    max_gap = std::max(max_gap, std::chrono::duration<double>(arrivals[i] - arrivals[i - 1]).count());
  }
  CHECK(max_gap < std::max(2.0, 3 * baseline_gap));
  CHECK(!feed.failed());
}

}  // namespace
}  // namespace liveprof::trace_export_test
