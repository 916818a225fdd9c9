// PytorchOverview as the plugin's overview JSON, its recommendations as HTML
// and its steps as CSV. The computation is in pytorch_view.cc.
#include <cmath>
#include <string>

#include "aggregators/pytorch/pytorch_view.h"
#include "aggregators/tf/kernel_stats.h"

namespace liveprof {

namespace {

// A float as Python's json.dumps writes it (its repr). JsonWriter has no raw
// output: fixed-notation reprs go through Fixed() with the repr's number of
// decimals (the same text: the repr is the correctly rounded value at that
// precision), the others through Double() (also the same text: "1e+16").
void WritePyFloat(JsonWriter& w, double v) {
  const std::string repr = PyRepr(v);
  const size_t dot = repr.find('.');
  if (std::isfinite(v) && repr.find('e') == std::string::npos && dot != std::string::npos) {
    const int decimals = static_cast<int>(repr.size() - dot - 1);
    if (PyFormatFixed(v, decimals) == repr) {
      w.Fixed(v, decimals);
      return;
    }
  }
  w.Double(v);
}

// A published time value: an int for whole-µs traces, a float otherwise.
std::string TimeText(int64_t ns, double us, bool integer_us) {
  return integer_us ? std::to_string(ns / 1000) : PyRepr(us);
}

void WriteTime(JsonWriter& w, int64_t ns, double us, bool integer_us) {
  if (integer_us) {
    w.Int(ns / 1000);
  } else {
    WritePyFloat(w, us);
  }
}

}  // namespace

std::string PytorchOverview::RecommendationsHtml() const {
  std::string html = "<ul>";
  if (recommendations.empty()) {
    html += "<li>N/A</li>";
  } else {
    for (const std::string& r : recommendations) {
      html += "<li>";
      html += r;
      html += "</li>";
    }
  }
  html += "</ul>";
  return html;
}

void PytorchOverview::WriteJson(JsonWriter& w) const {
  w.BeginObject();

  w.Key("steps");
  w.BeginObject();
  w.Key("columns");
  w.BeginArray();
  w.BeginObject();
  w.KV("type", "string");
  w.KV("name", "Step");
  w.EndObject();
  for (const PytorchRole role : columns) {
    w.BeginObject();
    w.KV("type", "number");
    w.KV("name", PytorchRoleName(role));
    w.EndObject();
    w.BeginObject();
    w.KV("type", "string");
    w.KV("role", "tooltip");
    w.Key("p");
    w.BeginObject();
    w.KV("html", "true");
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("rows");
  w.BeginArray();
  for (const PytorchOverviewStep& s : steps) {
    w.BeginArray();
    w.String(s.name);
    const std::string total = TimeText(s.total_ns, s.total_us, integer_us);
    for (const PytorchRole role : columns) {
      const auto r = static_cast<size_t>(role);
      WriteTime(w, s.value_ns[r], s.value_us[r], integer_us);
      std::string tip = "<div class=\"visualization-tooltip\" style=\"white-space: nowrap;\">Step ";
      tip += s.name;
      tip += "<br>Total: ";
      tip += total;
      tip += "us<br><b>";
      tip += PytorchRoleName(role);
      tip += ": ";
      tip += TimeText(s.value_ns[r], s.value_us[r], integer_us);
      tip += "us</b><br>Percentage: ";
      tip += PyRepr(s.pct[r]);
      tip += "%</div>";
      w.String(tip);
    }
    w.EndArray();
  }
  w.EndArray();
  w.EndObject();

  w.Key("performance");
  w.BeginArray();
  if (!steps.empty()) {
    w.BeginObject();
    w.KV("name", "Average Step Time");
    w.KV("description", "");
    w.Key("value");
    w.Int(static_cast<int64_t>(average.total_rounded_us));
    w.KV("extra", 100);
    w.Key("children");
    w.BeginArray();
    for (const PytorchRole role : columns) {
      const auto r = static_cast<size_t>(role);
      w.BeginObject();
      w.KV("name", PytorchRoleName(role));
      w.KV("description", "");
      w.Key("value");
      w.Int(static_cast<int64_t>(average.rounded_us[r]));
      w.Key("extra");
      WritePyFloat(w, average.pct[r]);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();

  w.KV("recommendations", RecommendationsHtml());

  w.Key("environments");
  w.BeginArray();
  w.BeginObject();
  w.KV("title", "Number of Worker(s)");
  w.KV("value", "1");
  w.EndObject();
  w.BeginObject();
  w.KV("title", "Device Type");
  w.KV("value", show_gpu ? "GPU" : "CPU");
  w.EndObject();
  w.EndArray();

  if (!gpus.empty()) {
    w.Key("gpu_metrics");
    w.BeginObject();
    w.KV("title", "GPU Summary");
    w.Key("data");
    w.BeginArray();
    auto row = [&w](std::string_view title, std::string_view value) {
      w.BeginObject();
      w.KV("title", title);
      w.KV("value", value);
      w.EndObject();
    };
    for (const PytorchOverviewGpu& g : gpus) {
      row("GPU " + std::to_string(g.device) + ":", "");
      if (g.described) {
        row("Name", g.name);
        const double gb = static_cast<double>(g.memory_bytes) / 1024 / 1024 / 1024;
        row("Memory", PyRepr(PyRound(gb, 2)) + " GB");
        row("Compute Capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor));
      }
      row("GPU Utilization", PyRepr(g.utilization_pct) + " %");
      const PytorchGpuEstimates& x = g.estimates;
      if (x.has_sm_efficiency) row("Est. SM Efficiency", PyRepr(x.sm_efficiency_pct) + " %");
      if (x.has_occupancy) row("Est. Achieved Occupancy", PyRepr(x.occupancy_pct) + " %");
      if (x.has_tensor_cores) row("Kernel Time using Tensor Cores", PyRepr(x.tensor_cores_pct) + " %");
    }
    w.EndArray();
    w.EndObject();
  }

  w.Key("liveprof");
  w.BeginObject();
  // The recommendations as plain text (the plugin's field is HTML).
  w.Key("recommendation_list");
  w.BeginArray();
  for (const std::string& r : recommendations) w.String(r);
  w.EndArray();
  w.KV("gpu_mode", gpu_mode);
  w.KV("fallback_step", fallback_step);
  w.KV("integer_us", integer_us);
  w.KV("dropped_tail_steps", dropped_tail_steps);
  w.KV("dropped_events", dropped_events);
  w.KV("bad_duration_events", bad_duration_events);
  w.KV("window_start_ns", window_start_ns);
  w.KV("window_end_ns", window_end_ns);
  // What each GPU row counts, and the Tensor Core share by kernel family
  // beside the plugin's (which keeps its own rule).
  w.Key("definitions");
  w.BeginObject();
  w.KV("GPU Utilization", kPluginGpuUtilizationDefinition);
  w.KV("Kernel Time using Tensor Cores", kPluginTensorCoresDefinition);
  w.KV("tensor_cores_by_family_pct", kTensorCoresByFamilyDefinition);
  w.EndObject();
  w.Key("gpus");
  w.BeginArray();
  for (const PytorchOverviewGpu& g : gpus) {
    w.BeginObject();
    w.KV("device", static_cast<uint32_t>(g.device));
    w.KV("utilization_pct", g.utilization_pct);
    if (g.estimates.has_tensor_cores) w.KV("tensor_cores_pct", g.estimates.tensor_cores_pct);
    w.KV("tensor_cores_by_family_pct", g.estimates.tensor_cores_by_family_pct);
    w.EndObject();
  }
  w.EndArray();
  w.Key("steps");
  w.BeginArray();
  for (const PytorchOverviewStep& s : steps) {
    w.BeginObject();
    w.KV("name", s.name);
    w.KV("host_start_ns", s.host_start_ns);
    w.KV("host_end_ns", s.host_end_ns);
    w.KV("start_ns", s.start_ns);
    w.KV("end_ns", s.end_ns);
    w.KV("device_ops", s.device_ops);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  w.EndObject();
}

std::string PytorchOverview::ToCsv() const {
  std::string csv = "Step";
  for (const PytorchRole role : columns) {
    csv.push_back(',');
    AppendCsvField(&csv, PytorchRoleName(role));
  }
  csv += ",Total\n";
  for (const PytorchOverviewStep& s : steps) {
    AppendCsvField(&csv, s.name);
    for (const PytorchRole role : columns) {
      const auto r = static_cast<size_t>(role);
      csv.push_back(',');
      csv += TimeText(s.value_ns[r], s.value_us[r], integer_us);
    }
    csv.push_back(',');
    csv += TimeText(s.total_ns, s.total_us, integer_us);
    csv.push_back('\n');
  }
  return csv;
}

}  // namespace liveprof
