#include "aggregators/analyses.h"

#include <algorithm>

#include "aggregators/alerts/alert_metrics.h"

namespace liveprof {

namespace {

// A snapshot as a view model: {"type","v","seq", ...the snapshot's fields}.
// The header is written first and the snapshot's opening brace becomes the
// comma after it, so the body is never copied. `size_hint` carries the last
// size of this view, to allocate once.
template <typename T>
std::string ViewModel(std::string_view type, uint64_t seq, const T& snapshot, size_t* size_hint) {
  JsonWriter head;
  head.BeginObject();
  head.KV("type", type);
  head.KV("v", kViewProtocolVersion);
  head.KV("seq", seq);
  head.EndObject();
  std::string prefix = head.Take();
  prefix.pop_back();  // its "}".
  const size_t body_at = prefix.size();
  prefix.reserve(*size_hint + *size_hint / 8 + 64);
  JsonWriter w(std::move(prefix));
  snapshot.WriteJson(w);
  std::string out = w.Take();
  if (out.size() == body_at + 2) {
    out.erase(body_at, 1);  // an empty body "{}": keep only its "}".
  } else {
    out[body_at] = ',';  // the body's "{".
  }
  *size_hint = out.size();
  return out;
}

// Lets a function stand where ViewModel wants a snapshot.
template <typename F>
struct WriteWith {
  F write;
  void WriteJson(JsonWriter& w) const { write(w); }
};
template <typename F>
WriteWith(F) -> WriteWith<F>;

// A view's table as CSV, for the views whose row in views.h names one.
template <typename S>
requires requires(const S& s) { s.ToCsv(); }
std::string CsvOf(const S& snapshot) { return snapshot.ToCsv(); }
std::string CsvOf(const InputPipelineSnapshot& snapshot) { return snapshot.OpsCsv(); }

// The pod's options with the pipeline's step detection and breakdown mode
// (its own bounds kept).
PodViewOptions PodOptions(const AnalysesOptions& o) {
  PodViewOptions p = o.pod;
  p.steps.name_pattern = o.steps.name_pattern;
  p.steps.close_lag_ns = o.steps.close_lag_ns;
  p.steps.max_step_ns = o.steps.max_step_ns;
  p.steps.small_kernel_ns = o.steps.small_kernel_ns;
  p.mode = o.breakdown.mode;
  p.share_local_steps = true;  // a single-process run's steps are assembled once.
  return p;
}

WindowSel ToSel(const WindowSpec& w) {
  WindowSel s;
  if (w.kind == WindowSpec::Kind::kSteps) {
    s.last_steps = w.steps;
    s.offset_steps = w.offset_steps;
  } else {
    s.last_ns = w.ns;
  }
  return s;
}

}  // namespace

// The alert rules' metrics over the pipeline's windows (docs/alerts.md).
class Analyses::Metrics : public MetricSource {
 public:
  explicit Metrics(const Analyses& a) : a_(a) {}

  // Pod rules advance whenever a worker completes a step.
  std::optional<int64_t> StepClock(std::string_view metric) const override {
    const AlertMetricInfo* m = FindAlertMetric(metric);
    if (m != nullptr && m->pod_steps) return static_cast<int64_t>(a_.pod_.cells_total());
    return std::nullopt;
  }

  // Each metric as alert_metrics.h's table says it is computed.
  std::optional<MetricValue> Get(std::string_view metric, const WindowSpec& spec) const override {
    const AlertMetricInfo* m = FindAlertMetric(metric);
    if (m == nullptr) return std::nullopt;
    switch (m->from) {
      case MetricFrom::kStepBucket:
      case MetricFrom::kStepTimeMedian:
      case MetricFrom::kStepTimeMean: return StepMetric(*m, spec);
      case MetricFrom::kMemoryUsed: return MemoryUsed(spec);
      case MetricFrom::kDroppedEvents:
      case MetricFrom::kLateEvents: return CounterDelta(m->from, spec);
      case MetricFrom::kSinceLastStep: return SinceLastStep();
      case MetricFrom::kGpuUtilization: return GpuUtilization(spec);
      case MetricFrom::kPodStraggler: return Straggler(spec);
    }
    return std::nullopt;
  }

