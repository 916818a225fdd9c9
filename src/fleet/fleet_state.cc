// FleetState: a job's hosts and ranks from its stream's messages; the pod
// across them; fleet alerts; the view model.
#include "fleet/fleet_state.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/json_writer.h"

namespace liveprof {

namespace {

constexpr size_t kMaxErrorsKept = 8;
constexpr size_t kMaxGapsKept = 4096;     // per rank: skipped seqs still awaited.
constexpr size_t kMaxAlertsPerHost = 16;  // an agent's alerts firing, kept.
constexpr size_t kMaxHostsNamed = 10;     // in the host_gone summary.
constexpr size_t kMaxAgentsKept = 16;     // per host: the incarnations remembered.
constexpr char kSep = '\x1f';

std::string Pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f %%", v);
  return b;
}

}  // namespace

FleetState::FleetState(FleetStateOptions options) : options_(std::move(options)) {
  PodViewOptions po;
  po.view_steps = options_.view_steps;
  po.max_workers = options_.max_workers;
  po.straggler_steps = options_.straggler_steps;
  pod_ = std::make_unique<PodView>(&catalog_, po);
  for (const char* rule : {"straggler", "host_gone", "input_bound"}) {
    FleetAlertState a;
    a.rule = rule;
    alerts_.push_back(std::move(a));
  }
}

FleetState::~FleetState() = default;

FleetHost* FleetState::HostOf(const std::string& host, const std::string& agent, uint64_t stored_unix_ns) {
  if (hosts_.size() >= options_.max_hosts && hosts_.count(host) == 0) {
    ++counts_.hosts_over_cap;
    return nullptr;
  }
  FleetHost& h = hosts_[host];
  if (h.host.empty()) h.host = host;
  if (h.agent != agent) {
    // An agent seen before, not the current one: two live agents call
    // themselves this host (a --fleet-host given twice); counted and shown.
    if (std::find(h.agents_seen.begin(), h.agents_seen.end(), agent) != h.agents_seen.end()) {
      ++h.conflicts;
      ++counts_.host_conflicts;
    } else {
      ++h.agents;
      h.agents_seen.push_back(agent);
      if (h.agents_seen.size() > kMaxAgentsKept) h.agents_seen.erase(h.agents_seen.begin());
    }
    h.agent = agent;
    h.firing.clear();  // another agent: the old one's alerts went with it.
  }
  h.last_seen_unix_ns = std::max(h.last_seen_unix_ns, stored_unix_ns);
  return &h;
}

void FleetState::Apply(std::string_view job, std::string_view subject, std::string_view data, uint64_t stream_seq,
                       uint64_t stored_unix_ns, uint64_t now_unix_ns, bool live) {
  if (stream_seq != 0 && stream_seq <= last_stream_seq_) {
    ++counts_.redelivered;  // applied already (an ack lost, a consumer resumed).
    return;
  }
  last_stream_seq_ = std::max(last_stream_seq_, stream_seq);
  ++counts_.messages;
  FleetDecoded d = DecodeFleetMessage(job, subject, data);
  if (d.reject != FleetReject::kNone) {
    ++counts_.rejected[static_cast<size_t>(d.reject)];
    errors_.push_back(std::move(d.error));
    if (errors_.size() > kMaxErrorsKept) errors_.pop_front();
    return;
  }
  if (FleetStep* s = std::get_if<FleetStep>(&d.message)) {
    if (HostOf(s->host, s->agent, stored_unix_ns)) ApplyStep(*s, now_unix_ns, live);
  } else if (FleetStatus* st = std::get_if<FleetStatus>(&d.message)) {
    if (FleetHost* h = HostOf(st->host, st->agent, stored_unix_ns)) ApplyStatus(*h, *st, stored_unix_ns, live);
  } else if (FleetAlert* a = std::get_if<FleetAlert>(&d.message)) {
    if (FleetHost* h = HostOf(a->host, a->agent, stored_unix_ns)) ApplyAlert(*h, *a);
  }
}

