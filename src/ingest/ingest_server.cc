// The ingest server on Boost.Asio: one io_context, run by one thread (as the
// web server's), for every listener and connection, so no strands and no
// locks on the connections. This is the only translation unit of src/ingest
// with Asio in it (the project allows Beast/Asio in at most four).
//
//   accept   each listener waits to be readable (async_wait), then takes every
//            pending connection with accept4(SOCK_NONBLOCK | SOCK_CLOEXEC):
//            descriptors stay out of any child process, as before. Out of
//            descriptors, the listener rests 100 ms (a timer) instead of
//            spinning on a backlog it cannot take.
//   read     one async_read_some per connection, straight into the frame
//            splitter's buffer; when it completes, a pass takes the frames,
//            reads on without waiting while bytes are there (at most 1 MiB
//            a pass, so one busy sender does not hold up the others) and
//            sends one ack. A source whose ring is half full gets no read
//            (back pressure): a 2 ms timer looks at its ring again.
//   write    acks, pings and controls are appended to the connection's
//            queue; one async_write_some at a time sends it. Past 1 MiB
//            unsent, the sender is not reading: closed.
//   timers   a 10 ms tick (pings, the stall and hello timeouts), the 2 ms
//            back-pressure look, the listeners' rests.
//   closing  a connection is closed where its end is found (close(2) of a
//            non-blocking socket: never waits); its handlers then see it
//            closed and do nothing. Stop() posts the shutdown to the thread.
#include "ingest/ingest_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include <boost/asio/buffer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "ingest/ingest_frames.h"
#include "ingest/ingest_wire.h"
#include "stream/clock.h"
#include "stream/liveprof_generated.h"

namespace liveprof {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using local = net::local::stream_protocol;
using error_code = boost::system::error_code;

constexpr size_t kReadBytes = 64 * 1024;
constexpr size_t kPassBytes = 1 << 20;  // read from one connection before the others' turn.
constexpr size_t kMaxOutBytes = 1 << 20;  // acks and pings a sender has not read: it is not reading.
constexpr size_t kMaxStatuses = 1024;
// A source's ring: read while at most half full, so a whole batch of the
// largest a sender sends (65,536 events) always fits in the other half.
constexpr size_t kDefaultRingEvents = size_t{1} << 18;  // 12 MiB.
constexpr uint64_t kProgressSlackNs = 50'000'000;  // a sender's declared progress, held back this much more.
constexpr auto kTickPeriod = std::chrono::milliseconds(10);      // pings, stall and hello timeouts.
constexpr auto kPausedLookPeriod = std::chrono::milliseconds(2);  // a source held back: its ring again.
constexpr auto kAcceptRest = std::chrono::milliseconds(100);      // out of descriptors.

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Adds `r`'s count to the total of (source, r.reason) in `totals`.
void AddRefused(std::vector<IngestServer::RefusedCount>* totals, const std::string& source, const IngestRefusal& r) {
  const auto it = std::find_if(totals->begin(), totals->end(), [&](const IngestServer::RefusedCount& t) {
    return t.source == source && t.reason == r.reason;
  });
  if (it != totals->end()) {
    it->events += r.events;
  } else {
    totals->push_back({source, r.reason, r.events});
  }
}

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

  Impl(Stream& stream, Options options) : stream_(stream), options_(std::move(options)) {}
  ~Impl() { Stop(); }

  bool Start(std::vector<IngestEndpoint>* bound, std::string* error);
  void Stop();
  bool Capture(uint64_t id, const CaptureRequest& request, std::string* error);
  std::vector<SourceStatus> Sources() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  std::vector<RefusedCount> RefusedTotals() const;

