#include "web/rest.h"

#include <boost/url/encoding_opts.hpp>
#include <boost/url/param.hpp>
#include <boost/url/params_encoded_view.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/parse_query.hpp>

#include <algorithm>
#include <charconv>

#include "base/json_writer.h"
#include "web/static_files.h"  // PercentDecode, FindUrlSyntaxError
#include "web/trace_api.h"

namespace liveprof {
namespace {

constexpr uint32_t kMaxLastSteps = 100'000;

constexpr uint64_t kMaxLastSeconds = 7 * 24 * 3600;

// Every view of the table (aggregators/views.h) is served at /api/<name>:
// those on the feed, and those rendered for each request (the PyTorch view:
// a batch recompute over its buffer, which the dashboard's PyTorch page
// polls every few seconds).
// The view a route names, if it is one rendered on request only.
const ViewInfo* OnRequestView(const Route& route) {
  if (static_cast<size_t>(route.topic) >= kViewCount) return nullptr;
  const ViewInfo& v = GetViewInfo(ViewOf(route.topic));
  return v.on_request() ? &v : nullptr;
}

// The views with a table, for the error message ("input_pipeline, tf_stats...").
std::string CsvViews() {
  std::string out;
  for (const ViewInfo& v : kViews) {
    if (v.csv.empty()) continue;
    if (!out.empty()) out += ", ";
    out += v.name;
  }
  return out;
}

Route Error(int status, std::string message) {
  Route r;
  r.kind = Route::Kind::kError;
  r.status = status;
  r.message = std::move(message);
  return r;
}

// Equal in time independent of where they differ (for the token).
bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (b.empty() ? 0 : b[i % b.size()]));
  }
  return diff == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls f(entry) for each comma-separated entry of a header value.
template <typename F>
void ForEachListEntry(std::string_view list, F f) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    f(Trim(list.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

constexpr std::string_view kTokenProtocolPrefix = "liveprof.token.";

}  // namespace

std::optional<std::string_view> RequestTarget::Param(std::string_view key) const {
  for (const auto& [k, v] : query) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

// Boost.URL parses the target (RFC 3986 origin-form) and decodes it. In
// the query '+' is a space, as URLSearchParams and HTML forms send it (%2B
// is a '+'); in the path it stays '+'. Empty parameters ("a=1&&b=2", a bare
// '?') are skipped; repeated ones are all kept, in order.
RequestTarget ParseRequestTarget(std::string_view target) {
  namespace urls = boost::urls;
  RequestTarget t;
  urls::encoding_opts form;
  form.space_as_plus = true;
  const auto add_params = [&](urls::params_encoded_view params) {
    for (const urls::param_pct_view p : params) {
      if (p.key.empty() && !p.has_value) continue;
      t.query.emplace_back(p.key.decode(form), p.value.decode(form));
    }
  };
  if (const urls::result<urls::url_view> url = urls::parse_origin_form(target)) {
    t.path = url->encoded_path().decode();
    add_params(url->encoded_params());
    return t;
  }
  // Not origin-form: say where and why. The path still routes the request
  // (static files give their own reasons) and the parameters before the bad
  // one are kept (the token may be among them).
  const size_t q = target.find('?');
  const std::string_view raw_path = target.substr(0, q);
  t.path = PercentDecode(raw_path).value_or("");
  if (raw_path.empty() || raw_path.front() != '/') {
    t.error = "the path must start with '/'";
    return t;
  }
  if (const std::optional<UrlSyntaxError> why = FindUrlSyntaxError(raw_path, false)) {
    t.error = why->message + " in the path, at byte " + std::to_string(why->offset);
    return t;
  }
  const std::string_view query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  const std::optional<UrlSyntaxError> why = FindUrlSyntaxError(query, true);
  if (!why) {
    t.error = "not a request target";
    return t;
  }
  const size_t amp = query.rfind('&', why->offset);
  const size_t begin = amp == std::string_view::npos ? 0 : amp + 1;
  // (Never an empty string: Boost 1.81's parse_query("") builds its view
  // from the bare pointer, and strlen reads past the request's bytes; found
  // by TSan.)
  if (begin > 0) {
    if (const auto before = urls::parse_query(query.substr(0, begin))) add_params(*before);
  }
  const std::string_view pair = query.substr(begin, query.find('&', why->offset) - begin);
  t.error = why->message + " in query parameter '" + std::string(pair.substr(0, pair.find('='))) + "'";
  return t;
}

std::optional<uint64_t> WholeNumber(std::string_view text, uint64_t lo, uint64_t hi) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < lo || n > hi) return std::nullopt;
  return n;
}

