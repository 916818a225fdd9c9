// The sender thread (sender.h): drains this process's stream, batches,
// sends, reads acks, pings and capture controls.
#include "ingest/ingest_sender.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "ingest/ingest_endpoint.h"
#include "ingest/ingest_frames.h"
#include "ingest/ingest_wire.h"
#include "producers/gpu_activity.h"
#include "producers/host_api.h"
#include "stream/clock.h"
#include "stream/drain_loop.h"
#include "stream/wire_event.h"

namespace liveprof {
namespace {

constexpr size_t kMaxBatchEvents = 65536;               // 3 MiB of events a frame, well under 16 MiB.
constexpr size_t kMaxDefinitionBytes = 4 << 20;         // a definitions-only batch (seq 0), about.
constexpr size_t kOutLowWater = 1 << 20;                // serialize more batches below this.
constexpr uint64_t kIdleProgressPeriodNs = 50'000'000;  // a batch of progress alone, at most this often.
constexpr uint64_t kCostPeriodNs = 1'000'000'000;       // liveprof's own cost read, at most this often.

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string HostName() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

}  // namespace

void IngestSender::OnBatch(const Batch& b) {
  open_.definitions.insert(open_.definitions.end(), b.definitions.begin(), b.definitions.end());
  open_.events.insert(open_.events.end(), b.events.begin(), b.events.end());
  open_.events.insert(open_.events.end(), b.late.begin(), b.late.end());
  if (b.events.empty() && b.late.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  status_.events_recorded += b.events.size() + b.late.size();
}

// Closes the open batch (if it holds anything) and queues it, with how far
// this process's events are complete. With nothing else to send, that alone
// goes now and then: an idle sender must not hold up the server's release of
// the other senders' events.
void IngestSender::Seal(uint64_t now, bool stopping) {
  const uint64_t dropped_total = stream_.TotalDropped();
  open_.dropped = dropped_total - last_dropped_total_ + carried_dropped_;
  const uint64_t progress = drain_.complete_through_ns();
  const bool progress_due = progress > sealed_progress_ns_ && now - last_batch_ns_ >= kIdleProgressPeriodNs;
  if (open_.events.empty() && open_.definitions.empty() && open_.dropped == 0 && !progress_due &&
      open_.cost.at_ns == 0) {
    return;
  }
  sealed_progress_ns_ = std::max(sealed_progress_ns_, progress);
  last_batch_ns_ = now;
  if (dropped_total > last_dropped_total_) {  // recorded, and lost in the rings.
    std::lock_guard<std::mutex> lock(mu_);
    status_.events_recorded += dropped_total - last_dropped_total_;
    status_.events_ring_dropped += dropped_total - last_dropped_total_;
  }
  last_dropped_total_ = dropped_total;
  carried_dropped_ = 0;
  // Cut to frames of at most kMaxBatchEvents; definitions go with the first.
  const size_t total = open_.events.size();
  size_t at = 0;
  do {
    Pending p;
    p.seq = next_seq_++;
    const size_t n = std::min(kMaxBatchEvents, total - at);
    if (n == total) {
      p.events = std::move(open_.events);  // (the usual case: one frame)
    } else {
      p.events.assign(open_.events.begin() + static_cast<ptrdiff_t>(at),
                      open_.events.begin() + static_cast<ptrdiff_t>(at + n));
    }
    if (at == 0) {
      p.definitions = std::move(open_.definitions);
      p.dropped = open_.dropped;
      p.cost = std::move(open_.cost);
    }
    at += n;
    if (at == total) p.progress_ns = progress;  // (the last frame: the events it completes are in it or before)
    p.stopping = stopping;
    unacked_events_ += p.events.size();
    unacked_.push_back(std::move(p));
  } while (at < total);
  open_ = Pending{};
  TrimUnacked();
}

// Past max_unacked_bytes the oldest batches go, counted as dropped (the
// server learns their count with the next batch).
void IngestSender::TrimUnacked() {
  const size_t max_events = std::max<size_t>(options_.max_unacked_bytes / sizeof(Event), kMaxBatchEvents);
  uint64_t dropped_batches = 0, dropped_events = 0;
  while (unacked_events_ > max_events && unacked_.size() > 1) {
    Pending& p = unacked_.front();
    unacked_events_ -= p.events.size();
    dropped_events += p.events.size();  // (written or not: none is known to have arrived)
    // Its ring drops still to say, and its events unless a connection took them.
    carried_dropped_ += p.dropped + (p.seq > last_written_seq_ ? p.events.size() : 0);
    // Its definitions still matter on this connection if it was not sent:
    // hand them to the next batch.
    Pending& next = unacked_[1];
    next.definitions.insert(next.definitions.begin(), p.definitions.begin(), p.definitions.end());
    if (next_send_seq_ <= p.seq) next_send_seq_ = p.seq + 1;
    unacked_.pop_front();
    ++dropped_batches;
  }
  if (dropped_batches > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    status_.batches_dropped += dropped_batches;
    status_.events_dropped_unacked += dropped_events;
  }
}

bool IngestSender::Connect(uint64_t now) {
  next_connect_ns_ = now + options_.reconnect_period_ns;
  // Non-blocking from the start: a server whose backlog is full (or a TCP
  // peer that does not answer) must not hold the thread, or the exit.
  const int fd = ::socket(endpoint_.tcp ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    SetError(Errno("socket"));
    return false;
  }
  fork_fd_.store(fd, std::memory_order_release);
  int rc;
  if (endpoint_.tcp) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(endpoint_.port);
    inet_pton(AF_INET, endpoint_.host.c_str(), &a.sin_addr);
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, endpoint_.path.data(), endpoint_.path.size());
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 && errno == EINPROGRESS) {  // TCP: wait a little for it, no more.
    pollfd p{fd, POLLOUT, 0};
    int err = ETIMEDOUT;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, 200) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0) rc = err == 0 ? 0 : -1;
    errno = err;
  }
  if (rc != 0) {
    SetError(Errno("connect " + endpoint_.ToString()));
    fork_fd_.store(-1, std::memory_order_release);
    ::close(fd);
    return false;
  }
  fd_ = fd;
  splitter_ = FrameSplitter();
  out_.clear();
  out_pos_ = 0;
  const std::string host = HostName();
  AppendIngestFrame(&out_, wire::Body::IngestHello, [&](flatbuffers::FlatBufferBuilder& fbb) {
    return wire::CreateIngestHelloDirect(fbb, kIngestProtocol, host.c_str(), static_cast<uint64_t>(getpid()),
                                         options_.rank, options_.program.c_str(), HostNowNs(), session_,
                                         options_.helper.empty() ? nullptr : options_.helper.c_str(),
                                         options_.helper_of)
        .Union();
  });
  AppendState(control_id_);
  SendDefinitions();
  next_send_seq_ = unacked_.empty() ? next_seq_ : unacked_.front().seq;
  uint64_t resent = 0;
  for (const Pending& p : unacked_) resent += p.seq < next_seq_ && p.seq <= last_written_seq_ ? 1 : 0;
  std::lock_guard<std::mutex> lock(mu_);
  status_.connected = true;
  ++status_.connects;
  status_.batches_resent += resent;
  return true;
}

