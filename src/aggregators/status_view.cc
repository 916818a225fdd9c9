#include "aggregators/status_view.h"

#include <algorithm>
#include <utility>

#include "aggregators/views.h"

namespace liveprof {

std::string_view AnalysisName(Analysis a) {
  switch (a) {
    case Analysis::kCatalog: return "catalog";
    case Analysis::kPod: return "pod";
    case Analysis::kOpStats: return "op_stats";
    case Analysis::kKernels: return "kernel_stats";
    case Analysis::kUtilization: return "device_utilization";
    case Analysis::kMemory: return "memory";
    case Analysis::kModules: return "modules";
    case Analysis::kAnnotations: return "annotations";
    case Analysis::kPytorch: return "pytorch";
    case Analysis::kSteps: return "steps";
    case Analysis::kTraceStore: return "trace_store";
    case Analysis::kRender: return "render";
    case Analysis::kCount: break;
  }
  return "?";
}

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kLive: return "live";
    case JobState::kWaiting: return "waiting";
    case JobState::kFinished: return "finished";
    case JobState::kDisconnected: return "disconnected";
  }
  return "live";
}

std::vector<SourceTotals> MergeSourcesByName(std::vector<SourceTotals> sources) {
  std::stable_sort(sources.begin(), sources.end(),
                   [](const SourceTotals& a, const SourceTotals& b) { return a.name < b.name; });
  std::vector<SourceTotals> out;
  for (SourceTotals& s : sources) {
    if (!out.empty() && out.back().name == s.name) {
      out.back().published += s.published;
      out.back().dropped += s.dropped;
    } else {
      out.push_back(std::move(s));
    }
  }
  return out;
}

void StatusView::SetSources(std::vector<SourceTotals> sources, uint64_t now_ns) {
  source_history_.push_back({now_ns, MergeSourcesByName(std::move(sources))});
  // Keep the newest sample at least a second older than now, and what follows.
  while (source_history_.size() > 2 && source_history_[1].now_ns + 1'000'000'000 <= now_ns) {
    source_history_.pop_front();
  }
}

void StatusView::SetSelfCost(SelfCostSample sample) {
  if (sample.at_ns <= self_now_.at_ns) return;
  self_prev_ = std::move(self_now_);
  self_now_ = std::move(sample);
}

void StatusView::Write(JsonWriter& w, const Inputs& in) const {
  const RunEnvironment& env = in.overview.env;
  // What the stream carried, what was lost, and every diagnostic.
  w.BeginObject();
  w.KV("protocol_version", kViewProtocolVersion);
  // Whether the job has a device: without one the pages show host views.
  w.KV("has_device", in.overview.has_device);
  if (self_now_.at_ns) {
    // Each liveprof thread's CPU over the last interval (% of one core; -1
    // before a second sample) and since it started; the process's memory.
    w.Key("liveprof_cost");
    w.BeginObject();
    w.KV("process", "server");
    WriteSelfCostFields(w, self_prev_, self_now_);
    w.EndObject();
  }
  w.KV("events_consumed", in.events_consumed);
  w.KV("events_published", published_);
  w.KV("events_dropped", dropped_);
  w.KV("watermark_ns", in.watermark_ns);
  w.KV("step_source", StepSourceName(in.steps.source()));
  // Per process with steps (the pod's workers): where its steps come from.
  // A process of the job with none (a launcher, an inference loop) is not
  // here: the ingest sources list it.
  w.Key("step_sources");
  w.BeginArray();
  for (const PodWorkerSummary& ws : in.pod.StepSources()) {
    w.BeginObject();
    w.KV("worker", static_cast<uint64_t>(ws.id));
    w.KV("label", ws.label);
    w.KV("source", ws.step_source);
    w.KV("marker", ws.step_marker);
    w.KV("steps", ws.steps_total);
    w.EndObject();
  }
  w.EndArray();
  // Per process: the spans whose GPU data went to another CUPTI client
  // (torch.profiler run by the program itself), oldest first.
  w.Key("gpu_handoffs");
  in.gpu_handoffs.WriteJson(w);
  w.KV("job_state", JobStateName(in.job_state));
  // With several workers: the one these views follow (the pod view has all).
  if (in.catalog.multi_process() && in.analysed_process != Catalog::kNoProcess) {
    w.KV("analysed_process", static_cast<uint64_t>(in.analysed_process));
    w.KV("analysed_worker", in.catalog.ProcessLabel(in.analysed_process));
  }
  w.KV("steps_closed", in.steps.steps_closed());
  w.KV("steps_open", static_cast<uint64_t>(in.steps.open_steps()));
  w.KV("events_waiting_for_step", static_cast<uint64_t>(in.steps.pending_events()));
  // Per producer ring: totals, and rates over the last second or so.
  w.Key("sources");
  WriteSources(w);
  if (!in.costs.empty()) {
    // The pipeline thread's time in each analysis and stage: a long batch
    // holds the drain back, and producers' rings fill behind it.
    w.Key("pipeline_cost");
    w.BeginArray();
    for (size_t i = 0; i < in.costs.size(); ++i) {
      const AnalysisCost& c = in.costs[i];
      w.BeginObject();
      w.KV("name", AnalysisName(static_cast<Analysis>(i)));
      w.KV("total_ms", static_cast<double>(c.total_ns) / 1e6);
      w.KV("max_batch_ms", static_cast<double>(c.max_ns) / 1e6);
      w.KV("batches", c.batches);
      w.KV("batches_over_10ms", c.batches_over_10ms);
      w.EndObject();
    }
    w.EndArray();
    w.Key("pipeline_backlog");
    w.BeginObject();
    w.KV("events", backlog_);
    w.KV("max_events", max_backlog_);
    w.EndObject();
  }
  w.Key("run_environment");
  WriteRunEnvironment(w, env);
  w.Key("diagnostics");
  w.BeginArray();
  for (size_t i = 0; i < static_cast<size_t>(Diag::kCount); ++i) {
    const DiagInfo& info = DiagnosticInfo(static_cast<Diag>(i));
    w.BeginObject();
    w.KV("name", info.name);
    w.KV("severity", info.severity == Severity::kInfo       ? "info"
                     : info.severity == Severity::kDataLoss ? "data_loss"
                     : info.severity == Severity::kLate     ? "late"
                                                            : "error");
    w.KV("count", in.diag ? in.diag->Get(static_cast<Diag>(i)) : uint64_t{0});
    w.KV("description", info.description);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void StatusView::WriteSources(JsonWriter& w) const {
  w.BeginArray();
  if (!source_history_.empty()) {
    const SourceSample& last = source_history_.back();
    const SourceSample& first = source_history_.front();
    const double seconds = static_cast<double>(last.now_ns - first.now_ns) / 1e9;
    for (const SourceTotals& s : last.sources) {
      uint64_t published0 = s.published, dropped0 = s.dropped;
      for (const SourceTotals& o : first.sources) {
        if (o.name == s.name) {
          published0 = std::min(o.published, s.published);
          dropped0 = std::min(o.dropped, s.dropped);
        }
      }
      w.BeginObject();
      w.KV("name", s.name);
      w.KV("published", s.published);
      w.KV("dropped", s.dropped);
      w.KV("events_per_second", seconds > 0 ? static_cast<double>(s.published - published0) / seconds : 0.0);
      w.KV("dropped_per_second", seconds > 0 ? static_cast<double>(s.dropped - dropped0) / seconds : 0.0);
      w.EndObject();
    }
  }
  w.EndArray();
}

}  // namespace liveprof
