// Server: liveprof's HTTP and WebSocket server, as the rest of the program
// sees it. No Beast type appears here: Boost.Beast lives in listener.cc,
// http_session.cc and websocket_session.cc only.
//
//   Pipeline ──(snapshots, event chunks: posted)──► web thread (io_context)
//                                                    ├─ Listener: accepts, caps per address
//                                                    ├─ HttpSession: static/, /api/*, /metrics
//                                                    └─ WebsocketSession: /ws feed
//
// Every session runs on one thread, the web thread; it reads only what the
// pipeline published (shared_state.h). Trace store queries (/api/trace*,
// WebSocket trace tiles) run on a small query pool and /api/export on an
// export pool, both owned by the server; their answers are posted back.
#ifndef LIVEPROF_WEB_SERVER_H_
#define LIVEPROF_WEB_SERVER_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/metrics_input.h"
#include "pipeline/pipeline.h"

namespace liveprof {

// Writes events [t0, t1] of `tracks` (empty: all) of `store` as a gzip
// Chrome trace, piece by piece: `sink` gets each piece in order and returns
// false to stop (the client went away); false with *error. What /api/export
// streams (on an export worker, a piece written before the next is made);
// set by the application (the writer, ExportStoreRangeStream, lives in
// src/import, which the web layer does not include).
using TraceExportSink = std::function<bool(std::string_view piece)>;
using TraceExportFn =
    std::function<bool(const TraceStore& store, uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                       const TraceExportSink& sink, std::string* error)>;

// POST /api/capture?source=ID&host_level=1|2&python_scopes=0|1&gpu=0|1&gpu_level=default|full&seconds=S:
// what to turn on or off in one ingest source, for S seconds (0 or none:
// until the next capture). Parameters left out stay as they are.
struct Reply;          // (rest.h)
struct RequestTarget;  // (rest.h)

struct CaptureQuery {
  uint64_t source = 0;
  int host_level = 0;      // 0: unchanged.
  int python_scopes = -1;  // -1: unchanged.
  int gpu = -1;
  int gpu_level = -1;  // 0 default, 1 full (CuptiLevel); -1: unchanged.
  uint64_t duration_ns = 0;
};

struct ServerOptions {
  std::string bind = "127.0.0.1";  // anything but loopback needs `token`.
  uint16_t port = 8080;            // 0: the system picks a free port.
  // When set, every request must carry it: `Authorization: Bearer <token>`,
  // `?token=<token>`, or the WebSocket subprotocol `liveprof.token.<token>`.
  std::string token;
  std::filesystem::path static_dir;  // the dashboard; "" serves no files.
  // Origins a browser may open /ws from, besides the server's own
  // (http://<Host>). "*" allows any (not recommended).
  std::vector<std::string> allowed_origins;
  size_t max_connections_per_address = 128;
  size_t max_connections = 1024;
  // A WebSocket whose write has not completed in this long is closed.
  std::chrono::milliseconds send_deadline{5000};
  // A WebSocket that sends nothing (not even a pong to our pings, sent at
  // half this) for this long is closed; so is a half-open one.
  std::chrono::milliseconds ws_idle_timeout{60000};
  std::chrono::milliseconds http_timeout{30000};  // per request, and keep-alive idle.
  // A new connection's first request header must be in within this: an idle
  // or slow connection holds a slot a few seconds, not the request timeout.
  std::chrono::milliseconds header_timeout{5000};
  // (A control message over 64 KiB, protocol.h's kMaxControlMessageBytes,
  // closes its WebSocket with 1009.)
  // Control messages that fail to decode before the connection is closed.
  uint32_t max_bad_messages = 16;
  uint32_t frame_hz = 10;      // said in the hello: the pipeline's publish rate.
  std::string version;         // liveprof's version, in the hello and Server header.
  TraceExportFn export_trace;  // /api/export; empty: 501.
  // /api/status's "ingest": a JSON array of the ingest sources (liveprof
  // serve --ingest); empty: no key. Called on the web thread.
  std::function<std::string()> ingest_status;
  // /metrics' liveprof_ingest_refused_events_total: the events the ingest
  // sources sent that were refused, by source and reason. Empty: none.
  // Called on the web thread.
  std::function<std::vector<MetricsRefusal>()> ingest_refused;
  // /metrics' liveprof_source_self_cpu_seconds_total,
  // liveprof_source_resident_bytes and liveprof_source_hook_seconds_total:
  // liveprof's own cost in each connected ingest source's process, as its
  // sender read it. Empty: none. Called on the web thread.
  std::function<std::vector<MetricsSourceCost>()> ingest_cost;
  // POST /api/capture (capture on demand, docs/ingest.md): sends an ingest
  // source a capture control. Returns "" when sent, else why not (a 409).
  // Empty: 501. Called on the web thread.
  std::function<std::string(const CaptureQuery&)> capture;
  // /api/fleet and /api/fleet/... (docs/fleet.md): the fleet view's model
  // and forwarded viewport queries (liveprof fleet), an agent's publisher
  // (serve --publish). Given the parsed and the raw target. Empty: 404.
  // Called on the query pool (it may wait on the network), never the web thread.
  std::function<Reply(const RequestTarget& target, std::string_view raw_target)> fleet;
  bool fleet_view = false;  // liveprof fleet: /api lists /api/fleet (the dashboard's Fleet page).
  // /metrics: more families (the fleet's, fleet/fleet_metrics.h) after the
  // pipeline's; on a fleet view (fleet_view) they are all of it. Called on
  // a web thread: quick, and safe while the server runs.
  std::function<std::string()> extra_metrics;
};

// "" when the options can be served, else why not (e.g. a non-loopback bind
// without a token).
std::string ValidateServerOptions(const ServerOptions& options);

// What the server did; a consistent-enough copy, any thread.
struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over a connection cap.
  uint64_t connections_evicted = 0;  // waiting for a request: gave way to a new one at a cap.
  uint64_t connections_open = 0;     // now (HTTP and WebSocket).
  uint64_t websocket_sessions = 0;   // open now.
  uint64_t view_frames_sent = 0;
  uint64_t event_frames_sent = 0;
  uint64_t trace_tiles_sent = 0;         // binary tiles answering WebSocket trace requests.
  uint64_t view_frames_replaced = 0;     // a newer snapshot took a pending one's place.
  uint64_t sessions_closed_blocked = 0;  // past the send deadline.
  uint64_t bad_messages = 0;
  // From an event's end to the completed write of the first view frame that
  // reflects it, over every frame sent (ms; see docs/protocol.md).
  double latency_p50_ms = 0, latency_p99_ms = 0, latency_max_ms = 0;
  uint64_t latency_samples = 0;
  double web_thread_cpu_seconds = 0;
  std::string ingest_json;  // ServerOptions::ingest_status's answer (empty: none).
};

class Server {
 public:
  // Takes the pipeline's sinks: construct before pipeline.Start(). The
  // pipeline must outlive the server's Stop().
  Server(Pipeline& pipeline, ServerOptions options);
  ~Server();  // Stop()s.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the web thread. False (and *error says what
  // and where) when the options are refused or the address cannot be bound.
  bool Start(std::string* error);
  // The bound port (after Start). Any thread.
  uint16_t port() const;
  // Closes every connection and joins the web thread. Idempotent.
  void Stop();

  ServerStats stats() const;
  // Forgets the latency samples so far (a benchmark's warm-up). Any thread.
  void ResetLatency();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace liveprof

#endif  // LIVEPROF_WEB_SERVER_H_
