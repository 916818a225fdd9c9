// The fleet on the command line (docs/fleet.md):
//   - `serve|demo|run --publish nats://HOST:PORT --job NAME`: this server is
//     also an agent: every rank's steps, its alerts and its status go to the
//     job's JetStream stream, and it answers viewport queries for its host;
//     /api/fleet/agent says how the publishing goes.
//   - `liveprof fleet --nats nats://HOST:PORT --job NAME`: the fleet view:
//     the dashboard's Fleet page over every rank of every host (/api/fleet),
//     a rank's trace fetched from its agent (/api/fleet/trace?host=H&...).
#ifndef LIVEPROF_APP_FLEET_H_
#define LIVEPROF_APP_FLEET_H_

#include <atomic>
#include <memory>
#include <string>

#include "app/args.h"
#include "fleet/fleet_agent.h"
#include "pipeline/pipeline.h"
#include "web/server.h"

namespace liveprof {

struct PublishArgs {
  std::string url;  // "": no agent.
  std::string job, host, creds_file;
};
// --publish, --job, --fleet-host, --nats-creds.
void AddPublishOptions(CLI::App* sub, PublishArgs* args);
// After parsing: --job is needed with --publish and a valid name. Throws
// CLI::ValidationError.
void FinishPublishOptions(const PublishArgs& args);
// Before the pipeline is made: it keeps every rank's steps for the agent.
void PreparePublish(const PublishArgs& args, Pipeline::Options* po);
// The /api/fleet hook of an agent's server: /api/fleet/agent from `*agent`
// (null until it started; it must outlive the server's Stop()).
void SetAgentHook(ServerOptions* so, const std::atomic<FleetAgent*>* agent);
// Starts the agent over `pipeline` (whose own dashboard is at `url`); null
// and *error when it cannot.
std::unique_ptr<FleetAgent> StartAgent(const PublishArgs& args, Pipeline& pipeline, Stream& stream,
                                       const std::string& url, std::string* error);

// Adds `liveprof fleet`.
void AddFleetCommand(CLI::App& app, Commands* commands);

}  // namespace liveprof

#endif  // LIVEPROF_APP_FLEET_H_