 private:
  // The io thread's.
  void WaitAccept(Listener& l);
  void Accept(Listener& l, const error_code& ec);
  void StartRead(Connection& c);
  void OnRead(Connection& c, const error_code& ec, size_t n);
  void Pass(Connection& c, uint64_t acked, size_t taken);
  void ReadEnded(Connection& c, uint64_t acked, const error_code& ec);
  bool TakeFrames(Connection& c, uint64_t acked);
  void Flush(Connection& c);
  void WriteSending(Connection& c);
  void OnWrite(Connection& c, const error_code& ec, size_t n);
  void AckTaken(Connection& c, uint64_t acked);  // an IngestAck when batches came since `acked`.
  void ArmTick();
  void Tick(Connection& c, uint64_t now);
  void Pause(Connection& c);
  void ArmPausedLook();
  static bool RingHalfFull(const Connection& c);
  void Close(Connection& c, const std::string& reason);
  void Publish(const Connection& c);
  void NoteRefusals(Connection& c);  // a batch's refused events: the ack, the console.
  void Hello(Connection& c, uint64_t now);
  void TakeEvents(Connection& c, uint64_t now);
  void DeclareProgress(Connection& c, uint64_t now);
  void SendControls();
  void Remember(const Connection& c);  // its session's last batch, for a reconnect.
  void Shutdown();
  struct Worker {
    uint32_t process = 0;
    std::unordered_map<std::string, TrackId> rows;  // IngestDecoder::set_worker.
  };

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
  std::unordered_map<std::string, Worker> workers_;  // by label; the thread's.
  // Per sender session (host, pid, IngestHello.session): the last batch
  // taken, for a reconnect; the newest 1,024 (age: session_order_). The thread's.
  std::unordered_map<std::string, uint64_t> sessions_;
  std::deque<std::string> session_order_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;  // guards status_, evicted_refused_, controls_ and post_to_.
  std::vector<SourceStatus> status_;
  std::vector<RefusedCount> evicted_refused_;  // of sources status_ no longer holds.
  std::vector<std::pair<uint64_t, CaptureRequest>> controls_;  // for the thread to send.
  net::io_context* post_to_ = nullptr;  // while running: where Capture() posts.
};

struct IngestServer::Impl::Connection : std::enable_shared_from_this<Connection> {
  using Socket = std::variant<tcp::socket, local::socket>;
  Connection(Stream& stream, Socket s) : socket(std::move(s)), decoder(stream) {}
  Socket socket;
  bool open = true;
  bool reading = false;   // an async_read_some in flight (into the splitter's buffer).
  bool paused = false;    // its ring half full: not read; the 2 ms look resumes it.
  FrameSplitter splitter;
  IngestDecoder decoder;
  std::shared_ptr<Ring> ring;
  std::string out;      // frames to send: acks, pings, controls;
  std::string sending;  // and those an async_write_some has in flight (never touched meanwhile).
  std::vector<Event> events;
  uint64_t connected_ns = 0, last_byte_ns = 0, next_ping_ns = 0;
  std::string session;         // host, pid, session: the key of IngestServer::sessions_.
  uint32_t control_id = 0;     // the last IngestControl's.
  uint32_t ping_id = 0;        // the ping in flight,
  uint64_t ping_sent_ns = 0;   // and our clock in it.
  uint64_t declared_ns = 0;    // the ring's declared progress (DeclareProgress).
  // Refused events of the batches since the last ack (IngestAck.refused_*):
  // how many, and the first of them (its batch, reason and message).
  uint64_t ack_refused = 0, ack_refused_seq = 0;
  std::string ack_refused_reason, ack_refused_message;
  size_t said_refusals = 0;  // reasons said on the console (decoder.refusals()'s first ones).
  SourceStatus status;
  size_t unsent() const { return out.size() + sending.size(); }
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
        {  // (the probe goes before fail() can drop the io_context)
          local::socket probe(*ioc_);
          probe.connect(where, ec);
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
  thread_ = std::thread([this] { ioc_->run(); });
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
  std::visit([&](auto& a) { a.async_wait(net::socket_base::wait_read, [this, &l](const error_code& ec) { Accept(l, ec); }); },
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
      continue;
    }
    auto c = std::make_shared<Connection>(stream_, std::move(socket));
    c->connected_ns = c->last_byte_ns = HostNowNs();
    c->status.id = next_id_++;
    c->status.endpoint = l.endpoint.ToString();
    c->status.connected = true;
    const size_t open = static_cast<size_t>(
        std::count_if(connections_.begin(), connections_.end(), [](const auto& o) { return o->open; }));
    if (open >= options_.max_sources) {
      Close(*c, "refused: " + std::to_string(options_.max_sources) + " sources connected already");
      continue;
    }
    Publish(*c);
    connections_.push_back(c);
    StartRead(*c);
  }
  WaitAccept(l);
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
  if (RingHalfFull(c) || c.splitter.has_frame()) return Pause(c);
  c.reading = true;
  char* into = c.splitter.Reserve(kReadBytes);
  std::visit(
      [&](auto& s) {
        s.async_read_some(net::buffer(into, kReadBytes),
                          [this, self = c.shared_from_this()](const error_code& ec, size_t n) { OnRead(*self, ec, n); });
      },
      c.socket);
}

