// IngestServer: other processes' events into this server's stream
// (docs/ingest.md). It listens on unix sockets and loopback TCP ports; each
// connection is a source with its own ring, tracks and counters. One thread
// runs a Boost.Asio io_context (asynchronous accept, read and write; Asio
// stays inside ingest_server.cc) for every listener and connection: it reads
// frames (ingest_frames.h), writes the events to the source's ring,
// acknowledges each batch (IngestAck) and pings the sender for its clock
// (IngestPing / IngestPong, the least round trip wins). A source whose ring
// is half full is not read (no read is issued; a 2 ms timer looks again)
// until the pipeline drains it (back pressure: the sender keeps its batches
// until acknowledged, and drops and counts only past its own bound), so
// what the server acknowledges is not dropped by it.
//
// A refused frame (ingest_frames.h: verifier, framing, protocol, order,
// definitions that contradict, caps), a sender silent mid-frame past the
// stall timeout, or an output queue past its bound closes that connection,
// with the reason kept in Sources(); the others go on. A malformed event is
// refused alone: counted per source and reason (Sources(), RefusedTotals()),
// said on the console once per source and reason, and told to the sender in
// the ack (its batch is taken and acknowledged: never sent again). A sender that reconnects is a new source
// (its hello says who it is again) of the same worker: a worker is a label
// ("rank 3", "host:pid"), with a process number for its tracks
// (TrackInfo::process) and a kProcess track naming it; its rows are reused
// across reconnects, and the batches a reconnecting sender sends again are
// skipped (IngestHello.session says it is the same process).
//
// Capture on demand: Capture() sends a source an IngestControl (host trace
// level, Python scopes, GPU activity and level, for a duration); the sender applies it
// and says what it records (IngestState), shown in Sources().
#ifndef LIVEPROF_INGEST_INGEST_SERVER_H_
#define LIVEPROF_INGEST_INGEST_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/self_cost.h"
#include "ingest/ingest_endpoint.h"
#include "ingest/ingest_frames.h"
#include "stream/stream.h"

namespace liveprof {

class IngestServer {
 public:
  struct Options {
    std::vector<IngestEndpoint> endpoints;
    // Events per source's ring; 0: 2^18 (12 MiB). A source is read while its
    // ring is at most half full (back pressure: the sender keeps the rest),
    // so a batch up to half of it is never dropped by the server.
    size_t ring_capacity = 0;
    uint64_t ping_interval_ns = 1'000'000'000;
    uint64_t stall_timeout_ns = 10'000'000'000;  // silent mid-frame this long: closed.
    // A source that answers no ping this long (while it is read) is closed:
    // an idle connection holds no place that a real sender needs.
    uint64_t pong_timeout_ns = 5'000'000'000;
    size_t max_sources = 256;  // connections at once; more are refused.
    // Connections at once from one peer: a process on a unix socket (its
    // pid, SO_PEERCRED), an address on TCP; more from it are refused. A
    // loopback TCP peer is any local process (they cannot be told apart):
    // not capped, only by max_sources. A rank and its helpers are several
    // processes: each its own peer.
    size_t max_sources_per_peer = 16;
    // Unfinished frames held across every connection; past it the
    // connection holding the most is closed.
    size_t max_buffered_bytes = size_t{256} << 20;
    // Events ending later than this past the server's clock are dropped
    // (counted: future_dropped): a wrong clock must not move the reorder
    // window's watermark to the end of time.
    uint64_t max_future_ns = 60'000'000'000;
  };
  // What a sender records (its IngestState) and a control to change it.
  struct CaptureState {
    bool known = false;  // the sender said (an older sender may not).
    uint32_t control_id = 0;
    int host_level = 0;
    bool python_scopes = false, gpu = false, gpu_available = false;
    uint64_t until_ns = 0;  // the server's clock; 0: no control running.
    int gpu_level = -1;     // the GPU producer's: 0 default, 1 full; -1: none (or not said).
  };
  struct CaptureRequest {
    int host_level = 0;        // 1 or 2; 0: unchanged.
    int python_scopes = -1;    // 0 off, 1 on, -1 unchanged.
    int gpu = -1;              // 0 off, 1 on, -1 unchanged.
    uint64_t duration_ns = 0;  // 0: until the next request.
    int gpu_level = -1;        // the GPU producer's capture level: 0 default, 1 full, -1 unchanged.
  };