void IngestSender::CloseSocket() {
  const int fd = std::exchange(fd_, -1);
  fork_fd_.store(-1, std::memory_order_release);  // (before the close: see CloseInForkChild)
  if (fd >= 0) ::close(fd);
}

void IngestSender::Disconnect(const std::string& why) {
  CloseSocket();
  SetError(why);
  std::lock_guard<std::mutex> lock(mu_);
  status_.connected = false;
}

// Every name and track of the stream so far, in batches of seq 0 (definitions
// only: not counted, not acknowledged), so that a connection's first batch
// may use ids that earlier connections learnt.
void IngestSender::SendDefinitions() {
  const NameTable& names = stream_.names();
  // Tracks first: every name a track counted here uses is in the name count
  // read after it (as the drain loop reads them).
  const uint32_t track_count = stream_.track_count();
  const uint32_t name_count = names.size();
  uint32_t name = 1, track = 1;
  while (name < name_count || track < track_count) {
    AppendIngestFrame(&out_, wire::Body::IngestBatch, [&](flatbuffers::FlatBufferBuilder& fbb) {
      std::vector<flatbuffers::Offset<wire::NameDef>> defs;
      size_t bytes = 0;
      for (; name < name_count && bytes < kMaxDefinitionBytes; ++name) {
        const std::string_view text = names.Get(name);
        bytes += text.size() + 16;
        defs.push_back(wire::CreateNameDef(fbb, name, fbb.CreateString(text.data(), text.size())));
      }
      std::vector<flatbuffers::Offset<wire::TrackDef>> tracks;
      if (name == name_count) {  // tracks after every name they may use.
        for (; track < track_count && tracks.size() < 65536; ++track) {
          const TrackInfo t = stream_.track(track);
          tracks.push_back(wire::CreateTrackDef(fbb, track, t.name, static_cast<uint8_t>(t.type), t.os_id));
        }
      }
      return wire::CreateIngestBatchDirect(fbb, 0, &defs, &tracks, nullptr, 0).Union();
    });
  }
}