 private:
  std::optional<MetricValue> StepMetric(const AlertMetricInfo& m, const WindowSpec& spec) const {
    const StepWindow w = a_.breakdown_.Window(ToSel(spec));
    if (w.steps == 0) return std::nullopt;
    if (spec.kind == WindowSpec::Kind::kSteps && w.steps < spec.steps) return std::nullopt;
    MetricValue v{0, w.first_step, w.last_step, w.steps};
    if (m.from == MetricFrom::kStepBucket) {
      v.value = w.pct(m.bucket);
      return v;
    }
    v.value = m.from == MetricFrom::kStepTimeMedian ? w.step_ms_median : w.step_ms.mean();
    // The spread a median has: 1.4826 × MAD (the standard deviation of
    // normal data, untouched by a few slow steps) over the median.
    if (w.step_ms_median > 0) v.spread_pct = 100.0 * 1.4826 * w.step_ms_mad / w.step_ms_median;
    return v;
  }

  std::optional<MetricValue> SinceLastStep() const {
    if (a_.last_step_num_ < 0) return std::nullopt;
    // A finished job's clock stopped when it finished.
    const uint64_t now =
        std::max(a_.finished_ns_ != 0 ? std::min(a_.now_ns_, a_.finished_ns_) : a_.now_ns_, a_.last_step_end_ns_);
    return MetricValue{static_cast<double>(now - a_.last_step_end_ns_) / 1e9, a_.last_step_num_, a_.last_step_num_, 1};
  }

  std::optional<MetricValue> GpuUtilization(const WindowSpec& spec) const {
    const uint64_t ns = spec.kind == WindowSpec::Kind::kSeconds ? spec.ns : 0;
    const DeviceUtilizationSnapshot u = a_.utilization_.Snapshot(ns);
    if (u.devices.empty()) return std::nullopt;
    uint64_t busy = 0, span = 0;
    for (const auto& d : u.devices) {
      busy += d.busy_ns;
      span += d.span_ns;
    }
    if (span == 0) return std::nullopt;
    return MetricValue{100.0 * static_cast<double>(busy) / static_cast<double>(span), -1, -1, u.devices.size()};
  }

  // pod.straggler_pct: a steps window of k steps (a seconds window has no value).
  std::optional<MetricValue> Straggler(const WindowSpec& spec) const {
    if (spec.kind != WindowSpec::Kind::kSteps || spec.steps == 0) return std::nullopt;
    const std::optional<PodStraggler> s = a_.pod_.Straggler(spec.steps);
    if (!s) return std::nullopt;
    return MetricValue{s->pct, s->first_step, s->last_step, s->workers_compared, s->label};
  }

  std::optional<MetricValue> MemoryUsed(const WindowSpec& spec) const {
    const uint64_t ns = spec.kind == WindowSpec::Kind::kSeconds ? spec.ns : 0;
    const std::optional<double> pct = a_.memory_.MaxUsedPct(ns);
    if (!pct) return std::nullopt;
    return MetricValue{*pct, -1, -1, 1};
  }

  std::optional<MetricValue> CounterDelta(MetricFrom counter, const WindowSpec& spec) const {
    if (a_.counter_history_.empty()) return std::nullopt;
    const auto& now = a_.counter_history_.back();
    const uint64_t span = spec.kind == WindowSpec::Kind::kSeconds ? spec.ns : 10'000'000'000;
    const uint64_t from = now.now_ns > span ? now.now_ns - span : 0;
    // The newest sample at or before the window's start (else the oldest).
    const auto after = std::partition_point(a_.counter_history_.begin(), a_.counter_history_.end(),
                                            [from](const CounterSample& s) { return s.now_ns <= from; });
    const CounterSample* base = after == a_.counter_history_.begin() ? &a_.counter_history_.front() : &*(after - 1);
    const double d = counter == MetricFrom::kDroppedEvents ? static_cast<double>(now.dropped - base->dropped)
                                                           : static_cast<double>(now.late - base->late);
    return MetricValue{d, -1, -1, a_.counter_history_.size()};
  }

