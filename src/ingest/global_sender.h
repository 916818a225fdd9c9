// The global sender: this process's events to a liveprof server instead of an
// in-process pipeline (docs/ingest.md). The host API writes to
// GlobalStream()'s rings as always (never blocking, a full ring drops and
// counts); a sender thread drains them, sends size-prefixed frames
// (IngestHello, then IngestBatch with the new names and tracks) over a unix
// socket or loopback TCP, answers the server's pings, applies its capture
// controls (host_api.h levels), and keeps every batch until it is
// acknowledged: after a reconnect the unacknowledged batches are sent again
// (bounded: past max_unacked_bytes the oldest are dropped and counted). A
// server that refuses some events of a batch (one on a track never defined:
// docs/ingest.md, "Refusals") takes the rest and acknowledges the batch: the
// sender counts them (events_refused) and says so once on stderr, with the
// first reason; it does not send them again.
//
// LIVEPROF_SERVER=unix:/path (or tcp:127.0.0.1:PORT) in the environment
// connects GlobalStream() at its creation; ConnectGlobalStream() does it
// from code (the Python module's liveprof.connect).
#ifndef LIVEPROF_INGEST_GLOBAL_SENDER_H_
#define LIVEPROF_INGEST_GLOBAL_SENDER_H_

#include <cstdint>
#include <string>

namespace liveprof {

struct SenderOptions {
  std::string address;  // "unix:/path" or "tcp:127.0.0.1:PORT".
  std::string program;  // shown by the server; default: this process's name.
  int32_t rank = -1;    // -1: $RANK if set, else none.
  // A helper of another process (a DataLoader worker: "loader 1"), and
  // that process's pid; shown by the server as "<its label> · <helper>".
  std::string helper;
  uint64_t helper_of = 0;
  uint64_t flush_period_ns = 10'000'000;        // a batch at least this often.
  uint64_t reconnect_period_ns = 500'000'000;   // between attempts.
  size_t max_unacked_bytes = size_t{64} << 20;  // kept for a resend.
};

struct SenderStatus {
  bool running = false;    // a sender thread exists.
  bool connected = false;  // its socket is up and the hello was sent.
  // Batches and events written once each (a resend is counted apart).
  uint64_t events_sent = 0, batches_sent = 0, batches_acked = 0, batches_resent = 0;
  uint64_t batches_dropped = 0;  // unacknowledged past max_unacked_bytes.
  // What became of the events this process recorded: each one recorded is
  // delivered (acknowledged), still pending, or lost, and is said so.
  uint64_t events_recorded = 0;         // taken from the rings into batches, plus the rings' drops.
  uint64_t events_delivered = 0;        // in batches the server acknowledged.
  uint64_t events_resent = 0;           // written again after a reconnect (not in events_sent).
  uint64_t events_ring_dropped = 0;     // lost: the rings were full (never batched).
  uint64_t events_dropped_unacked = 0;  // lost: batches dropped unacknowledged (max_unacked_bytes).
  uint64_t events_unsent_at_stop = 0;   // lost: not acknowledged when the sender stopped.
  uint64_t events_lost() const { return events_ring_dropped + events_dropped_unacked + events_unsent_at_stop; }
  uint64_t events_pending() const {  // recorded, neither delivered nor lost yet.
    const uint64_t settled = events_delivered + events_lost();
    return events_recorded > settled ? events_recorded - settled : 0;
  }
  uint64_t connects = 0;        // successful connections (1 + reconnects).
  uint64_t events_refused = 0;  // events the server refused (IngestAck.refused), summed.
  std::string last_error;       // the latest failure, or empty.
};

// Starts the sender for GlobalStream() (once per process: a second call
// while one runs fails). False with `error` for a bad address; a server that
// is not there yet is not an error (the sender retries).
bool ConnectGlobalStream(const SenderOptions& options, std::string* error);
// Sends what is recorded, waits up to `timeout_ns` for its acknowledgement,
// and stops the sender. Idempotent. Also run at exit when connected.
void DisconnectGlobalStream(uint64_t timeout_ns = 2'000'000'000);
// The running sender's counters, or the last one's once stopped.
SenderStatus GlobalSenderStatus();

namespace internal {
// GlobalStream()'s creation: connects if LIVEPROF_SERVER is set (a bad
// address is said on stderr; the program goes on).
void ConnectFromEnvironment();
}  // namespace internal

}  // namespace liveprof

#endif  // LIVEPROF_INGEST_GLOBAL_SENDER_H_