void IngestServer::Impl::OnRead(Connection& c, const error_code& ec, size_t n) {
  c.reading = false;
  if (!c.open) return;  // (closed meanwhile: aborted, or bytes nobody wants now)
  const uint64_t acked = c.decoder.last_seq();
  if (ec) return ReadEnded(c, acked, ec);
  c.last_byte_ns = HostNowNs();
  c.splitter.Commit(n);
  Pass(c, acked, n);
}

// A pass over one connection: its frames, then more bytes while the socket
// has some (non-blocking: an answer, never a wait), at most kPassBytes, then
// the others' turn. One ack a pass: acks are cumulative. The frames already
// here go first; none is taken, and nothing more received, while the
// source's ring is half full (back pressure).
void IngestServer::Impl::Pass(Connection& c, uint64_t acked, size_t taken) {
  for (;;) {
    if (!TakeFrames(c, acked)) return;  // (closed)
    if (taken >= kPassBytes || stop_.load(std::memory_order_relaxed) || RingHalfFull(c)) break;
    error_code ec;
    char* into = c.splitter.Reserve(kReadBytes);
    const size_t n = std::visit([&](auto& s) { return s.read_some(net::buffer(into, kReadBytes), ec); }, c.socket);
    if (ec == net::error::would_block || ec == net::error::try_again) break;
    if (ec == net::error::interrupted) continue;
    if (ec) return ReadEnded(c, acked, ec);
    c.last_byte_ns = HostNowNs();
    taken += n;
    c.splitter.Commit(n);
  }
  AckTaken(c, acked);
  if (c.unsent() > kMaxOutBytes) return Close(c, "not reading what the server sends (acks, pings)");
  Publish(c);
  StartRead(c);
}

// The sender closed (a reset: it left acks unread): what it sent whole is
// kept. Another error closes it with what it was.
void IngestServer::Impl::ReadEnded(Connection& c, uint64_t acked, const error_code& ec) {
  if (ec == net::error::eof || ec == net::error::connection_reset) {
    AckTaken(c, acked);
    const size_t torn = c.splitter.pending_bytes();
    return Close(c, torn ? "closed mid-frame (" + std::to_string(torn) + " bytes of an unfinished frame dropped)" : "");
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
      if (!c.open || !c.paused || RingHalfFull(c)) continue;
      c.paused = false;
      // Frames left waiting for room in the ring are taken first.
      Pass(c, c.decoder.last_seq(), 0);
    }
    if (std::any_of(connections_.begin(), connections_.end(), [](const auto& c) { return c->open && c->paused; })) {
      ArmPausedLook();
    }
  });
}

