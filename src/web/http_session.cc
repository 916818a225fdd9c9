#include "web/http_session.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "web/metrics.h"
#include "web/rest.h"
#include "web/static_files.h"
#include "web/trace_api.h"
#include "web/websocket_session.h"

namespace liveprof {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kMaxRequestBody = 64 * 1024;
constexpr size_t kMaxRequestHeader = 16 * 1024;

class HttpSession final : public std::enable_shared_from_this<HttpSession>, public SharedState::Waiter {
 public:
  HttpSession(tcp::socket&& socket, std::shared_ptr<SharedState> state, std::string address)
      : stream_(std::move(socket)), state_(std::move(state)), address_(std::move(address)) {}

  ~HttpSession() {
    state_->NotWaiting(this);
    if (!handed_over_ && !released_) state_->Release(address_);
  }

  // At a connection cap, while waiting for a request: the slot goes to a
  // new connection now, and the read waiting here ends (operation_aborted).
  void GiveWay() override {
    released_ = true;
    state_->Release(address_);
    stream_.close();
  }

  void Run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
  }

 private:
  using Request = http::request<http::string_body>;

  // Waits for a request: the first one's header within header_timeout of
  // the accept (an idle or slow opener holds its slot seconds, not the
  // request timeout), a kept-alive connection's next one within
  // http_timeout. Meanwhile a new connection at a cap may take the slot
  // (SharedState::Waiting).
  void DoRead() {
    parser_.emplace();
    parser_->body_limit(kMaxRequestBody);
    parser_->header_limit(kMaxRequestHeader);
    const ServerOptions& o = state_->options();
    stream_.expires_after(requests_ == 0 ? o.header_timeout : o.http_timeout);
    state_->Waiting(this, address_, requests_ > 0);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // The header is in: the body (if any) within the request timeout.
  void OnHeader(beast::error_code ec) {
    state_->NotWaiting(this);
    if (ec || parser_->is_done()) return OnRead(ec);
    stream_.expires_after(state_->options().http_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == net::error::eof) {
      return Shutdown();
    }
    if (ec) {
      // Not HTTP, or over a limit: say what, then close.
      keep_alive_ = false;
      return SendReply(ErrorReply(400, "malformed HTTP request: " + ec.message()), 11);
    }
    ++requests_;
    Request& req = parser_->get();
    keep_alive_ = req.keep_alive();
    const unsigned version = req.version();
    const RequestTarget target = ParseRequestTarget(req.target());

    if (NeedsToken(target.path) && !TokenAccepted(state_->options().token, req[http::field::authorization], target,
                                                  req[http::field::sec_websocket_protocol])) {
      return SendReply(ErrorReply(401,
                                  "this server needs its token: 'Authorization: Bearer <token>', "
                                  "?token=<token> or the WebSocket subprotocol "
                                  "liveprof.token.<token>"),
                       version);
    }
    if (!HostAllowed(req[http::field::host], !state_->options().token.empty())) {
      return SendReply(ErrorReply(403, "Host '" + std::string(req[http::field::host]) +
                                           "' is not this machine: without --token liveprof answers "
                                           "only to localhost, 127.0.0.1 or [::1] (a guard against "
                                           "DNS rebinding)"),
                       version);
    }
    if (beast::websocket::is_upgrade(req)) return Upgrade(target);
    if (req.method() == http::verb::post && target.path == "/api/capture") {
      // A change, not a read: a page of another origin may not make it.
      const std::string_view origin = req[http::field::origin];
      if (!origin.empty() && !OriginAllowed(origin, req[http::field::host], state_->options().allowed_origins)) {
        return SendReply(ErrorReply(403, "Origin '" + std::string(origin) + "' may not POST /api/capture"), version);
      }
      return SendReply(CaptureReply(std::string(req.target())), version);
    }
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      return SendReply(ErrorReply(405, std::string(req.method_string()) +
                                           " is not served: GET and HEAD only (POST for /api/capture)"),
                       version);
    }
    head_ = req.method() == http::verb::head;
    Serve(std::string(req.target()), version);
  }

  void Upgrade(const RequestTarget& target) {
    Request& req = parser_->get();
    if (target.path != "/ws") {
      return SendReply(ErrorReply(404, "WebSocket upgrades are served on /ws only, not " + target.path), req.version());
    }
    const std::string host(req[http::field::host]);
    const std::string origin(req[http::field::origin]);
    if (!OriginAllowed(origin, host, state_->options().allowed_origins)) {
      return SendReply(
          ErrorReply(403, "Origin '" + origin + "' may not open /ws on " + host + " (allow it with --allow-origin)"),
          req.version());
    }
    std::string subprotocol = ChooseSubprotocol(req[http::field::sec_websocket_protocol]);
    handed_over_ = true;  // the WebSocket session releases the address now.
    stream_.expires_never();
    RunWebsocketSession(stream_.release_socket(), state_, address_, parser_->release(), std::move(subprotocol));
  }

