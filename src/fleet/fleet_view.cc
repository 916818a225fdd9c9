// FleetView: the durable pull consumer, the fetch loop, renders, queries.
#include "fleet/fleet_view.h"

#include <nats/nats.h>
#include <pthread.h>

#include <algorithm>

#include "fleet/fleet_metrics.h"
#include "stream/clock.h"

namespace liveprof {

namespace {

FleetQueryReply ErrorReply(int status, const std::string& message) {
  std::string escaped;
  for (const char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
  }
  return FleetQueryReply{
      status, "application/json",
      "{\"type\":\"error\",\"v\":1,\"code\":\"" + std::to_string(status) + "\",\"message\":\"" + escaped + "\"}"};
}

}  // namespace

FleetView::FleetView(Options options) : options_(std::move(options)), state_(options_.state) {}

FleetView::~FleetView() { Stop(); }

bool FleetView::Start(std::string* error) {
  if (!link_.ConnectForJob(options_.job, options_.nats, "liveprof fleet " + options_.job, error)) return false;
  started_unix_ns_ = UnixNowNs();
  started_ = true;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "liveprof fleetv");  // (its CPU on the Sources page)
    Run();
  });
  return true;
}

void FleetView::Stop() {
  if (!started_) return;
  started_ = false;
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  if (sub_ != nullptr) natsSubscription_Destroy(sub_);
  sub_ = nullptr;
  link_.Close();
}

std::shared_ptr<const std::string> FleetView::Latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

std::shared_ptr<const std::string> FleetView::LatestMetrics() const {
  std::lock_guard lock(mu_);
  return latest_metrics_;
}

FleetView::Stats FleetView::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.connected = link_.connected();
  s.disconnects = link_.disconnects();
  s.reconnects = link_.reconnects();
  return s;
}

FleetState::Lag FleetView::lag() const {
  std::lock_guard lock(state_mu_);
  return state_.lag();
}

FleetCounts FleetView::counts() const {
  std::lock_guard lock(state_mu_);
  return state_.counts();
}

bool FleetView::Bind(bool fresh) {
  if (sub_ != nullptr) {
    natsSubscription_Destroy(sub_);
    sub_ = nullptr;
  }
  std::string error;
  if (!link_.EnsureStream(options_.job, options_.stream_max_age_s, options_.stream_max_bytes, &error)) return false;
  const std::string stream = FleetStreamName(options_.job);
  const std::string subject = "liveprof." + options_.job + ".>";
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  if (fresh) {
    // A new consumer from rebuild_seconds back: this view's picture is
    // rebuilt from the stream, whatever an earlier one had acknowledged.
    js_DeleteConsumer(link_.js(), stream.c_str(), options_.durable.c_str(), nullptr, &jerr);
    jerr = static_cast<jsErrCode>(0);
    jsConsumerConfig& c = so.Config;
    c.Durable = options_.durable.c_str();
    c.DeliverPolicy = js_DeliverByStartTime;
    const uint64_t now = UnixNowNs();
    const uint64_t back = static_cast<uint64_t>(std::max<int64_t>(options_.rebuild_seconds, 0)) * 1'000'000'000ull;
    c.OptStartTime = static_cast<int64_t>(now > back ? now - back : 1);
    c.AckPolicy = js_AckAll;
    c.AckWait = int64_t{30} * 1'000'000'000;
    c.MaxAckPending = 1 << 20;
  } else {
    so.Consumer = options_.durable.c_str();  // the existing one, where it stands.
  }
  const natsStatus s =
      js_PullSubscribe(&sub_, link_.js(), subject.c_str(), options_.durable.c_str(), nullptr, &so, &jerr);
  const bool ok = s == NATS_OK;
  std::lock_guard lock(mu_);
  stats_.consuming = ok;
  return ok;
}

