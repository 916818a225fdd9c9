// The ingest server on Boost.Asio: one io_context, run by one thread (as the
// web server's), for every listener and connection, so no strands and no
// locks on the connections. This is the only translation unit of src/ingest
// with Asio in it (the project allows Beast/Asio in at most four).
//
//   accept   each listener waits to be readable (async_wait), then takes every
//            pending connection with accept4(SOCK_NONBLOCK | SOCK_CLOEXEC):
//            descriptors stay out of any child process, as before. A peer
//            (a process: SO_PEERCRED; a TCP address) past its cap, or any
//            past the cap of sources with none idle, is refused. Out of
//            descriptors, the listener rests 100 ms (a timer) instead of
//            spinning on a backlog it cannot take.
//   read     one async_read_some per connection, straight into the frame
//            splitter's buffer; when it completes, a pass takes the frames,
//            reads on without waiting while bytes are there (at most 1 MiB
//            a pass, so one busy sender does not hold up the others) and
//            acknowledges the batches the pipeline has handled (written to
//            the run folder, when there is one: docs/ingest.md), the rest
//            at the tick's. A source whose ring is half full gets no read
//            (back pressure): a 2 ms timer looks at its ring again.
//   write    acks, pings and controls are appended to the connection's
//            queue; one async_write_some at a time sends it. Past 1 MiB
//            unsent, the sender is not reading: closed.
//   timers   a 10 ms tick (acks, pings, the stall and hello timeouts), the 2 ms
//            back-pressure look, the listeners' rests.
//   closing  a connection is closed where its end is found (close(2) of a
//            non-blocking socket: never waits); its handlers then see it
//            closed and do nothing. Stop() posts the shutdown to the thread.
//
// What a connection's bytes mean (frames, hello, acks, pings, controls,
// timeouts, status) is IngestConnection's (ingest_connection.h), which has
// no socket: this file is the sockets, the timers and the thread.
#include "ingest/ingest_server.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>

#include <boost/asio/buffer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "ingest/ingest_connection.h"
#include "stream/clock.h"

namespace liveprof {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using local = net::local::stream_protocol;
using error_code = boost::system::error_code;

constexpr size_t kReadBytes = 64 * 1024;
constexpr size_t kPassBytes = 1 << 20;             // read from one connection before the others' turn.
constexpr uint64_t kIdleSourceNs = 2'000'000'000;  // no batch this long: it gives way at the source cap.
constexpr size_t kTrimAfterBytes = 1 << 20;        // a buffer this large, released: memory back to the system.
constexpr size_t kMaxOutBytes = 1 << 20;           // acks and pings a sender has not read: it is not reading.
constexpr auto kTickPeriod = std::chrono::milliseconds(10);       // pings, stall and hello timeouts.
constexpr auto kPausedLookPeriod = std::chrono::milliseconds(2);  // a source held back: its ring again.
constexpr auto kAcceptRest = std::chrono::milliseconds(100);      // out of descriptors.

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

struct IngestServer::Impl {
  struct Connection;
  struct Listener {
    Listener(net::io_context& ioc, bool tcp_endpoint)
        : acceptor(tcp_endpoint ? Acceptor(std::in_place_type<tcp::acceptor>, ioc)
                                : Acceptor(std::in_place_type<local::acceptor>, ioc)),
          rest(ioc) {}
    using Acceptor = std::variant<tcp::acceptor, local::acceptor>;
    Acceptor acceptor;
    net::steady_timer rest;  // out of descriptors: waits before accepting again.
    IngestEndpoint endpoint;
  };

  Impl(Stream& stream, Options options) : stream_(stream), options_(std::move(options)), workers_(stream) {}
  ~Impl() { Stop(); }

  bool Start(std::vector<IngestEndpoint>* bound, std::string* error);
  void Stop();
  bool Capture(uint64_t id, const CaptureRequest& request, std::string* error);
  std::vector<SourceStatus> Sources() const { return statuses_.All(); }
  std::vector<RefusedCount> RefusedTotals() const { return statuses_.RefusedTotals(); }