  struct SourceStatus {
    uint64_t id = 0;      // from 1, in order of connection.
    uint32_t worker = 0;  // the worker (TrackInfo::process) once its hello came; 0 before.
    std::string endpoint, label, host, program;
    std::string peer;  // who connected, as the kernel says: "pid 1234, uid 1000"; a TCP address; empty: loopback TCP.
    uint64_t pid = 0;
    int32_t rank = -1;
    bool connected = false;
    std::string closed_reason;    // empty while connected; else how it ended ("closed by the sender").
    bool closed_cleanly = false;  // the sender closed it, with no frame cut short.
    uint64_t frames = 0, batches = 0, events = 0, lost_batches = 0, sender_dropped = 0, ring_dropped = 0;
    uint64_t duplicate_batches = 0;  // sent again after a reconnect: skipped.
    // The last batch acknowledged (its events handled: docs/ingest.md), and
    // the batches taken since, waiting for the pipeline.
    uint64_t acked_seq = 0, unacked_batches = 0;
    uint64_t future_dropped = 0;         // events past max_future_ns.
    uint64_t refused_events = 0;         // malformed events refused alone (the rest was taken),
    std::vector<IngestRefusal> refused;  // by reason, each with its first one's message.
    CaptureState capture;
    int64_t clock_offset_ns = 0;
    uint64_t best_rtt_ns = 0;  // 0: no pong yet.
    // liveprof's own cost in the source's process (IngestBatch.cost, read
    // from its /proc about once a second, its hooks' counters with it): the
    // newest sample and the one before it (CompareSelfCost: each thread's
    // CPU over the interval), and the two the hooks' time per step is over
    // (TakeSelfCost), on the sender's clock. cost.now.at_ns 0: none yet (an
    // older sender sends none).
    SelfCostReadings cost;
  };

  IngestServer(Stream& stream, Options options);
  ~IngestServer();  // Stop()
  IngestServer(const IngestServer&) = delete;
  IngestServer& operator=(const IngestServer&) = delete;

  // Binds every endpoint (a unix path that is a stale socket is replaced;
  // any other file there is an error) and starts the thread. False with
  // `error` naming the endpoint; nothing is left listening then.
  bool Start(std::string* error);
  void Stop();
  // Sends source `id` (SourceStatus::id, connected) a capture control; its
  // IngestState then shows in Sources(). Any thread. False with `error`
  // for an unknown, closed or not yet introduced source, a bad request, or
  // a gpu or gpu_level request to a source that said it has no GPU producer.
  bool Capture(uint64_t id, const CaptureRequest& request, std::string* error);

  // The endpoints as bound (a TCP port 0 resolved). After Start.
  std::vector<IngestEndpoint> bound() const { return bound_; }
  // Every source since Start, connected or not (the newest 1,024). Any thread.
  std::vector<SourceStatus> Sources() const;
  // Events refused since Start, by source ("ingest " + its label: the name
  // of its ring, as /metrics' source label) and reason, summed over every
  // connection of that source, sources older than Sources() keeps included.
  // Sorted by source, then reason. Any thread.
  struct RefusedCount {
    std::string source, reason;
    uint64_t events = 0;
  };
  std::vector<RefusedCount> RefusedTotals() const;

 private:
  // The listeners, connections, io thread and statuses (ingest_server.cc):
  // no Asio in this header.
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<IngestEndpoint> bound_;
};

}  // namespace liveprof

#endif  // LIVEPROF_INGEST_INGEST_SERVER_H_
