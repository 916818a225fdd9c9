// What the server tests share: options with short timeouts, polling, JSON
// replies, and a server with its pipeline and the simulated workload.
#ifndef LIVEPROF_TESTS_WEB_TEST_SERVER_H_
#define LIVEPROF_TESTS_WEB_TEST_SERVER_H_

#include <doctest/doctest.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "pipeline/pipeline.h"
#include "producers/simulated_workload.h"
#include "stream/stream.h"
#include "wait_for.h"
#include "web/server.h"
#include "web/ws_raw_client.h"

namespace liveprof::test {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint32_t kMaxBadMessages = 5;
constexpr size_t kPerAddressCap = 64;

#define REQUIRE_SERVER(ts) REQUIRE_MESSAGE((ts).started(), (ts).error())

inline ServerOptions ShortOptions() {
  ServerOptions o;
  o.bind = "127.0.0.1";
  o.port = 0;
  o.version = "test";
  o.send_deadline = milliseconds(500);
  o.ws_idle_timeout = milliseconds(1500);
  o.http_timeout = milliseconds(1500);
  o.header_timeout = milliseconds(1000);
  o.max_connections_per_address = kPerAddressCap;
  o.max_bad_messages = kMaxBadMessages;
  return o;
}

// A gzip body inflated; "" when it is not whole gzip.
inline std::string Gunzip(const std::string& gz) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return {};
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  inflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::string();
}

inline nlohmann::json ParseJson(const std::string& text) {
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// A JSON error body: {"type":"error",...}.
inline bool IsJsonError(const HttpReply& r) {
  const nlohmann::json j = ParseJson(r.body);
  return j.is_object() && j.value("type", "") == "error" && r.Header("Content-Type") == "application/json";
}

// The server, its pipeline and the simulated workload at its default rate
// (about 7 k events/s), or `events_per_second`.
class TestServer {
 public:
  explicit TestServer(ServerOptions options = ShortOptions(), double events_per_second = 0)
      : pipeline_(stream_, Pipeline::Options{}), server_(pipeline_, std::move(options)) {
    started_ = server_.Start(&error_);
    if (!started_) return;
    pipeline_.Start();
    SimulatedWorkloadOptions w;
    w.model.schedule = DefaultSchedule();
    w.events_per_second = events_per_second;
    workload_ = std::make_unique<SimulatedWorkload>(stream_, w);
    workload_->Start();
  }
  ~TestServer() {
    if (workload_) workload_->Stop();
    pipeline_.Stop();
    server_.Stop();
  }

  bool started() const { return started_; }
  const std::string& error() const { return error_; }
  uint16_t port() const { return server_.port(); }
  Server& server() { return server_; }
  Pipeline& pipeline() { return pipeline_; }
  ServerStats stats() const { return server_.stats(); }

  // Once the trace store holds over `min_events` events: the first half of
  // its range, a range in the past (nothing more will arrive in it). Fails
  // the test when the server is not ready, keeps no store or stays short.
  std::pair<uint64_t, uint64_t> PastTraceRange(uint64_t min_events) {
    REQUIRE(WaitReady());
    const TraceStore* store = pipeline_.trace_store();
    REQUIRE(store != nullptr);
    REQUIRE(WaitFor([&] { return store->stats().events > min_events; }));
    const TraceStore::Stats s = store->stats();
    return {s.first_ns, s.first_ns + (s.last_ns - s.first_ns) / 2};
  }

  // True once the first snapshot is published (GET /api/status answers 200).
  bool WaitReady(const test::Headers& headers = {}) {
    return WaitFor([&] {
      RawClient c(port());
      return c.HttpGet("/api/status", headers).status == 200;
    });
  }

 private:
  Stream stream_;
  Pipeline pipeline_;
  Server server_;
  std::unique_ptr<SimulatedWorkload> workload_;
  bool started_ = false;
  std::string error_;
};

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_WEB_TEST_SERVER_H_