// POST /api/capture's parameters (server.h, CaptureQuery).
static Route CaptureRoute(const RequestTarget& target) {
  Route r;
  r.kind = Route::Kind::kCapture;
  bool has_source = false;
  for (const auto& param : target.query) {
    const std::string& key = param.first;
    const std::string& value = param.second;
    auto number = [&](uint64_t lo, uint64_t hi) { return WholeNumber(value, lo, hi); };
    auto bad = [&](std::string_view expected) {
      return Error(400, key + "='" + value + "': expected " + std::string(expected));
    };
    if (key == "source") {
      const auto n = number(1, UINT64_MAX);
      if (!n) return bad("a source id (/api/status: server.ingest[].id)");
      r.capture.source = *n;
      has_source = true;
    } else if (key == "host_level") {
      const auto n = number(1, 3);
      if (!n) return bad("1 (steps, input, counters, memory), 2 (+ ops and scopes) or 3 (+ PyTorch modules)");
      r.capture.host_level = static_cast<int>(*n);
    } else if (key == "python_scopes" || key == "gpu") {
      const auto n = number(0, 1);
      if (!n) return bad("0 (off) or 1 (on)");
      (key == "gpu" ? r.capture.gpu : r.capture.python_scopes) = static_cast<int>(*n);
    } else if (key == "gpu_level") {
      if (value != "default" && value != "full") return bad("default or full (the GPU producer's capture level)");
      r.capture.gpu_level = value == "full" ? 1 : 0;
    } else if (key == "seconds") {
      const auto n = number(0, 86'400);
      if (!n) return bad("a whole number of seconds in 0..86400 (0: until the next capture)");
      r.capture.duration_ns = *n * 1'000'000'000ull;
    } else if (key != "token") {
      return Error(400, "unknown query parameter '" + key + "' for /api/capture");
    }
  }
  if (!has_source) return Error(400, "/api/capture needs source=ID (/api/status: server.ingest[].id)");
  return r;
}

Route RouteRequest(std::string_view raw_target, uint32_t published_last_steps) {
  const RequestTarget target = ParseRequestTarget(raw_target);
  const bool api = target.path == "/api" || target.path.starts_with("/api/");
  if (!api && target.path != "/metrics") return Route{};  // static files decode on their own.
  if (!target.error.empty()) return Error(400, target.error);
  Route r;
  if (target.path == "/metrics") {
    r.kind = Route::Kind::kMetrics;
  } else if (target.path == "/api" || target.path == "/api/") {
    r.kind = Route::Kind::kIndex;
  } else if (IsTracePath(target.path)) {
    r.kind = Route::Kind::kTrace;  // trace_api.cc checks its parameters.
  } else if (target.path == "/api/capture") {
    return CaptureRoute(target);
  } else if (target.path == "/api/fleet" || target.path.starts_with("/api/fleet/")) {
    r.kind = Route::Kind::kFleet;  // its owner checks the rest.
  } else {
    const ViewInfo* found = nullptr;
    for (const ViewInfo& v : kViews) {
      if (target.path == v.rest_path) found = &v;
    }
    if (!found) return Error(404, "no endpoint " + target.path + " (GET /api lists them)");
    r.kind = Route::Kind::kView;
    r.topic = TopicOf(found->view);
    for (const auto& [key, value] : target.query) {
      if (key == "format") {
        if (value == "json") continue;
        if (value != "csv") return Error(400, "format='" + value + "': expected json or csv");
        if (found->csv.empty()) {
          return Error(
              400, "format=csv: " + std::string(found->rest_path) + " has no table; csv is offered on " + CsvViews());
        }
        r.csv = true;
      } else if (key == "last" && found->steps_window) {
        const std::optional<uint64_t> n = WholeNumber(value, 1, kMaxLastSteps);
        if (!n) {
          return Error(400,
                       "last='" + value + "': expected a whole number of steps in 1.." + std::to_string(kMaxLastSteps));
        }
        r.last_steps = *n == published_last_steps ? 0 : static_cast<uint32_t>(*n);
      } else if (key == "last_s" && found->time_window) {
        const std::optional<uint64_t> n = WholeNumber(value, 1, kMaxLastSeconds);
        if (!n) {
          return Error(400, "last_s='" + value + "': expected a whole number of seconds in 1.." +
                                std::to_string(kMaxLastSeconds));
        }
        r.last_ns = *n * 1'000'000'000ull;
      } else if (key == "include_idle" && found->idle) {
        if (value != "true" && value != "false") {
          return Error(400, "include_idle='" + value + "': expected true or false");
        }
        r.exclude_idle = value == "false";
      } else if (key != "token") {
        return Error(400, "unknown query parameter '" + key + "' for " + target.path);
      }
    }
  }
  for (const auto& [key, value] : target.query) {
    if (r.kind == Route::Kind::kMetrics && key != "token") {
      return Error(400, "unknown query parameter '" + key + "' for /metrics");
    }
  }
  return r;
}

bool NeedsToken(std::string_view path) {
  return path == "/api" || path.starts_with("/api/") || path == "/metrics" || path == "/ws";
}

bool NeedsRender(const Route& route) {
  return route.kind == Route::Kind::kView && (route.csv || route.last_steps != 0 || route.last_ns != 0 ||
                                              route.exclude_idle || OnRequestView(route) != nullptr);
}

RenderOptions RenderOptionsFor(const Route& route, const RenderOptions& published) {
  RenderOptions o = published;
  o.csv = route.csv;
  if (route.last_steps != 0) o.steps = WindowSel{.last_steps = route.last_steps};
  if (route.last_ns != 0) {
    // Both: when last=N is given too, the steps of the last T seconds, at most N.
    o.steps.last_ns = route.last_ns;
    if (route.last_steps == 0) o.steps.last_steps = 0;
    o.table_window_ns = route.last_ns;
  }
  if (route.exclude_idle) o.include_idle = false;
  o.on_request = OnRequestView(route) != nullptr;
  o.advance_seq = false;
  return o;
}

Reply ViewReply(const Route& route, const RenderedViews& v, std::string_view server_json) {
  Reply r;
  if (route.csv) {
    r.content_type = "text/csv; charset=utf-8";
    if (!IsViewTopic(route.topic) || GetViewInfo(ViewOf(route.topic)).csv.empty()) {
      return ErrorReply(400, "format=csv: this view has no table");
    }
    r.body = v.csv(ViewOf(route.topic));
    return r;
  }
  if (route.topic == Topic::kEvents) return ErrorReply(404, "events are a WebSocket topic only (/ws)");
  r.content_type = "application/json";
  if (const ViewInfo* on_request = OnRequestView(route)) {
    r.body = v.json(on_request->view);
    if (r.body.empty()) return ErrorReply(404, "this server keeps no " + std::string(on_request->name) + " view");
    return r;
  }
  r.body = ViewJson(v, route.topic);
  if (route.topic == Topic::kStatus && !server_json.empty() && !r.body.empty() && r.body.back() == '}') {
    r.body.pop_back();
    r.body += ",\"server\":";
    r.body += server_json;
    r.body += '}';
  }
  return r;
}

Reply IndexReply(bool fleet_view) {
  JsonWriter w;
  w.BeginObject();
  w.KV("type", "index");
  w.KV("v", kViewProtocolVersion);
  w.Key("endpoints");
  w.BeginArray();
  for (const ViewInfo& v : kViews) {
    w.BeginObject();
    w.KV("path", v.rest_path);
    w.KV("csv", !v.csv.empty());
    w.EndObject();
  }
  for (const char* path :
       {"/api/trace", "/api/trace/event", "/api/trace/search", "/api/trace/area", "/api/export", "/metrics"}) {
    w.BeginObject();
    w.KV("path", path);
    w.KV("csv", false);
    w.EndObject();
  }
  if (fleet_view) {  // (docs/fleet.md; the dashboard's Fleet page looks for it here)
    for (const char* path : {"/api/fleet", "/api/fleet/trace", "/api/fleet/trace/event", "/api/fleet/trace/search"}) {
      w.BeginObject();
      w.KV("path", path);
      w.KV("csv", false);
      w.EndObject();
    }
  }
  w.EndArray();
  w.Key("views");  // (what each view's /api/<name> takes: views.h's table)
  WriteViewTable(w);
  w.KV("websocket", "/ws");
  w.EndObject();
  return Reply{200, "application/json", w.Take()};
}

Reply ErrorReply(int status, std::string_view message) {
  JsonWriter w;
  w.BeginObject();
  w.KV("type", "error");
  w.KV("v", kViewProtocolVersion);
  w.KV("code", std::to_string(status));
  w.KV("message", message);
  w.EndObject();
  return Reply{status, "application/json", w.Take()};
}

std::string ServerStatsJson(const ServerStats& s) {
  JsonWriter w;
  w.BeginObject();
  w.KV("connections_accepted", s.connections_accepted);
  w.KV("connections_refused", s.connections_refused);
  w.KV("connections_evicted", s.connections_evicted);
  w.KV("connections_open", s.connections_open);
  w.KV("websocket_sessions", s.websocket_sessions);
  w.KV("view_frames_sent", s.view_frames_sent);
  w.KV("event_frames_sent", s.event_frames_sent);
  w.KV("trace_tiles_sent", s.trace_tiles_sent);
  w.KV("view_frames_replaced", s.view_frames_replaced);
  w.KV("sessions_closed_blocked", s.sessions_closed_blocked);
  w.KV("bad_messages", s.bad_messages);
  w.Key("feed_latency_ms");
  w.BeginObject();
  w.KV("p50", s.latency_p50_ms);
  w.KV("p99", s.latency_p99_ms);
  w.KV("max", s.latency_max_ms);
  w.KV("samples", s.latency_samples);
  w.EndObject();
  w.KV("web_thread_cpu_seconds", s.web_thread_cpu_seconds);
  w.EndObject();
  std::string out = w.Take();
  if (!s.ingest_json.empty()) {  // (already JSON: spliced in)
    out.pop_back();
    out += ",\"ingest\":" + s.ingest_json + "}";
  }
  return out;
}

bool TokenAccepted(std::string_view token, std::string_view authorization, const RequestTarget& target,
                   std::string_view ws_protocols) {
  if (token.empty()) return true;
  bool ok = false;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.starts_with(kBearer)) {
    ok |= ConstantTimeEqual(Trim(authorization.substr(kBearer.size())), token);
  }
  if (std::optional<std::string_view> q = target.Param("token")) ok |= ConstantTimeEqual(*q, token);
  ForEachListEntry(ws_protocols, [&](std::string_view p) {
    if (p.starts_with(kTokenProtocolPrefix)) {
      ok |= ConstantTimeEqual(p.substr(kTokenProtocolPrefix.size()), token);
    }
  });
  return ok;
}

