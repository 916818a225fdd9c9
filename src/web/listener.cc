// The Listener (accepts TCP connections, applies the connection caps, hands
// each connection to an HttpSession) and the Server around it: the web
// thread, its io_context, and the pipeline's sinks that post publications
// onto it. Implements server.h.
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>

#include "stream/clock.h"
#include "web/http_session.h"
#include "web/server.h"
#include "web/shared_state.h"

namespace liveprof {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

// Sent to a connection over a cap, then the connection is closed.
const std::string& TooManyConnections() {
  static const std::string response = [] {
    const std::string body = "too many connections from this address or in all (liveprof's caps); retry later\n";
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
           "Connection: close\r\nRetry-After: 5\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  return response;
}

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& ioc, std::shared_ptr<SharedState> state)
      : ioc_(ioc), acceptor_(ioc), state_(std::move(state)) {}

  bool Open(const tcp::endpoint& endpoint, std::string* error) {
    error_code ec;
    auto fail = [&](const char* what) {
      *error = std::string(what) + " " + endpoint.address().to_string() + ":" + std::to_string(endpoint.port()) + ": " +
               ec.message();
      return false;
    };
    acceptor_.open(endpoint.protocol(), ec);
    if (ec) return fail("open");
    acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (ec) return fail("set_option on");
    acceptor_.bind(endpoint, ec);
    if (ec == net::error::address_in_use) {
      fail("bind");
      *error += " (another server has this port: --port 0 picks a free one)";
      return false;
    }
    if (ec) return fail("bind");
    acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return fail("listen on");
    port_ = acceptor_.local_endpoint(ec).port();
    return true;
  }
  uint16_t port() const { return port_; }
  void Run() { DoAccept(); }
  void Close() {
    error_code ec;
    acceptor_.close(ec);
  }

 private:
  void DoAccept() {
    // One thread runs the io_context: no strands are needed.
    acceptor_.async_accept(ioc_, [self = shared_from_this()](error_code ec, tcp::socket socket) {
      self->OnAccept(ec, std::move(socket));
    });
  }

  void OnAccept(error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;  // closed.
    if (!ec) {
      error_code ep_ec;
      const tcp::endpoint remote = socket.remote_endpoint(ep_ec);
      std::string address = ep_ec ? "unknown" : remote.address().to_string();
      if (state_->Admit(address)) {
        // Small frames (alerts, status) must not wait for Nagle.
        socket.set_option(tcp::no_delay(true), ep_ec);
        RunHttpSession(std::move(socket), state_, std::move(address));
      } else {
        auto s = std::make_shared<tcp::socket>(std::move(socket));
        net::async_write(*s, net::buffer(TooManyConnections()), [s](error_code, size_t) {
          error_code ignored;
          s->shutdown(tcp::socket::shutdown_both, ignored);
          s->close(ignored);
        });
      }
    }
    // Accept errors (EMFILE...) must not stop the server: go on.
    DoAccept();
  }

  net::io_context& ioc_;
  tcp::acceptor acceptor_;
  std::shared_ptr<SharedState> state_;
  uint16_t port_ = 0;
};

}  // namespace

std::string ValidateServerOptions(const ServerOptions& o) {
  error_code ec;
  const net::ip::address address = net::ip::make_address(o.bind, ec);
  if (ec) return "--bind '" + o.bind + "': not an IP address (" + ec.message() + ")";
  if (!address.is_loopback() && o.token.empty()) {
    return "--bind " + o.bind +
           " exposes the profiler beyond this machine: it needs --token T (clients then send "
           "'Authorization: Bearer T', ?token=T or the WebSocket subprotocol liveprof.token.T)";
  }
  if (o.max_connections_per_address == 0 || o.max_connections == 0) {
    return "connection caps must be at least 1";
  }
  return "";
}

class Server::Impl {
 public:
  Impl(Pipeline& pipeline, ServerOptions options)
      : ioc_(std::make_shared<net::io_context>(1)),
        state_(std::make_shared<SharedState>(pipeline, std::move(options))),
        open_(std::make_shared<std::atomic<bool>>(true)) {
    // Publications cross to the web thread by post: the pipeline never waits
    // for us, and everything web-side stays on one thread.
    auto ioc = ioc_;
    auto state = state_;
    auto open = open_;
    pipeline.SetSinks(
        [ioc, state, open](std::shared_ptr<const PipelineSnapshot> s) {
          if (open->load()) net::post(*ioc, [state, s] { state->OnSnapshot(s); });
        },
        [ioc, state, open](std::shared_ptr<const EventChunk> c) {
          if (open->load()) net::post(*ioc, [state, c] { state->OnChunk(c); });
        });
    // Trace queries and exports leave the web thread for these pools: a
    // full-range query or a long export never delays another session.
    // Each pool thread names itself at its first job (Asio starts them
    // unnamed): the Sources page and /metrics list liveprof's threads by name.
    state_->set_workers(
        [this](SharedState::Job job) { net::post(queries_, Named("liveprof query", std::move(job))); },
        [this](SharedState::Job job) { net::post(exports_, Named("liveprof export", std::move(job))); });
  }
  ~Impl() { Stop(); }

