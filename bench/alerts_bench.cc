// The cost of one AlertEngine::Evaluate over the built-in rules: what the
// pipeline pays per tick (or per step) for its alerts. Items are rule
// evaluations. The source answers by a linear scan of the metric names, as a
// simple pipeline implementation would; values drift so that about one
// evaluation in 64 crosses a threshold (a transition renders a summary).
#include <benchmark/benchmark.h>

#include <array>
#include <string_view>

#include "aggregators/alerts/alert_metrics.h"
#include "aggregators/alerts/alerts.h"
#include "base/json_writer.h"

namespace liveprof {
namespace {

class DriftingSource : public MetricSource {
 public:
  void Advance() { ++tick_; }
  std::optional<MetricValue> Get(std::string_view metric, const WindowSpec& w) const override {
    for (size_t i = 0; i < std::size(kAlertMetrics); ++i) {
      if (kAlertMetrics[i].name != metric) continue;
      // A value just under the default thresholds most of the time, above them
      // for a stretch of 8 evaluations out of every 512.
      const bool high = (tick_ + i * 37) % 512 < 8;
      double v = high ? 95.0 : 1.0;
      if (metric == "step_time_ms_median") v = w.offset_steps != 0 ? 100.0 : (high ? 150 : 100);
      return MetricValue{v, tick_ - 19, tick_, 20};
    }
    return std::nullopt;
  }

 private:
  int64_t tick_ = 0;
};

void BM_AlertsEvaluate(benchmark::State& state) {
  AlertEngine engine(DefaultAlertRules());
  DriftingSource source;
  uint64_t now_ns = 0;
  int64_t step = 0;
  size_t events = 0;
  for (auto _ : state) {
    source.Advance();
    now_ns += 1'000'000'000;
    events += engine.Evaluate(source, now_ns, ++step).size();
  }
  benchmark::DoNotOptimize(events);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(DefaultAlertRules().size()));
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_AlertsEvaluate);

void BM_AlertsSnapshotJson(benchmark::State& state) {
  // The per-tick view: a snapshot with a full history, serialized.
  AlertEngine engine(DefaultAlertRules());
  DriftingSource source;
  for (int64_t i = 1; i <= 100'000; ++i) {
    source.Advance();
    engine.Evaluate(source, static_cast<uint64_t>(i) * 1'000'000'000, i);
  }
  size_t bytes = 0;
  for (auto _ : state) {
    JsonWriter w;
    engine.Snapshot().WriteJson(w);
    bytes += w.str().size();
  }
  benchmark::DoNotOptimize(bytes);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AlertsSnapshotJson);

}  // namespace
}  // namespace liveprof
