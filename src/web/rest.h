// REST: what an HTTP request asks for and the answer, without Beast, so it
// is tested without sockets. The HTTP session (http_session.cc) only moves
// bytes: it asks RouteRequest what a target means, takes the answer from the
// newest snapshot (or asks the pipeline for a render with other options) and
// writes it.
//
//   /api                      the list of endpoints
//   /api/overview             JSON view models, {"type","v","seq",...}
//   /api/steps?last=N         (N in 1..100000; default: the published 100)
//   /api/input_pipeline       ?format=csv: the input ops table
//   /api/tf_stats             ?format=csv
//   /api/kernel_stats         ?format=csv
//   /api/memory               ?format=csv: one summary row per allocator
//   /api/alerts
//   /api/status               sources, rates, drops, run environment, protocol
//                             version, and the server's own counters
//   /api/pod                  per worker, steps aligned by step number
//   /metrics                  Prometheus text format
//   /api/trace, /api/trace/event, /api/trace/search, /api/export
//                             the trace store (trace_api.h)
//
// Pure functions; any thread.
#ifndef LIVEPROF_WEB_REST_H_
#define LIVEPROF_WEB_REST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregators/analyses.h"
#include "web/protocol.h"
#include "web/server.h"

namespace liveprof {

// A request target split into its path and decoded query parameters
// (Boost.URL, rest.cc: '+' in the query is a space, empty parameters are
// skipped, repeated ones kept in order).
struct RequestTarget {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  std::string error;  // set when the target cannot be decoded.
  // The value of query parameter `key`, or nullopt.
  std::optional<std::string_view> Param(std::string_view key) const;
};
RequestTarget ParseRequestTarget(std::string_view target);

// A query parameter's value as a whole number in [lo, hi] (the whole text,
// decimal digits only), or nullopt.
std::optional<uint64_t> WholeNumber(std::string_view text, uint64_t lo = 0, uint64_t hi = UINT64_MAX);

struct Route {
  enum class Kind {
    kStatic,   // not /api or /metrics: a file from static/.
    kIndex,    // /api
    kView,     // /api/<topic>
    kMetrics,  // /metrics
    kTrace,    // /api/trace..., /api/export: the trace store (trace_api.h)
    kCapture,  // POST /api/capture: capture on demand (`capture`).
    kFleet,    // /api/fleet...: the fleet (ServerOptions::fleet; docs/fleet.md).
    kError,    // a bad /api request: status and message say why.
  };
  Kind kind = Kind::kStatic;
  Topic topic = Topic::kOverview;
  bool csv = false;
  uint32_t last_steps = 0;    // ?last=N; 0: the published window.
  uint64_t last_ns = 0;       // ?last_s=T; 0: the published window (tables since start).
  bool exclude_idle = false;  // ?include_idle=false (tf_stats).
  CaptureQuery capture;
  int status = 200;
  std::string message;
};
// What `target` asks for. `published_last_steps` is the step window each
// publication renders (steps?last=N with that N needs no render).
Route RouteRequest(std::string_view target, uint32_t published_last_steps);

// True when the published snapshot cannot answer: a render is needed.
bool NeedsRender(const Route& route);
// The options of that render.
RenderOptions RenderOptionsFor(const Route& route, const RenderOptions& published);

struct Reply {
  int status = 200;
  std::string content_type;
  std::string body;
};
// The answer to a kView route from rendered views. `server_json`, when not
// empty, is a JSON object added to the status view as "server".
Reply ViewReply(const Route& route, const RenderedViews& views, std::string_view server_json = {});
// `/api`: the endpoints; with `fleet_view` (liveprof fleet) /api/fleet's too.
Reply IndexReply(bool fleet_view = false);
// {"type":"error","v":1,"code":"<status>","message":"..."} with that status.
Reply ErrorReply(int status, std::string_view message);

// The server's counters as a JSON object, for /api/status.
std::string ServerStatsJson(const ServerStats& stats);

// ---- Access checks ----

// True when the request carries the token: in `authorization` ("Bearer
// <token>"), the `token` query parameter, or a `liveprof.token.<token>` entry
// of `ws_protocols` (Sec-WebSocket-Protocol, comma separated). The compare
// takes the same time whatever matches. Always true for an empty `token`.
bool TokenAccepted(std::string_view token, std::string_view authorization, const RequestTarget& target,
                   std::string_view ws_protocols);

// True when a request for `path` (decoded) needs the token: /api, /metrics
// and /ws, everything that carries profiling data. The dashboard's static
// files hold none and are served without it, so that a browser can load the
// page whose URL carries ?token= (its scripts and styles are fetched without).
bool NeedsToken(std::string_view path);

// True when a WebSocket upgrade from `origin` may proceed: no Origin header
// (not a browser), the server's own origin (http(s)://<host>), or one of
// `allowed` ("*" allows any).
bool OriginAllowed(std::string_view origin, std::string_view host, const std::vector<std::string>& allowed);

// True when a request's Host header may be answered. Without a token the
// server answers only to loopback names (localhost, 127.0.0.1, [::1], any
// port) or an empty Host: a web page whose name an attacker points at
// 127.0.0.1 (DNS rebinding) sends its own name and is refused. With a token
// any Host is fine: the token protects.
bool HostAllowed(std::string_view host, bool has_token);

// The subprotocol to answer an upgrade with, from the client's offer:
// "liveprof" if offered, else the offered token entry, else "" (none).
std::string ChooseSubprotocol(std::string_view ws_protocols);

}  // namespace liveprof

#endif  // LIVEPROF_WEB_REST_H_
