// The fleet's Prometheus metrics (docs/fleet.md, "Metrics"): the fleet
// view's /metrics (hosts by state, each host's state, ranks, the fleet
// alerts firing with the host and rank they name, what the stream brought)
// and an agent's additions to its own /metrics (what it published, dropped
// and holds). Pure; the caller holds whatever guards its input.
#ifndef LIVEPROF_FLEET_FLEET_METRICS_H_
#define LIVEPROF_FLEET_FLEET_METRICS_H_

#include <string>

#include "fleet/fleet_agent.h"
#include "fleet/fleet_state.h"

namespace liveprof {

// The fleet view's families, ending in a newline.
std::string RenderFleetPrometheus(const FleetState& state, bool nats_connected);

// An agent's families (appended to its server's own /metrics).
std::string RenderFleetAgentPrometheus(const FleetAgent::Stats& stats);

}  // namespace liveprof

#endif  // LIVEPROF_FLEET_FLEET_METRICS_H_
