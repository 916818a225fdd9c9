// The metrics an alert rule may watch, each declared once here: the rules
// file's check (alert_rules.cc), each value's unit (alerts.cc) and how the
// pipeline computes it (Analyses' MetricSource, analyses.cc) read this
// table. docs/alerts.md defines each one. Adding a metric: a row here, its
// `MetricFrom` case in Analyses' MetricSource if it is computed a new way,
// its definition in docs/alerts.md.
#ifndef LIVEPROF_AGGREGATORS_ALERTS_ALERT_METRICS_H_
#define LIVEPROF_AGGREGATORS_ALERTS_ALERT_METRICS_H_

#include <cstdint>
#include <string_view>

#include "aggregators/steps/step_breakdown.h"

namespace liveprof {

// What a metric is computed from.
enum class MetricFrom : uint8_t {
  kStepBucket,      // a bucket's share of the step time over the window's steps (%)
  kStepTimeMedian,  // the window's steps' median time (ms), its spread the MAD
  kStepTimeMean,    // their mean time (ms)
  kMemoryUsed,      // the highest share of a device's memory in use over the window (%)
  kDroppedEvents,   // events the rings dropped during the window
  kLateEvents,      // events that came after the reorder window passed them
  kSinceLastStep,   // seconds since the last step ended (a finished job's clock stops)
  kGpuUtilization,  // every GPU's busy time over its span in the window (%)
  kPodStraggler,    // the pod's straggler: its excess over the median worker (%)
};

struct AlertMetricInfo {
  std::string_view name;
  MetricFrom from;
  std::string_view unit;               // of its value: "%", "ms", "s", "events".
  Bucket bucket = Bucket::kAllOthers;  // kStepBucket's.
  // Its steps are the pod's (any worker's step moves a steps window), not
  // the pipeline's own.
  bool pod_steps = false;
};

inline constexpr AlertMetricInfo kAlertMetrics[] = {
    {"input_pct", MetricFrom::kStepBucket, "%", Bucket::kInput},
    {"kernel_launch_pct", MetricFrom::kStepBucket, "%", Bucket::kKernelLaunch},
    {"all_others_pct", MetricFrom::kStepBucket, "%", Bucket::kAllOthers},
    {"device_collectives_pct", MetricFrom::kStepBucket, "%", Bucket::kDeviceCollectives},
    {"step_time_ms_median", MetricFrom::kStepTimeMedian, "ms"},
    {"step_time_ms_mean", MetricFrom::kStepTimeMean, "ms"},
    {"memory_used_pct", MetricFrom::kMemoryUsed, "%"},
    {"dropped_events", MetricFrom::kDroppedEvents, "events"},
    {"late_events", MetricFrom::kLateEvents, "events"},
    {"seconds_since_last_step", MetricFrom::kSinceLastStep, "s"},
    {"gpu_utilization_pct", MetricFrom::kGpuUtilization, "%"},
    {"pod.straggler_pct", MetricFrom::kPodStraggler, "%", Bucket::kAllOthers, /*pod_steps=*/true},
};

// The row of metric `name`, or null.
constexpr const AlertMetricInfo* FindAlertMetric(std::string_view name) {
  for (const AlertMetricInfo& m : kAlertMetrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_ALERTS_ALERT_METRICS_H_