  // `job`, run on a thread that takes `name` first (once per thread).
  static SharedState::Job Named(const char* name, SharedState::Job job) {
    return [name, job = std::move(job)]() mutable {
      thread_local const bool named = pthread_setname_np(pthread_self(), name) == 0;
      (void)named;
      job();
    };
  }

  bool Start(std::string* error) {
    const std::string invalid = ValidateServerOptions(state_->options());
    if (!invalid.empty()) {
      *error = invalid;
      return false;
    }
    const ServerOptions& o = state_->options();
    listener_ = std::make_shared<Listener>(*ioc_, state_);
    if (!listener_->Open(tcp::endpoint(net::ip::make_address(o.bind), o.port), error)) return false;
    listener_->Run();
    ArmDeadlineTimer();
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "liveprof web");
      ioc_->run();
    });
    pthread_getcpuclockid(thread_.native_handle(), &cpu_clock_);
    has_cpu_clock_ = true;
    return true;
  }

  uint16_t port() const { return listener_ ? listener_->port() : 0; }

  // Blocked sessions are closed on each publication; this timer does it too
  // when publications stall.
  void ArmDeadlineTimer() {
    deadline_timer_.expires_after(std::chrono::milliseconds(250));
    deadline_timer_.async_wait([this](error_code ec) {
      if (ec) return;  // cancelled: stopping.
      state_->CheckDeadlines(HostNowNs());
      ArmDeadlineTimer();
    });
  }

  void Stop() {
    if (!thread_.joinable()) return;
    open_->store(false);
    state_->set_stopping();  // an export waiting for its reader gives up.
    net::post(*ioc_, [this] {
      deadline_timer_.cancel();
      listener_->Close();
      state_->CloseAll();
    });
    // Give the closes a moment to go out, then stop whatever is left (idle
    // keep-alive connections).
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ioc_->stop();
    thread_.join();
    // The workers' answers go to the stopped io_context (dropped with it).
    queries_.join();
    exports_.join();
  }

  ServerStats Stats() const {
    ServerStats s;
    ServerCounters& c = state_->counters();
    s.connections_accepted = c.connections_accepted.load();
    s.connections_refused = c.connections_refused.load();
    s.connections_evicted = c.connections_evicted.load();
    s.connections_open = c.connections_open.load();
    s.websocket_sessions = c.websocket_sessions.load();
    s.view_frames_sent = c.view_frames_sent.load();
    s.event_frames_sent = c.event_frames_sent.load();
    s.trace_tiles_sent = c.trace_tiles_sent.load();
    s.view_frames_replaced = c.view_frames_replaced.load();
    s.sessions_closed_blocked = c.sessions_closed_blocked.load();
    s.bad_messages = c.bad_messages.load();
    s.latency_p50_ms = state_->latency().Percentile(0.50);
    s.latency_p99_ms = state_->latency().Percentile(0.99);
    s.latency_max_ms = state_->latency().Max();
    s.latency_samples = state_->latency().samples();
    timespec ts{};
    if (has_cpu_clock_ && clock_gettime(cpu_clock_, &ts) == 0) {
      s.web_thread_cpu_seconds = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
    }
    if (state_->options().ingest_status) s.ingest_json = state_->options().ingest_status();
    return s;
  }

  SharedState& state() { return *state_; }

 private:
  std::shared_ptr<net::io_context> ioc_;
  std::shared_ptr<SharedState> state_;
  std::shared_ptr<std::atomic<bool>> open_;
  std::shared_ptr<Listener> listener_;
  net::steady_timer deadline_timer_{*ioc_};
  net::thread_pool queries_{2};  // /api/trace*, WebSocket trace tiles.
  net::thread_pool exports_{2};  // /api/export, one export each (a third waits its turn).
  std::thread thread_;
  clockid_t cpu_clock_{};
  bool has_cpu_clock_ = false;
};

Server::Server(Pipeline& pipeline, ServerOptions options)
    : impl_(std::make_unique<Impl>(pipeline, std::move(options))) {
  impl_->state().set_stats_source([this] { return stats(); });
}
Server::~Server() = default;
bool Server::Start(std::string* error) { return impl_->Start(error); }
uint16_t Server::port() const { return impl_->port(); }
void Server::Stop() { impl_->Stop(); }
ServerStats Server::stats() const { return impl_->Stats(); }
void Server::ResetLatency() { impl_->state().latency().Reset(); }

}  // namespace liveprof