  const Analyses& a_;
};

Analyses::Analyses(AnalysesOptions options, Diagnostics* diag)
    : options_(std::move(options)),
      diag_(diag),
      steps_(&catalog_, diag, options_.steps),
      breakdown_(diag, options_.breakdown),
      op_stats_(&catalog_, diag, options_.op_stats),
      kernels_(&catalog_, diag, options_.kernels),
      utilization_(&catalog_, diag, options_.utilization),
      memory_(&catalog_, diag, options_.memory),
      modules_(&catalog_),
      annotations_(&catalog_),
      gpu_handoffs_(&catalog_),
      loader_workers_(&catalog_),
      pod_(&catalog_, PodOptions(options_)),
      alerts_(options_.alert_rules),
      worker_(&catalog_) {
  if (options_.pytorch_view) pytorch_.emplace(&catalog_, diag, options_.pytorch);
}

template <typename F>
void Analyses::Timed(Analysis a, F&& f) {
  if (options_.clock_ns == nullptr) {
    f();
    return;
  }
  const uint64_t t0 = options_.clock_ns();
  f();
  AddCost(a, options_.clock_ns() - t0);
}

void Analyses::AddCost(Analysis a, uint64_t ns) {
  if (options_.clock_ns == nullptr) return;
  AnalysisCost& c = costs_[static_cast<size_t>(a)];
  c.total_ns += ns;
  c.max_ns = std::max(c.max_ns, ns);
  ++c.batches;
  if (ns > 10'000'000) ++c.batches_over_10ms;
}

void Analyses::Consume(std::span<const Event> definitions, std::span<const Event> events, std::span<const Event> late,
                       uint64_t watermark_ns, uint64_t now_ns) {
  catalog_.Consume(definitions);
  pod_.ConsumeDefinitions(definitions);
  for (std::span<const Event> part : {events, late}) {
    part = DropBadSpans(part);
    if (part.empty()) continue;
    events_consumed_ += part.size();
    Timed(Analysis::kCatalog,
          [&] { catalog_.Consume(part); });              // a GPU's kDeviceInfo travels with its source's events.
    Timed(Analysis::kPod, [&] { pod_.Consume(part); });  // every worker's events.
    Timed(Analysis::kCatalog, [&] { gpu_handoffs_.Consume(part); });  // every worker's too.
    // With several workers every view but the pod follows one (worker_filter.h).
    Timed(Analysis::kCatalog, [&] { part = worker_.Filter(part); });
    Timed(Analysis::kOpStats, [&] {
      if (!part.empty()) op_stats_.Consume(part);
      // Its helpers' work (DataLoader workers' fetches) is their own: in the
      // input pipeline's tables, never in its TF stats, host time, steps,
      // kernels or memory.
      if (!worker_.helpers().empty()) loader_workers_.Consume(worker_.helpers());
    });
    if (part.empty()) continue;
    Timed(Analysis::kKernels, [&] { kernels_.Consume(part); });
    Timed(Analysis::kUtilization, [&] { utilization_.Consume(part); });
    Timed(Analysis::kMemory, [&] { memory_.Consume(part); });
    Timed(Analysis::kModules, [&] { modules_.Consume(part); });
    Timed(Analysis::kAnnotations, [&] { annotations_.Consume(part); });
    if (pytorch_) Timed(Analysis::kPytorch, [&] { pytorch_->Consume(part); });
    Timed(Analysis::kSteps, [&] { steps_.Consume(part); });
  }
  watermark_ns_ = std::max(watermark_ns_, watermark_ns);
  now_ns_ = std::max(now_ns_, now_ns);
  Timed(Analysis::kSteps, [&] {
    steps_.Advance(watermark_ns_);
    const uint64_t pod_cells = pod_.cells_total();
    pod_.Advance(watermark_ns_);
    CloseSteps(pod_.cells_total() != pod_cells);
  });
}

std::span<const Event> Analyses::DropBadSpans(std::span<const Event> part) {
  // Counted here, once, so that no aggregator sees them (each would count
  // them again: they keep their own guard for standalone use).
  auto bad = [](const Event& e) {
    // The rare condition first: most events pass on two compares.
    return (e.dur > kMaxEventDurationNs || e.ts > ~uint64_t{0} - e.dur) && IsSpanKind(e.kind);
  };
  const auto first = std::find_if(part.begin(), part.end(), bad);
  if (first == part.end()) return part;
  clean_.assign(part.begin(), first);
  for (auto it = first; it != part.end(); ++it) {
    if (bad(*it)) {
      if (diag_) diag_->Add(Diag::bad_duration);
    } else {
      clean_.push_back(*it);
    }
  }
  return clean_;
}

void Analyses::CloseSteps(bool pod_steps) {
  std::vector<StepRecord> closed = steps_.TakeClosed();
  const bool any = !closed.empty();
  if (any) {
    const uint64_t rows_before = breakdown_.rows_added();
    breakdown_.Consume(closed);
    if (pod_.shares_local_steps()) {  // the pod's local worker: these very rows.
      pod_.SetLocalStepSource(steps_.source(), std::string(catalog_.Name(steps_.marker_name())));
      const std::deque<StepBreakdownRow>& rows = breakdown_.rows();
      const size_t added = static_cast<size_t>(std::min<uint64_t>(rows.size(), breakdown_.rows_added() - rows_before));
      for (size_t i = rows.size() - added; i < rows.size(); ++i) pod_.AddLocalRow(rows[i]);
    }
    last_step_end_ns_ = std::max(last_step_end_ns_, closed.back().host_end_ns);
    last_step_num_ = closed.back().step_num;
    steps_.Recycle(std::move(closed));
  }
  EvaluateAlerts(now_ns_, any || pod_steps);
}

void Analyses::Flush(uint64_t now_ns) {
  now_ns_ = std::max(now_ns_, now_ns);
  steps_.Flush();
  const uint64_t pod_cells = pod_.cells_total();
  pod_.Flush();
  CloseSteps(pod_.cells_total() != pod_cells);
}

namespace {
bool JobEnded(JobState s) { return s == JobState::kFinished || s == JobState::kDisconnected; }
}  // namespace

void Analyses::SetJobState(JobState state) {
  if (JobEnded(state) && !JobEnded(job_state_)) {
    // The end of the job: its alerts are closed with their last values
    // (docs/alerts.md), and no rule is evaluated until a job is live again.
    std::vector<AlertEvent> closed = alerts_.CloseAll(now_ns_, "at end of job");
    alert_events_.insert(alert_events_.end(), closed.begin(), closed.end());
  }
  if (state == JobState::kFinished && job_state_ != JobState::kFinished) finished_ns_ = std::max<uint64_t>(now_ns_, 1);
  if (state != JobState::kFinished && job_state_ == JobState::kFinished) {
    // A job again after one finished (a rerun on the same server): its
    // stall clock starts now, not at the old job's last step.
    finished_ns_ = 0;
    last_step_end_ns_ = std::max(last_step_end_ns_, now_ns_);
  }
  job_state_ = state;
}

void Analyses::SetAlertRules(std::vector<AlertRule> rules) { alerts_.SetRules(std::move(rules)); }

std::vector<AlertEvent> Analyses::TakeAlertEvents() {
  std::vector<AlertEvent> out;
  out.swap(alert_events_);
  return out;
}

void Analyses::EvaluateAlerts(uint64_t now_ns, bool force) {
  if (JobEnded(job_state_)) return;  // closed at its end (SetJobState).
  if (!force && now_ns < last_alert_ns_ + options_.alert_tick_ns) return;
  last_alert_ns_ = now_ns;
  const uint64_t late = diag_ ? diag_->Get(Diag::late_events) : 0;
  counter_history_.push_back({now_ns, status_.dropped(), late});
  // Keep ten minutes of samples: longer than any sensible rule window.
  while (counter_history_.size() > 2 && counter_history_.front().now_ns + 600'000'000'000 < now_ns) {
    counter_history_.pop_front();
  }
  const Metrics metrics(*this);
  std::vector<AlertEvent> events = alerts_.Evaluate(metrics, now_ns, last_step_num_);
  alert_events_.insert(alert_events_.end(), events.begin(), events.end());
}

RenderedViews Analyses::Render(const RenderOptions& ro) {
  RenderedViews v;
  if (ro.advance_seq) ++seq_;
  v.seq = seq_;
  v.watermark_ns = watermark_ns_;
  const StepBreakdownSnapshot steps = breakdown_.Snapshot(ro.steps);
  OpStatsSnapshotOptions oso;
  oso.window_ns = ro.table_window_ns;
  oso.include_idle = ro.include_idle;
  const OpStatsSnapshot ops = op_stats_.Snapshot(oso);
  KernelStatsQuery kq;
  kq.window_ns = ro.table_window_ns;
  const KernelStatsSnapshot kernels = kernels_.Snapshot(kq);
  const DeviceUtilizationSnapshot util = utilization_.Snapshot(ro.table_window_ns);
  const MemoryStateSnapshot memory = memory_.Snapshot(ro.table_window_ns);
  // The input ops: the analysed process's own and its DataLoader workers'
  // fetches; the workers' rows over the steps' time.
  std::vector<InputOpRecord> input_ops = ops.host_input_ops;
  LoaderWorkersWindow workers;
  if (!loader_workers_.empty()) {
    for (InputOpStats& op : loader_workers_.Ops(ro.table_window_ns)) {
      auto same =
          std::find_if(input_ops.begin(), input_ops.end(), [&](const InputOpRecord& r) { return r.name == op.name; });
      if (same == input_ops.end()) {
        input_ops.push_back(std::move(op));
      } else {
        same->occurrences += op.occurrences;
        same->total_ns += op.total_ns;
        same->self_ns += op.self_ns;
      }
    }
    workers = loader_workers_.Window(steps.window.first_begin_ns, steps.window.last_end_ns);
  }
  const InputPipelineSnapshot input =
      AnalyzeInputPipeline(steps.window, input_ops, loader_workers_.empty() ? nullptr : &workers);

  OverviewInputs oi{&steps.window, &input, &ops, &kernels, &util, options_.env, options_.steps.small_kernel_ns};
  oi.env.devices = catalog_.devices();
  oi.env.step_source = std::string(StepSourceName(steps_.source()));
  oi.env.breakdown_mode = std::string(BreakdownModeName(steps.mode));
  const OverviewSnapshot overview = BuildOverview(oi);

  // Each view's model, named by the table (views.h), and its table as CSV
  // where the table says it has one. A view delivered on request is
  // rendered when asked for only.
  auto wanted = [&](View view) { return !GetViewInfo(view).on_request() || ro.on_request; };
  auto put = [&](View view, const auto& snapshot) {
    const auto i = static_cast<size_t>(view);
    v.json(view) = ViewModel(ViewName(view), v.seq, snapshot, &view_size_hint_[i]);
    if constexpr (requires { CsvOf(snapshot); }) {
      if (ro.csv && !GetViewInfo(view).csv.empty()) v.csv(view) = CsvOf(snapshot);
    }
  };
  put(View::kOverview, overview);
  put(View::kSteps, steps);
  put(View::kInputPipeline, input);
  put(View::kTfStats, ops);
  put(View::kKernelStats, kernels);
  put(View::kMemory, memory);
  put(View::kAlerts, alerts_.Snapshot(ro.alert_history));
  put(View::kPod, pod_.Snapshot());
  put(View::kModules, modules_.Snapshot());
  put(View::kAnnotations, annotations_.Snapshot());
  if (pytorch_ && wanted(View::kPytorch)) put(View::kPytorch, pytorch_->Snapshot());
  const StatusView::Inputs status{
      overview,
      catalog_,
      steps_,
      pod_,
      gpu_handoffs_,
      diag_,
      job_state_,
      worker_.process(),
      events_consumed_,
      watermark_ns_,
      options_.clock_ns != nullptr ? std::span<const AnalysisCost>(costs_) : std::span<const AnalysisCost>()};
  put(View::kStatus, WriteWith{[&](JsonWriter& w) { status_.Write(w, status); }});
  return v;
}

}  // namespace liveprof
