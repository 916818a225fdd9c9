// liveprof: the command line (CLI11; `liveprof --help`, `liveprof SUB --help`).
//
//   liveprof demo|serve|replay|open [options]
//       The server: on the simulated GPU workload, for real producers, on a
//       trace file fed through the live path, or on a run folder (app/serve.h).
//   liveprof example [--steps N] [--step-ms MS] [--input-share F] [--connect ADDRESS [--rank R]]
//       Runs an example training loop instrumented with the host tracing API,
//       drains its events through the stream and prints what it carried.
//   liveprof simulate [--scenario S] [--seconds N] [--rate R] [--seed N] ...
//       Runs the simulated GPU workload through the analyses (app/simulate.h).
//   liveprof analyze FILE | export IN OUT (app/analyze.h)
//   liveprof version | help
//
// Exit codes: 0, 1 for a failure of the command, 2 for a bad command line
// (an unknown or malformed option, named in the message).
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "aggregators/analyses.h"
#include "aggregators/stream_summary.h"
#include "app/analyze.h"
#include "app/args.h"
#include "app/example_training.h"
#include "app/fleet.h"
#include "app/serve.h"
#include "app/simulate.h"
#include "ingest/global_sender.h"
#include "producers/host_api.h"
#ifdef LIVEPROF_HAVE_CUPTI
#include "producers/cupti_source.h"
#endif
#include "stream/clock.h"
#include "stream/drain_loop.h"

#ifndef LIVEPROF_VERSION
#define LIVEPROF_VERSION "unknown"
#endif

namespace liveprof {
namespace {

// The text of member `key` of the JSON object `json` (its value, an object
// or array, up to its closing bracket); "" if absent. Enough for printing a
// part of a view model we wrote ourselves.
std::string_view JsonMember(std::string_view json, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\":";
  const size_t at = json.find(quoted);
  if (at == std::string_view::npos) return {};
  const size_t begin = at + quoted.size();
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return json.substr(begin, i + 1 - begin);
    }
  }
  return {};
}

void PrintSummary(const StreamSummarySnapshot& s, const Stream& stream, uint64_t drained) {
  std::printf("\nThe stream carried %" PRIu64 " events (%" PRIu64 " drained from rings), plus %" PRIu64
              " name and %" PRIu64 " track definitions.\n",
              s.events, drained, s.name_defs, s.track_defs);
  std::printf("Dropped: %" PRIu64 " (full rings or no ring), late: %" PRIu64 "\n\n", stream.TotalDropped(), s.late);
  std::printf("%-16s %10s\n", "kind", "events");
  for (size_t k = 0; k < kEventKindCount; ++k) {
    if (s.by_kind[k] == 0) continue;
    std::printf("%-16s %10" PRIu64 "\n", std::string(EventKindName(static_cast<EventKind>(k))).c_str(), s.by_kind[k]);
  }
  std::printf("\n%-6s %-28s %10s\n", "track", "name", "events");
  for (const auto& t : s.tracks) {
    std::printf("%-6u %-28s %10" PRIu64 "\n", t.id, t.name.c_str(), t.events);
  }
  std::printf("\n%-52s %-13s %7s %11s %11s\n", "span", "kind", "count", "total ms", "max ms");
  for (const auto& n : s.top_names) {
    std::printf("%-52s %-13s %7" PRIu64 " %11.3f %11.3f\n", n.name.c_str(), std::string(EventKindName(n.kind)).c_str(),
                n.count, n.total_ns / 1e6, n.max_ns / 1e6);
  }
  if (!s.steps.empty()) {
    double sum = 0, lo = 1e300, hi = 0;
    for (const auto& st : s.steps) {
      const double ms = st.dur_ns / 1e6;
      sum += ms;
      lo = std::min(lo, ms);
      hi = std::max(hi, ms);
    }
    std::printf("\nsteps: %zu, step time mean %.3f ms, min %.3f ms, max %.3f ms\n", s.steps.size(),
                sum / s.steps.size(), lo, hi);
  }
  std::printf("\ndiagnostics:");
  bool any = false;
  for (size_t d = 0; d < static_cast<size_t>(Diag::kCount); ++d) {
    const uint64_t v = stream.diagnostics().Get(static_cast<Diag>(d));
    if (v == 0) continue;
    any = true;
    std::printf(" %s=%" PRIu64, std::string(DiagnosticInfo(static_cast<Diag>(d)).name).c_str(), v);
  }
  std::printf("%s\n", any ? "" : " none");
}

