// IngestSender: the sender thread behind ConnectGlobalStream()
// (global_sender.h), for one stream. Internal to liveprof_ingest_client:
// ingest_sender.cc is the thread (drain, batch, send, acks, pings, capture
// controls), global_sender.cc the process-wide one (connect, disconnect,
// fork, LIVEPROF_SERVER).
#ifndef LIVEPROF_INGEST_INGEST_SENDER_H_
#define LIVEPROF_INGEST_INGEST_SENDER_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/self_cost.h"
#include "ingest/global_sender.h"
#include "ingest/ingest_endpoint.h"
#include "ingest/ingest_frames.h"
#include "producers/gpu_activity.h"
#include "stream/clock.h"
#include "stream/drain_loop.h"
#include "stream/liveprof_generated.h"

namespace liveprof {

// The sender for one stream: a thread that drains it (DrainLoop::RunOnce on
// its own thread), batches, sends, reads acks, pings and controls.
class IngestSender {
 public:
  IngestSender(Stream& stream, SenderOptions options, IngestEndpoint endpoint)
      : stream_(stream),
        options_(std::move(options)),
        endpoint_(std::move(endpoint)),
        drain_(stream, DrainOptions(), [this](const Batch& b) { OnBatch(b); }) {
    std::random_device rd;
    session_ = (uint64_t{rd()} << 32) ^ rd() ^ HostNowNs();
    status_.running = true;
  }
  ~IngestSender() { Stop(0); }

  void Start() {
    owner_pid_ = ::getpid();
    thread_ = std::thread([this] { Run(); });
  }
  // False in a child forked after Start: the thread did not come along.
  bool InOwner() const { return ::getpid() == owner_pid_; }
  // In a child forked after Start (the one thread there, its own sender's
  // not started): closes the child's copy of the connection, so that the
  // server sees it close when the parent's does. Nothing else is touched.
  void CloseInForkChild() {
    const int fd = fork_fd_.load(std::memory_order_acquire);
    if (fd >= 0) ::close(fd);
  }

  // Asks the thread to send what is recorded and to wait for its ack, then
  // joins it.
  void Stop(uint64_t timeout_ns) {
    if (!thread_.joinable()) return;
    const uint64_t now = HostNowNs();
    stop_deadline_ns_.store(timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns, std::memory_order_relaxed);
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }

  std::string address() const { return endpoint_.ToString(); }

  SenderStatus Status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  struct Pending {
    uint64_t seq = 0;
    std::vector<Event> definitions;  // kNameDef / kTrackDef of the drain rounds it covers.
    std::vector<Event> events;
    uint64_t dropped = 0;      // events the rings dropped meanwhile.
    uint64_t progress_ns = 0;  // IngestBatch.progress_ns: DrainLoop::complete_through_ns().
    SelfCostSample cost;       // IngestBatch.cost; at_ns 0: none.
    bool stopping = false;     // IngestBatch.stopping: sealed after Stop().
  };

  static DrainLoop::Options DrainOptions() {
    DrainLoop::Options o;
    o.reorder.window_ns = 20'000'000;  // the server reorders again: keep latency low here.
    // Nor wait here for a source that says it is behind (CUPTI): its events
    // go out as they come, and the batches carry its progress
    // (IngestBatch.progress_ns), which the server waits for.
    o.reorder.declared_max_wait_ns = o.reorder.window_ns;
    return o;
  }

  void Run();
  void OnBatch(const Batch& b);
  void Seal(uint64_t now, bool stopping);
  void TrimUnacked();
  bool Connect(uint64_t now);
  void Disconnect(const std::string& why);
  void CloseSocket();  // fd_ (and fork_fd_) closed and -1.
  void SendDefinitions();
  void FillOut();
  bool ReadFrames(uint64_t now);
  void Refused(const wire::IngestAck& a);
  void Apply(const wire::IngestControl& c, uint64_t now);
  void ExpireControl(uint64_t now);
  void Restore();
  void AppendState(uint32_t control_id);
  void StateGpuChange();
  bool WriteOut();
  void SetError(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    status_.last_error = e;
  }

  Stream& stream_;
  const SenderOptions options_;
  const IngestEndpoint endpoint_;
  DrainLoop drain_;
  uint64_t session_ = 0;
  std::thread thread_;
  pid_t owner_pid_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> stop_deadline_ns_{0};

  // The thread's.
  Pending open_;                 // being filled by drain rounds.
  std::deque<Pending> unacked_;  // sealed, oldest first; sent or not.
  size_t unacked_events_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t next_send_seq_ = 1;     // the oldest batch not yet written on this connection.
  uint64_t last_written_seq_ = 0;  // on any connection: a batch at or below was sent before.
  uint64_t last_dropped_total_ = 0;
  uint64_t carried_dropped_ = 0;  // events of batches dropped unacknowledged.
  uint64_t last_seal_ns_ = 0;
  uint64_t next_cost_ns_ = 0;        // the next read of liveprof's own cost (/proc/self), once a second,
  bool cost_read_at_stop_ = false;   // and the last, at the stop.
  uint64_t sealed_progress_ns_ = 0;  // the last batch's progress_ns,
  uint64_t last_batch_ns_ = 0;       // and when it was sealed.
  int fd_ = -1;
  // The socket, from its creation to just before its close (CloseInForkChild
  // reads it in a fork's child: never a number the parent closed and may
  // have reused).
  std::atomic<int> fork_fd_{-1};
  uint64_t next_connect_ns_ = 0;
  bool tried_at_stop_ = false;  // one more attempt once stopping, whatever the period.
  bool said_refused_ = false;   // the first refusal was said on stderr (the rest are counted).
  FrameSplitter splitter_;
  std::string out_;
  size_t out_pos_ = 0;
  // Capture on demand: what was in force before the control, and its end.
  struct Settings {
    int level;
    bool python;
    bool gpu_turned;        // a control turned the GPU producer (gpu_activity.h),
    bool gpu;               // which was on or off before;
    bool gpu_level_turned;  // a control switched its level,
    CuptiLevel gpu_level;   // which was this before.
  };
  // What the last IngestState said of the GPU producer: a change (a
  // CuptiSource started or stopped, or turned by the program) is said anew.
  bool stated_gpu_ = false, stated_gpu_available_ = false;
  CuptiLevel stated_gpu_level_ = CuptiLevel::kDefault;
  bool control_active_ = false;
  Settings before_{};
  uint64_t control_until_ns_ = 0;
  uint32_t control_id_ = 0;

  mutable std::mutex mu_;  // guards status_.
  SenderStatus status_;
};

}  // namespace liveprof

#endif  // LIVEPROF_INGEST_INGEST_SENDER_H_