 private:
  // The io thread's.
  void WaitAccept(Listener& l);
  void Accept(Listener& l, const error_code& ec);
  void StartRead(Connection& c);
  void OnRead(Connection& c, const error_code& ec, size_t n);
  void Pass(Connection& c, size_t taken);
  void ReadEnded(Connection& c, const error_code& ec);
  bool TakeFrames(Connection& c);
  bool WithinBufferBound(Connection& c);
  void Flush(Connection& c);
  void WriteSending(Connection& c);
  void OnWrite(Connection& c, const error_code& ec, size_t n);
  void Acknowledge(Connection& c);  // an IngestAck when more of its batches were handled.
  void Publish(const Connection& c);
  void ArmTick();
  void Pause(Connection& c);
  void ArmPausedLook();
  void Close(Connection& c, const std::string& reason);
  void ReleaseBuffer(Connection& c);
  bool MakeRoom();
  void SendControls();
  void Shutdown();

  Stream& stream_;
  const Options options_;
  std::vector<IngestEndpoint> bound_;
  // One run (Start .. Stop): the io_context and its objects, destroyed
  // before it when the thread has ended.
  std::unique_ptr<net::io_context> ioc_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::unique_ptr<net::steady_timer> tick_, paused_look_;
  bool paused_look_armed_ = false;
  bool cleanup_posted_ = false;
  std::vector<std::shared_ptr<Connection>> connections_;  // the thread's.
  uint64_t next_id_ = 1;
  IngestWorkers workers_;  // the thread's.
  std::atomic<bool> stop_{false};
  std::thread thread_;
  IngestStatuses statuses_;                                    // any thread's.
  mutable std::mutex mu_;                                      // guards controls_ and post_to_.
  std::vector<std::pair<uint64_t, CaptureRequest>> controls_;  // for the thread to send.
  net::io_context* post_to_ = nullptr;                         // while running: where Capture() posts.
};

namespace {

// Who is at the other end of `fd`, for the per-peer cap: a process on a unix
// socket (SO_PEERCRED), an address on TCP; empty for a loopback TCP peer
// (any local process: they cannot be told apart) or when the kernel says
// nothing.
std::string PeerOf(int fd, bool tcp) {
  if (!tcp) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) return {};
    return "pid " + std::to_string(cred.pid) + ", uid " + std::to_string(cred.uid);
  }
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET) return {};
  if ((ntohl(a.sin_addr.s_addr) >> 24) == 127) return {};
  char text[INET_ADDRSTRLEN] = {};
  return ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text) ? text : "";
}

}  // namespace

// A connection: its socket and peer, here, and everything else (IngestConnection).
struct IngestServer::Impl::Connection : std::enable_shared_from_this<Connection> {
  using Socket = std::variant<tcp::socket, local::socket>;
  template <typename... Args>
  Connection(Socket s, Args&&... args) : socket(std::move(s)), source(std::forward<Args>(args)...) {}
  Socket socket;
  std::string peer;  // PeerOf: the per-peer cap's key (empty: none).
  bool open = true;
  bool reading = false;  // an async_read_some in flight (into the splitter's buffer).
  bool paused = false;   // its ring half full: not read; the 2 ms look resumes it.
  IngestConnection source;
  std::string sending;  // what an async_write_some has in flight (never touched meanwhile).
  size_t unsent() const { return source.out().size() + sending.size(); }
};

IngestServer::IngestServer(Stream& stream, Options options)
    : impl_(std::make_unique<Impl>(stream, std::move(options))) {}

IngestServer::~IngestServer() { Stop(); }