void FleetState::ApplyStep(const FleetStep& s, uint64_t now_unix_ns, bool live) {
  ++counts_.steps;
  const std::string key = s.host + kSep + s.label;
  auto it = ranks_.find(key);
  if (it == ranks_.end()) {
    if (ranks_.size() >= options_.max_workers) {
      ++counts_.ranks_over_cap;
      return;
    }
    FleetRank r;
    r.worker = next_worker_++;
    r.host = s.host;
    r.label = s.label;
    it = ranks_.emplace(key, std::move(r)).first;
  }
  FleetRank& r = it->second;
  r.rank = s.rank;
  if (r.agent != s.agent) {  // a new incarnation: its own sequence from 1.
    if (!r.agent.empty()) ++counts_.restarts;
    r.agent = s.agent;
    ++r.incarnations;
    r.last_seq = 0;
    r.gaps.clear();  // (the old incarnation's: never to come now; still counted missing)
  }
  if (s.seq <= r.last_seq) {
    const auto gap = r.gaps.find(s.seq);
    if (gap == r.gaps.end()) {
      ++r.duplicates;
      ++counts_.duplicate_steps;
      return;
    }
    // A seq skipped earlier comes now (its window was sent again after
    // later ones were stored): applied, no longer missing.
    r.gaps.erase(gap);
    --r.missing;
    --counts_.missing_steps;
    ++r.late;
    ++counts_.late_steps;
  } else {
    // (counted, not walked: a seq from a broken sender may be huge)
    const uint64_t skipped = s.seq - r.last_seq - 1;
    r.missing += skipped;
    counts_.missing_steps += skipped;
    for (uint64_t q = s.seq - std::min<uint64_t>(skipped, kMaxGapsKept); q < s.seq; ++q) r.gaps.insert(q);
    while (r.gaps.size() > kMaxGapsKept) r.gaps.erase(r.gaps.begin());
    r.last_seq = s.seq;
    r.last_step = s.step;  // (a late one does not change the newest)
    r.last_step_ns = s.step_ns;
    r.last_mem_peak_bytes = s.mem_peak_bytes;
    r.last_end_unix_ns = s.end_unix_ns;
  }
  ++r.steps;
  r.mem_peak_bytes = std::max(r.mem_peak_bytes, s.mem_peak_bytes);
  PodCell cell;
  cell.end_ns = s.end_unix_ns;
  cell.step_ns = s.step_ns;
  cell.bucket_ns = s.bucket_ns;
  pod_->AddExternalStep(r.worker, s.host + " · " + s.label, s.step, cell);
  if (s.end_unix_ns > now_unix_ns + options_.gone_after_ns) {
    ++counts_.steps_from_future;  // its host's clock is ahead: no lag from it.
    return;
  }
  if (live) pending_ends_.push_back(s.end_unix_ns);  // its lag: at the first render that shows it.
}

void FleetState::ApplyStatus(FleetHost& h, const FleetStatus& s, uint64_t stored_unix_ns, bool live) {
  ++counts_.statuses;
  // Only the newest status counts (a rebuild replays them in order anyway).
  if (h.has_status && h.status.agent == s.agent && s.sent_unix_ns < h.status.sent_unix_ns) return;
  h.status = s;
  h.ranks_count = s.ranks.size();
  h.status.ranks.clear();  // (a count is what is shown: a hostile status cannot fill memory with names)
  h.has_status = true;
  if (live || h.skew_ns == 0) {
    // (clamped: a broken clock's 2^63 must not overflow)
    constexpr uint64_t kMaxNs = uint64_t{1} << 62;
    h.skew_ns =
        static_cast<int64_t>(std::min(s.sent_unix_ns, kMaxNs)) - static_cast<int64_t>(std::min(stored_unix_ns, kMaxNs));
    const uint64_t abs_skew = h.skew_ns < 0 ? static_cast<uint64_t>(-h.skew_ns) : static_cast<uint64_t>(h.skew_ns);
    h.skewed = abs_skew > options_.skew_warn_ns;
  }
}

void FleetState::ApplyAlert(FleetHost& h, const FleetAlert& a) {
  ++counts_.alerts;
  const std::string key = a.rule + (a.worker.empty() ? "" : " " + a.worker);
  if (a.firing) {
    if (h.firing.size() < kMaxAlertsPerHost || h.firing.count(key) > 0) h.firing[key] = a;
  } else {
    h.firing.erase(key);
  }
}

void FleetState::SetAlert(std::string_view rule, bool firing, std::string summary, std::string host, std::string label,
                          uint64_t now_unix_ns) {
  for (FleetAlertState& a : alerts_) {
    if (a.rule != rule) continue;
    if (a.firing != firing) {
      a.since_unix_ns = now_unix_ns;
      history_.push_back(
          Transition{a.rule, firing ? summary : "cleared (it was: " + a.summary + ")", firing, now_unix_ns});
      if (history_.size() > options_.alert_history) history_.pop_front();
    }
    a.firing = firing;
    if (firing || summary.size() > 0) a.summary = std::move(summary);
    a.host = std::move(host);
    a.label = std::move(label);
  }
}