void FleetView::Render() {
  const uint64_t now = UnixNowNs();
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const std::string> rendered, metrics;
  {
    std::lock_guard lock(state_mu_);
    state_.Tick(now);
    rendered = std::make_shared<const std::string>(state_.RenderJson(now, ++seq_));
    metrics = std::make_shared<const std::string>(RenderFleetPrometheus(state_, link_.connected()));
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard lock(mu_);
  latest_ = std::move(rendered);
  latest_metrics_ = std::move(metrics);
  ++stats_.renders;
  stats_.last_render_ms = ms;
}

void FleetView::Run() {
  bool bound = false, bound_once = false;
  int errors_in_row = 0;
  auto next_render = std::chrono::steady_clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    if (std::chrono::steady_clock::now() >= next_render) {
      Render();
      next_render = std::chrono::steady_clock::now() + options_.render_period;
    }
    if (!bound) {
      if (link_.connected()) bound = Bind(/*fresh=*/!bound_once);
      if (bound) {
        bound_once = true;
        errors_in_row = 0;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
    }
    natsMsgList list{};
    jsErrCode jerr = static_cast<jsErrCode>(0);
    const int64_t wait_ms = std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(next_render - std::chrono::steady_clock::now()).count(),
        10, 100);
    const natsStatus s = natsSubscription_Fetch(&list, sub_, options_.fetch_batch, wait_ms, &jerr);
    if (s == NATS_TIMEOUT) {
      errors_in_row = 0;
      continue;
    }
    if (s != NATS_OK) {
      {
        std::lock_guard lock(mu_);
        ++stats_.fetch_errors;
      }
      // A reconnect is waited for; a consumer gone (a server that lost its
      // store) is made again after a few failures in a row.
      if (++errors_in_row >= 20 && link_.connected()) {
        // Where it stood, else afresh: what was applied already is known by
        // its stream sequence and skipped.
        bound = Bind(false);
        if (!bound && Bind(true)) {  // a new consumer, perhaps of a new stream: its sequences start again.
          bound = true;
          std::lock_guard lock(state_mu_);
          state_.ForgetStreamSequence();
        }
        errors_in_row = 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    errors_in_row = 0;
    {
      std::lock_guard lock(state_mu_);
      const uint64_t now = UnixNowNs();
      for (int i = 0; i < list.Count; ++i) {
        natsMsg* m = list.Msgs[i];
        jsMsgMetaData* meta = nullptr;
        uint64_t stream_seq = 0, stored = now;
        if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
          stream_seq = meta->Sequence.Stream;
          stored = static_cast<uint64_t>(meta->Timestamp);
          jsMsgMetaData_Destroy(meta);
        }
        const char* subj = natsMsg_GetSubject(m);
        const char* data = natsMsg_GetData(m);
        state_.Apply(options_.job, subj == nullptr ? "" : subj,
                     std::string_view(data == nullptr ? "" : data, static_cast<size_t>(natsMsg_GetDataLength(m))),
                     stream_seq, stored, now, stored >= started_unix_ns_);
      }
    }
    {
      std::lock_guard lock(mu_);
      stats_.fetched += static_cast<uint64_t>(list.Count);
    }
    // AckAll: the last acknowledges the batch.
    if (list.Count > 0 && natsMsg_Ack(list.Msgs[list.Count - 1], nullptr) == NATS_OK) {
      std::lock_guard lock(mu_);
      ++stats_.acked_batches;
    }
    natsMsgList_Destroy(&list);
  }
  Render();
}

FleetQueryReply FleetView::Query(const std::string& host, const std::string& target) {
  {
    std::lock_guard lock(mu_);
    ++stats_.queries;
  }
  auto fail = [&](int status, const std::string& message) {
    std::lock_guard lock(mu_);
    ++stats_.query_errors;
    return ErrorReply(status, message);
  };
  if (!link_.connected()) return fail(503, "the fleet view is not connected to NATS now");
  const std::string subject = FleetQuerySubject(options_.job, host);
  natsMsg* reply = nullptr;
  const natsStatus s = natsConnection_Request(&reply, link_.connection(), subject.c_str(), target.data(),
                                              static_cast<int>(target.size()), options_.query_timeout_ms);
  if (s == NATS_NO_RESPONDERS) return fail(503, "no agent of host '" + host + "' answers (gone, or not this job's)");
  if (s == NATS_TIMEOUT)
    return fail(504, "host '" + host + "' did not answer within " + std::to_string(options_.query_timeout_ms) + " ms");
  if (s != NATS_OK) return fail(502, std::string("NATS request to host '") + host + "': " + natsStatus_GetText(s));
  FleetQueryReply r;
  const char* v = nullptr;
  if (natsMsgHeader_Get(reply, kQueryStatusHeader, &v) == NATS_OK && v != nullptr) r.status = std::atoi(v);
  if (natsMsgHeader_Get(reply, kQueryTypeHeader, &v) == NATS_OK && v != nullptr) r.content_type = v;
  const char* data = natsMsg_GetData(reply);
  r.body.assign(data == nullptr ? "" : data, static_cast<size_t>(natsMsg_GetDataLength(reply)));
  natsMsg_Destroy(reply);
  // What goes back to a browser from this origin is what an agent answers:
  // JSON with an HTTP status, nothing else (any NATS client could reply).
  if (r.status < 200 || r.status > 599) return fail(502, "host '" + host + "' answered without a valid status");
  if (!r.content_type.starts_with("application/json")) {
    return fail(502, "host '" + host + "' answered with a content type other than JSON");
  }
  return r;
}

}  // namespace liveprof