// The whole frames received, while the source's ring is at most half full.
// False when the connection was closed (a refused frame; the buffers' bound).
bool IngestServer::Impl::TakeFrames(Connection& c, uint64_t acked) {
  while (!RingHalfFull(c)) {
    const auto frame = c.splitter.Next();
    if (!frame) break;
    const std::string where = "frame " + std::to_string(c.splitter.frames()) + " (bytes " +
                              std::to_string(c.splitter.frame_begin()) + ".." +
                              std::to_string(c.splitter.frame_end()) + ")";
    const bool had_hello = c.decoder.has_hello();
    c.events.clear();
    if (!c.decoder.Decode(*frame, where, &c.events)) {
      AckTaken(c, acked);  // what it sent before this frame is the server's: say so before closing.
      Close(c, c.decoder.error());
      return false;
    }
    const uint64_t now = HostNowNs();
    if (!had_hello && c.decoder.has_hello()) {
      Hello(c, now);
      if (!c.ring) {
        Close(c, "no ring for it (memory)");
        return false;
      }
    }
    NoteRefusals(c);
    TakeEvents(c, now);
    DeclareProgress(c, now);
    if (const auto& st = c.decoder.state()) {
      CaptureState& cs = c.status.capture;
      cs = CaptureState{true, st->control_id, st->host_level, st->python_scopes, st->gpu, st->gpu_available, 0,
                        st->gpu_available && st->gpu_level != 0 ? st->gpu_level - 1 : -1};
      if (st->until_ns != 0) {
        const __int128 until = static_cast<__int128>(st->until_ns) + c.decoder.clock_offset_ns();
        cs.until_ns = until <= 0 ? 1 : static_cast<uint64_t>(std::min<__int128>(until, INT64_MAX));
      }
    }
    // A pong to the ping in flight (its id and reading: no other counts).
    if (const auto& pong = c.decoder.pong();
        pong && pong->id == c.ping_id && pong->server_ns == c.ping_sent_ns && now >= pong->server_ns) {
      const uint64_t rtt = now - pong->server_ns;
      if (c.status.best_rtt_ns == 0 || rtt < c.status.best_rtt_ns) {
        // The sender read its clock halfway through the round trip (wide: no overflow).
        c.status.best_rtt_ns = std::max<uint64_t>(rtt, 1);
        const __int128 offset = static_cast<__int128>(pong->server_ns + rtt / 2) - pong->sender_ns;
        // From the sender's reading in this exchange on: its earlier times keep theirs.
        c.decoder.set_clock_offset_ns(static_cast<int64_t>(std::clamp<__int128>(offset, INT64_MIN, INT64_MAX)),
                                      pong->sender_ns);
      }
    }
  }
  if (!c.splitter.error().empty()) {
    AckTaken(c, acked);
    Close(c, c.splitter.error());
    return false;
  }
  // Bytes held across every connection (frames not whole yet, and whole ones
  // waiting for room in their ring): past the bound the largest holder goes.
  size_t buffered = 0;
  if (c.splitter.pending_bytes() > 0) {
    for (const auto& other : connections_) buffered += other->open ? other->splitter.pending_bytes() : 0;
  }
  if (buffered > options_.max_buffered_bytes) {
    const Connection* largest = nullptr;
    for (const auto& other : connections_) {
      if (other->open && (largest == nullptr || other->splitter.pending_bytes() > largest->splitter.pending_bytes())) {
        largest = other.get();
      }
    }
    if (largest == &c) {
      AckTaken(c, acked);
      Close(c, "the server's buffers for received frames are full (" +
                   std::to_string(options_.max_buffered_bytes >> 20) + " MiB); this sender held the most");
      return false;
    }
  }
  return true;
}

// Its hello: who it is, its worker (rows kept across reconnects), its ring,
// where a reconnecting sender left off, and a first clock offset (one way,
// from its hello) until a pong.
void IngestServer::Impl::Hello(Connection& c, uint64_t now) {
  const IngestSource& s = c.decoder.source();
  c.status.label = s.label, c.status.host = s.host, c.status.program = s.program;
  c.status.pid = s.pid, c.status.rank = s.rank;
  auto [w, fresh] = workers_.try_emplace(s.label);
  if (fresh) {
    w->second.process = static_cast<uint32_t>(workers_.size());
    stream_.AddTrack(TrackInfo{stream_.names().Intern(s.label), TrackType::kProcess, s.pid, 0, w->second.process});
  }
  c.status.worker = w->second.process;
  c.decoder.set_worker(w->second.process, &w->second.rows);
  c.session = s.host + '\0' + std::to_string(s.pid) + '\0' + std::to_string(s.session);
  if (s.session != 0) {
    if (const auto old = sessions_.find(c.session); old != sessions_.end()) c.decoder.set_resume_seq(old->second);
  }
  c.decoder.set_clock_offset_ns(static_cast<int64_t>(now - s.clock_ns));
  c.ring = stream_.AddRing({.name = "ingest " + s.label,
                            .capacity = options_.ring_capacity != 0 ? options_.ring_capacity : kDefaultRingEvents,
                            .progress = RingProgress::kDeclared,
                            .pushes_back = true});
  c.next_ping_ns = now;
}