void FleetState::Tick(uint64_t now_unix_ns) {
  // Hosts: gone when silent, stopped when their last status said so.
  std::vector<std::string> gone;
  counts_.skewed_hosts = 0;
  for (auto& [name, h] : hosts_) {
    const bool stopped = h.has_status && h.status.stopping;
    const bool silent = now_unix_ns > h.last_seen_unix_ns + options_.gone_after_ns;
    const bool now_gone = silent && !stopped;
    if (now_gone && !h.gone) ++h.gone_count;
    if (!now_gone && h.gone) ++h.back_count;
    h.gone = now_gone;
    if (h.gone) gone.push_back(name);
    if (h.skewed) ++counts_.skewed_hosts;
  }
  if (gone.empty()) {
    SetAlert("host_gone", false, "", "", "", now_unix_ns);
  } else {
    std::string list;
    for (size_t i = 0; i < gone.size() && i < kMaxHostsNamed; ++i) list += (i == 0 ? "" : ", ") + gone[i];
    if (gone.size() > kMaxHostsNamed) list += " and " + std::to_string(gone.size() - kMaxHostsNamed) + " more";
    SetAlert("host_gone", true,
             std::to_string(gone.size()) + (gone.size() == 1 ? " host" : " hosts") + " silent for over " +
                 std::to_string(options_.gone_after_ns / 1'000'000'000) + " s: " + list,
             gone.size() == 1 ? gone.front() : "", "", now_unix_ns);
  }

  // The straggler: the pod's, named by host and rank.
  pod_snapshot_ = pod_->Snapshot();
  const PodSnapshot& snap = pod_snapshot_;
  const std::optional<PodStraggler>& s = snap.straggler;
  const FleetRank* straggler = nullptr;
  if (s && s->pct > options_.straggler_pct) {
    for (const auto& [key, r] : ranks_) {
      if (r.worker == s->worker) straggler = &r;
    }
  }
  if (straggler) {
    SetAlert("straggler", true,
             straggler->host + " " + straggler->label + " is " + Pct(s->pct) + " slower than the median over steps " +
                 std::to_string(s->first_step) + "-" + std::to_string(s->last_step),
             straggler->host, straggler->label, now_unix_ns);
  } else {
    SetAlert("straggler", false, "", "", "", now_unix_ns);
  }

  // Input-bound: the rank with the largest input share over its recent steps.
  const PodWorkerSummary* worst = nullptr;
  for (const PodWorkerSummary& w : snap.workers) {
    if (w.input_pct >= options_.input_bound_pct && (worst == nullptr || w.input_pct > worst->input_pct)) worst = &w;
  }
  const FleetRank* input_rank = nullptr;
  uint64_t input_ranks = 0;
  for (const PodWorkerSummary& w : snap.workers) input_ranks += w.input_pct >= options_.input_bound_pct ? 1 : 0;
  if (worst) {
    for (const auto& [key, r] : ranks_) {
      if (r.worker == worst->id) input_rank = &r;
    }
  }
  if (input_rank) {
    SetAlert("input_bound", true,
             std::to_string(input_ranks) + (input_ranks == 1 ? " rank" : " ranks") +
                 " input-bound; the most: " + input_rank->host + " " + input_rank->label + " at " +
                 Pct(worst->input_pct) + " of its step time waiting for input",
             input_rank->host, input_rank->label, now_unix_ns);
  } else {
    SetAlert("input_bound", false, "", "", "", now_unix_ns);
  }
}

std::string_view FleetHostStateName(const FleetHost& h) {
  return h.gone ? "gone" : (h.has_status && h.status.stopping) ? "stopped" : "live";
}

FleetState::Lag FleetState::lag() const {
  Lag l;
  l.samples = lag_total_;
  if (lags_ms_.empty()) return l;
  std::vector<double> v = lags_ms_;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  l.p50_ms = at(0.50);
  l.p99_ms = at(0.99);
  l.max_ms = v.back();
  return l;
}

std::string FleetState::RenderJson(uint64_t now_unix_ns, uint64_t seq) {
  // The steps this render shows for the first time: their lag, end to page.
  const size_t ring = std::max<size_t>(options_.lag_samples, 1);
  for (const uint64_t end : pending_ends_) {
    const double lag_ms = static_cast<double>(now_unix_ns - std::min(now_unix_ns, end)) / 1e6;
    if (lags_ms_.size() < ring) {
      lags_ms_.push_back(lag_ms);
    } else {
      lags_ms_[lag_next_] = lag_ms;
      lag_next_ = (lag_next_ + 1) % ring;
    }
    ++lag_total_;
  }
  pending_ends_.clear();
  JsonWriter w;
  w.BeginObject();
  w.KV("type", "fleet");
  w.KV("v", kFleetProtocolVersion);
  w.KV("seq", seq);
  w.KV("now_unix_ns", now_unix_ns);
  w.KV("gone_after_s", static_cast<double>(options_.gone_after_ns) / 1e9);

  w.Key("hosts");
  w.BeginArray();
  for (const auto& [name, h] : hosts_) {
    w.BeginObject();
    w.KV("host", h.host);
    w.KV("agent", h.agent);
    w.KV("state", FleetHostStateName(h));
    w.KV("last_seen_s_ago", static_cast<double>(now_unix_ns - std::min(now_unix_ns, h.last_seen_unix_ns)) / 1e9);
    w.KV("gone_count", h.gone_count);
    w.KV("back_count", h.back_count);
    w.KV("agents", h.agents);
    w.KV("agent_conflicts", h.conflicts);
    w.KV("clock_skew_ms", static_cast<double>(h.skew_ns) / 1e6);
    w.KV("clock_skewed", h.skewed);
    w.KV("url", h.has_status ? h.status.url : "");
    w.KV("pid", h.status.pid);
    w.KV("ranks", h.ranks_count);
    w.KV("events_consumed", h.status.events_consumed);
    w.KV("events_dropped", h.status.events_dropped);
    w.KV("steps_published", h.status.steps_published);
    w.KV("steps_dropped", h.status.steps_dropped);
    w.KV("outbox", h.status.outbox);
    w.Key("alerts");
    w.BeginArray();
    for (const auto& [key, a] : h.firing) {
      w.BeginObject();
      w.KV("rule", a.rule);
      w.KV("severity", a.severity);
      w.KV("summary", a.summary);
      w.KV("worker", a.worker);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();

  w.Key("ranks");
  w.BeginArray();
  for (const auto& [key, r] : ranks_) {
    w.BeginObject();
    w.KV("worker", r.worker);
    w.KV("host", r.host);
    w.KV("label", r.label);
    w.KV("rank", r.rank);
    w.KV("agent", r.agent);
    w.KV("incarnations", r.incarnations);
    w.KV("steps", r.steps);
    w.KV("last_seq", r.last_seq);
    w.KV("duplicates", r.duplicates);
    w.KV("missing", r.missing);
    w.KV("late", r.late);
    w.KV("last_step", r.last_step);
    w.KV("last_step_ms", static_cast<double>(r.last_step_ns) / 1e6);
    w.KV("last_mem_peak_bytes", r.last_mem_peak_bytes);
    w.KV("mem_peak_bytes", r.mem_peak_bytes);
    w.EndObject();
  }
  w.EndArray();

  w.Key("alerts");
  w.BeginArray();
  for (const FleetAlertState& a : alerts_) {
    w.BeginObject();
    w.KV("rule", a.rule);
    w.KV("state", a.firing ? "firing" : "ok");
    w.KV("summary", a.firing ? a.summary : "");
    w.KV("host", a.host);
    w.KV("label", a.label);
    w.KV("since_unix_ns", a.since_unix_ns);
    w.EndObject();
  }
  w.EndArray();
  w.Key("alert_history");
  w.BeginArray();
  for (const Transition& t : history_) {
    w.BeginObject();
    w.KV("rule", t.rule);
    w.KV("state", t.firing ? "firing" : "resolved");
    w.KV("summary", t.summary);
    w.KV("unix_ns", t.unix_ns);
    w.EndObject();
  }
  w.EndArray();

  const Lag l = lag();
  w.Key("lag");
  w.BeginObject();
  w.KV("p50_ms", l.p50_ms);
  w.KV("p99_ms", l.p99_ms);
  w.KV("max_ms", l.max_ms);
  w.KV("samples", l.samples);
  w.EndObject();

  w.Key("counts");
  w.BeginObject();
  w.KV("messages", counts_.messages);
  w.KV("redelivered", counts_.redelivered);
  w.KV("steps", counts_.steps);
  w.KV("statuses", counts_.statuses);
  w.KV("alerts", counts_.alerts);
  w.KV("duplicate_steps", counts_.duplicate_steps);
  w.KV("missing_steps", counts_.missing_steps);
  w.KV("restarts", counts_.restarts);
  w.KV("late_steps", counts_.late_steps);
  w.KV("ranks_over_cap", counts_.ranks_over_cap);
  w.KV("hosts_over_cap", counts_.hosts_over_cap);
  w.KV("host_conflicts", counts_.host_conflicts);
  w.KV("skewed_hosts", counts_.skewed_hosts);
  w.KV("steps_from_future", counts_.steps_from_future);
  w.Key("rejected");
  w.BeginObject();
  for (size_t i = 1; i < counts_.rejected.size(); ++i) {
    w.KV(FleetRejectName(static_cast<FleetReject>(i)), counts_.rejected[i]);
  }
  w.EndObject();
  w.EndObject();
  w.Key("recent_errors");
  w.BeginArray();
  for (const std::string& e : errors_) w.String(e);
  w.EndArray();

  w.Key("pod");
  pod_snapshot_.WriteJson(w);
  w.EndObject();
  return w.Take();
}

}  // namespace liveprof
