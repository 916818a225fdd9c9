#include "app/fleet.h"

#include <signal.h>
#include <time.h>

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "app/paths.h"
#include "fleet/fleet_metrics.h"
#include "fleet/fleet_view.h"
#include "web/rest.h"
#include "web/trace_api.h"

#ifndef LIVEPROF_VERSION
#define LIVEPROF_VERSION "unknown"
#endif

namespace liveprof {

namespace {

constexpr const char* kNatsUrlHelp =
    "NATS server(s), nats://HOST:PORT (comma separated; may carry user:password@ or token@, never shown)";

Reply FromFleetReply(FleetQueryReply r) { return Reply{r.status, std::move(r.content_type), std::move(r.body)}; }

// A query key as the server reads it (%XX and '+' decoded), to compare.
std::string DecodedKey(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += raw[i] == '+' ? ' ' : raw[i];
    }
  }
  return out;
}

// The raw target's query string less `host=` and `token=` (the fleet view's
// own token never goes on to an agent), under `path`.
std::string ForwardedTarget(std::string_view raw, std::string_view path) {
  std::string out(path);
  const size_t q = raw.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view rest = raw.substr(q + 1);
  char sep = '?';
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view part = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const std::string key = DecodedKey(part.substr(0, part.find('=')));
    if (part.empty() || key == "host" || key == "token") continue;
    out += sep;
    out += part;
    sep = '&';
  }
  return out;
}

struct FleetArgs {
  ServerOptions so;
  FleetView::Options view;
  double seconds = 0;
  double gone_after_s = 6;
};