  Reply CaptureReply(const std::string& target) {
    const Route route = RouteRequest(target, 0);
    if (route.kind == Route::Kind::kError) return ErrorReply(route.status, route.message);
    if (!state_->options().capture) return ErrorReply(501, "this server takes no ingest (serve --ingest)");
    const std::string error = state_->options().capture(route.capture);
    if (!error.empty()) return ErrorReply(409, error);
    return Reply{
        200, "application/json",
        "{\"type\":\"capture\",\"v\":1,\"source\":" + std::to_string(route.capture.source) + ",\"sent\":true}"};
  }

  void Serve(const std::string& target, unsigned version) {
    const std::shared_ptr<const PipelineSnapshot>& latest = state_->latest();
    const uint32_t published_last = state_->pipeline_render().steps.last_steps;
    const Route route = RouteRequest(target, published_last);
    switch (route.kind) {
      case Route::Kind::kStatic: return ServeFile(target, version);
      case Route::Kind::kIndex: return SendReply(IndexReply(state_->options().fleet_view), version);
      case Route::Kind::kError: return SendReply(ErrorReply(route.status, route.message), version);
      case Route::Kind::kMetrics: {
        const ServerOptions& o = state_->options();
        std::string text;
        if (!o.fleet_view) {  // (a fleet view's own pipeline is idle: only the fleet's)
          if (!latest) return SendReply(NotYet(), version);
          if (!o.ingest_refused && !o.ingest_cost) {
            text = RenderPrometheus(latest->metrics);
          } else {
            MetricsInput metrics = latest->metrics;
            if (o.ingest_refused) metrics.ingest_refused = o.ingest_refused();
            if (o.ingest_cost) metrics.ingest_cost = o.ingest_cost();
            text = RenderPrometheus(metrics);
          }
        }
        if (o.extra_metrics) text += o.extra_metrics();
        return SendReply(Reply{200, std::string(kPrometheusContentType), std::move(text)}, version);
      }
      case Route::Kind::kTrace: return ServeTrace(target, version);
      case Route::Kind::kFleet: return ServeFleet(target, version);
      case Route::Kind::kCapture:
        return SendReply(ErrorReply(405, "/api/capture changes what a source records: POST it"), version);
      case Route::Kind::kView: break;
    }
    if (!NeedsRender(route)) {
      if (!latest) return SendReply(NotYet(), version);
      return SendReply(ViewReply(route, latest->views, ServerJson(route)), version);
    }
    // Another window or CSV: the pipeline renders it at its next round and
    // the answer comes back to this thread.
    auto self = shared_from_this();
    auto executor = stream_.get_executor();
    state_->pipeline().Request(RenderOptionsFor(route, state_->pipeline_render()),
                               [self, executor, route, version](std::shared_ptr<const RenderedViews> views) {
                                 net::post(executor, [self, route, version, views] {
                                   if (!views)
                                     return self->SendReply(ErrorReply(503, "the pipeline has stopped"), version);
                                   self->SendReply(ViewReply(route, *views, self->ServerJson(route)), version);
                                 });
                               });
  }

  // A trace path: the store is queried on the query pool (a full-range
  // query must not hold up the other sessions), the answer written from
  // here; /api/export streams from the export pool.
  void ServeTrace(const std::string& target, unsigned version) {
    RequestTarget parsed = ParseRequestTarget(target);
    const TraceStore* store = state_->pipeline().trace_store();
    if (parsed.path == "/api/export") {
      std::variant<Reply, ExportRequest> checked = CheckExport(parsed, store, state_->options().export_trace);
      if (Reply* error = std::get_if<Reply>(&checked)) return SendReply(std::move(*error), version);
      // HEAD: whether it would be served, not its size (the file is not made).
      if (head_) return SendReply(Reply{200, "application/gzip", ""}, version);
      return StartExport(std::move(std::get<ExportRequest>(checked)), *store, version);
    }
    auto self = shared_from_this();
    auto executor = stream_.get_executor();
    state_->RunQuery([self, executor, parsed = std::move(parsed), store, version]() mutable {
      Reply reply = TraceReply(parsed, store, self->state_->options().export_trace);
      // The session goes back whole to its thread (never the last reference here).
      net::post(executor, [self = std::move(self), reply = std::move(reply), version]() mutable {
        self->SendReply(std::move(reply), version);
      });
    });
  }

