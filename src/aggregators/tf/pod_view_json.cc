// PodSnapshot as JSON: the `pod` view model's body (docs/protocol.md).
#include "aggregators/tf/pod_view.h"

namespace liveprof {

namespace {

void WriteBucketsMs(JsonWriter& w, const std::array<uint64_t, kBucketCount>& ns) {
  w.BeginArray();
  for (const uint64_t v : ns) w.Double(static_cast<double>(v) / 1e6);
  w.EndArray();
}

void WriteOptionalDouble(JsonWriter& w, std::string_view key, const std::optional<double>& v) {
  w.Key(key);
  if (v) {
    w.Double(*v);
  } else {
    w.Null();
  }
}

// A worker's figures over its own newest steps or over the common range
// (PodWorkerSummary, PodCommonSummary: the same names).
template <typename Figures>
void WriteFigures(JsonWriter& w, const Figures& f) {
  w.KV("mean_step_ms", f.mean_step_ms);
  w.Key("mean_ms");
  w.BeginArray();
  for (const double v : f.mean_ms) w.Double(v);
  w.EndArray();
  w.KV("input_pct", f.input_pct);
  w.KV("worst_count", f.worst_count);
  w.KV("compared_steps", f.compared_steps);
  w.KV("lag_ms", f.lag_ms);
  w.KV("lag_pct", f.lag_pct);
}

}  // namespace

void PodSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.KV("mode", BreakdownModeName(mode));
  w.KV("window_steps", static_cast<uint64_t>(window_steps));
  w.KV("steps_in_window", steps_in_window);
  w.KV("straggler_steps", straggler_steps);
  w.KV("cells_total", cells_total);
  w.Key("buckets");
  w.BeginArray();
  for (size_t b = 0; b < kBucketCount; ++b) w.String(BucketKey(static_cast<Bucket>(b)));
  w.EndArray();
  w.Key("bucket_names");
  w.BeginArray();
  for (size_t b = 0; b < kBucketCount; ++b) w.String(BucketName(static_cast<Bucket>(b)));
  w.EndArray();

  w.KV("newest_step", newest_step);
  w.Key("common");
  w.BeginObject();
  w.KV("frontier_step", common.frontier_step);
  w.KV("first_step", common.first_step);
  w.KV("last_step", common.last_step);
  w.KV("steps", common.steps);
  w.KV("workers", common.workers);
  w.EndObject();

  w.Key("workers");
  w.BeginArray();
  for (const PodWorkerSummary& s : workers) {
    w.BeginObject();
    w.KV("id", s.id);
    w.KV("label", s.label);
    w.KV("steps", s.steps);
    w.KV("steps_total", s.steps_total);
    w.KV("step_source", s.step_source);
    w.KV("step_marker", s.step_marker);
    w.KV("first_step", s.first_step);
    w.KV("last_step", s.last_step);
    w.KV("behind_steps", s.behind_steps);
    WriteFigures(w, s);
    WriteOptionalDouble(w, "straggler_pct", s.straggler_pct);
    w.Key("common");
    if (s.common) {
      w.BeginObject();
      w.KV("steps", s.common->steps);
      WriteFigures(w, *s.common);
      w.EndObject();
    } else {
      w.Null();
    }
    w.KV("not_common", s.not_common);
    w.EndObject();
  }
  w.EndArray();

  w.Key("steps");
  w.BeginArray();
  for (const PodStepRow& r : steps) {
    w.BeginObject();
    w.KV("step", r.step_num);
    w.KV("median_ms", r.median_ms);
    w.Key("worst");
    if (r.worst) {
      w.UInt(*r.worst);
    } else {
      w.Null();
    }
    w.Key("cells");
    w.BeginArray();
    for (const PodCell& c : r.cells) {
      w.BeginObject();
      w.KV("worker", c.worker);
      w.KV("step_ms", static_cast<double>(c.step_ns) / 1e6);
      w.Key("ms");
      WriteBucketsMs(w, c.bucket_ns);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();

  w.Key("straggler");
  if (straggler) {
    w.BeginObject();
    w.KV("worker", straggler->worker);
    w.KV("label", straggler->label);
    w.KV("pct", straggler->pct);
    w.KV("first_step", straggler->first_step);
    w.KV("last_step", straggler->last_step);
    w.KV("workers_compared", straggler->workers_compared);
    w.EndObject();
  } else {
    w.Null();
  }

  w.Key("diagnostics");
  w.BeginObject();
  w.KV("steps_without_compute", diagnostics.steps_without_compute);
  w.KV("cells_outside_window", diagnostics.cells_outside_window);
  w.KV("duplicate_cells", diagnostics.duplicate_cells);
  w.KV("events_over_worker_cap", diagnostics.events_over_worker_cap);
  w.KV("workers_over_cap", diagnostics.workers_over_cap);
  w.KV("late_for_step", diagnostics.late_for_step);
  w.KV("events_without_step", diagnostics.events_without_step);
  w.KV("device_without_launch", diagnostics.device_without_launch);
  w.KV("new_steps_dropped", diagnostics.new_steps_dropped);
  w.EndObject();
  w.EndObject();
}

}  // namespace liveprof