// Serializes batches not yet written on this connection while the output is
// short (a slow server leaves them queued here, not in memory twice).
void IngestSender::FillOut() {
  if (fd_ < 0) return;
  // unacked_ holds consecutive seqs: the first unsent one is found, not searched for.
  const size_t first = unacked_.empty() || next_send_seq_ <= unacked_.front().seq
                           ? 0
                           : static_cast<size_t>(next_send_seq_ - unacked_.front().seq);
  for (size_t i = first; i < unacked_.size(); ++i) {
    const Pending& p = unacked_[i];
    if (out_.size() - out_pos_ >= kOutLowWater) break;
    AppendIngestFrame(
        &out_, wire::Body::IngestBatch,
        [&](flatbuffers::FlatBufferBuilder& fbb) {
          std::vector<flatbuffers::Offset<wire::NameDef>> names;
          std::vector<flatbuffers::Offset<wire::TrackDef>> tracks;
          for (const Event& d : p.definitions) {
            if (d.kind == EventKind::kNameDef) {
              const char* data = d.payload.name_def.data;
              names.push_back(wire::CreateNameDef(
                  fbb, d.name, fbb.CreateString(data ? data : "", data ? d.payload.name_def.size : 0)));
            } else if (d.kind == EventKind::kTrackDef) {
              tracks.push_back(wire::CreateTrackDef(
                  fbb, d.track, d.name, static_cast<uint8_t>(d.payload.track_def.type), d.payload.track_def.os_tid));
            }
          }
          // The wire's Event is liveprof::Event byte for byte (wire_event.h): copied whole.
          wire::Event* out = nullptr;
          const auto events = fbb.CreateUninitializedVectorOfStructs(p.events.size(), &out);
          if (!p.events.empty()) std::memcpy(static_cast<void*>(out), p.events.data(), p.events.size() * sizeof(Event));
          flatbuffers::Offset<wire::IngestCost> cost = 0;
          if (p.cost.at_ns != 0) {
            std::vector<flatbuffers::Offset<wire::IngestThreadCpu>> threads;
            for (const ThreadCpu& t : p.cost.threads) {
              threads.push_back(wire::CreateIngestThreadCpuDirect(fbb, t.tid, t.name.c_str(), t.cpu_ns));
            }
            cost = wire::CreateIngestCost(fbb, p.cost.at_ns, p.cost.rss_bytes, fbb.CreateVector(threads),
                                          p.cost.hook_ns, p.cost.hook_calls, p.cost.steps, p.cost.cupti_overhead_ns);
          }
          return wire::CreateIngestBatch(fbb, p.seq, fbb.CreateVector(names), fbb.CreateVector(tracks), events,
                                         p.dropped, p.progress_ns, cost, p.stopping)
              .Union();
        },
        p.events.size() * sizeof(Event) + 1024);
    next_send_seq_ = p.seq + 1;
    const bool again = p.seq <= last_written_seq_;  // written on an earlier connection.
    last_written_seq_ = std::max(last_written_seq_, p.seq);
    std::lock_guard<std::mutex> lock(mu_);
    if (again) {
      status_.events_resent += p.events.size();
    } else {
      ++status_.batches_sent;
      status_.events_sent += p.events.size();
    }
  }
}

bool IngestSender::WriteOut() {
  while (out_pos_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + out_pos_, out_.size() - out_pos_, MSG_NOSIGNAL);
    if (n > 0) {
      out_pos_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    Disconnect(Errno("send to " + endpoint_.ToString()));
    return false;
  }
  if (out_pos_ == out_.size()) {
    out_.clear();
    out_pos_ = 0;
  } else if (out_pos_ > (size_t{4} << 20)) {
    out_.erase(0, out_pos_);
    out_pos_ = 0;
  }
  return true;
}