  // /api/fleet...: the owner's hook, on the query pool (a forwarded query
  // waits on another host).
  void ServeFleet(const std::string& target, unsigned version) {
    if (!state_->options().fleet) {
      return SendReply(ErrorReply(404,
                                  "no fleet here: liveprof fleet serves /api/fleet, an agent "
                                  "(serve --publish) /api/fleet/agent"),
                       version);
    }
    auto self = shared_from_this();
    auto executor = stream_.get_executor();
    state_->RunQuery([self, executor, target, version]() mutable {
      Reply reply = self->state_->options().fleet(ParseRequestTarget(target), target);
      net::post(executor, [self = std::move(self), reply = std::move(reply), version]() mutable {
        self->SendReply(std::move(reply), version);
      });
    });
  }

  // ---- /api/export, streamed ----
  // The export runs on an export worker and hands each piece (<= 64 KiB of
  // gzip) to the web thread, which writes it as one HTTP chunk; the worker
  // makes the next piece only once that write completed (back pressure:
  // one piece in flight, whatever the reader's pace). The status line goes
  // with the first piece, so an export that fails before it is still a 500.
  // A reader gone, the send timeout or the server stopping ends it.
  struct ExportChannel {
    std::mutex mu;
    std::condition_variable cv;
    bool written = false;    // the last piece is out: make the next.
    bool cancelled = false;  // the connection failed: stop.
  };

  void StartExport(ExportRequest request, const TraceStore& store, unsigned version) {
    auto channel = std::make_shared<ExportChannel>();
    export_channel_ = channel;
    auto self = shared_from_this();
    auto executor = stream_.get_executor();
    state_->RunExport([self, executor, channel, request = std::move(request), store = &store, version]() mutable {
      const std::shared_ptr<SharedState>& state = self->state_;
      auto sink = [&](std::string_view piece) {
        {
          std::lock_guard lock(channel->mu);
          if (channel->cancelled) return false;
          channel->written = false;
        }
        net::post(executor, [self, piece = std::string(piece), version]() mutable {
          self->WriteExportPiece(std::move(piece), version);
        });
        std::unique_lock lock(channel->mu);
        while (!channel->written && !channel->cancelled) {
          if (state->stopping()) return false;
          channel->cv.wait_for(lock, std::chrono::milliseconds(50));
        }
        return !channel->cancelled;
      };
      std::string error;
      const bool ok = state->options().export_trace(*store, request.t0, request.t1, request.tracks, sink, &error);
      net::post(executor, [self = std::move(self), ok, error = std::move(error), version]() mutable {
        self->FinishExport(ok, error, version);
      });
    });
  }

  void WriteExportPiece(std::string piece, unsigned version) {
    export_piece_ = std::move(piece);
    stream_.expires_after(state_->options().http_timeout);  // a reader that stops reading is let go.
    if (!export_header_) {
      export_header_.emplace(http::status::ok, version);
      SetCommonHeaders(*export_header_);
      export_header_->set(http::field::content_type, "application/gzip");
      export_header_->chunked(true);
      export_serializer_.emplace(*export_header_);
      return http::async_write_header(stream_, *export_serializer_,
                                      [self = shared_from_this()](beast::error_code ec, size_t) {
                                        if (ec) return self->CancelExport();
                                        self->WriteExportChunk();
                                      });
    }
    WriteExportChunk();
  }