// The decoded events into the source's ring: a full ring drops and counts;
// an event ending too far in the future is dropped and counted here. A
// sender's correlation ids are its own: mixed with its worker number, so that
// two workers' launches and kernels do not pair up in the shared analyses
// (a bijection per worker: its own pairs are kept).
void IngestServer::Impl::TakeEvents(Connection& c, uint64_t now) {
  const uint64_t horizon = now + options_.max_future_ns;
  const uint32_t mix = (c.status.worker * 0x9E3779B1u) & 0xFFF00000u;
  size_t kept = 0;
  for (const Event& e : c.events) {
    if (e.end() > horizon) {
      ++c.status.future_dropped;
      continue;
    }
    Event& k = c.events[kept++];
    k = e;
    if (k.corr != 0) k.corr ^= mix;
  }
  c.ring->queue->TryPushBulk(std::span<const Event>(c.events.data(), kept));
}

// How far the source's events are complete, on the server's clock, for the
// drain loop (Ring::DeclareProgress): its events are then released as soon as
// every source is past them, not a reorder window later. The sender's
// progress (IngestBatch.progress_ns), mapped by the least offset that any
// time from it on takes now, less what the offset may still move: an
// estimate from a round trip r is within r/2 of the true offset, so every
// later (better) one is within r of it; less kProgressSlackNs for drift and
// for senders that join or come back (their first batches hold events up to
// a few flush periods old: later than the others' progress, they would be
// late). Only once a pong gave a round trip: the hello's one-way offset has
// no bound.
void IngestServer::Impl::DeclareProgress(Connection& c, uint64_t now) {
  const uint64_t progress = c.decoder.batch_progress_ns();
  if (progress == 0 || c.status.best_rtt_ns == 0) return;
  const uint64_t margin = c.status.best_rtt_ns + kProgressSlackNs;
  const uint64_t t = std::min(c.decoder.EarliestServerNs(progress), now);
  if (t <= margin || t - margin <= c.declared_ns) return;
  c.declared_ns = t - margin;
  c.ring->DeclareProgress(c.declared_ns);
}

void IngestServer::Impl::Remember(const Connection& c) {
  if (c.session.empty() || c.decoder.last_seq() == 0) return;
  auto [it, fresh] = sessions_.try_emplace(c.session, 0);
  it->second = std::max(it->second, c.decoder.last_seq());
  if (!fresh) return;
  session_order_.push_back(c.session);
  if (session_order_.size() > 1024) {
    sessions_.erase(session_order_.front());
    session_order_.pop_front();
  }
}

bool IngestServer::Impl::Capture(uint64_t id, const CaptureRequest& request, std::string* error) {
  if (request.host_level != 0 && request.host_level != 1 && request.host_level != 2) {
    *error = "host_level " + std::to_string(request.host_level) + ": 1 (critical) or 2 (detailed)";
    return false;
  }
  if (request.python_scopes < -1 || request.python_scopes > 1 || request.gpu < -1 || request.gpu > 1) {
    *error = "python_scopes and gpu: 0 (off), 1 (on) or unset";
    return false;
  }
  if (request.gpu_level < -1 || request.gpu_level > 1) {
    *error = "gpu_level " + std::to_string(request.gpu_level) + ": 0 (default), 1 (full) or unset";
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const auto s = std::find_if(status_.begin(), status_.end(), [&](const SourceStatus& o) { return o.id == id; });
  if (s == status_.end() || !s->connected || s->worker == 0) {
    *error = "source " + std::to_string(id) +
             (s == status_.end() ? " is unknown" : !s->connected ? " is closed" : " has not said hello yet");
    return false;
  }
  // (not said yet, or an older sender: none)
  if ((request.gpu != -1 || request.gpu_level != -1) && !s->capture.gpu_available) {
    const std::string what = request.gpu != -1
                                 ? std::string("turn ") + (request.gpu == 1 ? "on" : "off")
                                 : std::string("switch to level ") + (request.gpu_level == 1 ? "full" : "default");
    *error = "source " + std::to_string(id) + " (" + s->label + ") has no GPU producer to " + what +
             " (gpu_available false: no CuptiSource runs in it)";
    return false;
  }
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
      if (c->status.id != id || !c->open) continue;
      AppendIngestFrame(&c->out, wire::Body::IngestControl, [&](auto& fbb) {
        return wire::CreateIngestControl(fbb, ++c->control_id, static_cast<uint8_t>(r.host_level),
                                         static_cast<uint8_t>(r.python_scopes + 1), static_cast<uint8_t>(r.gpu + 1),
                                         r.duration_ns, static_cast<uint8_t>(r.gpu_level + 1))
            .Union();
      });
      Flush(*c);
    }
  }
}