// Reads what the server sent: acks, pings, controls. False: disconnected.
bool IngestSender::ReadFrames(uint64_t now) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      splitter_.Feed(std::string_view(buf, static_cast<size_t>(n)));
      if (static_cast<size_t>(n) < sizeof buf) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    Disconnect(n == 0 ? "the server closed the connection" : Errno("recv from " + endpoint_.ToString()));
    return false;
  }
  while (std::optional<std::string_view> frame = splitter_.Next()) {
    flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(frame->data()), frame->size());
    if (!wire::VerifyFrameBuffer(verifier)) {
      Disconnect("the server sent a frame that is not a liveprof frame");
      return false;
    }
    const wire::Frame* f = wire::GetFrame(frame->data());
    if (const wire::IngestAck* a = f->body_as_IngestAck()) {
      uint64_t acked = 0, delivered = 0;
      while (!unacked_.empty() && unacked_.front().seq <= a->seq()) {
        unacked_events_ -= unacked_.front().events.size();
        delivered += unacked_.front().events.size();
        unacked_.pop_front();
        ++acked;
      }
      if (a->refused() != 0) Refused(*a);
      std::lock_guard<std::mutex> lock(mu_);
      status_.batches_acked += acked;
      status_.events_delivered += delivered;
    } else if (const wire::IngestPing* p = f->body_as_IngestPing()) {
      const uint32_t id = p->id();
      const uint64_t server_ns = p->server_ns();
      AppendIngestFrame(&out_, wire::Body::IngestPong, [&](flatbuffers::FlatBufferBuilder& fbb) {
        return wire::CreateIngestPong(fbb, id, server_ns, HostNowNs()).Union();
      });
    } else if (const wire::IngestControl* c = f->body_as_IngestControl()) {
      Apply(*c, now);
    }  // other bodies: a newer server's; ignored.
  }
  if (!splitter_.error().empty()) {
    Disconnect("the server's byte stream is broken: " + splitter_.error());
    return false;
  }
  return true;
}

// An ack that says the server refused some events of the batches it covers
// (they are acknowledged all the same: sent again, they would be refused
// again). Counted; the first time, said on stderr with its reason.
void IngestSender::Refused(const wire::IngestAck& a) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_.events_refused += a.refused();
  }
  if (said_refused_) return;
  said_refused_ = true;
  const std::string batches = a.refused_seq() == 0 || a.refused_seq() == a.seq()
                                  ? "batch " + std::to_string(a.seq())
                                  : "batches " + std::to_string(a.refused_seq()) + ".." + std::to_string(a.seq());
  std::fprintf(stderr,
               "liveprof: the server refused %llu %s of %s (%s: %s); further refusals are counted in "
               "/api/status\n",
               static_cast<unsigned long long>(a.refused()), a.refused() == 1 ? "event" : "events", batches.c_str(),
               a.refused_reason() ? a.refused_reason()->c_str() : "no reason given",
               a.refused_message() ? a.refused_message()->c_str() : "");
}

void IngestSender::AppendState(uint32_t control_id) {
  if (fd_ < 0) return;
  stated_gpu_available_ = GpuActivityAvailable();
  stated_gpu_ = GpuActivityEnabled();
  stated_gpu_level_ = GpuActivityLevel();
  // The level on the wire: 1 default, 2 full; 0 without a GPU producer.
  const uint8_t gpu_level = stated_gpu_available_ ? static_cast<uint8_t>(stated_gpu_level_) + 1 : 0;
  AppendIngestFrame(&out_, wire::Body::IngestState, [&](flatbuffers::FlatBufferBuilder& fbb) {
    return wire::CreateIngestState(fbb, control_id, static_cast<uint8_t>(HostTraceLevel()), PythonScopesEnabled(),
                                   stated_gpu_, stated_gpu_available_, control_active_ ? control_until_ns_ : 0,
                                   gpu_level)
        .Union();
  });
}

void IngestSender::Apply(const wire::IngestControl& c, uint64_t now) {
  if (!control_active_) {
    before_ = Settings{HostTraceLevel(), PythonScopesEnabled(), false, false, false, CuptiLevel::kDefault};
  }
  if (c.host_level() != 0) SetHostTraceLevel(c.host_level());
  if (c.python_scopes() != 0) SetPythonScopesEnabled(c.python_scopes() == 2);
  // Without a GPU producer nothing turns; the state says gpu_available false
  // (and the server refuses a gpu or gpu_level request to such a source:
  // ingest_server.h).
  // The GPU level before its activity goes on (the level's kinds then go on
  // once), after it goes off.
  auto level = [&] {
    CuptiLevel was = CuptiLevel::kDefault;
    const CuptiLevel to = c.gpu_level() == 2 ? CuptiLevel::kFull : CuptiLevel::kDefault;
    if (c.gpu_level() != 0 && SetGpuActivityLevel(to, &was) && !before_.gpu_level_turned) {
      before_.gpu_level_turned = true;
      before_.gpu_level = was;
    }
  };
  if (c.gpu() != 1) level();
  if (c.gpu() != 0) {
    bool was = false;
    if (SetGpuActivityEnabled(c.gpu() == 2, &was) && !before_.gpu_turned) {
      before_.gpu_turned = true;
      before_.gpu = was;
    }
  }
  if (c.gpu() == 1) level();
  control_id_ = c.id();
  control_active_ = c.duration_ns() != 0;
  control_until_ns_ = control_active_ ? now + c.duration_ns() : 0;
  AppendState(c.id());
}