bool IngestServer::Start(std::string* error) { return impl_->Start(&bound_, error); }
void IngestServer::Stop() { impl_->Stop(); }
bool IngestServer::Capture(uint64_t id, const CaptureRequest& request, std::string* error) {
  return impl_->Capture(id, request, error);
}
std::vector<IngestServer::SourceStatus> IngestServer::Sources() const { return impl_->Sources(); }
std::vector<IngestServer::RefusedCount> IngestServer::RefusedTotals() const { return impl_->RefusedTotals(); }

bool IngestServer::Impl::Start(std::vector<IngestEndpoint>* bound, std::string* error) {
  if (thread_.joinable()) {
    *error = "ingest: the server is running already";
    return false;
  }
  ioc_ = std::make_unique<net::io_context>(1);
  auto fail = [&](const IngestEndpoint& e, const std::string& what) {
    *error = "ingest " + e.ToString() + ": " + what;
    listeners_.clear();  // (closes them)
    for (const IngestEndpoint& b : bound_) {
      if (!b.tcp) ::unlink(b.path.c_str());  // ours: bound by this call.
    }
    bound_.clear();
    bound->clear();
    ioc_.reset();
    return false;
  };
  bound_.clear();
  for (IngestEndpoint e : options_.endpoints) {
    // Our own socket(2), to have it SOCK_CLOEXEC; Asio takes it from there.
    const int fd = ::socket(e.tcp ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(e, Errno("socket"));
    listeners_.push_back(std::make_unique<Listener>(*ioc_, e.tcp));
    Listener& l = *listeners_.back();
    error_code ec;
    auto said = [&](const char* what) { return std::string(what) + ": " + ec.message(); };
    if (e.tcp) {
      auto& a = std::get<tcp::acceptor>(l.acceptor);
      a.assign(tcp::v4(), fd, ec);
      if (ec) {
        ::close(fd);
        return fail(e, said("socket"));
      }
      a.set_option(net::socket_base::reuse_address(true), ec);
      if (ec) return fail(e, said("SO_REUSEADDR"));
      const net::ip::address_v4 address = net::ip::make_address_v4(e.host, ec);
      if (ec) return fail(e, said("bind"));
      a.bind(tcp::endpoint(address, e.port), ec);
      if (ec) return fail(e, said("bind"));
      e.port = a.local_endpoint(ec).port();
      a.listen(64, ec);
      if (!ec) a.non_blocking(true, ec);
      if (ec) return fail(e, said("listen"));
    } else {
      auto& a = std::get<local::acceptor>(l.acceptor);
      a.assign(local(), fd, ec);
      if (ec) {
        ::close(fd);
        return fail(e, said("socket"));
      }
      // A socket left by a run that died is replaced; one that answers is
      // another server's, and any other file is not ours.
      const local::endpoint where(e.path);
      struct stat st;
      if (lstat(e.path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) return fail(e, "exists and is not a socket");
        {                              // (the probe goes before fail() can drop the io_context)
          local::socket probe(*ioc_);  // (close-on-exec, as every descriptor here)
          const int pfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
          if (pfd < 0) return fail(e, std::string("socket: ") + std::strerror(errno));
          probe.assign(local(), pfd, ec);
          if (!ec) probe.connect(where, ec);
        }
        if (!ec) return fail(e, "another server listens there");
        if (ec != net::error::connection_refused) return fail(e, said("a socket is there and could not be probed"));
        ::unlink(e.path.c_str());
      }
      a.bind(where, ec);
      if (ec) return fail(e, said("bind"));
      a.listen(64, ec);
      if (!ec) a.non_blocking(true, ec);
      if (ec) return fail(e, said("listen"));
    }
    l.endpoint = e;
    bound_.push_back(e);
  }
  *bound = bound_;
  stop_.store(false);
  work_.emplace(ioc_->get_executor());
  tick_ = std::make_unique<net::steady_timer>(*ioc_);
  paused_look_ = std::make_unique<net::steady_timer>(*ioc_);
  paused_look_armed_ = cleanup_posted_ = false;
  for (auto& l : listeners_) WaitAccept(*l);
  ArmTick();
  {
    std::lock_guard<std::mutex> lock(mu_);
    post_to_ = ioc_.get();
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "liveprof ingest");  // (its CPU on the Sources page)
    ioc_->run();
  });
  return true;
}