// A batch just decoded with refused events: kept for the next ack (the
// first one's reason and message, and the count), and each new reason said
// on the console, once per source.
void IngestServer::Impl::NoteRefusals(Connection& c) {
  const IngestDecoder::BatchRefused& r = c.decoder.batch_refused();
  if (r.events > 0) {
    if (c.ack_refused == 0) {
      c.ack_refused_seq = c.decoder.last_seq();
      c.ack_refused_reason = r.reason;
      c.ack_refused_message = r.message;
    }
    c.ack_refused += r.events;
  }
  const std::vector<IngestRefusal>& reasons = c.decoder.refusals();
  for (; c.said_refusals < reasons.size(); ++c.said_refusals) {
    const IngestRefusal& n = reasons[c.said_refusals];
    std::fprintf(stderr,
                 "liveprof: ingest source %llu (%s, %s) sent an event the server refused (%s): %s; the rest of "
                 "its batch was taken, and further refusals are counted in /api/status and /metrics\n",
                 static_cast<unsigned long long>(c.status.id), c.status.label.c_str(), c.status.endpoint.c_str(),
                 n.reason.c_str(), n.example.c_str());
  }
}

void IngestServer::Impl::AckTaken(Connection& c, uint64_t acked) {
  if (c.decoder.last_seq() == acked) return;
  Remember(c);
  AppendIngestFrame(&c.out, wire::Body::IngestAck, [&](auto& fbb) {
    return wire::CreateIngestAckDirect(fbb, c.decoder.last_seq(), c.ack_refused, c.ack_refused_seq,
                                       c.ack_refused == 0 ? nullptr : c.ack_refused_reason.c_str(),
                                       c.ack_refused == 0 ? nullptr : c.ack_refused_message.c_str())
        .Union();
  });
  c.ack_refused = c.ack_refused_seq = 0;
  Flush(c);
}

// What is queued goes out by one async_write_some at a time. Asio tries the
// send at once (its speculative write), so an ack queued just before a close
// has left already, as a non-blocking send(2) had before.
void IngestServer::Impl::Flush(Connection& c) {
  if (!c.open || !c.sending.empty() || c.out.empty()) return;
  c.sending.swap(c.out);
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
  if (c.sending.empty()) c.sending.swap(c.out);
  if (!c.sending.empty()) WriteSending(c);
}

bool IngestServer::Impl::RingHalfFull(const Connection& c) {
  return c.ring != nullptr && c.ring->queue->size() * 2 > c.ring->queue->capacity();
}

void IngestServer::Impl::ArmTick() {
  tick_->expires_after(kTickPeriod);
  tick_->async_wait([this](const error_code& ec) {
    if (ec || stop_.load(std::memory_order_relaxed)) return;
    const uint64_t now = HostNowNs();
    for (size_t i = 0; i < connections_.size(); ++i) {  // (Tick may close, never add)
      if (connections_[i]->open) Tick(*connections_[i], now);
    }
    ArmTick();
  });
}

