#include "fleet/fleet_metrics.h"

#include <string_view>
#include <unordered_map>

#include "base/prometheus_text.h"

namespace liveprof {

std::string RenderFleetPrometheus(const FleetState& state, bool nats_connected) {
  std::string out;
  out.reserve(2048 + 96 * state.hosts().size());
  PrometheusText w(&out);
  w.Gauge("liveprof_fleet_nats_connected", "1 while the fleet view is connected to NATS", nats_connected ? 1 : 0);

  constexpr std::string_view kStates[] = {"live", "gone", "stopped"};
  std::unordered_map<std::string_view, uint64_t> by_state;
  for (const auto& [name, h] : state.hosts()) ++by_state[FleetHostStateName(h)];
  w.Family("liveprof_fleet_hosts", "gauge",
           "the job's hosts (agents) by state: live, gone (silent), stopped (cleanly)");
  for (const std::string_view st : kStates) w.Sample("liveprof_fleet_hosts", {{"state", st}}, by_state[st]);
  // A state set: each host's three states, 1 for the one it is in.
  w.Family("liveprof_fleet_host_state", "gauge",
           "each host's state, 1 for the one it is in: live, gone (its agent silent), stopped (cleanly)");
  for (const auto& [name, h] : state.hosts()) {
    const std::string_view now = FleetHostStateName(h);
    for (const std::string_view st : kStates) {
      w.Sample("liveprof_fleet_host_state", {{"host", h.host}, {"state", st}}, uint64_t{st == now ? 1u : 0u});
    }
  }
  w.Gauge("liveprof_fleet_ranks", "ranks (training processes) of the job the fleet view follows",
          static_cast<double>(state.ranks().size()));

  w.Family("liveprof_fleet_alert_firing", "gauge",
           "1 while a fleet alert fires: straggler (the slowest rank, by host and rank), host_gone, input_bound "
           "(a rank's steps input-bound); host and rank say which");
  for (const FleetAlertState& a : state.alerts()) {
    w.Sample("liveprof_fleet_alert_firing", {{"rule", a.rule}, {"host", a.host}, {"rank", a.label}},
             uint64_t{a.firing ? 1u : 0u});
  }

  // Each rank's input share and slowdown over its recent steps: stable
  // series per rank, for rules that must hold for minutes (the alert gauge's
  // labels follow the worst rank, which may change).
  std::unordered_map<uint32_t, const PodWorkerSummary*> by_worker;
  for (const PodWorkerSummary& w : state.pod_snapshot().workers) by_worker[w.id] = &w;
  w.Family("liveprof_fleet_rank_input_ratio", "gauge",
           "a rank's share of step time waiting for input over its recent steps (ratio of sums)");
  for (const auto& [key, r] : state.ranks()) {
    const auto it = by_worker.find(r.worker);
    if (it != by_worker.end()) {
      w.Sample("liveprof_fleet_rank_input_ratio", {{"host", r.host}, {"rank", r.label}}, it->second->input_pct / 100);
    }
  }
  w.Family("liveprof_fleet_rank_slowdown_ratio", "gauge",
           "how much slower a rank's recent steps were than the median of the same steps (0.2: 20 % slower)");
  for (const auto& [key, r] : state.ranks()) {
    const auto it = by_worker.find(r.worker);
    if (it != by_worker.end() && it->second->compared_steps > 0) {
      w.Sample("liveprof_fleet_rank_slowdown_ratio", {{"host", r.host}, {"rank", r.label}}, it->second->lag_pct / 100);
    }
  }

  const FleetCounts& c = state.counts();
  w.Counter("liveprof_fleet_messages_total", "messages taken from the job's stream", c.messages);
  w.Counter("liveprof_fleet_step_summaries_total", "step summaries applied (one per rank and step)", c.steps);
  w.Counter("liveprof_fleet_duplicate_step_summaries_total",
            "step summaries of a sequence number already applied: not applied again", c.duplicate_steps);
  w.Gauge("liveprof_fleet_missing_step_summaries",
          "sequence numbers skipped and not come since: summaries lost before the stream",
          static_cast<double>(c.missing_steps));
  w.Family("liveprof_fleet_rejected_messages_total", "counter", "messages not applied, by reason");
  for (size_t r = 1; r < c.rejected.size(); ++r) {
    w.Sample("liveprof_fleet_rejected_messages_total", {{"reason", FleetRejectName(static_cast<FleetReject>(r))}},
             c.rejected[r]);
  }
  const FleetState::Lag lag = state.lag();
  w.Gauge("liveprof_fleet_lag_p99_seconds",
          "a step's end to the first fleet-view render that shows it, 99th percentile of the newest steps",
          lag.p99_ms / 1e3);
  return out;
}

std::string RenderFleetAgentPrometheus(const FleetAgent::Stats& s) {
  std::string out;
  PrometheusText w(&out);
  w.Gauge("liveprof_fleet_agent_connected", "1 while this host's fleet agent is connected to NATS",
          s.connected ? 1 : 0);
  w.Counter("liveprof_fleet_agent_step_summaries_published_total", "step summaries JetStream acknowledged",
            s.steps_published);
  w.Counter("liveprof_fleet_agent_step_summaries_dropped_total",
            "step summaries left out: the outbox was full (NATS away too long)", s.steps_dropped);
  w.Gauge("liveprof_fleet_agent_outbox", "messages waiting to be published", static_cast<double>(s.outbox));
  w.Counter("liveprof_fleet_agent_windows_resent_total", "publish windows sent again after a failure",
            s.windows_resent);
  return out;
}

}  // namespace liveprof