  void WriteExportChunk() {
    net::async_write(stream_, http::make_chunk(net::buffer(export_piece_)),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->CancelExport();
                       self->export_piece_.clear();
                       self->SignalExport(/*cancelled=*/false);
                     });
  }

  void SignalExport(bool cancelled) {
    if (!export_channel_) return;
    {
      std::lock_guard lock(export_channel_->mu);
      (cancelled ? export_channel_->cancelled : export_channel_->written) = true;
    }
    export_channel_->cv.notify_one();
  }

  void CancelExport() {
    SignalExport(/*cancelled=*/true);
    keep_alive_ = false;  // FinishExport ends the connection.
  }

  void FinishExport(bool ok, const std::string& error, unsigned version) {
    const bool started = export_header_.has_value();
    const bool cancelled = [&] {
      if (!export_channel_) return true;
      std::lock_guard lock(export_channel_->mu);
      return export_channel_->cancelled;
    }();
    export_channel_.reset();
    export_serializer_.reset();
    export_header_.reset();
    export_piece_.clear();
    if (cancelled) return Shutdown();
    if (!started) {  // nothing sent yet: a plain answer.
      if (ok) return SendReply(ErrorReply(500, "export failed: it produced nothing"), version);
      return SendReply(ErrorReply(500, "export failed: " + error), version);
    }
    if (!ok) {
      // The status line is out: the client sees the transfer cut short
      // (no last chunk), never a file that looks whole.
      keep_alive_ = false;
      return Shutdown();
    }
    stream_.expires_after(state_->options().http_timeout);
    net::async_write(stream_, http::make_chunk_last(),
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->AfterWrite(ec); });
  }

  // The server's counters, for the status view only (they take percentiles).
  std::string ServerJson(const Route& route) const {
    return route.topic == Topic::kStatus ? ServerStatsJson(state_->stats()) : std::string();
  }

  static Reply NotYet() { return ErrorReply(503, "no snapshot has been published yet: retry in a moment"); }

  void ServeFile(const std::string& target, unsigned version) {
    const std::filesystem::path& root = state_->options().static_dir;
    if (root.empty()) return SendReply(ErrorReply(404, "this server serves no static files"), version);
    const StaticResolution found = ResolveStaticPath(root, target);
    if (found.status != 200) return SendReply(ErrorReply(found.status, found.error), version);
    beast::error_code ec;
    http::file_body::value_type body;
    body.open(found.path.c_str(), beast::file_mode::scan, ec);
    if (ec) return SendReply(ErrorReply(404, "cannot open " + std::string(target) + ": " + ec.message()), version);
    const uint64_t size = body.size();
    file_response_.emplace(std::piecewise_construct, std::make_tuple(std::move(body)),
                           std::make_tuple(http::status::ok, version));
    http::response<http::file_body>& res = *file_response_;
    SetCommonHeaders(res);
    res.set(http::field::content_type, MimeType(found.path));
    res.content_length(size);
    if (head_) {
      // The headers of the file, without the file.
      http::response<http::empty_body> h{http::status::ok, version};
      SetCommonHeaders(h);
      h.set(http::field::content_type, MimeType(found.path));
      h.content_length(size);
      file_response_.reset();
      return SendEmpty(std::move(h));
    }
    http::async_write(stream_, res, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->file_response_.reset();
      self->AfterWrite(ec);
    });
  }

  template <class Res>
  void SetCommonHeaders(Res& res) {
    res.set(http::field::server, "liveprof/" + state_->options().version);
    res.set(http::field::cache_control, "no-store");
    res.set("X-Content-Type-Options", "nosniff");
    res.keep_alive(keep_alive_);
  }

  void SendEmpty(http::response<http::empty_body> res) {
    empty_response_.emplace(std::move(res));
    http::async_write(stream_, *empty_response_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->empty_response_.reset();
      self->AfterWrite(ec);
    });
  }

  void SendReply(Reply reply, unsigned version) {
    response_.emplace(static_cast<http::status>(reply.status), version);
    http::response<http::string_body>& res = *response_;
    SetCommonHeaders(res);
    if (reply.status == 401) res.set(http::field::www_authenticate, "Bearer");
    res.set(http::field::content_type, reply.content_type);
    if (head_) {
      res.content_length(reply.body.size());
    } else {
      res.body() = std::move(reply.body);
      res.prepare_payload();
    }
    http::async_write(stream_, res, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->response_.reset();
      self->AfterWrite(ec);
    });
  }

  void AfterWrite(beast::error_code ec) {
    if (ec) return;  // the peer went away: the session ends.
    if (!keep_alive_) return Shutdown();
    head_ = false;
    DoRead();
  }

  void Shutdown() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<SharedState> state_;
  std::string address_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  std::optional<http::response<http::file_body>> file_response_;
  std::optional<http::response<http::empty_body>> empty_response_;
  // /api/export's stream: its header, serializer, the piece being written,
  // and the channel to its worker.
  std::optional<http::response<http::empty_body>> export_header_;
  std::optional<http::response_serializer<http::empty_body>> export_serializer_;
  std::string export_piece_;
  std::shared_ptr<ExportChannel> export_channel_;
  bool keep_alive_ = true;
  bool head_ = false;
  bool handed_over_ = false;
  bool released_ = false;  // its slot given to another (GiveWay).
  uint64_t requests_ = 0;  // read whole.
};

}  // namespace

void RunHttpSession(tcp::socket socket, std::shared_ptr<SharedState> state, std::string address) {
  std::make_shared<HttpSession>(std::move(socket), std::move(state), std::move(address))->Run();
}

}  // namespace liveprof