void IngestServer::Impl::Tick(Connection& c, uint64_t now) {
  // Not read for back pressure: the silence is ours, not a stalled sender's.
  if (RingHalfFull(c)) c.last_byte_ns = now;
  if (!c.decoder.has_hello() && now - c.connected_ns > options_.stall_timeout_ns) {
    return Close(c, "no hello in " + std::to_string(options_.stall_timeout_ns / 1'000'000) + " ms");
  }
  if (c.splitter.pending_bytes() > 0 && now - c.last_byte_ns > options_.stall_timeout_ns) {
    return Close(c, "stalled mid-frame for " + std::to_string((now - c.last_byte_ns) / 1'000'000) + " ms (" +
                        std::to_string(c.splitter.pending_bytes()) + " bytes of an unfinished frame dropped)");
  }
  if (c.decoder.has_hello() && now >= c.next_ping_ns) {
    c.next_ping_ns = now + options_.ping_interval_ns;
    c.ping_sent_ns = HostNowNs();
    AppendIngestFrame(&c.out, wire::Body::IngestPing,
                      [&](auto& fbb) { return wire::CreateIngestPing(fbb, ++c.ping_id, c.ping_sent_ns).Union(); });
    Flush(c);
  }
}

// Closes it here and now: close(2) of a non-blocking socket (no linger) does
// not wait; its read and write in flight end aborted and find it closed. It
// leaves connections_ by a posted clean-up (callers may be walking it).
void IngestServer::Impl::Close(Connection& c, const std::string& reason) {
  Remember(c);
  error_code ec;
  std::visit([&](auto& s) { s.close(ec); }, c.socket);
  c.open = false;
  c.paused = false;
  c.status.connected = false;
  c.status.closed_reason = reason;
  if (!reason.empty()) {  // said on the console too; /api/status keeps it (server.ingest).
    std::fprintf(stderr, "liveprof: ingest source %llu (%s, %s) closed: %s\n",
                 static_cast<unsigned long long>(c.status.id), c.status.label.empty() ? "no hello" : c.status.label.c_str(),
                 c.status.endpoint.c_str(), reason.c_str());
  }
  if (c.ring) c.ring->closed.store(true, std::memory_order_release);  // drained, then retired.
  Publish(c);
  if (!cleanup_posted_ && !stop_.load(std::memory_order_relaxed)) {
    cleanup_posted_ = true;
    net::post(*ioc_, [this] {
      cleanup_posted_ = false;
      std::erase_if(connections_, [](const auto& o) { return !o->open; });
    });
  }
}

void IngestServer::Impl::Publish(const Connection& c) {
  SourceStatus s = c.status;
  s.frames = c.splitter.frames();
  s.batches = c.decoder.batches();
  s.events = c.decoder.events();
  s.lost_batches = c.decoder.lost_batches();
  s.sender_dropped = c.decoder.sender_dropped();
  s.ring_dropped = c.ring ? c.ring->queue->dropped() : 0;
  s.clock_offset_ns = c.decoder.clock_offset_ns();
  s.duplicate_batches = c.decoder.duplicate_batches();
  s.refused_events = c.decoder.refused_events();
  s.refused = c.decoder.refusals();
  std::lock_guard<std::mutex> lock(mu_);
  for (SourceStatus& old : status_) {
    if (old.id == s.id) return void(old = std::move(s));
  }
  if (status_.size() >= kMaxStatuses) {  // the oldest closed one makes room (its refusals are kept).
    const auto gone = std::find_if(status_.begin(), status_.end(), [](const auto& o) { return !o.connected; });
    if (gone != status_.end()) {
      for (const IngestRefusal& r : gone->refused) AddRefused(&evicted_refused_, "ingest " + gone->label, r);
      status_.erase(gone);
    }
  }
  status_.push_back(std::move(s));
}

std::vector<IngestServer::RefusedCount> IngestServer::Impl::RefusedTotals() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RefusedCount> totals = evicted_refused_;
  for (const SourceStatus& s : status_) {
    for (const IngestRefusal& r : s.refused) AddRefused(&totals, "ingest " + s.label, r);
  }
  std::sort(totals.begin(), totals.end(), [](const RefusedCount& a, const RefusedCount& b) {
    return std::tie(a.source, a.reason) < std::tie(b.source, b.reason);
  });
  return totals;
}

}  // namespace liveprof
