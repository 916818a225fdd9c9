#include "aggregators/pytorch/pytorch_view.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

#include "aggregators/pytorch/interval_ranges.h"
#include "aggregators/pytorch/pytorch_names.h"

namespace liveprof {

std::string_view PytorchRoleName(PytorchRole role) {
  switch (role) {
    case PytorchRole::kKernel: return "Kernel";
    case PytorchRole::kMemcpy: return "Memcpy";
    case PytorchRole::kMemset: return "Memset";
    case PytorchRole::kCommunication: return "Communication";
    case PytorchRole::kRuntime: return "Runtime";
    case PytorchRole::kDataLoader: return "DataLoader";
    case PytorchRole::kCpuOp: return "CPU Exec";
    case PytorchRole::kOther: return "Other";
  }
  return "?";
}

namespace {

constexpr int64_t kMaxTs = std::numeric_limits<int64_t>::max();  // sys.maxsize.
constexpr int64_t kMinTs = std::numeric_limits<int64_t>::min();

using ranges::IntersectRanges;
using ranges::MergeRanges;
using ranges::MergeSortedRanges;
using ranges::OverlapLength;
using ranges::Range;
using ranges::Ranges;
using ranges::SubtractRanges;

using pytorch::NameClass;
using pytorch::NameClassifier;

// ---- Records.

enum class RecType : uint8_t { kDevice, kRuntime, kHost, kStep };
constexpr uint8_t kNoRole = 0xff;

struct Rec {
  int64_t ts;
  int64_t end;
  int64_t step_num;  // kStep.
  uint32_t corr;
  RecType type;
  uint8_t role;  // PytorchRole, or kNoRole.
  uint8_t device;
  bool is_kernel;   // any Kernel event (GPU utilization, section 5).
  bool counts_cpu;  // Operator / ProfilerStep: the fallback step's extent.
};

bool IsBadSpan(const Event& e) { return e.dur > kMaxEventDurationNs || e.ts > kMaxEventDurationNs; }

// Builds the record of `e`, or returns false for kinds the overview ignores.
bool MakeRec(const Event& e, NameClassifier& names, Rec* r) {
  r->ts = static_cast<int64_t>(e.ts);
  r->end = static_cast<int64_t>(e.ts + e.dur);
  r->step_num = 0;
  r->corr = e.corr;
  r->role = kNoRole;
  r->device = e.device;
  r->is_kernel = false;
  r->counts_cpu = false;
  switch (e.kind) {
    case EventKind::kKernel:
      r->type = RecType::kDevice;
      r->is_kernel = true;
      r->role = static_cast<uint8_t>(names.IsCommunication(e.payload.kernel.op) ? PytorchRole::kCommunication
                                                                                : PytorchRole::kKernel);
      return true;
    case EventKind::kMemcpyHtoD:
    case EventKind::kMemcpyDtoH:
    case EventKind::kMemcpyDtoD:
    case EventKind::kMemcpyHtoH:
    case EventKind::kMemcpyPtoP:
    case EventKind::kMemcpyOther:
      r->type = RecType::kDevice;
      r->role = static_cast<uint8_t>(PytorchRole::kMemcpy);
      return true;
    case EventKind::kMemset:
      r->type = RecType::kDevice;
      r->role = static_cast<uint8_t>(PytorchRole::kMemset);
      return true;
    case EventKind::kRuntimeApi:
      // The plugin ignores cuda_driver events entirely (docs/semantics-pytorch.md §0.3): no Runtime, no launch.
      if (e.sub == static_cast<uint8_t>(ApiLayer::kDriver)) return false;
      r->type = RecType::kRuntime;
      r->role = static_cast<uint8_t>(PytorchRole::kRuntime);
      return true;
    case EventKind::kStepMarker:
      r->type = RecType::kStep;
      r->step_num = e.payload.step.step_num;
      r->counts_cpu = true;
      return true;
    case EventKind::kInputSpan:
      r->type = RecType::kHost;
      r->role = static_cast<uint8_t>(PytorchRole::kDataLoader);
      r->counts_cpu = true;
      return true;
    case EventKind::kFrameworkOp:
    case EventKind::kHostSpan: {
      const bool is_operator = e.kind == EventKind::kFrameworkOp;  // else UserAnnotation.
      int64_t step_num = 0;
      switch (names.Get(e.name, &step_num)) {
        case NameClass::kProfilerStep:
          r->type = RecType::kStep;
          // A replay's later loop numbers its steps on (kFlagStepShift).
          r->step_num = step_num + ((e.flags & kFlagStepShift) != 0 ? e.payload.step.step_num : 0);
          r->counts_cpu = true;
          return true;
        case NameClass::kDataLoader: r->role = static_cast<uint8_t>(PytorchRole::kDataLoader); break;
        case NameClass::kCommunication: r->role = static_cast<uint8_t>(PytorchRole::kCommunication); break;
        default: r->role = static_cast<uint8_t>(PytorchRole::kCpuOp); break;
      }
      r->type = RecType::kHost;
      r->counts_cpu = is_operator;
      return true;
    }
    default: return false;
  }
}

struct DeviceOp {
  int64_t ts;
  int64_t end;
  int32_t next;  // next device op of the same Runtime, or -1.
  bool matched;  // credited to a step through its Runtime.
};

struct Runtime {
  int64_t ts;
  int64_t end;
  int32_t head;  // its device ops (linked through DeviceOp::next), or -1.
  int32_t tail;
};

struct OpList {
  int32_t head = -1;
  int32_t tail = -1;
};

void Append(std::vector<DeviceOp>& ops, OpList& list, int32_t d) {
  if (list.head < 0) {
    list.head = list.tail = d;
  } else {
    ops[static_cast<size_t>(list.tail)].next = d;
    list.tail = d;
  }
}

std::string Href(std::string_view text, std::string_view url) {
  std::string s = "<a href=\"";
  s += url;
  s += "\" target=\"_blank\">";
  s += text;
  s += "</a>";
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------

PytorchOverview ComputePytorchOverview(std::span<const Event> events, const Catalog& catalog,
                                       const PytorchViewOptions& options) {
  PytorchOverview out;
  NameClassifier names(catalog);

  // Section 0.3: the kept events, stably sorted by ts.
  std::vector<Rec> recs;
  recs.reserve(events.size());
  for (const Event& e : events) {
    Rec r;
    if (!MakeRec(e, names, &r)) continue;
    if (IsBadSpan(e)) {
      ++out.bad_duration_events;
      continue;
    }
    if (e.ts % 1000 != 0 || e.dur % 1000 != 0) out.integer_us = false;
    recs.push_back(r);
  }
  // Stable order by ts: sort small (ts, index) keys, the index breaking ties.
  struct Key {
    int64_t ts;
    uint32_t index;
  };
  std::vector<Key> order(recs.size());
  for (size_t i = 0; i < recs.size(); ++i) order[i] = {recs[i].ts, static_cast<uint32_t>(i)};
  std::sort(order.begin(), order.end(),
            [](const Key& a, const Key& b) { return a.ts != b.ts ? a.ts < b.ts : a.index < b.index; });

  // One walk in ts order: role lists, host steps, device ops attached to
  // their Runtime (sections 1.1, 1.2, 2).
  std::array<Ranges, kPytorchRoleCount - 1> role_ranges;
  Ranges steps;
  std::vector<std::string> step_names;
  int64_t cpu_min = kMaxTs, cpu_max = kMinTs;
  std::vector<DeviceOp> device_ops;
  std::vector<Runtime> runtimes;
  std::unordered_map<uint32_t, int32_t> corr_to_runtime;
  std::unordered_map<uint32_t, OpList> pending;  // device ops before their Runtime.
  std::vector<Ranges> kernels_by_device(256);
  std::vector<bool> gpu_seen(256, false);

  for (const Key& key : order) {
    const Rec& r = recs[key.index];
    if (r.role != kNoRole) role_ranges[r.role].push_back({r.ts, r.end});
    if (r.counts_cpu) {
      cpu_min = std::min(cpu_min, r.ts);
      cpu_max = std::max(cpu_max, r.end);
    }
    switch (r.type) {
      case RecType::kStep:
        steps.push_back({r.ts, r.end});
        step_names.push_back(std::to_string(r.step_num));
        break;
      case RecType::kDevice: {
        const auto d = static_cast<int32_t>(device_ops.size());
        device_ops.push_back({r.ts, r.end, -1, false});
        const auto it = corr_to_runtime.find(r.corr);
        if (it != corr_to_runtime.end()) {
          Runtime& rt = runtimes[static_cast<size_t>(it->second)];
          OpList list{rt.head, rt.tail};
          Append(device_ops, list, d);
          rt.head = list.head;
          rt.tail = list.tail;
        } else {
          Append(device_ops, pending[r.corr], d);
        }
        if (r.is_kernel) {
          kernels_by_device[r.device].push_back({r.ts, r.end});
          gpu_seen[r.device] = true;
        }
        break;
      }
      case RecType::kRuntime: {
        OpList list;
        const auto it = pending.find(r.corr);
        if (it != pending.end()) {
          list = it->second;
          pending.erase(it);
        }
        corr_to_runtime[r.corr] = static_cast<int32_t>(runtimes.size());
        runtimes.push_back({r.ts, r.end, list.head, list.tail});
        break;
      }
      case RecType::kHost: break;
    }
  }

  if (steps.empty()) {
    // Section 1.1: one step "0" over the Operator / ProfilerStep events. With
    // none the plugin's step is a sentinel; we publish no step at all.
    if (cpu_min > cpu_max) return out;
    steps.push_back({cpu_min, cpu_max});
    step_names.push_back("0");
    out.fallback_step = true;
  }
  const size_t n_steps = steps.size();
  std::vector<int64_t> host_start(n_steps), host_end(n_steps);
  for (size_t i = 0; i < n_steps; ++i) {
    host_start[i] = steps[i].first;
    host_end[i] = steps[i].second;
  }

  // Section 1.2: sweep the Runtimes (already in stable start order) against
  // the host steps with one forward-only cursor.
  std::vector<Range> steps_device(n_steps, {kMaxTs, kMinTs});
  std::vector<uint64_t> steps_count(n_steps, 0);
  bool any_matched = false;
  {
    size_t i_step = 0, i_rt = 0;
    int64_t dev_min = kMaxTs, dev_max = kMinTs;
    while (i_step < n_steps && i_rt < runtimes.size()) {
      const Range& step = steps[i_step];
      const Runtime& rt = runtimes[i_rt];
      if (rt.ts < step.first) {
        ++i_rt;  // starts before the step (or straddles its start).
      } else if (rt.end <= step.second) {
        for (int32_t d = rt.head; d >= 0; d = device_ops[static_cast<size_t>(d)].next) {
          DeviceOp& op = device_ops[static_cast<size_t>(d)];
          dev_min = std::min(dev_min, op.ts);
          dev_max = std::max(dev_max, op.end);
          op.matched = true;
          ++steps_count[i_step];
          any_matched = true;
        }
        ++i_rt;
      } else if (rt.ts < step.second) {
        ++i_rt;  // straddles the step's end: credited to no step.
      } else {
        steps_device[i_step] = {dev_min, dev_max};
        ++i_step;
        dev_min = kMaxTs;
        dev_max = kMinTs;
      }
    }
    for (; i_step < n_steps; ++i_step) {
      steps_device[i_step] = {dev_min, dev_max};
      dev_min = kMaxTs;
      dev_max = kMinTs;
    }
  }

  // Section 1.3: adjust the bounds (GPU mode only).
  out.gpu_mode = any_matched;
  if (any_matched) {
    int64_t prev = steps[0].first;
    if (steps_device[0].first != kMaxTs) {
      for (const DeviceOp& op : device_ops) {
        if (!op.matched && op.end < steps_device[0].first) prev = std::max(prev, op.end);
      }
    }
    for (size_t i = 0; i < n_steps; ++i) {
      const int64_t start = std::max(prev, steps[i].first);
      int64_t end = steps[i].second;
      if (steps_device[i].first == kMaxTs) {
        end = std::max(end, start);
      } else {
        end = std::max(end, steps_device[i].second);
        if (end < start) end = start;
      }
      steps[i] = {start, end};
      prev = end;
    }
    // Section 1.4: drop the steps after the last one with device ops, and
    // that one too when it has under 80% of its predecessor's.
    if (options.remove_tail_steps && n_steps > 1) {
      ptrdiff_t i = static_cast<ptrdiff_t>(n_steps) - 1;
      while (i >= 0 && steps_count[static_cast<size_t>(i)] == 0) --i;
      if (i >= 0) {
        size_t keep = static_cast<size_t>(i) + 1;
        if (i > 0 && static_cast<double>(steps_count[static_cast<size_t>(i) - 1]) * 0.8 >
                         static_cast<double>(steps_count[static_cast<size_t>(i)])) {
          keep = static_cast<size_t>(i);
        }
        if (keep < n_steps) {
          out.dropped_tail_steps = n_steps - keep;
          steps.resize(keep);
          step_names.resize(keep);
        }
      }
    }
  }

  // Section 2: the united role lists and the column flags.
  for (Ranges& r : role_ranges) r = MergeSortedRanges(std::move(r));
  out.has_kernel = !role_ranges[static_cast<size_t>(PytorchRole::kKernel)].empty();
  out.has_runtime = !role_ranges[static_cast<size_t>(PytorchRole::kRuntime)].empty();
  out.has_communication = !role_ranges[static_cast<size_t>(PytorchRole::kCommunication)].empty();
  out.has_memcpy_or_memset = !role_ranges[static_cast<size_t>(PytorchRole::kMemcpy)].empty() ||
                             !role_ranges[static_cast<size_t>(PytorchRole::kMemset)].empty();
  out.show_gpu = out.has_runtime || out.has_kernel || out.has_memcpy_or_memset;
  if (out.show_gpu) {
    out.columns.insert(out.columns.end(), {PytorchRole::kKernel, PytorchRole::kMemcpy, PytorchRole::kMemset});
  }
  if (out.has_communication) out.columns.push_back(PytorchRole::kCommunication);
  if (out.show_gpu) out.columns.push_back(PytorchRole::kRuntime);
  out.columns.insert(out.columns.end(), {PytorchRole::kDataLoader, PytorchRole::kCpuOp, PytorchRole::kOther});

  // Section 3: carving in priority order, with the empty-free-set reset.
  std::array<Ranges, kPytorchRoleCount> cost;
  {
    Ranges slots;
    for (size_t role = 0; role + 1 < kPytorchRoleCount; ++role) {
      Ranges range;
      if (!slots.empty()) {
        range = IntersectRanges(slots, role_ranges[role]);
      } else {
        range = role_ranges[role];
        slots = MergeRanges(steps);
      }
      slots = SubtractRanges(slots, range);
      cost[role] = std::move(range);
    }
    cost[kPytorchRoleCount - 1] = std::move(slots);
  }

  // Per-step values and percentages (sections 3, 4).
  out.steps.resize(steps.size());
  std::array<double, kPytorchRoleCount> sum{};
  double sum_total = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    PytorchOverviewStep& s = out.steps[i];
    s.name = std::move(step_names[i]);
    s.host_start_ns = host_start[i];
    s.host_end_ns = host_end[i];
    s.start_ns = steps[i].first;
    s.end_ns = steps[i].second;
    s.device_ops = steps_count[i];
    s.total_ns = s.end_ns - s.start_ns;
    s.total_us = static_cast<double>(s.total_ns) / 1000.0;
    for (size_t r = 0; r < kPytorchRoleCount; ++r) {
      s.value_ns[r] = OverlapLength(cost[r], s.start_ns, s.end_ns);
      s.value_us[r] = static_cast<double>(s.value_ns[r]) / 1000.0;
      s.pct[r] = s.total_ns == 0 ? 0.0 : PyRound(100.0 * s.value_us[r] / s.total_us, 2);
      sum[r] += s.value_us[r];
    }
    sum_total += s.total_us;
  }

  // Section 4: averages over the kept steps.
  const double n = static_cast<double>(steps.size());
  PytorchOverviewAverage& avg = out.average;
  avg.total_us = sum_total / n;
  avg.total_rounded_us = PyRound(avg.total_us);
  for (size_t r = 0; r < kPytorchRoleCount; ++r) {
    avg.value_us[r] = sum[r] / n;
    avg.rounded_us[r] = PyRound(avg.value_us[r]);
    avg.pct[r] = avg.total_us == 0 ? 0.0 : PyRound(100.0 * avg.value_us[r] / avg.total_us, 2);
  }

  // Section 5: GPU Utilization over W = [first step start, last step end].
  out.window_start_ns = steps.front().first;
  out.window_end_ns = steps.back().second;
  const int64_t w_len = out.window_end_ns - out.window_start_ns;
  const std::map<uint8_t, PytorchGpuEstimates> estimates =
      EstimateGpus(events, catalog, out.window_start_ns, out.window_end_ns);
  for (size_t dev = 0; dev < gpu_seen.size(); ++dev) {
    if (!gpu_seen[dev]) continue;
    PytorchOverviewGpu g;
    g.device = static_cast<uint8_t>(dev);
    const Ranges merged = MergeSortedRanges(std::move(kernels_by_device[dev]));
    const int64_t busy = OverlapLength(merged, out.window_start_ns, out.window_end_ns);
    g.utilization = w_len == 0 ? 0.0 : (static_cast<double>(busy) / 1000.0) / (static_cast<double>(w_len) / 1000.0);
    g.utilization_pct = PyRound(100.0 * g.utilization, 2);
    if (const DeviceDef* def = catalog.Device(g.device)) {
      g.described = true;
      g.name = def->name;
      g.memory_bytes = def->memory_bytes;
      g.cc_major = def->cc_major;
      g.cc_minor = def->cc_minor;
    }
    if (const auto it = estimates.find(g.device); it != estimates.end()) g.estimates = it->second;
    out.gpus.push_back(std::move(g));
  }

  // Section 6, items 1, 4 and 5 (2, 3, 6, 7 need data this view does not have).
  if (avg.total_us != 0) {
    const double dataloader_ratio = avg.value_us[static_cast<size_t>(PytorchRole::kDataLoader)] / avg.total_us;
    if (dataloader_ratio > 0.05) {
      out.recommendations.push_back(
          "This run has high time cost on input data loading. " + PyFormatFixed(dataloader_ratio * 100, 1) +
          "% of the step time is in DataLoader. You could try to set num_workers on DataLoader's "
          "construction and " +
          Href("enable multi-processes on data loading",
               "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading") +
          ".");
    }
    const double communication_ratio = avg.value_us[static_cast<size_t>(PytorchRole::kCommunication)] / avg.total_us;
    if (communication_ratio > 0.1) {
      // The plugin's compress_url is a one-element tuple (a trailing comma),
      // so its link text is the tuple's repr.
      out.recommendations.push_back(
          "This run has high time cost on communication. " + PyFormatFixed(communication_ratio * 100, 1) +
          "% of the step time is in communication. You could try " +
          Href("Gradient Compression", "('https://pytorch.org/docs/stable/ddp_comm_hooks.html',)") + " or " +
          Href("Gradient Accumulation",
               "https://towardsdatascience.com/what-is-gradient-accumulation-in-deep-learning-ec034122cfa") +
          " or increase the batch size. Note: Gradient accumulation will increase global effective batch "
          "size, which may hurt model convergence and accuracy. For such case, you may want to evaluate " +
          Href("LAMB optimizer", "https://nvidia.github.io/apex/optimizers.html#apex.optimizers.FusedLAMB") + ".");
    }
  }
  {
    std::vector<uint8_t> low;
    for (const PytorchOverviewGpu& g : out.gpus) {
      if (g.utilization < 0.5) low.push_back(g.device);
    }
    if (!low.empty()) {
      // get_gpus_str: ", " between ids, but "and " (no comma, no space
      // before) ahead of the last one; "has" only when the text is one
      // character long.
      std::string list = std::to_string(low[0]);
      for (size_t i = 1; i < low.size(); ++i) {
        list += i == low.size() - 1 ? "and " : ", ";
        list += std::to_string(low[i]);
      }
      out.recommendations.push_back(
          "GPU " + list + (list.size() == 1 ? " has" : " have") +
          " low utilization. You could try to increase batch size to improve. Note: Increasing batch size "
          "may affect the speed and stability of model convergence.");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------

PytorchView::PytorchView(const Catalog* catalog, Diagnostics* diagnostics, Options options)
    : catalog_(catalog), diagnostics_(diagnostics), options_(options) {
  if (options_.max_events == 0) options_.max_events = 1;
  static const Catalog kNoNames;
  names_ = std::make_unique<pytorch::NameClassifier>(catalog_ != nullptr ? *catalog_ : kNoNames);
}

PytorchView::~PytorchView() = default;

void PytorchView::Consume(std::span<const Event> events) {
  // The buffer's whole room at once (address space; pages come as they are
  // written), and a full buffer is cut before it would grow: grown by
  // doubling, each copy moved the buffer into fresh pages (a page fault
  // costs ~10 us on a VM) and held the pipeline thread 50-100 ms in a run's
  // first seconds (bench/RESULTS.md, "Soak").
  if (events_.capacity() == 0 && !events.empty()) events_.reserve(options_.max_events + options_.max_events / 4);
  for (const Event& e : events) {
    if (!IsSpanKind(e.kind)) continue;  // the plugin reads complete events only.
    if (IsBadSpan(e)) {
      ++bad_duration_;
      if (diagnostics_ != nullptr) diagnostics_->Add(Diag::bad_duration);
      continue;
    }
    if (e.ts < cut_ns_ && e.end() <= cut_ns_) {
      ++dropped_events_;  // a late arrival from before the last cut.
      continue;
    }
    if (events_.size() == events_.capacity() && events_.size() > options_.max_events) Compact();
    events_.push_back(e);
  }
  if (events_.size() > options_.max_events) Compact();
}

// Cuts the buffer at a step start C: keeps the events with ts >= C or end > C
// (those still running at C too: GPU work of the step before C becomes
// "unmatched" device ops, which section 1.3 cuts off the first step, as the
// plugin does with a trace that starts mid-run). C is the earliest step
// start that leaves at most 1/2 of max_events (so compaction is amortized:
// a cut costs a few passes over the buffer, once per max_events / 2 new
// events; with 3/4 kept it came twice as often and took a quarter of the
// pipeline thread at 1 M events/s, bench/RESULTS.md); with no such step (no
// steps, or one step larger than the budget) C is the ts that keeps the
// newest half.
void PytorchView::Compact() {
  const size_t target = std::max<size_t>(1, options_.max_events / 2);
  if (events_.size() <= target) return;
  auto kept_at = [this](uint64_t cut) {
    size_t kept = 0;
    for (const Event& e : events_) kept += (e.ts >= cut || e.end() > cut) ? 1 : 0;
    return kept;
  };
  pytorch::NameClassifier& names = *names_;
  std::vector<uint64_t> step_starts;
  for (const Event& e : events_) {
    int64_t num = 0;
    if (e.kind == EventKind::kStepMarker || ((e.kind == EventKind::kFrameworkOp || e.kind == EventKind::kHostSpan) &&
                                             names.Get(e.name, &num) == NameClass::kProfilerStep)) {
      step_starts.push_back(e.ts);
    }
  }
  std::sort(step_starts.begin(), step_starts.end());
  step_starts.erase(std::unique(step_starts.begin(), step_starts.end()), step_starts.end());

  bool found = false;
  uint64_t cut = 0;
  if (!step_starts.empty()) {
    // kept(C) = events with ts >= C or end > C = those ending after C, and
    // the zero-length ones at C (ts <= end). One pass counts, per step
    // start, the events ending in (start[k-1], start[k]] and the zero-length
    // ones at start[k]; kept(start[k]) is then a suffix sum. (A pass per
    // candidate held the pipeline thread for 60 ms at 256 Ki events.)
    const size_t n = step_starts.size();
    std::vector<size_t> ending(n + 1, 0);  // [k]: events with end in (start[k-1], start[k]].
    std::vector<size_t> zero_at(n, 0);     // [k]: zero-length events at start[k].
    // k = the first step start >= end. Events come in end order but for
    // late ones: the last k, or the next, is nearly always it.
    size_t k = 0;
    for (const Event& e : events_) {
      const uint64_t end = e.end();
      auto is_k = [&](size_t i) { return (i == n || step_starts[i] >= end) && (i == 0 || step_starts[i - 1] < end); };
      if (!is_k(k)) {
        if (k < n && is_k(k + 1)) {
          ++k;
        } else {
          k = static_cast<size_t>(std::lower_bound(step_starts.begin(), step_starts.end(), end) - step_starts.begin());
        }
      }
      ++ending[k];
      if (e.dur == 0 && k < n && step_starts[k] == end) ++zero_at[k];
    }
    // kept(start[k]) = events ending after start[k] = sum of ending[k+1..n].
    std::vector<size_t> kept(n, 0);
    size_t after = 0;
    for (size_t k = n; k-- > 0;) {
      after += ending[k + 1];
      kept[k] = after + zero_at[k];
    }
    for (size_t k = 0; k < n; ++k) {
      if (step_starts[k] > cut_ns_ && kept[k] <= target) {
        cut = step_starts[k];
        found = true;
        break;
      }
    }
  }
  if (!found) {
    std::vector<uint64_t> ts;
    ts.reserve(events_.size());
    for (const Event& e : events_) ts.push_back(e.end());
    // The newest `target` events by end time; ties and straddlers aside.
    const size_t idx = events_.size() - target;
    std::nth_element(ts.begin(), ts.begin() + static_cast<ptrdiff_t>(idx), ts.end());
    cut = std::max(cut_ns_, ts[idx]);
    while (kept_at(cut) > options_.max_events) cut += (cut >> 4) + 1;  // degenerate ties only.
  }
  cut_ns_ = std::max(cut_ns_, cut);
  const size_t before = events_.size();
  std::erase_if(events_, [c = cut_ns_](const Event& e) { return !(e.ts >= c || e.end() > c); });
  dropped_events_ += before - events_.size();
}

PytorchOverview PytorchView::Snapshot() const {
  const Catalog empty;
  PytorchOverview o = ComputePytorchOverview(events_, catalog_ != nullptr ? *catalog_ : empty, options_);
  o.bad_duration_events = bad_duration_;
  o.dropped_events = dropped_events_;
  return o;
}

}  // namespace liveprof
