// One ingest connection's protocol, without its socket
// (docs/ingest.md). The server (ingest_server.cc, the one translation unit
// with Asio in it) accepts, reads bytes into an IngestConnection's splitter,
// writes what its out() holds, and closes; everything in between is here:
// the frames decoded into the source's ring, its hello (worker and rows,
// the batch a reconnecting sender left off at), the acks, pings and capture
// controls it is owed, its clock offset from the pongs, the timeouts, and
// its status. All of it runs on the server's one io thread, except
// IngestStatuses, which every thread reads.
#ifndef LIVEPROF_INGEST_INGEST_CONNECTION_H_
#define LIVEPROF_INGEST_INGEST_CONNECTION_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ingest/ingest_frames.h"
#include "ingest/ingest_server.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace liveprof {

// What every source of one server shares (the io thread's): workers by
// label, whose process number and rows outlive a connection, and sender
// sessions, whose last batch taken lets a reconnecting sender skip what was
// taken already.
class IngestWorkers {
 public:
  explicit IngestWorkers(Stream& stream) : stream_(stream) {}
  struct Worker {
    uint32_t process = 0;
    std::unordered_map<std::string, TrackId> rows;  // IngestDecoder::set_worker.
  };
  // The worker labelled `label`; a new one gets the next process number and
  // a kProcess track named after it.
  Worker& For(const std::string& label, uint64_t pid);
  // The last batch taken from `session` (host, pid, IngestHello.session); 0: none.
  uint64_t ResumeSeq(const std::string& session) const;
  // Keeps `seq` as `session`'s last batch (the newest 1,024 sessions).
  void Remember(const std::string& session, uint64_t seq);

 private:
  Stream& stream_;
  std::unordered_map<std::string, Worker> workers_;
  std::unordered_map<std::string, uint64_t> sessions_;
  std::deque<std::string> session_order_;  // age of sessions_' keys.
};

class IngestConnection {
 public:
  using Options = IngestServer::Options;
  using SourceStatus = IngestServer::SourceStatus;

  IngestConnection(Stream& stream, IngestWorkers& workers, const Options& options, uint64_t id, std::string endpoint,
                   uint64_t now_ns);

  // Bytes are read into it (Reserve, Commit) by the server.
  FrameSplitter& splitter() { return splitter_; }
  const FrameSplitter& splitter() const { return splitter_; }
  // Bytes received: the stall timeout counts from the last.
  void Received(uint64_t now_ns) { last_byte_ns_ = now_ns; }

  // Takes the whole frames received while its ring is at most half full.
  // False, with the reason to close it in `reason`, on a refused frame or
  // when no ring could be made for it; what came before is taken (and
  // acknowledged by AppendAck).
  bool TakeFrames(std::string* reason);
  // Its ring holds more than half its capacity: not read (back pressure).
  bool RingHalfFull() const;

  // The last batch taken (into its ring), and the last acknowledged.
  uint64_t last_seq() const { return decoder_.last_seq(); }
  uint64_t acked_seq() const { return acked_seq_; }
  // An IngestAck into out() when more batches were handled (Ring::Handled:
  // their events were handed to the pipeline's consumer, which wrote them to
  // the run folder when there is one) since the last ack.
  void AppendAck();
  // An IngestControl into out().
  void AppendControl(const IngestServer::CaptureRequest& request);
  // Every tick: the hello and stall timeouts (false, with the reason to
  // close it), an ack (AppendAck) and a ping into out() when one is due.
  bool Tick(uint64_t now_ns, std::string* reason);
  // Frames owed to the sender, for the server to send.
  std::string& out() { return out_; }
  const std::string& out() const { return out_; }

  // Closed with `reason` (empty: a clean close): its status says so, its
  // ring is retired once drained, its session remembered.
  void Closed(const std::string& reason);
  // The sender closed it, no frame cut short (before Closed).
  void ClosedCleanly() { status_.closed_cleanly = true; }
  // A copy of its status with the counters as they are now.
  SourceStatus Status() const;
  uint64_t id() const { return status_.id; }
  // Since when it sent no batch (its connect, else its last batch): at the
  // source cap the idlest source gives way to a new one.
  uint64_t idle_since_ns() const { return std::max(connected_ns_, last_batch_ns_); }
  const std::string& label() const { return status_.label; }
  void set_peer(std::string peer) { status_.peer = std::move(peer); }
  const std::string& endpoint() const { return status_.endpoint; }

 private:
  void Hello(uint64_t now);
  void NoteRefusals();
  void TakeEvents(uint64_t now);
  void DeclareProgress(uint64_t now);
  void Remember();

  Stream& stream_;
  IngestWorkers& workers_;
  const Options& options_;
  FrameSplitter splitter_;
  IngestDecoder decoder_;
  std::shared_ptr<Ring> ring_;
  std::string out_;  // frames to send: acks, pings, controls.
  std::vector<Event> events_;
  // Batches taken and not acknowledged yet, oldest first: each one's seq,
  // its ring position after its events, and the latest end among them.
  struct Unacked {
    uint64_t seq = 0, ring_events = 0, max_end_ns = 0;
  };
  std::deque<Unacked> unacked_;
  uint64_t acked_seq_ = 0;      // the last IngestAck's.
  uint64_t batch_max_end_ = 0;  // TakeEvents': the latest end among its events.
  uint64_t connected_ns_ = 0, last_byte_ns_ = 0, next_ping_ns_ = 0;
  uint64_t answered_ns_ = 0;  // the last pong (or the hello): liveness.
  uint64_t last_batch_ns_ = 0;
  uint64_t batches_seen_ = 0;
  std::string session_;        // host, pid, session: IngestWorkers' key.
  uint32_t control_id_ = 0;    // the last IngestControl's.
  uint32_t ping_id_ = 0;       // the ping in flight,
  uint64_t ping_sent_ns_ = 0;  // and our clock in it.
  // A sender on this host reads the same clock (CLOCK_MONOTONIC): its
  // offset is 0, not estimated (an estimate that improves moves a
  // sender's later events against its earlier ones, and two contiguous
  // steps could swap).
  bool same_clock_ = false;
  uint64_t declared_ns_ = 0;  // the ring's declared progress (DeclareProgress).
  // Refused events of the batches since the last ack (IngestAck.refused_*):
  // how many, the first of them (its batch, reason and message), and the
  // last batch with any (they go with the ack that covers it).
  uint64_t ack_refused_ = 0, ack_refused_seq_ = 0, ack_refused_last_seq_ = 0;
  std::string ack_refused_reason_, ack_refused_message_;
  size_t said_refusals_ = 0;  // reasons said on the console (decoder_.refusals()'s first ones).
  SourceStatus status_;
};

// The sources' statuses, for every thread: the newest 1,024 connections,
// and the refusals of older ones summed.
class IngestStatuses {
 public:
  void Publish(IngestServer::SourceStatus s);
  std::vector<IngestServer::SourceStatus> All() const;
  std::vector<IngestServer::RefusedCount> RefusedTotals() const;
  // Whether `request` may go to source `id` (connected, introduced, and with
  // a GPU producer if it asks for GPU changes); false with `error` if not.
  bool CheckCapture(uint64_t id, const IngestServer::CaptureRequest& request, std::string* error) const;

 private:
  mutable std::mutex mu_;
  std::vector<IngestServer::SourceStatus> status_;
  std::vector<IngestServer::RefusedCount> evicted_refused_;  // of sources status_ no longer holds.
};

}  // namespace liveprof

#endif  // LIVEPROF_INGEST_INGEST_CONNECTION_H_