// A control whose duration has passed: back to what was in force before it.
void IngestSender::ExpireControl(uint64_t now) {
  if (!control_active_ || now < control_until_ns_) return;
  Restore();
  AppendState(0);
}

// What was in force before the control, again (its end, or the sender's).
void IngestSender::Restore() {
  control_active_ = false;
  SetHostTraceLevel(before_.level);
  SetPythonScopesEnabled(before_.python);
  // The GPU producer (nothing done if it stopped meanwhile): its level before
  // its activity goes on again, after it goes off.
  const bool level_first = before_.gpu_turned && before_.gpu;
  if (level_first && before_.gpu_level_turned) SetGpuActivityLevel(before_.gpu_level);
  if (before_.gpu_turned) SetGpuActivityEnabled(before_.gpu);
  if (!level_first && before_.gpu_level_turned) SetGpuActivityLevel(before_.gpu_level);
  before_.gpu_turned = false;
  before_.gpu_level_turned = false;
  control_id_ = 0;
}

// A GPU producer that started, stopped or was turned by the program since
// the last state: the server is told (the Sources page shows it).
void IngestSender::StateGpuChange() {
  if (fd_ >= 0 && (GpuActivityAvailable() != stated_gpu_available_ || GpuActivityEnabled() != stated_gpu_ ||
                   GpuActivityLevel() != stated_gpu_level_)) {
    AppendState(control_id_);
  }
}

void IngestSender::Run() {
  // Named, so that its CPU shows among liveprof's own cost (the batches'
  // IngestBatch.cost; the server's Sources page).
  pthread_setname_np(pthread_self(), "liveprof send");
  for (;;) {
    const bool stopping = stop_.load(std::memory_order_acquire);
    uint64_t now = HostNowNs();
    if (stopping) {
      drain_.Flush();
    } else {
      drain_.RunOnce(now);
    }
    // liveprof's own cost in this process, from /proc (this thread's work,
    // never the program's threads'), and its hooks' own counters: the next
    // batch sealed carries them. Once more at the stop, so that the server
    // has the last steps (it takes a reading this close to the last in its
    // place).
    if (stopping ? !cost_read_at_stop_ : now >= next_cost_ns_) {
      open_.cost = ReadSelfCost(now, "liveprof");
      const HookTotals hooks = ReadHookTotals();
      open_.cost.hook_ns = hooks.ns;
      open_.cost.hook_calls = hooks.calls;
      open_.cost.steps = hooks.steps;
      open_.cost.cupti_overhead_ns = hooks.cupti_overhead_ns;
      next_cost_ns_ = now + kCostPeriodNs;
      cost_read_at_stop_ = stopping;
    }
    if (stopping || open_.events.size() >= kMaxBatchEvents || now - last_seal_ns_ >= options_.flush_period_ns) {
      Seal(now, stopping);
      last_seal_ns_ = now;
    }
    ExpireControl(now);
    StateGpuChange();
    if (fd_ < 0 && (now >= next_connect_ns_ || (stopping && !tried_at_stop_))) {
      tried_at_stop_ = stopping;
      Connect(now);
    }
    if (stopping && (unacked_.empty() || now >= stop_deadline_ns_.load(std::memory_order_relaxed) || fd_ < 0)) {
      break;
    }
    FillOut();
    if (fd_ >= 0) {
      pollfd p{fd_, static_cast<short>(POLLIN | (out_pos_ < out_.size() ? POLLOUT : 0)), 0};
      const int timeout_ms = static_cast<int>(std::max<uint64_t>(1, options_.flush_period_ns / 2'000'000));
      const int rc = ::poll(&p, 1, timeout_ms);
      if (rc < 0 && errno != EINTR) Disconnect(Errno("poll"));
      now = HostNowNs();
      if (fd_ >= 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) ReadFrames(now);
      if (fd_ >= 0) WriteOut();
    } else {
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(options_.flush_period_ns, 5'000'000)));
    }
  }
  // A control still running when the sender stops leaves nothing turned
  // (the program may go on recording, or connect again).
  if (control_active_) Restore();
  if (fd_ >= 0) {
    WriteOut();
    CloseSocket();
  }
  std::lock_guard<std::mutex> lock(mu_);
  status_.connected = false;
  status_.running = false;
  // Never acknowledged: lost, whether written or not (the server may hold
  // some, unacknowledged; the counts do not claim them).
  status_.events_unsent_at_stop += unacked_events_ + open_.events.size();
}

}  // namespace liveprof