bool OriginAllowed(std::string_view origin, std::string_view host, const std::vector<std::string>& allowed) {
  if (origin.empty()) return true;
  for (const std::string& a : allowed) {
    if (a == "*" || a == origin) return true;
  }
  if (host.empty()) return false;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (origin.size() == scheme.size() + host.size() && origin.starts_with(scheme) &&
        origin.substr(scheme.size()) == host) {
      return true;
    }
  }
  return false;
}

bool HostAllowed(std::string_view host, bool has_token) {
  if (has_token || host.empty()) return true;
  // Without its port: "name:port", "[v6]:port".
  std::string_view name = host;
  if (name.front() == '[') {
    const size_t close = name.find(']');
    if (close == std::string_view::npos) return false;
    name = name.substr(0, close + 1);
  } else if (const size_t colon = name.rfind(':'); colon != std::string_view::npos) {
    name = name.substr(0, colon);
  }
  for (std::string_view ok : {"localhost", "127.0.0.1", "[::1]"}) {
    if (name.size() == ok.size() &&
        std::equal(name.begin(), name.end(), ok.begin(), [](char a, char b) { return (a | 0x20) == (b | 0x20); })) {
      return true;
    }
  }
  return false;
}

std::string ChooseSubprotocol(std::string_view ws_protocols) {
  std::string chosen;
  ForEachListEntry(ws_protocols, [&](std::string_view p) {
    if (p == "liveprof") chosen = "liveprof";
    else if (chosen.empty() && p.starts_with(kTokenProtocolPrefix)) chosen = std::string(p);
  });
  return chosen;
}

}  // namespace liveprof
