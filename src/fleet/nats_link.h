// NatsLink: one connection to NATS (cnats) with its JetStream context, for
// the agent and the fleet view. It reconnects by itself, forever (a
// nats-server restart is a pause, not an end), and starts even when the
// server is not up yet (cnats retries in the background).
//
// The URL may carry credentials (nats://user:password@host:port,
// nats://token@host:port), or a creds file may be given: neither is ever
// printed; RedactNatsUrl() is what may be shown.
#ifndef LIVEPROF_FLEET_NATS_LINK_H_
#define LIVEPROF_FLEET_NATS_LINK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

// cnats' types, declared as nats.h does (only the .cc files include it).
typedef struct __natsConnection natsConnection;
typedef struct __natsSubscription natsSubscription;
typedef struct __natsMsg natsMsg;
typedef struct __jsCtx jsCtx;
struct jsPubAckErr;

namespace liveprof {

struct NatsOptions {
  std::string url = "nats://127.0.0.1:4222";
  std::string creds_file;  // a NATS .creds file (JWT and seed); "" none.
  std::string name;        // the connection's name, as nats-server shows it.
  int64_t connect_timeout_ms = 2000;
};

// The URL with any user, password or token replaced by "***".
std::string RedactNatsUrl(std::string_view url);

// The job's stream: "LIVEPROF_<job>", subjects "liveprof.<job>.>".
std::string FleetStreamName(std::string_view job);

class NatsLink {
 public:
  NatsLink() = default;
  ~NatsLink();  // closes.
  NatsLink(const NatsLink&) = delete;
  NatsLink& operator=(const NatsLink&) = delete;

  // Connects (or, with the server away, keeps trying in the background):
  // false only for what retrying cannot mend (a bad URL, a creds file that
  // does not load); *error says what, the URL redacted.
  bool Connect(const NatsOptions& options, std::string* error);
  // Connect() for a job's agent or fleet view: the job name checked first
  // (CheckJobName), `options.name` defaulted to `name`.
  bool ConnectForJob(std::string_view job, NatsOptions options, std::string_view name, std::string* error);
  // Closes and waits (up to 5 s) until cnats has made its last callback
  // into this object. Owner's thread.
  void Close();

  // (Close() ends it: callers on other threads are stopped before that.)
  natsConnection* connection() const { return nc_.load(std::memory_order_acquire); }
  jsCtx* js() const { return js_; }
  // Connected now (not connecting, reconnecting or closed). Any thread.
  bool connected() const;
  uint64_t disconnects() const { return disconnects_.load(std::memory_order_relaxed); }
  uint64_t reconnects() const { return reconnects_.load(std::memory_order_relaxed); }
  // Asynchronous JetStream publishes that failed (no ack, an error ack),
  // since the start: a publisher that sees it move sends its window again.
  uint64_t publish_errors() const { return publish_errors_.load(std::memory_order_relaxed); }

  // Makes sure the job's stream exists (file storage: it outlives a
  // nats-server restart; discard old past max_age or max_bytes; a two-minute
  // window in which a message id seen before is dropped as a duplicate).
  bool EnsureStream(std::string_view job, int64_t max_age_s, int64_t max_bytes, std::string* error);

 private:
  static void OnDisconnected(natsConnection* nc, void* self);
  static void OnReconnected(natsConnection* nc, void* self);
  static void OnClosed(natsConnection* nc, void* self);
  static void OnConnected(natsConnection* nc, void* self);  // (a late first connect)
  static void OnPublishError(jsCtx* js, ::jsPubAckErr* pae, void* self);

  std::atomic<natsConnection*> nc_{nullptr};
  jsCtx* js_ = nullptr;
  std::atomic<uint64_t> disconnects_{0}, reconnects_{0}, publish_errors_{0};
  // cnats calls back on its own thread, after natsConnection_Close too:
  // Close() waits for the closed callback, the last one, before this goes.
  std::mutex closed_mu_;
  std::condition_variable closed_cv_;
  bool closed_ = false;
};

}  // namespace liveprof

#endif  // LIVEPROF_FLEET_NATS_LINK_H_