void IngestServer::Impl::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    post_to_ = nullptr;
  }
  net::post(*ioc_, [this] { Shutdown(); });
  thread_.join();
  // What is left (handlers never run: closed, cancelled) goes with the
  // io_context, after the objects that use it.
  connections_.clear();
  listeners_.clear();
  tick_.reset();
  paused_look_.reset();
  work_.reset();
  ioc_.reset();
}

// On the thread, Stop()'s last handler.
void IngestServer::Impl::Shutdown() {
  // The listeners first: a sender told of the close reconnects at once, and
  // must not land in the backlog of a listener about to go.
  for (auto& l : listeners_) {
    error_code ec;
    std::visit([&](auto& a) { a.close(ec); }, l->acceptor);
    l->rest.cancel();
  }
  for (const IngestEndpoint& e : bound_) {
    if (!e.tcp) ::unlink(e.path.c_str());
  }
  for (auto& c : connections_) {
    if (c->open) Close(*c, "the server stopped");
  }
  connections_.clear();
  tick_->cancel();
  paused_look_->cancel();
  work_.reset();
  ioc_->stop();
}

void IngestServer::Impl::WaitAccept(Listener& l) {
  std::visit(
      [&](auto& a) { a.async_wait(net::socket_base::wait_read, [this, &l](const error_code& ec) { Accept(l, ec); }); },
      l.acceptor);
}

void IngestServer::Impl::Accept(Listener& l, const error_code& ec) {
  if (ec == net::error::operation_aborted || stop_.load(std::memory_order_relaxed)) return;
  const int listener = std::visit([](auto& a) { return a.native_handle(); }, l.acceptor);
  for (;;) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
      // Out of descriptors: the pending connection stays in the backlog and
      // the listener stays readable; rest it, or we would spin.
      l.rest.expires_after(kAcceptRest);
      l.rest.async_wait([this, &l](const error_code& e) {
        if (!e) WaitAccept(l);
      });
      return;
    }
    if (fd < 0) break;  // EAGAIN: none left (others: the next wait tries again).
    error_code aec;
    Connection::Socket socket = l.endpoint.tcp ? Connection::Socket(std::in_place_type<tcp::socket>, *ioc_)
                                               : Connection::Socket(std::in_place_type<local::socket>, *ioc_);
    std::visit(
        [&](auto& s) {
          if constexpr (std::is_same_v<std::decay_t<decltype(s)>, tcp::socket>) {
            s.assign(tcp::v4(), fd, aec);
          } else {
            s.assign(local(), fd, aec);
          }
          if (!aec) s.non_blocking(true, aec);  // (it is: accept4; Asio is told, for Pass's reads)
        },
        socket);
    if (aec) {  // (the reactor would not take it)
      ::close(fd);
      std::fprintf(stderr, "liveprof: ingest: a connection on %s dropped: %s\n", l.endpoint.ToString().c_str(),
                   aec.message().c_str());
      continue;
    }
    auto c = std::make_shared<Connection>(std::move(socket), stream_, workers_, options_, next_id_++,
                                          l.endpoint.ToString(), HostNowNs());
    c->peer = PeerOf(fd, l.endpoint.tcp);
    c->source.set_peer(c->peer);
    if (!c->peer.empty() &&
        static_cast<size_t>(std::count_if(connections_.begin(), connections_.end(), [&](const auto& o) {
          return o->open && o->peer == c->peer;
        })) >= options_.max_sources_per_peer) {
      Close(*c, "refused: its peer (" + c->peer + ") has " + std::to_string(options_.max_sources_per_peer) +
                    " sources connected already (max_sources_per_peer)");
      continue;
    }
    const size_t open = static_cast<size_t>(
        std::count_if(connections_.begin(), connections_.end(), [](const auto& o) { return o->open; }));
    if (open >= options_.max_sources && !MakeRoom()) {
      Close(*c, "refused: " + std::to_string(options_.max_sources) + " sources connected already, none idle");
      continue;
    }
    Publish(*c);
    connections_.push_back(c);
    StartRead(*c);
  }
  WaitAccept(l);
}

