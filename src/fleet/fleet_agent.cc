// FleetAgent: outbox, publish windows, status, alerts, viewport queries.
#include "fleet/fleet_agent.h"

#include <nats/nats.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>

#include "base/json_writer.h"
#include "stream/clock.h"

namespace liveprof {

namespace {

std::string NewAgentId() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ HostNowNs();
  char b[24];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

}  // namespace

FleetAgent::FleetAgent(Options options) : options_(std::move(options)), agent_id_(NewAgentId()) {
  if (options_.host.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) options_.host = host;
  }
  options_.publish_window = std::max<size_t>(options_.publish_window, 1);
  stats_.agent = agent_id_;
}

FleetAgent::~FleetAgent() { Stop(); }

bool FleetAgent::Start(std::string* error) {
  if (!link_.ConnectForJob(options_.job, options_.nats, "liveprof agent " + options_.host, error)) return false;
  started_unix_ns_ = UnixNowNs();
  const std::string subject = FleetQuerySubject(options_.job, options_.host);
  if (natsConnection_Subscribe(&query_sub_, link_.connection(), subject.c_str(), &FleetAgent::OnQuery, this) !=
      NATS_OK) {
    *error = "NATS: cannot subscribe to " + subject;
    return false;
  }
  // Stop() waits for this: no query handler runs after it.
  natsSubscription_SetOnCompleteCB(query_sub_, &FleetAgent::OnQueriesDone, this);
  started_ = true;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "liveprof fleet");  // (its CPU on the Sources page)
    Run();
  });
  return true;
}

void FleetAgent::Stop(std::chrono::milliseconds drain) {
  if (!started_) return;
  started_ = false;
  drain_ = drain;
  stop_.store(true, std::memory_order_release);  // (drain_ is read after it)
  if (thread_.joinable()) thread_.join();
  if (query_sub_ != nullptr) {
    // A query being answered on cnats' thread finishes first (it reads the
    // owner's trace store: the owner may go once Stop returns).
    if (natsSubscription_Unsubscribe(query_sub_) == NATS_OK) {
      std::unique_lock lock(mu_);
      queries_done_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return queries_done_; });
    }
    natsSubscription_Destroy(query_sub_);
    query_sub_ = nullptr;
  }
  link_.Close();
}

void FleetAgent::AddAlerts(const std::vector<AlertEvent>& events) {
  if (events.empty()) return;
  std::lock_guard lock(mu_);
  alerts_in_.insert(alerts_in_.end(), events.begin(), events.end());
}

FleetAgent::Stats FleetAgent::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.connected = link_.connected();
  s.disconnects = link_.disconnects();
  s.reconnects = link_.reconnects();
  return s;
}

std::string FleetAgent::StatusJson() const {
  const Stats s = stats();
  JsonWriter w;
  w.BeginObject();
  w.KV("type", "fleet_agent");
  w.KV("v", kFleetProtocolVersion);
  w.KV("nats", RedactNatsUrl(options_.nats.url));
  w.KV("job", options_.job);
  w.KV("host", options_.host);
  w.KV("agent", s.agent);
  w.KV("connected", s.connected);
  w.KV("steps_queued", s.steps_queued);
  w.KV("steps_published", s.steps_published);
  w.KV("steps_dropped", s.steps_dropped);
  w.KV("source_dropped", s.source_dropped);
  w.KV("alerts_published", s.alerts_published);
  w.KV("alerts_dropped", s.alerts_dropped);
  w.KV("statuses_published", s.statuses_published);
  w.KV("outbox", s.outbox);
  w.KV("outbox_max_seen", s.outbox_max_seen);
  w.KV("max_outbox", static_cast<uint64_t>(options_.max_outbox));
  w.KV("windows_resent", s.windows_resent);
  w.KV("disconnects", s.disconnects);
  w.KV("reconnects", s.reconnects);
  w.KV("queries", s.queries);
  w.EndObject();
  return w.Take();
}

void FleetAgent::Enqueue(Pending p) {
  // Past the cap the oldest goes, whatever it is, counted (the newest steps
  // are what a live view wants).
  if (outbox_.size() >= options_.max_outbox) {
    std::lock_guard lock(mu_);
    if (outbox_.front().kind == Pending::kStep) ++stats_.steps_dropped;
    if (outbox_.front().kind == Pending::kAlert) ++stats_.alerts_dropped;
    outbox_.pop_front();  // (a status is sent again every period: not counted)
  }
  outbox_.push_back(std::move(p));
}