// `liveprof example --connect ADDRESS`: the same loop, its events sent to a
// `liveprof serve --ingest ADDRESS` (ingest_sender.h) instead of analysed here.
int ExampleSending(const ExampleTrainingOptions& options, const SenderOptions& sender) {
  std::string error;
  if (!ConnectGlobalStream(sender, &error)) {
    std::fprintf(stderr, "liveprof example: %s\n", error.c_str());
    return 2;
  }
#ifdef LIVEPROF_HAVE_CUPTI
  // GPU activity when there is a GPU, sent with the rest; the server's
  // capture controls turn it off and on (gpu_activity.h). Here (no driver)
  // the source says why not and the run goes on host-only.
  CuptiSource cupti(GlobalStream());
  cupti.Start();
  std::printf("GPU tracing: %s\n", cupti.message().c_str());
#endif
  std::printf("liveprof example: %d steps of %.1f ms, %.0f%% waiting for input, sent to %s\n", options.steps,
              options.step_ms, options.input_share * 100, sender.address.c_str());
  std::fflush(stdout);
  RunExampleTraining(options);
#ifdef LIVEPROF_HAVE_CUPTI
  cupti.Stop();  // its last records go with the rest.
#endif
  DisconnectGlobalStream(5'000'000'000);
  // What became of every event recorded: delivered, or lost and how; a run
  // that lost any (or delivered none) fails.
  const SenderStatus s = GlobalSenderStatus();
  std::printf("recorded %" PRIu64 " events: %" PRIu64 " delivered (acknowledged), %" PRIu64 " lost (%" PRIu64
              " in full rings, %" PRIu64 " dropped unacknowledged, %" PRIu64 " unacknowledged at exit); sent %" PRIu64
              " events in %" PRIu64 " batches, %" PRIu64 " acknowledged, %" PRIu64 " events resent; %" PRIu64
              " connections%s%s\n",
              s.events_recorded, s.events_delivered, s.events_lost(), s.events_ring_dropped, s.events_dropped_unacked,
              s.events_unsent_at_stop, s.events_sent, s.batches_sent, s.batches_acked, s.events_resent, s.connects,
              s.last_error.empty() ? "" : "; last error: ", s.last_error.c_str());
  if (s.events_lost() > 0 || s.events_delivered == 0) {
    std::fprintf(stderr, "liveprof example: %" PRIu64 " of %" PRIu64 " recorded events were not delivered\n",
                 s.events_recorded - s.events_delivered, s.events_recorded);
    return 1;
  }
  return 0;
}

int Example(const ExampleTrainingOptions& options, const SenderOptions& sender) {
  if (!sender.address.empty()) return ExampleSending(options, sender);
  Stream& stream = GlobalStream();
  // The run environment says whether GPU activity is traced, and if not why.
  AnalysesOptions analyses_options;
  analyses_options.env.device_type = "CPU";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) analyses_options.env.hostname = host;
#ifdef LIVEPROF_HAVE_CUPTI
  // Real GPU activity when there is a GPU; here (no driver) the source says
  // why not and the run goes on host-only.
  CuptiSource cupti(stream);
  if (cupti.Start()) {
    analyses_options.env.device_type = "GPU";
  } else {
    analyses_options.env.gpu_note = cupti.message();
  }
  std::printf("GPU tracing: %s\n", cupti.message().c_str());
#else
  analyses_options.env.gpu_note = "built without the CUPTI producer (no CUDA toolkit); host-only";
#endif
  StreamSummary summary;
  Analyses analyses(analyses_options, &stream.diagnostics());
  std::mutex mu;  // the summary is read by main while the drain thread writes.
  DrainLoop::Options drain_options;
  // 20 ms: the host API writes each span as it ends; CUPTI, where it runs,
  // declares how far its buffers are delivered and is waited for.
  drain_options.reorder.window_ns = 20'000'000;
  DrainLoop drain(stream, drain_options, [&](const Batch& b) {
    std::lock_guard<std::mutex> lock(mu);
    summary.Consume(b.definitions);
    summary.Consume(b.events);
    summary.Consume(b.late);
    analyses.Consume(b.definitions, b.events, b.late, b.watermark_ns, b.now_ns);
  });
  drain.Start();
  std::printf("liveprof example: %d steps of %.1f ms, %.0f%% waiting for input\n", options.steps, options.step_ms,
              options.input_share * 100);
  RunExampleTraining(options);
#ifdef LIVEPROF_HAVE_CUPTI
  cupti.Stop();
#endif
  drain.Stop();

  std::lock_guard<std::mutex> lock(mu);
  PrintSummary(summary.Snapshot(12), stream, drain.events_drained());
  analyses.Flush(HostNowNs());
  const RenderedViews views = analyses.Render(RenderOptions{});
  std::printf("\nrun environment (overview view): %s\n",
              std::string(JsonMember(views.overview, "run_environment")).c_str());
  return 0;
}