// At the source cap: the source that has sent no batch for longest, if
// that is over kIdleSourceNs, gives its place to the new one. False: none.
bool IngestServer::Impl::MakeRoom() {
  const uint64_t now = HostNowNs();
  Connection* idlest = nullptr;
  for (const auto& o : connections_) {
    if (o->open && (idlest == nullptr || o->source.idle_since_ns() < idlest->source.idle_since_ns())) {
      idlest = o.get();
    }
  }
  if (idlest == nullptr || now < idlest->source.idle_since_ns() + kIdleSourceNs) return false;
  Close(*idlest, "gave its place to a new sender: " + std::to_string(options_.max_sources) +
                     " sources connected, and this one sent no batch for " +
                     std::to_string((now - idlest->source.idle_since_ns()) / 1'000'000) + " ms");
  return true;
}

// The next read, straight into the splitter's buffer (its frames stay
// aligned: decoded in place). None while the source's ring is half full
// (back pressure): its bytes wait in the socket, then in the sender, which
// keeps every batch until it is acknowledged; what the server acknowledges
// is in its ring. (A hang-up is seen once it is read again.)
// (Whole frames still held were left for room in the ring, which the pipeline
// may have made since: the look takes them first.)
void IngestServer::Impl::StartRead(Connection& c) {
  if (!c.open || c.reading || stop_.load(std::memory_order_relaxed)) return;
  if (c.source.RingHalfFull() || c.source.splitter().has_frame()) return Pause(c);
  c.reading = true;
  char* into = c.source.splitter().Reserve(kReadBytes);
  std::visit(
      [&](auto& s) {
        s.async_read_some(net::buffer(into, kReadBytes), [this, self = c.shared_from_this()](
                                                             const error_code& ec, size_t n) { OnRead(*self, ec, n); });
      },
      c.socket);
}

void IngestServer::Impl::OnRead(Connection& c, const error_code& ec, size_t n) {
  c.reading = false;
  if (!c.open) return ReleaseBuffer(c);  // (closed meanwhile: aborted, or bytes nobody wants now)
  if (ec) return ReadEnded(c, ec);
  c.source.Received(HostNowNs());
  c.source.splitter().Commit(n);
  Pass(c, n);
}

// A pass over one connection: its frames, then more bytes while the socket
// has some (non-blocking: an answer, never a wait), at most kPassBytes, then
// the others' turn. One ack a pass: acks are cumulative. The frames already
// here go first; none is taken, and nothing more received, while the
// source's ring is half full (back pressure).
void IngestServer::Impl::Pass(Connection& c, size_t taken) {
  // An async read in flight owns the splitter's reserved room: reading into
  // it here too would race it. (Pass runs from OnRead, after `reading` is
  // cleared, or on a paused connection, which StartRead left unread.)
  assert(!c.reading);
  for (;;) {
    if (!TakeFrames(c)) return;  // (closed)
    if (taken >= kPassBytes || stop_.load(std::memory_order_relaxed) || c.source.RingHalfFull()) break;
    error_code ec;
    char* into = c.source.splitter().Reserve(kReadBytes);
    const size_t n = std::visit([&](auto& s) { return s.read_some(net::buffer(into, kReadBytes), ec); }, c.socket);
    if (ec == net::error::would_block || ec == net::error::try_again) break;
    if (ec == net::error::interrupted) continue;
    if (ec) return ReadEnded(c, ec);
    c.source.Received(HostNowNs());
    taken += n;
    c.source.splitter().Commit(n);
  }
  Acknowledge(c);
  if (c.unsent() > kMaxOutBytes) return Close(c, "not reading what the server sends (acks, pings)");
  Publish(c);
  StartRead(c);
}