int RunFleet(FleetArgs& a) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  a.view.state.gone_after_ns = static_cast<uint64_t>(a.gone_after_s * 1e9);
  FleetView view(a.view);
  a.so.fleet = [&view](const RequestTarget& target, std::string_view raw) -> Reply {
    if (target.path == "/api/fleet") {
      const std::shared_ptr<const std::string> latest = view.Latest();
      if (!latest) return ErrorReply(503, "the fleet view has not rendered yet");
      return Reply{200, "application/json", *latest};
    }
    // /api/fleet/trace, /trace/event, /trace/search: the agent of ?host= answers.
    const std::string_view rest = std::string_view(target.path).substr(std::strlen("/api/fleet"));
    if (rest != "/trace" && rest != "/trace/event" && rest != "/trace/search") {
      return ErrorReply(404, "no endpoint " + target.path +
                                 " (the fleet serves /api/fleet and /api/fleet/trace[/event|/search]?host=H&...)");
    }
    const std::optional<std::string_view> host = target.Param("host");
    if (!host || host->empty()) return ErrorReply(400, target.path + " needs host=H (a host of /api/fleet's hosts)");
    return FromFleetReply(view.Query(std::string(*host), ForwardedTarget(raw, "/api" + std::string(rest))));
  };
  a.so.extra_metrics = [&view] {
    const std::shared_ptr<const std::string> m = view.LatestMetrics();
    return m ? *m : std::string();
  };
  // The server wants a pipeline: an idle one (the fleet's own pages are /api/fleet).
  Stream stream;
  Pipeline::Options po;
  po.trace_store_bytes = 0;
  po.analyses.env.gpu_note =
      "liveprof fleet: this server shows the job's fleet (the Fleet page); its own "
      "pages have no events";
  Pipeline pipeline(stream, po);
  Server server(pipeline, a.so);
  std::string error;
  // The view first: it renders at once, so /api/fleet never answers "not yet".
  if (!view.Start(&error) || !server.Start(&error)) {
    std::fprintf(stderr, "liveprof fleet: %s\n", error.c_str());
    return 1;
  }
  pipeline.Start();
  const std::string shown_host = a.so.bind.find(':') != std::string::npos ? "[" + a.so.bind + "]" : a.so.bind;
  std::printf("listening on http://%s:%u/\n", shown_host.c_str(), server.port());
  std::printf("fleet of job %s from %s (the Fleet page; /api/fleet)\n", a.view.job.c_str(),
              RedactNatsUrl(a.view.nats.url).c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  int ticks = 0;
  for (;;) {
    const timespec one_second{1, 0};
    const int sig = sigtimedwait(&signals, nullptr, &one_second);
    if (sig == SIGINT || sig == SIGTERM) {
      std::printf("liveprof fleet: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    if (++ticks % 5 == 0) {
      const FleetView::Stats s = view.stats();
      const FleetCounts c = view.counts();
      std::printf("  %s: %" PRIu64 " messages, %" PRIu64 " steps, %" PRIu64 " duplicates, %" PRIu64 " missing, %" PRIu64
                  " rejected\n",
                  s.connected ? "connected" : "NATS away", c.messages, c.steps, c.duplicate_steps, c.missing_steps,
                  c.rejected[1] + c.rejected[2] + c.rejected[3] + c.rejected[4] + c.rejected[5]);
      std::fflush(stdout);
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (a.seconds > 0 && elapsed >= a.seconds) break;
  }
  server.Stop();  // (first: its query threads use the view)
  view.Stop();
  pipeline.Stop();
  const FleetCounts c = view.counts();
  std::printf("done: %" PRIu64 " messages, %" PRIu64 " steps applied\n", c.messages, c.steps);
  return 0;
}

}  // namespace

void AddPublishOptions(CLI::App* sub, PublishArgs* a) {
  sub->add_option("--publish", a->url,
                  "also be this host's fleet agent: publish each rank's steps, the alerts and a status to "
                  "NATS JetStream at URL (nats://HOST:PORT; may carry credentials, never shown; docs/fleet.md)");
  sub->add_option("--job", a->job, "with --publish: the job's name (letters, digits, '_', '-')");
  sub->add_option("--fleet-host", a->host, "with --publish: this host's name in the fleet (default: the hostname)");
  sub->add_option("--nats-creds", a->creds_file, "with --publish: a NATS .creds file");
}

void FinishPublishOptions(const PublishArgs& a) {
  if (a.url.empty()) {
    if (!a.job.empty() || !a.host.empty() || !a.creds_file.empty()) {
      throw CLI::ValidationError("--job, --fleet-host and --nats-creds go with --publish URL");
    }
    return;
  }
  if (a.job.empty()) throw CLI::ValidationError("--publish needs --job NAME");
  if (std::string why = CheckJobName(a.job); !why.empty()) throw CLI::ValidationError("--job: " + why);
}

void PreparePublish(const PublishArgs& a, Pipeline::Options* po) {
  if (a.url.empty()) return;
  po->analyses.pod.max_new_steps = size_t{1} << 16;
}

void SetAgentHook(ServerOptions* so, const std::atomic<FleetAgent*>* agent) {
  so->fleet = [agent](const RequestTarget& target, std::string_view) -> Reply {
    if (target.path != "/api/fleet/agent") {
      return ErrorReply(404, "no endpoint " + target.path +
                                 " (an agent serves /api/fleet/agent; the fleet view, "
                                 "liveprof fleet, serves /api/fleet)");
    }
    const FleetAgent* a = agent->load(std::memory_order_acquire);
    if (a == nullptr) return ErrorReply(404, "this server publishes to no fleet (serve --publish URL --job NAME)");
    return Reply{200, "application/json", a->StatusJson()};
  };
  so->extra_metrics = [agent] {
    const FleetAgent* a = agent->load(std::memory_order_acquire);
    return a == nullptr ? std::string() : RenderFleetAgentPrometheus(a->stats());
  };
}

std::unique_ptr<FleetAgent> StartAgent(const PublishArgs& a, Pipeline& pipeline, Stream& stream, const std::string& url,
                                       std::string* error) {
  FleetAgent::Options o;
  o.nats.url = a.url;
  o.nats.creds_file = a.creds_file;
  o.job = a.job;
  o.host = a.host;
  o.url = url;
  o.take_steps = [&pipeline](uint64_t* dropped) { return pipeline.TakePodSteps(dropped); };
  o.totals = [&pipeline, &stream](uint64_t* consumed, uint64_t* dropped) {
    const std::shared_ptr<const PipelineSnapshot> latest = pipeline.Latest();
    *consumed = latest ? latest->metrics.events_consumed : 0;
    *dropped = stream.TotalDropped();
  };
  // A viewport query from the fleet view: this host's own trace API, read-only.
  o.query = [&pipeline](const std::string& target) {
    const RequestTarget t = ParseRequestTarget(target);
    if (!t.error.empty() || !IsTracePath(t.path) || t.path == "/api/export") {
      return FleetQueryReply{400, "application/json",
                             "{\"type\":\"error\",\"v\":1,\"code\":\"400\",\"message\":\"an agent answers "
                             "/api/trace, /api/trace/event and /api/trace/search only\"}"};
    }
    Reply r = TraceReply(t, pipeline.trace_store(), {});
    return FleetQueryReply{r.status, std::move(r.content_type), std::move(r.body)};
  };
  auto agent = std::make_unique<FleetAgent>(std::move(o));
  if (!agent->Start(error)) return nullptr;
  return agent;
}

void AddFleetCommand(CLI::App& app, Commands* commands) {
  auto a = std::make_shared<FleetArgs>();
  a->so.version = LIVEPROF_VERSION;
  a->so.static_dir = DefaultStaticDir();
  a->so.fleet_view = true;
  CLI::App* sub =
      app.add_subcommand("fleet",
                         "the fleet view: every rank of every host of a job, from the agents' NATS JetStream stream "
                         "(serve --publish); the dashboard's Fleet page, /api/fleet (docs/fleet.md)");
  sub->add_option("--nats", a->view.nats.url, kNatsUrlHelp)->required();
  sub->add_option("--job", a->view.job, "the job's name, as its agents publish it (--job)")->required();
  sub->add_option("--nats-creds", a->view.nats.creds_file, "a NATS .creds file");
  sub->add_option("--durable", a->view.durable, "the JetStream consumer's name (one per fleet view of a job)");
  AddNumber(sub, "--rebuild-seconds", a->view.rebuild_seconds, 0, 86400,
            "at start, read the stream back this far to rebuild the picture");
  AddNumber(sub, "--gone-after", a->gone_after_s, 1, 3600,
            "seconds without a message from a host before it shows as gone (its agents send a status every 2 s)");
  AddNumber(sub, "--port", a->so.port, 0, 65535, "port to listen on (0 picks a free one)");
  sub->add_option("--bind", a->so.bind, "address to listen on (any but loopback needs --token)");
  sub->add_option("--token", a->so.token, "require T on every request (as serve --token)");
  sub->add_option("--static", a->so.static_dir, "the dashboard's files");
  AddNumber(sub, "--seconds", a->seconds, 0.1, 1e9, "stop after N seconds (by default, 0: run until Ctrl-C)");
  sub->callback([a] {
    if (std::string why = CheckJobName(a->view.job); !why.empty()) throw CLI::ValidationError("--job: " + why);
    if (const std::string invalid = ValidateServerOptions(a->so); !invalid.empty()) {
      throw CLI::ValidationError(invalid);
    }
  });
  commands->Add(sub, [a] { return RunFleet(*a); });
}

}  // namespace liveprof
