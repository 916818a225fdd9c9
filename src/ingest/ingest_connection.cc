#include "ingest/ingest_connection.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <span>
#include <tuple>
#include <utility>

#include "ingest/ingest_wire.h"
#include "stream/clock.h"
#include "stream/liveprof_generated.h"

namespace liveprof {
namespace {

// A source's ring: read while at most half full, so a whole batch of the
// largest a sender sends (65,536 events) always fits in the other half.
constexpr size_t kDefaultRingEvents = size_t{1} << 18;  // 12 MiB.
constexpr uint64_t kProgressSlackNs = 50'000'000;       // a sender's declared progress, held back this much more.
constexpr size_t kMaxSessions = 1024;
constexpr size_t kMaxStatuses = 1024;

// This host's name, as a sender's hello gives its own (gethostname).
const std::string& LocalHostName() {
  static const std::string name = [] {
    char buf[256] = {};
    return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("?");
  }();
  return name;
}

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

IngestWorkers::Worker& IngestWorkers::For(const std::string& label, uint64_t pid) {
  auto [w, fresh] = workers_.try_emplace(label);
  if (fresh) {
    w->second.process = static_cast<uint32_t>(workers_.size());
    stream_.AddTrack(TrackInfo{stream_.names().Intern(label), TrackType::kProcess, pid, 0, w->second.process});
  }
  return w->second;
}

uint64_t IngestWorkers::ResumeSeq(const std::string& session) const {
  const auto it = sessions_.find(session);
  return it == sessions_.end() ? 0 : it->second;
}

void IngestWorkers::Remember(const std::string& session, uint64_t seq) {
  auto [it, fresh] = sessions_.try_emplace(session, 0);
  it->second = std::max(it->second, seq);
  if (!fresh) return;
  session_order_.push_back(session);
  if (session_order_.size() > kMaxSessions) {
    sessions_.erase(session_order_.front());
    session_order_.pop_front();
  }
}

IngestConnection::IngestConnection(Stream& stream, IngestWorkers& workers, const Options& options, uint64_t id,
                                   std::string endpoint, uint64_t now_ns)
    : stream_(stream), workers_(workers), options_(options), decoder_(stream) {
  connected_ns_ = last_byte_ns_ = now_ns;
  status_.id = id;
  status_.endpoint = std::move(endpoint);
  status_.connected = true;
}

bool IngestConnection::RingHalfFull() const {
  return ring_ != nullptr && ring_->queue->size() * 2 > ring_->queue->capacity();
}

bool IngestConnection::TakeFrames(std::string* reason) {
  while (!RingHalfFull()) {
    const auto frame = splitter_.Next();
    if (!frame) break;
    const std::string where = "frame " + std::to_string(splitter_.frames()) + " (bytes " +
                              std::to_string(splitter_.frame_begin()) + ".." + std::to_string(splitter_.frame_end()) +
                              ")";
    const bool had_hello = decoder_.has_hello();
    events_.clear();
    if (!decoder_.Decode(*frame, where, &events_)) {
      *reason = decoder_.error();
      return false;
    }
    const uint64_t now = HostNowNs();
    if (!had_hello && decoder_.has_hello()) {
      Hello(now);
      if (!ring_) {
        *reason = "no ring for it (memory)";
        return false;
      }
    }
    NoteRefusals();
    if (decoder_.batches() != batches_seen_) {  // a batch (pongs and states are not work)
      batches_seen_ = decoder_.batches();
      last_batch_ns_ = now;
    }
    TakeEvents(now);
    if (decoder_.last_seq() > (unacked_.empty() ? acked_seq_ : unacked_.back().seq)) {
      unacked_.push_back({decoder_.last_seq(), ring_->queue->published(), batch_max_end_});
    }
    DeclareProgress(now);
    // The sender's cost: its newest samples (a batch sent again after a
    // reconnect may carry an older one: not taken).
    if (const auto& cost = decoder_.batch_cost()) TakeSelfCost(&status_.cost, *cost);
    if (const auto& st = decoder_.state()) {
      IngestServer::CaptureState& cs = status_.capture;
      cs = IngestServer::CaptureState{true,
                                      st->control_id,
                                      st->host_level,
                                      st->python_scopes,
                                      st->gpu,
                                      st->gpu_available,
                                      0,
                                      st->gpu_available && st->gpu_level != 0 ? st->gpu_level - 1 : -1};
      if (st->until_ns != 0) {
        const __int128 until = static_cast<__int128>(st->until_ns) + decoder_.clock_offset_ns();
        cs.until_ns = until <= 0 ? 1 : static_cast<uint64_t>(std::min<__int128>(until, INT64_MAX));
      }
    }
    if (decoder_.pong()) answered_ns_ = now;  // any pong says it is there.
    // A pong to the ping in flight (its id and reading: no other counts).
    if (const auto& pong = decoder_.pong();
        pong && pong->id == ping_id_ && pong->server_ns == ping_sent_ns_ && now >= pong->server_ns) {
      const uint64_t rtt = now - pong->server_ns;
      if (status_.best_rtt_ns == 0 || rtt < status_.best_rtt_ns) {
        status_.best_rtt_ns = std::max<uint64_t>(rtt, 1);
      }
      if (status_.best_rtt_ns == std::max<uint64_t>(rtt, 1) && !same_clock_) {
        // The sender read its clock halfway through the round trip (wide: no overflow).
        const __int128 offset = static_cast<__int128>(pong->server_ns + rtt / 2) - pong->sender_ns;
        // From the sender's reading in this exchange on: its earlier times keep theirs.
        decoder_.set_clock_offset_ns(static_cast<int64_t>(std::clamp<__int128>(offset, INT64_MIN, INT64_MAX)),
                                     pong->sender_ns);
      }
    }
  }
  if (!splitter_.error().empty()) {
    *reason = splitter_.error();
    return false;
  }
  return true;
}

// Its hello: who it is, its worker (rows kept across reconnects), its ring,
// where a reconnecting sender left off, and a first clock offset (one way,
// from its hello) until a pong.
void IngestConnection::Hello(uint64_t now) {
  const IngestSource& s = decoder_.source();
  status_.label = s.label, status_.host = s.host, status_.program = s.program;
  status_.pid = s.pid, status_.rank = s.rank;
  IngestWorkers::Worker& w = workers_.For(s.label, s.pid);
  status_.worker = w.process;
  decoder_.set_worker(w.process, &w.rows);
  session_ = s.host + '\0' + std::to_string(s.pid) + '\0' + std::to_string(s.session);
  if (s.session != 0) {
    if (const uint64_t seq = workers_.ResumeSeq(session_); seq != 0) decoder_.set_resume_seq(seq);
  }
  // This host's clock, read by the sender (its hello names this host) and
  // consistent with it (read before its hello came, less than 10 s before):
  // the same clock, offset 0. Else a first estimate (one way: its hello's
  // transit is in it) until a pong.
  const int64_t one_way = static_cast<int64_t>(now - s.clock_ns);
  same_clock_ = s.host == LocalHostName() && one_way >= 0 && one_way < 10'000'000'000;
  decoder_.set_clock_offset_ns(same_clock_ ? 0 : one_way);
  ring_ = stream_.AddRing({.name = "ingest " + s.label,
                           .capacity = options_.ring_capacity != 0 ? options_.ring_capacity : kDefaultRingEvents,
                           .progress = RingProgress::kDeclared,
                           .pushes_back = true});
  next_ping_ns_ = now;
  answered_ns_ = now;
}

// The decoded events into the source's ring: a full ring drops and counts;
// an event ending too far in the future is dropped and counted here. A
// sender's correlation ids are its own: mixed with its worker number, so that
// two workers' launches and kernels do not pair up in the shared analyses
// (a bijection per worker: its own pairs are kept). An annotated
// allocation's corr is a name (event.h), already made the server's.
void IngestConnection::TakeEvents(uint64_t now) {
  const uint64_t horizon = now + options_.max_future_ns;
  const uint32_t mix = (status_.worker * 0x9E3779B1u) & 0xFFF00000u;
  size_t kept = 0;
  batch_max_end_ = 0;
  for (const Event& e : events_) {
    if (e.end() > horizon) {
      ++status_.future_dropped;
      continue;
    }
    batch_max_end_ = std::max(batch_max_end_, e.end());
    Event& k = events_[kept++];
    k = e;
    const bool name = k.kind == EventKind::kAlloc && (k.flags & kFlagAllocAnnotation) != 0;
    if (k.corr != 0 && !name) k.corr ^= mix;
  }
  const size_t pushed = ring_->queue->TryPushBulk(std::span<const Event>(events_.data(), kept));
  if (pushed < kept) {  // a batch larger than half the ring: the rest is refused, and the sender told.
    if (ack_refused_ == 0) {
      ack_refused_seq_ = decoder_.last_seq();
      ack_refused_reason_ = "ring_full";
      ack_refused_message_ = "a batch of " + std::to_string(kept) + " events; the source's ring had room for " +
                             std::to_string(pushed) + " (send smaller batches)";
    }
    ack_refused_ += kept - pushed;
    ack_refused_last_seq_ = decoder_.last_seq();
  }
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
void IngestConnection::DeclareProgress(uint64_t now) {
  // A stopping sender has sent all it recorded: nothing of it is to wait for
  // (the release then goes as far as the drain loop's clock).
  if (decoder_.batch_stopping()) {
    declared_ns_ = UINT64_MAX;
    ring_->DeclareProgress(declared_ns_);
    return;
  }
  const uint64_t progress = decoder_.batch_progress_ns();
  if (progress == 0 || status_.best_rtt_ns == 0) return;
  const uint64_t margin = status_.best_rtt_ns + kProgressSlackNs;
  const uint64_t t = std::min(decoder_.EarliestServerNs(progress), now);
  if (t <= margin || t - margin <= declared_ns_) return;
  declared_ns_ = t - margin;
  ring_->DeclareProgress(declared_ns_);
}

void IngestConnection::Remember() {
  if (session_.empty() || decoder_.last_seq() == 0) return;
  workers_.Remember(session_, decoder_.last_seq());
}

// A batch just decoded with refused events: kept for the next ack (the
// first one's reason and message, and the count), and each new reason said
// on the console, once per source.
void IngestConnection::NoteRefusals() {
  const IngestDecoder::BatchRefused& r = decoder_.batch_refused();
  if (r.events > 0) {
    if (ack_refused_ == 0) {
      ack_refused_seq_ = decoder_.last_seq();
      ack_refused_reason_ = r.reason;
      ack_refused_message_ = r.message;
    }
    ack_refused_ += r.events;
    ack_refused_last_seq_ = decoder_.last_seq();
  }
  const std::vector<IngestRefusal>& reasons = decoder_.refusals();
  for (; said_refusals_ < reasons.size(); ++said_refusals_) {
    const IngestRefusal& n = reasons[said_refusals_];
    std::fprintf(stderr,
                 "liveprof: ingest source %llu (%s, %s) sent an event the server refused (%s): %s; the rest of "
                 "its batch was taken, and further refusals are counted in /api/status and /metrics\n",
                 static_cast<unsigned long long>(status_.id), status_.label.c_str(), status_.endpoint.c_str(),
                 n.reason.c_str(), n.example.c_str());
  }
}

// The batches the pipeline has handled, oldest first: a batch is once the
// drain loop has taken its events from the ring and handed every one of
// them to its consumer (none ends after what it has released), which wrote
// them to the run folder if there is one. The refusals go with the ack that
// covers their last batch.
void IngestConnection::AppendAck() {
  uint64_t handled = acked_seq_;
  while (!unacked_.empty() && ring_->Handled(unacked_.front().ring_events, unacked_.front().max_end_ns)) {
    handled = unacked_.front().seq;
    unacked_.pop_front();
  }
  if (handled == acked_seq_) return;
  acked_seq_ = handled;
  Remember();
  const bool refusals = ack_refused_ > 0 && handled >= ack_refused_last_seq_;
  AppendIngestFrame(&out_, wire::Body::IngestAck, [&](auto& fbb) {
    return wire::CreateIngestAckDirect(fbb, handled, refusals ? ack_refused_ : 0, refusals ? ack_refused_seq_ : 0,
                                       refusals ? ack_refused_reason_.c_str() : nullptr,
                                       refusals ? ack_refused_message_.c_str() : nullptr)
        .Union();
  });
  if (refusals) ack_refused_ = ack_refused_seq_ = 0;
}

void IngestConnection::AppendControl(const IngestServer::CaptureRequest& r) {
  AppendIngestFrame(&out_, wire::Body::IngestControl, [&](auto& fbb) {
    return wire::CreateIngestControl(fbb, ++control_id_, static_cast<uint8_t>(r.host_level),
                                     static_cast<uint8_t>(r.python_scopes + 1), static_cast<uint8_t>(r.gpu + 1),
                                     r.duration_ns, static_cast<uint8_t>(r.gpu_level + 1))
        .Union();
  });
}

bool IngestConnection::Tick(uint64_t now, std::string* reason) {
  // Not read for back pressure: the silence is ours, not a stalled sender's.
  if (RingHalfFull()) last_byte_ns_ = answered_ns_ = now;
  if (!decoder_.has_hello() && now - connected_ns_ > options_.stall_timeout_ns) {
    *reason = "no hello in " + std::to_string(options_.stall_timeout_ns / 1'000'000) + " ms";
    return false;
  }
  if (splitter_.pending_bytes() > 0 && now - last_byte_ns_ > options_.stall_timeout_ns) {
    *reason = "stalled mid-frame for " + std::to_string((now - last_byte_ns_) / 1'000'000) + " ms (" +
              std::to_string(splitter_.pending_bytes()) + " bytes of an unfinished frame dropped)";
    return false;
  }
  if (decoder_.has_hello() && now > answered_ns_ && now - answered_ns_ > options_.pong_timeout_ns) {
    *reason = "answered no ping in " + std::to_string((now - answered_ns_) / 1'000'000) +
              " ms (a sender answers each IngestPing with an IngestPong)";
    return false;
  }
  AppendAck();
  if (decoder_.has_hello() && now >= next_ping_ns_) {
    next_ping_ns_ = now + options_.ping_interval_ns;
    ping_sent_ns_ = HostNowNs();
    AppendIngestFrame(&out_, wire::Body::IngestPing,
                      [&](auto& fbb) { return wire::CreateIngestPing(fbb, ++ping_id_, ping_sent_ns_).Union(); });
  }
  return true;
}

// A source's end on the console: at most kCloseLinesPerSecond lines a
// second (a crowd of connections, an attacker's or a restarted job's, must
// not flood it); the others are counted and said in one line when the next
// second's first close comes. /api/status keeps every reason.
namespace {
void SayClosed(const IngestServer::SourceStatus& s) {
  constexpr uint64_t kCloseLinesPerSecond = 10;
  static std::mutex mu;
  static uint64_t second = 0, said = 0, unsaid = 0;
  std::lock_guard<std::mutex> lock(mu);
  const uint64_t now = HostNowNs() / 1'000'000'000;
  if (now != second) {
    if (unsaid > 0) {
      std::fprintf(stderr,
                   "liveprof: ingest: %llu more sources closed (each one's reason: /api/status, server.ingest)\n",
                   static_cast<unsigned long long>(unsaid));
    }
    second = now;
    said = unsaid = 0;
  }
  if (said++ >= kCloseLinesPerSecond) {
    ++unsaid;
    return;
  }
  std::fprintf(stderr, "liveprof: ingest source %llu (%s, %s) closed: %s\n", static_cast<unsigned long long>(s.id),
               s.label.empty() ? "no hello" : s.label.c_str(), s.endpoint.c_str(), s.closed_reason.c_str());
}
}  // namespace

void IngestConnection::Closed(const std::string& reason) {
  Remember();
  status_.connected = false;
  status_.closed_reason = reason;
  SayClosed(status_);
  if (ring_) ring_->closed.store(true, std::memory_order_release);  // drained, then retired.
}

IngestServer::SourceStatus IngestConnection::Status() const {
  SourceStatus s = status_;
  s.frames = splitter_.frames();
  s.batches = decoder_.batches();
  s.acked_seq = acked_seq_;
  s.unacked_batches = unacked_.size();
  s.events = decoder_.events();
  s.lost_batches = decoder_.lost_batches();
  s.sender_dropped = decoder_.sender_dropped();
  s.ring_dropped = ring_ ? ring_->queue->dropped() : 0;
  s.clock_offset_ns = decoder_.clock_offset_ns();
  s.duplicate_batches = decoder_.duplicate_batches();
  s.refused_events = decoder_.refused_events();
  s.refused = decoder_.refusals();
  return s;
}

void IngestStatuses::Publish(IngestServer::SourceStatus s) {
  std::lock_guard<std::mutex> lock(mu_);
  for (IngestServer::SourceStatus& old : status_) {
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

std::vector<IngestServer::SourceStatus> IngestStatuses::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::vector<IngestServer::RefusedCount> IngestStatuses::RefusedTotals() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<IngestServer::RefusedCount> totals = evicted_refused_;
  for (const IngestServer::SourceStatus& s : status_) {
    for (const IngestRefusal& r : s.refused) AddRefused(&totals, "ingest " + s.label, r);
  }
  std::sort(totals.begin(), totals.end(),
            [](const auto& a, const auto& b) { return std::tie(a.source, a.reason) < std::tie(b.source, b.reason); });
  return totals;
}

bool IngestStatuses::CheckCapture(uint64_t id, const IngestServer::CaptureRequest& request, std::string* error) const {
  if (request.host_level < 0 || request.host_level > 3) {  // (host_api.h: kHostLevelVerbose)
    *error = "host_level " + std::to_string(request.host_level) + ": 1 (critical), 2 (detailed) or 3 (verbose)";
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
  const auto s = std::find_if(status_.begin(), status_.end(), [&](const auto& o) { return o.id == id; });
  if (s == status_.end() || !s->connected || s->worker == 0) {
    *error = "source " + std::to_string(id) +
             (s == status_.end() ? " is unknown"
              : !s->connected    ? " is closed"
                                 : " has not said hello yet");
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
  return true;
}

}  // namespace liveprof