// The sender closed (a reset: it left acks unread): what it sent whole is
// kept. Another error closes it with what it was.
void IngestServer::Impl::ReadEnded(Connection& c, const error_code& ec) {
  if (ec == net::error::eof || ec == net::error::connection_reset) {
    Acknowledge(c);
    const size_t torn = c.source.splitter().pending_bytes();
    if (torn) return Close(c, "closed mid-frame (" + std::to_string(torn) + " bytes of an unfinished frame dropped)");
    if (ec == net::error::connection_reset) return Close(c, "reset by the sender (killed, or gone without closing)");
    c.source.ClosedCleanly();
    return Close(c, "closed by the sender");
  }
  Close(c, "recv: " + ec.message());
}

// Its ring is half full: no read until the 2 ms look finds room.
void IngestServer::Impl::Pause(Connection& c) {
  c.paused = true;
  ArmPausedLook();
}

void IngestServer::Impl::ArmPausedLook() {
  if (paused_look_armed_) return;
  paused_look_armed_ = true;
  paused_look_->expires_after(kPausedLookPeriod);
  paused_look_->async_wait([this](const error_code& ec) {
    paused_look_armed_ = false;
    if (ec || stop_.load(std::memory_order_relaxed)) return;
    // (Pass may close connections, never add any: indices hold.)
    for (size_t i = 0; i < connections_.size(); ++i) {
      Connection& c = *connections_[i];
      if (!c.open || !c.paused || c.source.RingHalfFull()) continue;
      c.paused = false;
      // Frames left waiting for room in the ring are taken first.
      Pass(c, 0);
    }
    if (std::any_of(connections_.begin(), connections_.end(), [](const auto& c) { return c->open && c->paused; })) {
      ArmPausedLook();
    }
  });
}

// The whole frames received, while the source's ring is at most half full.
// False when the connection was closed (a refused frame; the buffers' bound);
// what it sent before is acknowledged first: the server's, and it is told so.
bool IngestServer::Impl::TakeFrames(Connection& c) {
  std::string reason;
  if (!c.source.TakeFrames(&reason)) {
    Acknowledge(c);
    Close(c, reason);
    return false;
  }
  return WithinBufferBound(c);
}

// Bytes held across every connection (frames not whole yet, and whole ones
// waiting for room in their ring): past the bound the largest holders go,
// whichever connection they are (a holder that sends no more is never read
// again: it must not wait to be its own judge). Nothing they hold was
// acknowledged: a sender sends it again. False when `c` was closed.
bool IngestServer::Impl::WithinBufferBound(Connection& c) {
  auto pending = [](const Connection& o) { return o.open ? o.source.splitter().pending_bytes() : 0; };
  if (pending(c) == 0) return true;
  size_t buffered = 0;
  for (const auto& other : connections_) buffered += pending(*other);
  while (buffered > options_.max_buffered_bytes) {
    Connection* largest = nullptr;
    for (const auto& other : connections_) {
      if (other->open && (largest == nullptr || pending(*other) > pending(*largest))) largest = other.get();
    }
    buffered -= pending(*largest);
    if (largest == &c) Acknowledge(c);
    Close(*largest, "the server's buffers for received frames are full (" +
                        std::to_string(options_.max_buffered_bytes >> 20) + " MiB); this sender held the most (" +
                        std::to_string(pending(*largest)) + " bytes, not acknowledged: sent again on reconnect)");
  }
  return c.open;
}

