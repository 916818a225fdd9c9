#include "aggregators/tf/overview.h"

#include <cstdio>

namespace liveprof {

namespace {

std::string Fmt(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c, d);
  return buf;
}

double Pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

}  // namespace

std::string GpuModelName(uint8_t major, uint8_t minor) {
  const char* arch = nullptr;
  switch (major) {
    case 2: arch = "Fermi"; break;
    case 3: arch = "Kepler"; break;
    case 5: arch = "Maxwell"; break;
    case 6: arch = "Pascal"; break;
    case 7: arch = minor < 5 ? "Volta" : "Turing"; break;
    case 8: arch = minor == 9 ? "Ada Lovelace" : "Ampere"; break;
    case 9: arch = "Hopper"; break;
    case 10: arch = "Blackwell"; break;
    default: return "GPU";
  }
  return std::string("Nvidia GPU (") + arch + ")";
}

OverviewSnapshot BuildOverview(const OverviewInputs& in) {
  OverviewSnapshot o;
  const StepWindow& w = *in.window;
  o.window = w;
  o.bound = in.input->bound;
  o.statement = in.input->statement;
  o.next_step = in.input->next_step;
  o.advice = in.input->advice;
  o.env = in.env;
  if (o.env.device_type.empty()) {
    if (!o.env.devices.empty()) {
      o.env.device_type = GpuModelName(o.env.devices.back().cc_major, o.env.devices.back().cc_minor);
    } else {
      o.env.device_type = in.utilization->devices.empty() ? "CPU" : "GPU";
    }
  }
  o.env.device_core_count = static_cast<uint32_t>(std::max(o.env.devices.size(), in.utilization->devices.size()));

  // The precision statement (docs/semantics-tf.md §5).
  const double p16 = w.precision16_pct();
  if (w.compute16_ns + w.compute32_ns > 0 && p16 < kLowPrecisionPct) {
    o.precision_statement =
        Fmt("Only %.1f%% of device computation is 16 bit. So you might want to replace more 32-bit "
            "Ops by 16-bit Ops to improve performance (if the reduced accuracy is acceptable).",
            p16);
  }

  // Top-10 ops (§4): IDLE left out, fractions of the op time alone.
  uint64_t host_occ = 0, device_occ = 0;
  for (const OpStatsRow& r : in.ops->host.rows) host_occ += r.occurrences;
  for (const OpStatsRow& r : in.ops->device.rows) device_occ += r.occurrences;
  o.host_op_pct = Pct(static_cast<double>(host_occ), static_cast<double>(host_occ + device_occ));
  o.device_op_pct = host_occ + device_occ ? 100 - o.host_op_pct : 0;
  o.has_device = !o.env.devices.empty() || !in.utilization->devices.empty() || in.ops->device.op_ns > 0 || w.has_device;
  // With no device, the host's named ops: what the job's own time went to.
  const OpStatsSide& side = o.has_device ? in.ops->device : in.ops->host;
  o.top_ops_side = o.has_device ? "device" : "host";
  const auto named = [&](const OpStatsRow& r) {
    return r.name != OpStats::kIdleName && r.name != OpStats::kHostUnattributedName;
  };
  const double op_ns = static_cast<double>(side.op_ns);  // IDLE (unattributed) is not in it.
  double cumulative = 0;
  for (const OpStatsRow& r : side.rows) {
    if (o.top_ops.size() == 10) break;
    if (!named(r)) continue;
    const double pct = Pct(static_cast<double>(r.self_ns), op_ns);
    cumulative += pct;
    TopOp t{r.name, r.type, r.self_us, pct, cumulative, false, false};
    if (const KernelOpRollup* k = o.has_device ? in.kernels->Op(r.name) : nullptr) {
      t.tc_eligible = k->op_tc_eligible;
      t.uses_tc = k->tensor_core_ns != 0;
    }
    o.top_ops.push_back(std::move(t));
  }
  if (!in.utilization->devices.empty()) {
    uint64_t busy = 0, span = 0;
    for (const auto& d : in.utilization->devices) {
      busy += d.busy_ns;
      span += d.span_ns;
    }
    o.gpu_utilization_pct = Pct(static_cast<double>(busy), static_cast<double>(span));
    o.gpu_utilization_window_ns = in.utilization->window_ns;
  }

  // Patterns from the GPU performance guide, each with its trigger numbers.
  if (w.steps >= 2) {
    const double steps = static_cast<double>(w.steps);
    const double step_ns = static_cast<double>(w.step_ns_sum);
    const double wall = static_cast<double>(w.last_end_ns - w.first_begin_ns);
    // 1. Idle gaps between steps: host time outside every step marker.
    const double gap_pct = Pct(static_cast<double>(w.gap_ns), wall);
    if (gap_pct >= 5) {
      o.patterns.push_back(
          {"idle_gaps_between_steps",
           gap_pct >= 20 ? "high" : "moderate",
           Fmt("%.1f%% of the wall time (%.2f ms per step) falls between steps, outside every step "
               "marker: work done there (logging, checkpoints, evaluation, Python between "
               "iterations) slows training without showing in the step time.",
               gap_pct, static_cast<double>(w.gap_ns) / 1e6 / (steps - 1)),
           {{"gap_pct", gap_pct}, {"gap_ms_per_step", static_cast<double>(w.gap_ns) / 1e6 / (steps - 1)}}});
    }
    // 2. Many tiny kernels while the device waits.
    if (w.kernel_count > 0) {
      const double tiny_pct = Pct(static_cast<double>(w.small_kernel_count), static_cast<double>(w.kernel_count));
      const double busy_pct = Pct(static_cast<double>(w.device_busy_ns), step_ns);
      if (tiny_pct >= 50 && busy_pct < 70) {
        o.patterns.push_back(
            {"tiny_kernels",
             busy_pct < 40 ? "high" : "moderate",
             Fmt("%.0f%% of the kernels run shorter than %.0f us, about the 20-40 us it takes to "
                 "launch one, and the GPU is busy (a kernel, copy or memset running) only %.1f%% of the time inside "
                 "the steps (GPU utilization, above, counts the whole wall time): the host cannot launch "
                 "fast enough. Fuse ops (XLA / torch.compile), use CUDA Graphs, or raise the batch size.",
                 tiny_pct, static_cast<double>(in.small_kernel_ns) / 1e3, busy_pct),
             {{"tiny_kernel_pct", tiny_pct},
              {"kernels_per_step", static_cast<double>(w.kernel_count) / steps},
              {"device_busy_pct", busy_pct}}});
      }
    }
    // 3. Ops placed on the host.
    const double host_pct = w.pct(Bucket::kHostCompute);
    if (w.has_device && host_pct >= 10) {
      std::string top;
      for (size_t i = 0; i < in.ops->host.rows.size() && i < 3; ++i) {
        if (in.ops->host.rows[i].name == "IDLE") continue;
        top += (top.empty() ? "" : ", ") + in.ops->host.rows[i].name;
      }
      o.patterns.push_back({"ops_on_host",
                            host_pct >= 20 ? "high" : "moderate",
                            Fmt("%.1f%% of the step time is host compute while the GPU waits: ops placed on the CPU "
                                "(check device placement and ops without a GPU kernel).",
                                host_pct) +
                                (top.empty() ? "" : " Largest host ops: " + top + "."),
                            {{"host_compute_pct", host_pct}}});
    }
    // 4. Host<->device copies per step.
    const double copy_pct = Pct(static_cast<double>(w.h2d_ns + w.d2h_ns), step_ns);
    const double d2h_per_step = static_cast<double>(w.d2h_count) / steps;
    if (copy_pct >= 5 || d2h_per_step >= 10) {
      o.patterns.push_back({"host_device_copies",
                            copy_pct >= 20 ? "high" : "moderate",
                            Fmt("Per step: %.1f host-to-device and %.1f device-to-host copies (%.1f MB in all), "
                                "%.1f%% of the step time. Keep tensors on the GPU, avoid .item()/.cpu() in the loop, "
                                "use pinned memory and non_blocking copies.",
                                static_cast<double>(w.h2d_count) / steps, d2h_per_step,
                                static_cast<double>(w.h2d_bytes + w.d2h_bytes) / 1e6 / steps, copy_pct),
                            {{"h2d_per_step", static_cast<double>(w.h2d_count) / steps},
                             {"d2h_per_step", d2h_per_step},
                             {"copy_pct", copy_pct}}});
    }
    // 5. Collectives' share of the step.
    const double coll = w.pct(Bucket::kDeviceCollectives);
    if (coll >= kModerateCollectivesPct) {
      o.patterns.push_back(
          {"collectives",
           coll >= kHighCollectivesPct ? "high" : "moderate",
           Fmt("%.1f%% of the step time is collective communication (NCCL) not hidden by compute. "
               "Overlap communication with the backward pass (bucketed all-reduce) or reduce its size.",
               coll),
           {{"collectives_pct", coll}}});
    }
  }
  return o;
}

void OverviewSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.Key("summary");
  WriteStepWindowJson(w, window);
  w.KV("gpu_utilization_pct", gpu_utilization_pct);
  w.KV("gpu_utilization_definition", kGpuUtilizationDefinition);
  w.KV("gpu_utilization_window_ns", gpu_utilization_window_ns);
  w.KV("host_op_pct", host_op_pct);
  w.KV("device_op_pct", device_op_pct);
  w.KV("has_device", has_device);
  w.Key("recommendation");
  w.BeginObject();
  w.KV("bottleneck", InputBoundName(bound));
  w.KV("input_class", InputBoundClass(bound));
  w.KV("statement", statement);
  w.KV("next_step", next_step);
  w.Key("advice");
  w.BeginArray();
  for (const std::string& a : advice) w.String(a);
  w.EndArray();
  w.KV("precision_statement", precision_statement);
  w.Key("patterns");
  w.BeginArray();
  for (const Pattern& p : patterns) {
    w.BeginObject();
    w.KV("id", p.id);
    w.KV("severity", p.severity);
    w.KV("text", p.text);
    w.Key("numbers");
    w.BeginObject();
    for (const auto& [k, v] : p.numbers) w.KV(k, v);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.KV("top_ops_side", top_ops_side);
  w.Key("top_ops");
  w.BeginArray();
  for (const TopOp& t : top_ops) {
    w.BeginObject();
    w.KV("name", t.name);
    w.KV("type", t.type);
    w.KV("self_us", t.self_us);
    w.KV("self_pct", t.self_pct);
    w.KV("cumulative_pct", t.cumulative_pct);
    w.KV("tc_eligible", t.tc_eligible);
    w.KV("uses_tc", t.uses_tc);
    w.EndObject();
  }
  w.EndArray();
  w.Key("run_environment");
  WriteRunEnvironment(w, env);
  w.EndObject();
}

void WriteRunEnvironment(JsonWriter& w, const RunEnvironment& env) {
  w.BeginObject();
  w.KV("hostname", env.hostname);
  w.KV("device_type", env.device_type);
  w.KV("device_core_count", env.device_core_count);
  w.KV("step_source", env.step_source);
  w.KV("breakdown_mode", env.breakdown_mode);
  w.KV("gpu_note", env.gpu_note);
  if (!env.opened_run.empty()) w.KV("opened_run", env.opened_run);
  w.Key("devices");
  w.BeginArray();
  for (const DeviceDef& d : env.devices) {
    w.BeginObject();
    w.KV("ordinal", static_cast<uint32_t>(d.ordinal));
    w.KV("name", d.name);
    w.KV("memory_bytes", d.memory_bytes);
    w.KV("sm_count", d.sm_count);
    w.KV("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace liveprof