void FleetAgent::QueueStatus(bool stopping, uint64_t now_unix_ns) {
  FleetStatus st;
  st.job = options_.job;
  st.host = options_.host;
  st.agent = agent_id_;
  st.pid = getpid();
  st.started_unix_ns = started_unix_ns_;
  st.sent_unix_ns = now_unix_ns;
  st.url = options_.url;
  st.ranks = ranks_;
  if (options_.totals) options_.totals(&st.events_consumed, &st.events_dropped);
  {
    std::lock_guard lock(mu_);
    st.steps_published = stats_.steps_published;
    st.steps_dropped = stats_.steps_dropped + stats_.source_dropped;
  }
  st.outbox = outbox_.size();
  st.stopping = stopping;
  Enqueue({FleetStatusSubject(options_.job, options_.host), agent_id_ + "/status/" + std::to_string(++status_seq_),
           EncodeFleetStatus(st), Pending::kStatus});
}

bool FleetAgent::PublishWindow() {
  jsCtx* js = link_.js();
  const uint64_t errors_before = link_.publish_errors();
  const size_t n = std::min(outbox_.size(), options_.publish_window);
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) {
    const Pending& p = outbox_[i];
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = p.msg_id.c_str();
    ok = js_PublishAsync(js, p.subject.c_str(), p.data.data(), static_cast<int>(p.data.size()), &po) == NATS_OK;
  }
  jsPubOptions wait;
  jsPubOptions_Init(&wait);
  wait.MaxWait = 5000;
  const bool completed = js_PublishAsyncComplete(js, &wait) == NATS_OK;
  if (!ok || !completed || link_.publish_errors() != errors_before) {
    // Some of the window may be in the stream: all of it goes again, and
    // JetStream drops what it has (the message ids). Nothing pending stays.
    natsMsgList pending{};
    if (js_PublishAsyncGetPendingList(&pending, js) == NATS_OK) natsMsgList_Destroy(&pending);
    std::lock_guard lock(mu_);
    ++stats_.windows_resent;
    return false;
  }
  uint64_t steps = 0, alerts = 0, statuses = 0;
  for (size_t i = 0; i < n; ++i) {
    steps += outbox_.front().kind == Pending::kStep ? 1 : 0;
    alerts += outbox_.front().kind == Pending::kAlert ? 1 : 0;
    statuses += outbox_.front().kind == Pending::kStatus ? 1 : 0;
    outbox_.pop_front();
  }
  std::lock_guard lock(mu_);
  stats_.steps_published += steps;
  stats_.alerts_published += alerts;
  stats_.statuses_published += statuses;
  stats_.outbox = outbox_.size();
  return true;
}