bool IngestServer::Impl::Capture(uint64_t id, const CaptureRequest& request, std::string* error) {
  if (!statuses_.CheckCapture(id, request, error)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  controls_.emplace_back(id, request);
  if (post_to_ != nullptr) net::post(*post_to_, [this] { SendControls(); });
  return true;
}

void IngestServer::Impl::SendControls() {
  std::vector<std::pair<uint64_t, CaptureRequest>> controls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    controls.swap(controls_);
  }
  for (const auto& [id, r] : controls) {
    for (auto& c : connections_) {
      if (c->source.id() != id || !c->open) continue;
      c->source.AppendControl(r);
      Flush(*c);
    }
  }
}

void IngestServer::Impl::Acknowledge(Connection& c) {
  c.source.AppendAck();
  Flush(c);
}

// What is queued goes out by one async_write_some at a time. Asio tries the
// send at once (its speculative write), so an ack queued just before a close
// has left already, as a non-blocking send(2) had before.
void IngestServer::Impl::Flush(Connection& c) {
  if (!c.open || !c.sending.empty() || c.source.out().empty()) return;
  c.sending.swap(c.source.out());
  WriteSending(c);
}

void IngestServer::Impl::WriteSending(Connection& c) {
  std::visit(
      [&](auto& s) {
        s.async_write_some(net::buffer(c.sending), [this, self = c.shared_from_this()](const error_code& ec, size_t n) {
          OnWrite(*self, ec, n);
        });
      },
      c.socket);
}

void IngestServer::Impl::OnWrite(Connection& c, const error_code& ec, size_t n) {
  if (!c.open) return;
  if (ec) return Close(c, "send: " + ec.message());
  c.sending.erase(0, n);
  if (c.sending.empty()) c.sending.swap(c.source.out());
  if (!c.sending.empty()) WriteSending(c);
}

void IngestServer::Impl::ArmTick() {
  tick_->expires_after(kTickPeriod);
  tick_->async_wait([this](const error_code& ec) {
    if (ec || stop_.load(std::memory_order_relaxed)) return;
    const uint64_t now = HostNowNs();
    std::string reason;
    for (size_t i = 0; i < connections_.size(); ++i) {  // (Close never adds)
      Connection& c = *connections_[i];
      if (!c.open) continue;
      const uint64_t acked = c.source.acked_seq();
      if (!c.source.Tick(now, &reason)) {
        Close(c, reason);
      } else {
        if (c.source.acked_seq() != acked) Publish(c);  // (its status says how far it is acknowledged)
        Flush(c);
      }
    }
    ArmTick();
  });
}

// Closes it here and now: close(2) of a non-blocking socket (no linger) does
// not wait; its read and write in flight end aborted and find it closed. It
// leaves connections_ by a posted clean-up (callers may be walking it).
void IngestServer::Impl::Close(Connection& c, const std::string& reason) {
  error_code ec;
  std::visit([&](auto& s) { s.close(ec); }, c.socket);
  c.open = false;
  c.paused = false;
  c.source.Closed(reason);
  Publish(c);
  if (!c.reading) ReleaseBuffer(c);  // (else once its aborted read is back: OnRead)
  if (!cleanup_posted_ && !stop_.load(std::memory_order_relaxed)) {
    cleanup_posted_ = true;
    net::post(*ioc_, [this] {
      cleanup_posted_ = false;
      std::erase_if(connections_, [](const auto& o) { return !o->open; });
    });
  }
}

// A closed connection's buffer goes now, and a large one's memory back to
// the system (glibc keeps freed heap memory: 40 senders' 15 MiB unfinished
// frames would stay in the process after they left).
void IngestServer::Impl::ReleaseBuffer(Connection& c) {
  const size_t capacity = c.source.splitter().capacity();
  c.source.splitter().Release();
  if (capacity >= kTrimAfterBytes) malloc_trim(0);
}

void IngestServer::Impl::Publish(const Connection& c) { statuses_.Publish(c.source.Status()); }

}  // namespace liveprof
