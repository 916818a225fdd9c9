#include "ingest/ingest_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <charconv>
#include <algorithm>
#include <cstring>
#include <tuple>

#include "ingest/ingest_frames.h"
#include "ingest/ingest_wire.h"
#include "stream/clock.h"
#include "stream/liveprof_generated.h"

namespace liveprof {
namespace {

constexpr size_t kReadBytes = 64 * 1024;
constexpr size_t kPassBytes = 1 << 20;  // read from one connection before the next poll().
constexpr size_t kMaxOutBytes = 1 << 20;  // acks and pings a sender has not read: it is not reading.
constexpr size_t kMaxStatuses = 1024;
// A source's ring: read while at most half full, so a whole batch of the
// largest a sender sends (65,536 events) always fits in the other half.
constexpr size_t kDefaultRingEvents = size_t{1} << 18;  // 12 MiB.
constexpr uint64_t kProgressSlackNs = 50'000'000;  // a sender's declared progress, held back this much more.

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

bool NonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

}  // namespace

struct IngestServer::Connection {
  explicit Connection(Stream& stream) : decoder(stream) {}
  int fd = -1;
  FrameSplitter splitter;
  IngestDecoder decoder;
  std::shared_ptr<Ring> ring;
  std::string out;  // frames to send: acks, pings.
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
};

IngestServer::IngestServer(Stream& stream, Options options) : stream_(stream), options_(std::move(options)) {}

IngestServer::~IngestServer() { Stop(); }

bool IngestServer::Start(std::string* error) {
  if (thread_.joinable()) {
    *error = "ingest: the server is running already";
    return false;
  }
  auto fail = [&](const IngestEndpoint& e, const std::string& what) {
    *error = "ingest " + e.ToString() + ": " + what;
    for (const int fd : listeners_) ::close(fd);
    for (const IngestEndpoint& b : bound_) {
      if (!b.tcp) ::unlink(b.path.c_str());  // ours: bound by this call.
    }
    listeners_.clear();
    bound_.clear();
    return false;
  };
  for (IngestEndpoint e : options_.endpoints) {
    const int fd = ::socket(e.tcp ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(e, Errno("socket"));
    listeners_.push_back(fd);
    if (e.tcp) {
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(e.port);
      inet_pton(AF_INET, e.host.c_str(), &a.sin_addr);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return fail(e, Errno("bind"));
      socklen_t len = sizeof a;
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      e.port = ntohs(a.sin_port);
    } else {
      // A socket left by a run that died is replaced; one that answers is
      // another server's, and any other file is not ours.
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path, e.path.data(), e.path.size());
      struct stat st;
      if (lstat(e.path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) return fail(e, "exists and is not a socket");
        const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        const int connect_errno = errno;
        if (probe >= 0) ::close(probe);
        if (live) return fail(e, "another server listens there");
        if (connect_errno != ECONNREFUSED) {
          errno = connect_errno;
          return fail(e, Errno("a socket is there and could not be probed"));
        }
        ::unlink(e.path.c_str());
      }
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return fail(e, Errno("bind"));
    }
    if (::listen(fd, 64) != 0 || !NonBlocking(fd)) return fail(e, Errno("listen"));
    bound_.push_back(e);
  }
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return fail(IngestEndpoint{}, Errno("pipe"));
  stop_.store(false);
  thread_ = std::thread([this] { Run(); });
  return true;
}

void IngestServer::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
  thread_.join();
  // The listeners first: a sender told of the close reconnects at once, and
  // must not land in the backlog of a listener about to go.
  for (const int fd : listeners_) ::close(fd);
  for (const IngestEndpoint& e : bound_) {
    if (!e.tcp) ::unlink(e.path.c_str());
  }
  listeners_.clear();
  for (auto& c : connections_) {
    if (c->fd >= 0) Close(*c, "the server stopped");
  }
  connections_.clear();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::vector<IngestServer::SourceStatus> IngestServer::Sources() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void IngestServer::Run() {
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    const bool accepting = HostNowNs() >= accept_paused_until_ns_;
    for (const int fd : listeners_) fds.push_back({fd, static_cast<short>(accepting ? POLLIN : 0), 0});
    // A source whose ring is half full is not read (back pressure): its
    // bytes wait in the socket, then in the sender, which keeps every batch
    // until it is acknowledged; what the server acknowledges is in its ring.
    // Left out of poll() meanwhile (a hang-up is seen once it is read again),
    // and looked at again every 2 ms as the pipeline drains the ring.
    bool any_paused = false;
    for (const auto& c : connections_) {
      const bool paused = RingHalfFull(*c);
      any_paused |= paused;
      fds.push_back({paused ? -1 : c->fd, static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    }
    if (::poll(fds.data(), fds.size(), any_paused ? 2 : 50) < 0) {
      if (errno != EINTR) {  // (ENOMEM...): said once a second, and tried again.
        static thread_local uint64_t said_ns = 0;
        if (HostNowNs() - said_ns > 1'000'000'000) {
          said_ns = HostNowNs();
          std::fprintf(stderr, "liveprof: ingest: poll: %s\n", std::strerror(errno));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    if (fds[0].revents & POLLIN) {  // Stop() or a capture control.
      char drain[64];
      while (::read(wake_[0], drain, sizeof drain) > 0) {
      }
    }
    SendControls();
    for (size_t i = 0; i < listeners_.size(); ++i) {
      if (fds[1 + i].revents & POLLIN) Accept(i);
    }
    const size_t first = 1 + listeners_.size();
    for (size_t i = 0; i < connections_.size() && first + i < fds.size(); ++i) {
      Connection& c = *connections_[i];
      const short ev = fds[first + i].revents;
      // (Frames left waiting for room in the ring are taken once there is some.)
      if (c.fd >= 0 && ((ev & (POLLIN | POLLHUP | POLLERR)) || (c.splitter.has_frame() && !RingHalfFull(c)))) Read(c);
      if (c.fd >= 0 && (ev & POLLOUT)) Flush(c);
    }
    const uint64_t now = HostNowNs();
    for (auto& c : connections_) {
      if (c->fd >= 0) Tick(*c, now);
    }
    std::erase_if(connections_, [](const auto& c) { return c->fd < 0; });
  }
}

void IngestServer::Accept(size_t listener) {
  for (;;) {
    const int fd = ::accept4(listeners_[listener], nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
      // Out of descriptors: the pending connection stays in the backlog and
      // the listener stays readable; rest it, or poll() would spin.
      accept_paused_until_ns_ = HostNowNs() + 100'000'000;
      return;
    }
    if (fd < 0) return;  // EAGAIN: none left (others: the next poll tries again).
    auto c = std::make_unique<Connection>(stream_);
    c->fd = fd;
    c->connected_ns = c->last_byte_ns = HostNowNs();
    c->status.id = next_id_++;
    c->status.endpoint = bound_[listener].ToString();
    c->status.connected = true;
    if (connections_.size() >= options_.max_sources) {
      Close(*c, "refused: " + std::to_string(options_.max_sources) + " sources connected already");
      continue;
    }
    Publish(*c);
    connections_.push_back(std::move(c));
  }
}

void IngestServer::Read(Connection& c) {
  // At most kPassBytes a pass, then back to poll(): one busy sender does not
  // hold up the others (or Stop). One ack a pass: acks are cumulative. The
  // frames already here go first; none is taken, and nothing more received,
  // while the source's ring is half full (back pressure).
  const uint64_t acked = c.decoder.last_seq();
  for (size_t taken = 0;;) {
    if (!TakeFrames(c, acked)) return;  // (closed)
    if (taken >= kPassBytes || stop_.load(std::memory_order_relaxed) || RingHalfFull(c)) break;
    // Straight into the splitter's buffer (its frames stay aligned: decoded in place).
    const ssize_t n = ::recv(c.fd, c.splitter.Reserve(kReadBytes), kReadBytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno != ECONNRESET) return Close(c, Errno("recv"));
    if (n <= 0) {  // the sender closed (a reset: it left acks unread): what it sent whole is kept.
      AckTaken(c, acked);
      const size_t torn = c.splitter.pending_bytes();
      return Close(c, torn ? "closed mid-frame (" + std::to_string(torn) + " bytes of an unfinished frame dropped)" : "");
    }
    c.last_byte_ns = HostNowNs();
    taken += static_cast<size_t>(n);
    c.splitter.Commit(static_cast<size_t>(n));
  }
  AckTaken(c, acked);
  if (c.out.size() > kMaxOutBytes) return Close(c, "not reading what the server sends (acks, pings)");
  Publish(c);
}

// The whole frames received, while the source's ring is at most half full.
// False when the connection was closed (a refused frame; the buffers' bound).
bool IngestServer::TakeFrames(Connection& c, uint64_t acked) {
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
    for (const auto& other : connections_) buffered += other->fd >= 0 ? other->splitter.pending_bytes() : 0;
  }
  if (buffered > options_.max_buffered_bytes) {
    const auto* largest = std::max_element(connections_.begin(), connections_.end(), [](const auto& a, const auto& b) {
                            return a->splitter.pending_bytes() < b->splitter.pending_bytes();
                          })->get();
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
void IngestServer::Hello(Connection& c, uint64_t now) {
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
void IngestServer::TakeEvents(Connection& c, uint64_t now) {
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
void IngestServer::DeclareProgress(Connection& c, uint64_t now) {
  const uint64_t progress = c.decoder.batch_progress_ns();
  if (progress == 0 || c.status.best_rtt_ns == 0) return;
  const uint64_t margin = c.status.best_rtt_ns + kProgressSlackNs;
  const uint64_t t = std::min(c.decoder.EarliestServerNs(progress), now);
  if (t <= margin || t - margin <= c.declared_ns) return;
  c.declared_ns = t - margin;
  c.ring->DeclareProgress(c.declared_ns);
}

void IngestServer::Remember(const Connection& c) {
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

bool IngestServer::Capture(uint64_t id, const CaptureRequest& request, std::string* error) {
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
  const char byte = 2;
  [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
  return true;
}

void IngestServer::SendControls() {
  std::vector<std::pair<uint64_t, CaptureRequest>> controls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    controls.swap(controls_);
  }
  for (const auto& [id, r] : controls) {
    for (auto& c : connections_) {
      if (c->status.id != id || c->fd < 0) continue;
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
void IngestServer::NoteRefusals(Connection& c) {
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

void IngestServer::AckTaken(Connection& c, uint64_t acked) {
  if (c.decoder.last_seq() == acked) return;
  Remember(c);
  AppendIngestFrame(&c.out, wire::Body::IngestAck, [&](auto& fbb) {
    return wire::CreateIngestAckDirect(fbb, c.decoder.last_seq(), c.ack_refused, c.ack_refused_seq,
                                       c.ack_refused == 0 ? nullptr : c.ack_refused_reason.c_str(),
                                       c.ack_refused == 0 ? nullptr : c.ack_refused_message.c_str())
        .Union();
  });
  c.ack_refused = c.ack_refused_seq = 0;
  Flush(c);  // (non-blocking: what the socket takes now)
}

void IngestServer::Flush(Connection& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Close(c, Errno("send"));
    c.out.erase(0, static_cast<size_t>(n));
  }
}

bool IngestServer::RingHalfFull(const Connection& c) {
  return c.ring != nullptr && c.ring->queue->size() * 2 > c.ring->queue->capacity();
}

void IngestServer::Tick(Connection& c, uint64_t now) {
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

void IngestServer::Close(Connection& c, const std::string& reason) {
  Remember(c);
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  c.status.connected = false;
  c.status.closed_reason = reason;
  if (!reason.empty()) {  // said on the console too; /api/status keeps it (server.ingest).
    std::fprintf(stderr, "liveprof: ingest source %llu (%s, %s) closed: %s\n",
                 static_cast<unsigned long long>(c.status.id), c.status.label.empty() ? "no hello" : c.status.label.c_str(),
                 c.status.endpoint.c_str(), reason.c_str());
  }
  if (c.ring) c.ring->closed.store(true, std::memory_order_release);  // drained, then retired.
  Publish(c);
}

void IngestServer::Publish(const Connection& c) {
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

std::vector<IngestServer::RefusedCount> IngestServer::RefusedTotals() const {
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