void FleetAgent::Run() {
  bool stream_ready = false;
  std::chrono::steady_clock::time_point next_status{};
  std::chrono::steady_clock::time_point drain_until{};
  bool stopping = false;
  for (;;) {
    // (read before the steps are taken: the owner stops the pipeline first,
    // so the round that sees the stop takes its last steps)
    const bool stop_now = stop_.load(std::memory_order_acquire);
    const uint64_t now_unix = UnixNowNs();
    // Steps: the pipeline's monotonic ends onto the wall clock.
    if (options_.take_steps) {
      uint64_t dropped = 0;
      std::vector<PodNewStep> steps = options_.take_steps(&dropped);
      const int64_t mono_to_unix = static_cast<int64_t>(now_unix) - static_cast<int64_t>(HostNowNs());
      uint64_t agent_dropped = 0;
      if (!steps.empty() && options_.totals) {
        uint64_t consumed = 0;
        options_.totals(&consumed, &agent_dropped);
      }
      for (const PodNewStep& ns : steps) {
        auto it = std::find_if(seqs_.begin(), seqs_.end(), [&](const auto& e) { return e.first == ns.label; });
        if (it == seqs_.end()) {
          seqs_.emplace_back(ns.label, 0);
          it = seqs_.end() - 1;
          ranks_.push_back(ns.label);
        }
        FleetStep s;
        s.job = options_.job;
        s.host = options_.host;
        s.agent = agent_id_;
        s.label = ns.label;
        s.rank = RankOfLabel(ns.label);
        s.seq = ++it->second;
        s.step = ns.step_num;
        s.end_unix_ns =
            ns.cell.end_ns == 0 ? now_unix : static_cast<uint64_t>(static_cast<int64_t>(ns.cell.end_ns) + mono_to_unix);
        s.step_ns = ns.cell.step_ns;
        s.bucket_ns = ns.cell.bucket_ns;
        s.mem_peak_bytes = ns.cell.mem_peak_bytes;
        s.agent_dropped = agent_dropped;
        s.sent_unix_ns = now_unix;
        Enqueue({FleetStepSubject(options_.job, options_.host, s),
                 agent_id_ + "/" + RankToken(s) + "/" + std::to_string(s.seq), EncodeFleetStep(s), Pending::kStep});
      }
      std::lock_guard lock(mu_);
      stats_.steps_queued += steps.size();
      stats_.source_dropped = dropped;
    }
    std::vector<AlertEvent> alerts;
    {
      std::lock_guard lock(mu_);
      alerts.swap(alerts_in_);
    }
    for (const AlertEvent& e : alerts) {
      FleetAlert a;
      a.job = options_.job;
      a.host = options_.host;
      a.agent = agent_id_;
      a.rule = e.rule;
      a.severity = AlertSeverityName(e.severity);
      a.summary = e.summary;
      a.worker = e.worker;
      a.firing = e.state == AlertEventState::kFiring;
      a.unix_ns = now_unix;
      Enqueue({FleetAlertSubject(options_.job, options_.host), agent_id_ + "/alert/" + std::to_string(++alert_seq_),
               EncodeFleetAlert(a), Pending::kAlert});
    }
    if (stop_now && !stopping) {
      stopping = true;
      QueueStatus(/*stopping=*/true, now_unix);
      drain_until = std::chrono::steady_clock::now() + drain_;
    } else if (!stopping && std::chrono::steady_clock::now() >= next_status) {
      QueueStatus(/*stopping=*/false, now_unix);
      next_status = std::chrono::steady_clock::now() + options_.status_period;  // (not the wall clock: it may step)
    }
    {
      std::lock_guard lock(mu_);
      stats_.outbox = outbox_.size();
      stats_.outbox_max_seen = std::max<uint64_t>(stats_.outbox_max_seen, outbox_.size());
    }

    bool sent_all = outbox_.empty();
    if (link_.connected() && !outbox_.empty()) {
      std::string error;
      if (!stream_ready)
        stream_ready = link_.EnsureStream(options_.job, options_.stream_max_age_s, options_.stream_max_bytes, &error);
      // Window after window until the outbox is empty or one fails.
      while (stream_ready && !outbox_.empty() && PublishWindow()) {
      }
      sent_all = outbox_.empty();
      // A failed window: the stream is checked again before the next (a
      // server that lost its store has none).
      if (!sent_all) stream_ready = false;
      if (!stream_ready || !sent_all)
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // NATS trouble: back off.
    }
    if (stopping && (sent_all || std::chrono::steady_clock::now() >= drain_until)) break;
    std::this_thread::sleep_for(options_.poll_period);
  }
  std::lock_guard lock(mu_);
  stats_.outbox = outbox_.size();
}

void FleetAgent::OnQueriesDone(void* closure) {
  auto* self = static_cast<FleetAgent*>(closure);
  std::lock_guard lock(self->mu_);
  self->queries_done_ = true;
  self->queries_done_cv_.notify_all();
}

void FleetAgent::OnQuery(natsConnection* nc, natsSubscription*, natsMsg* msg, void* closure) {
  auto* self = static_cast<FleetAgent*>(closure);
  const char* reply_to = natsMsg_GetReply(msg);
  if (reply_to == nullptr || *reply_to == '\0') {
    natsMsg_Destroy(msg);
    return;
  }
  const std::string target(natsMsg_GetData(msg) == nullptr ? "" : natsMsg_GetData(msg),
                           static_cast<size_t>(natsMsg_GetDataLength(msg)));
  FleetQueryReply r;
  if (!self->options_.query) {
    r = FleetQueryReply{501, "application/json",
                        "{\"type\":\"error\",\"v\":1,\"code\":\"501\",\"message\":\"this agent answers no queries\"}"};
  } else {
    r = self->options_.query(target);
  }
  const int64_t max_payload = natsConnection_GetMaxPayload(nc);
  if (static_cast<int64_t>(r.body.size()) > max_payload - 1024) {
    r = FleetQueryReply{413, "application/json",
                        "{\"type\":\"error\",\"v\":1,\"code\":\"413\",\"message\":\"the answer (" +
                            std::to_string(r.body.size()) + " bytes) is over NATS' max payload (" +
                            std::to_string(max_payload) + "): ask for a narrower range or fewer pixels\"}"};
  }
  natsMsg* out = nullptr;
  if (natsMsg_Create(&out, reply_to, nullptr, r.body.data(), static_cast<int>(r.body.size())) == NATS_OK) {
    natsMsgHeader_Set(out, kQueryStatusHeader, std::to_string(r.status).c_str());
    natsMsgHeader_Set(out, kQueryTypeHeader, r.content_type.c_str());
    natsConnection_PublishMsg(nc, out);
    natsMsg_Destroy(out);
  }
  natsMsg_Destroy(msg);
  std::lock_guard lock(self->mu_);
  ++self->stats_.queries;
}

}  // namespace liveprof