void AddExampleCommand(CLI::App& app, Commands* commands) {
  struct ExampleArgs {
    ExampleTrainingOptions options;
    SenderOptions sender;
  };
  auto a = std::make_shared<ExampleArgs>();
  CLI::App* sub = app.add_subcommand(
      "example", "run an example training loop instrumented with the host API and print what the event stream carried");
  AddNumber(sub, "--steps", a->options.steps, 1, 1e7, "training steps");
  AddNumber(sub, "--step-ms", a->options.step_ms, 0.01, 60'000, "milliseconds per step");
  AddNumber(sub, "--input-share", a->options.input_share, 0, 1, "share of a step spent waiting for input");
  sub->add_option("--connect", a->sender.address,
                  "send the events to `liveprof serve --ingest ADDR` (unix:PATH or tcp:127.0.0.1:PORT) "
                  "instead (default: none, analyse here)");
  AddNumber(sub, "--rank", a->sender.rank, 0, 1e6, "the rank said in its hello (by default, -1: $RANK)");
  commands->Add(sub, [a] { return Example(a->options, a->sender); });
}

}  // namespace
}  // namespace liveprof

int main(int argc, char** argv) {
  using liveprof::Commands;
  CLI::App app(
      "liveprof: a live profiler for training jobs: the dashboard, the analyses and the "
      "event stream (docs/architecture.md)",
      "liveprof");
  app.footer(
      "`liveprof COMMAND --help` lists the options of a command, each with its default.\n"
      "Exit codes: 0; 1 when the command fails; 2 for a bad command line.");
  app.option_defaults()->always_capture_default();
  // A single-valued option given twice takes the last, as before CLI11.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // At most one; none (a word that is no command) is refused as not expected,
  // which names it.
  app.require_subcommand(0, 1);
  Commands commands;
  liveprof::AddServeCommands(app, &commands);
  liveprof::AddFleetCommand(app, &commands);
  liveprof::AddExampleCommand(app, &commands);
  liveprof::AddSimulateCommand(app, &commands);
  liveprof::AddAnalyzeCommands(app, &commands);
  commands.Add(app.add_subcommand("version", "print the version"), [] {
    std::printf("liveprof %s\n", LIVEPROF_VERSION);
    return 0;
  });
  commands.Add(app.add_subcommand("help", "print this help"), [&app] {
    // (app.help() would be the help subcommand's own, the one parsed.)
    std::fputs(app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal).c_str(), stdout);
    return 0;
  });
  if (argc < 2) {
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  return liveprof::ParseAndRun(app, commands, argc, argv);
}
