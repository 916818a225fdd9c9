#include "aggregators/step_breakdown.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "aggregators/tf_op_name.h"

namespace liveprof {

namespace {

constexpr uint64_t Overlap(uint64_t b0, uint64_t e0, uint64_t b1, uint64_t e1) {
  const uint64_t b = std::max(b0, b1), e = std::min(e0, e1);
  return e > b ? e - b : 0;
}

// Boundary keys: (time - base) << 7 | is_begin << 6 | is_device << 5 | type.
// Sorting the keys orders by time, ends before begins (§2.5).
constexpr int kTypeBits = 5;
constexpr uint64_t kDeviceBit = uint64_t{1} << kTypeBits;
constexpr uint64_t kBeginBit = uint64_t{1} << (kTypeBits + 1);
constexpr int kTimeShift = kTypeBits + 2;

}  // namespace

std::string_view BucketName(Bucket b) {
  static constexpr std::string_view kNames[kBucketCount] = {
      "Device compute", "Device to device", "Device collective communication",
      "Host compute",   "Kernel launch",    "Input",
      "Output",         "Compilation",      "All others"};
  return kNames[static_cast<size_t>(b)];
}

std::string_view BucketKey(Bucket b) {
  static constexpr std::string_view kKeys[kBucketCount] = {
      "device_compute", "device_to_device", "device_collectives", "host_compute", "kernel_launch",
      "input",          "output",           "compilation",        "all_others"};
  return kKeys[static_cast<size_t>(b)];
}

std::string_view BreakdownModeName(BreakdownMode m) {
  return m == BreakdownMode::kDeviceOnly ? "device_only" : "host_and_device";
}

uint8_t ClassifyName(std::string_view name) {
  uint8_t bits = kNameClassified;
  if (StartsWithNoCase(name, "nccl")) bits |= kNameCollective;
  if (name.find("half") != std::string_view::npos || name.find("fp16") != std::string_view::npos) {
    bits |= kName16Bit;
  }
  if (name.starts_with("EagerExecute") || name.starts_with("EagerLocalExecute") ||
      name.starts_with("EagerKernelExecute") || name.starts_with("FunctionRun")) {
    bits |= kNameIgnored;
  }
  if (StartsWithNoCase(name, "memcpyhtod") || name.starts_with("InfeedEnqueue")) bits |= kNameToDevice;
  if (StartsWithNoCase(name, "memcpyhtoh")) bits |= kNameHostToHost;
  if (name.starts_with("ExecutorState::Process")) bits |= kNameExecutor;
  if (StartsWithNoCase(name, "iteratorgetnext")) bits |= kNameWaitInput;
  return bits;
}

SpanType ClassifyDeviceEvent(const Event& e, uint8_t name_bits) {
  switch (e.kind) {
    case EventKind::kMemcpyHtoD: return SpanType::kHostToDevice;
    case EventKind::kMemcpyDtoH: return SpanType::kDeviceToHost;
    case EventKind::kMemcpyDtoD:
    case EventKind::kMemcpyPtoP: return SpanType::kDeviceToDevice;
    case EventKind::kMemcpyHtoH: return SpanType::kHostToHost;
    default: break;
  }
  if (e.kind == EventKind::kKernel && (name_bits & kNameCollective) != 0) {
    return SpanType::kDeviceCollectives;
  }
  // §2.3: 16-bit when the producer says so, or the name has "half" / "fp16".
  if ((e.flags & kFlag16Bit) != 0 || (name_bits & kName16Bit) != 0) return SpanType::kDeviceCompute16;
  return SpanType::kDeviceCompute32;
}

SpanType ClassifyHostEvent(const Event& e, uint8_t name_bits, bool has_device, bool* ignore) {
  *ignore = (name_bits & kNameIgnored) != 0;
  if (*ignore) return SpanType::kUnknown;
  if (e.kind == EventKind::kInputSpan &&
      static_cast<InputStage>(e.sub) == InputStage::kEnqueue) {
    return SpanType::kHostToDevice;  // §2.3 host rule 1 (InfeedEnqueue / MemcpyHToD).
  }
  if (name_bits & kNameToDevice) return SpanType::kHostToDevice;
  if (name_bits & kNameHostToHost) return SpanType::kHostToHost;
  if (has_device && (e.kind == EventKind::kRuntimeApi || (name_bits & kNameExecutor) != 0)) {
    return SpanType::kHostPrepare;
  }
  if (e.kind == EventKind::kInputSpan || (name_bits & kNameWaitInput) != 0) {
    return SpanType::kHostWaitInput;
  }
  return SpanType::kHostCompute;
}

SpanType ClassifyDeviceEvent(const Event& e, std::string_view name) {
  return ClassifyDeviceEvent(e, ClassifyName(name));
}

SpanType ClassifyHostEvent(const Event& e, std::string_view name, bool has_device, bool* ignore) {
  return ClassifyHostEvent(e, ClassifyName(name), has_device, ignore);
}

uint8_t BreakdownScratch::NameBits(const Catalog& catalog, NameId id) {
  if (id >= name_bits.size()) name_bits.resize(id + 1, 0);
  uint8_t& bits = name_bits[id];
  if (bits == 0) bits = ClassifyName(catalog.Name(id));
  return bits;
}

StepBreakdownRow ComputeStepBreakdown(const StepRecord& step, const Catalog& catalog,
                                      BreakdownMode mode, bool profile_has_device,
                                      uint64_t small_kernel_ns, bool* well_formed) {
  BreakdownScratch scratch;
  return ComputeStepBreakdown(step, catalog, mode, profile_has_device, small_kernel_ns, well_formed,
                              &scratch);
}

StepBreakdownRow ComputeStepBreakdown(const StepRecord& step, const Catalog& catalog,
                                      BreakdownMode mode, bool profile_has_device,
                                      uint64_t small_kernel_ns, bool* well_formed,
                                      BreakdownScratch* scratch) {
  StepBreakdownRow row;
  row.step_num = step.step_num;
  row.seq = step.seq;
  row.host_begin_ns = step.host_begin_ns;
  row.host_end_ns = step.host_end_ns;
  row.has_device = step.has_device();
  row.closed_by_timeout = step.closed_by_timeout;

  const bool device_step = profile_has_device;
  const bool use_host = !device_step || mode == BreakdownMode::kHostAndDevice;
  const bool use_device = device_step;
  if (device_step && !step.has_device()) {
    *well_formed = false;  // xprof: a group with no device activity has no step.
    row.begin_ns = step.host_begin_ns;
    row.end_ns = step.host_end_ns;
    return row;
  }
  if (!device_step) {
    row.begin_ns = step.host_begin_ns;
    row.end_ns = step.host_end_ns;
  } else if (mode == BreakdownMode::kDeviceOnly) {
    row.begin_ns = step.device_begin_ns;
    row.end_ns = step.device_end_ns;
  } else if (step.host_begin_ns <= step.device_begin_ns && step.device_end_ns <= step.host_end_ns) {
    row.begin_ns = step.host_begin_ns;  // §2.4: the host marker contains the device span.
    row.end_ns = step.host_end_ns;
  } else {
    row.begin_ns = step.device_begin_ns;
    row.end_ns = step.device_end_ns;
  }

  // Boundaries of every event taking part, as four runs (device begins,
  // device ends, host begins, host ends). Each run is nearly in order already
  // (events arrive by end), so sorting a run is cheap and the runs merge.
  const size_t n = (use_host ? step.host_events.size() : 0) + (use_device ? step.device_events.size() : 0);
  std::vector<uint64_t>& keys = scratch->keys;
  std::vector<uint64_t>& ends = scratch->ends;
  keys.clear();
  ends.clear();
  keys.reserve(2 * n);
  ends.reserve(n);
  uint64_t base = ~uint64_t{0};
  if (use_host) for (const Event& e : step.host_events) base = std::min(base, e.ts);
  if (use_device) for (const Event& e : step.device_events) base = std::min(base, e.ts);
  bool has_compute = false;
  auto add = [&](const Event& e, SpanType t, bool device) {
    const uint64_t low = static_cast<uint64_t>(t) | (device ? kDeviceBit : 0);
    keys.push_back(((e.ts - base) << kTimeShift) | kBeginBit | low);
    ends.push_back(((e.end() - base) << kTimeShift) | low);
  };
  if (use_device) {
    for (const Event& e : step.device_events) {
      const SpanType t = ClassifyDeviceEvent(e, scratch->NameBits(catalog, e.name));
      if (t == SpanType::kDeviceCompute16 || t == SpanType::kDeviceCompute32) has_compute = true;
      add(e, t, true);
      switch (e.kind) {
        case EventKind::kKernel:
          ++row.kernel_count;
          if (e.dur < small_kernel_ns) ++row.small_kernel_count;
          break;
        case EventKind::kMemcpyHtoD:
          ++row.h2d_count;
          row.h2d_bytes += e.payload.copy.bytes;
          row.h2d_ns += e.dur;
          break;
        case EventKind::kMemcpyDtoH:
          ++row.d2h_count;
          row.d2h_bytes += e.payload.copy.bytes;
          row.d2h_ns += e.dur;
          break;
        case EventKind::kMemcpyDtoD:
        case EventKind::kMemcpyPtoP:
          ++row.d2d_count;
          row.d2d_bytes += e.payload.copy.bytes;
          break;
        default: break;
      }
    }
  }
  const size_t device_runs = keys.size();  // device begins = device ends in count.
  if (use_host) {
    for (const Event& e : step.host_events) {
      bool ignore = false;
      const SpanType t =
          ClassifyHostEvent(e, scratch->NameBits(catalog, e.name), device_step, &ignore);
      if (ignore) continue;
      if (t == SpanType::kHostCompute) has_compute = has_compute || !device_step;
      add(e, t, false);
    }
  }
  *well_formed = has_compute;
  if (ends.empty()) {
    row.type_ns[0] = row.step_ns();
  } else {
    // Sort each run (usually a no-op check), then merge the four runs.
    auto sort_run = [](auto first, auto last) {
      if (!std::is_sorted(first, last)) std::sort(first, last);
    };
    const auto split = static_cast<ptrdiff_t>(device_runs);
    sort_run(keys.begin(), keys.begin() + split);
    sort_run(keys.begin() + split, keys.end());
    sort_run(ends.begin(), ends.begin() + split);
    sort_run(ends.begin() + split, ends.end());
    std::vector<uint64_t>& merged = scratch->merged;
    auto merge_into = [&merged](std::vector<uint64_t>& v, ptrdiff_t mid) {
      if (mid == 0 || mid == static_cast<ptrdiff_t>(v.size())) return;
      merged.resize(v.size());
      std::merge(v.begin(), v.begin() + mid, v.begin() + mid, v.end(), merged.begin());
      v.swap(merged);
    };
    merge_into(keys, split);
    merge_into(ends, split);
    const auto begins = static_cast<ptrdiff_t>(keys.size());
    keys.insert(keys.end(), ends.begin(), ends.end());
    merge_into(keys, begins);
    std::array<uint32_t, kSpanTypeCount> count{};
    uint32_t mask = 0;  // bit t set while count[t] > 0.
    uint32_t device_active = 0;
    const uint64_t sb = row.begin_ns, se = row.end_ns;
    uint64_t covered = 0;
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      const uint64_t k = keys[i];
      const size_t t = k & (kDeviceBit - 1);
      if (k & kBeginBit) {
        if (count[t]++ == 0) mask |= 1u << t;
        if (k & kDeviceBit) ++device_active;
      } else {
        if (--count[t] == 0) mask &= ~(1u << t);
        if (k & kDeviceBit) --device_active;
      }
      const uint64_t t0 = (k >> kTimeShift) + base;
      const uint64_t t1 = (keys[i + 1] >> kTimeShift) + base;
      if (t1 == t0) continue;
      const uint64_t len = Overlap(t0, t1, sb, se);
      if (len == 0) continue;
      const size_t current = mask == 0 ? 0 : static_cast<size_t>(31 - std::countl_zero(mask));
      row.type_ns[current] += len;
      covered += len;
      if (device_active > 0) row.device_busy_ns += len;
    }
    row.type_ns[0] += row.step_ns() - covered;  // before the first / after the last event.
  }
  const auto& t = row.type_ns;
  auto T = [&](SpanType s) { return t[static_cast<size_t>(s)]; };
  auto& b = row.bucket_ns;
  b[static_cast<size_t>(Bucket::kDeviceCompute)] = T(SpanType::kDeviceCompute16) + T(SpanType::kDeviceCompute32);
  b[static_cast<size_t>(Bucket::kDeviceToDevice)] = T(SpanType::kDeviceToDevice) + T(SpanType::kDeviceWaitDevice);
  b[static_cast<size_t>(Bucket::kDeviceCollectives)] = T(SpanType::kDeviceCollectives);
  b[static_cast<size_t>(Bucket::kHostCompute)] = T(SpanType::kHostCompute);
  b[static_cast<size_t>(Bucket::kKernelLaunch)] = T(SpanType::kHostPrepare);
  b[static_cast<size_t>(Bucket::kInput)] =
      T(SpanType::kHostWaitInput) + T(SpanType::kHostToDevice) + T(SpanType::kDeviceWaitHost);
  b[static_cast<size_t>(Bucket::kOutput)] = T(SpanType::kDeviceToHost);
  b[static_cast<size_t>(Bucket::kCompilation)] = T(SpanType::kHostCompile);
  b[static_cast<size_t>(Bucket::kAllOthers)] = T(SpanType::kUnknown);
  return row;
}

void RunningStats::Add(double x) {
  if (n == 0) {
    min = max = x;
  } else {
    min = std::min(min, x);
    max = std::max(max, x);
  }
  ++n;
  sum += x;
  sum_sq += x * x;
}

double RunningStats::stddev() const {
  if (n < 2) return 0;
  const double var = (sum_sq - sum * sum / static_cast<double>(n)) / static_cast<double>(n - 1);
  return var > 0 ? std::sqrt(var) : 0;  // all-equal samples: exactly 0 (§0.4).
}

double StepWindow::pct(Bucket b) const {
  return step_ns_sum == 0 ? 0
                          : 100.0 * static_cast<double>(bucket_ns[static_cast<size_t>(b)]) /
                                static_cast<double>(step_ns_sum);
}

double StepWindow::precision16_pct() const {
  const uint64_t all = compute16_ns + compute32_ns;
  return all == 0 ? 0 : 100.0 * static_cast<double>(compute16_ns) / static_cast<double>(all);
}

StepBreakdown::StepBreakdown(const Catalog* catalog, Diagnostics* diag, Options options)
    : catalog_(catalog), diag_(diag), options_(options) {}

void StepBreakdown::Consume(std::span<const StepRecord> steps) {
  for (const StepRecord& s : steps) {
    if (s.has_device()) has_device_ = true;
    ++steps_total_;
    bool well_formed = false;
    StepBreakdownRow row = ComputeStepBreakdown(s, *catalog_, options_.mode, has_device_,
                                                options_.small_kernel_ns, &well_formed, &scratch_);
    if (!well_formed) {
      ++steps_dropped_;
      if (diag_) diag_->Add(Diag::step_without_compute);
      continue;
    }
    rows_.push_back(row);
    if (rows_.size() > options_.max_steps) rows_.pop_front();
  }
}

size_t StepBreakdown::WindowEnd(const WindowSel& sel) const {
  return rows_.size() > sel.offset_steps ? rows_.size() - sel.offset_steps : 0;
}

size_t StepBreakdown::WindowStart(const WindowSel& sel) const {
  const size_t end = WindowEnd(sel);
  size_t start = 0;
  if (sel.last_steps != 0 && end > sel.last_steps) start = end - sel.last_steps;
  if (sel.last_ns != 0 && end > 0) {
    const uint64_t newest = rows_[end - 1].end_ns;
    const uint64_t from = newest > sel.last_ns ? newest - sel.last_ns : 0;
    while (start < end && rows_[start].end_ns < from) ++start;
  }
  return std::min(start, end);
}

StepWindow StepBreakdown::Window(const WindowSel& sel) const {
  StepWindow w;
  const size_t start = WindowStart(sel);
  const size_t end = WindowEnd(sel);
  std::vector<double> step_ms;
  step_ms.reserve(end - start);
  for (size_t i = start; i < end; ++i) {
    const StepBreakdownRow& r = rows_[i];
    if (w.steps == 0) {
      w.first_step = r.step_num;
      w.first_begin_ns = r.begin_ns;
    } else if (i > start && r.host_begin_ns > rows_[i - 1].host_end_ns) {
      w.gap_ns += r.host_begin_ns - rows_[i - 1].host_end_ns;
    }
    ++w.steps;
    w.last_step = r.step_num;
    w.last_end_ns = std::max(w.last_end_ns, r.end_ns);
    const uint64_t ns = r.step_ns();
    w.step_ns_sum += ns;
    for (size_t b = 0; b < kBucketCount; ++b) {
      w.bucket_ns[b] += r.bucket_ns[b];
      w.bucket_ms[b].Add(static_cast<double>(r.bucket_ns[b]) / 1e6);
    }
    for (size_t t = 0; t < kSpanTypeCount; ++t) w.type_ns[t] += r.type_ns[t];
    w.step_ms.Add(static_cast<double>(ns) / 1e6);
    step_ms.push_back(static_cast<double>(ns) / 1e6);
    w.input_pct.Add(ns == 0 ? 0
                            : 100.0 * static_cast<double>(r.bucket_ns[static_cast<size_t>(Bucket::kInput)]) /
                                  static_cast<double>(ns));
    w.compute16_ns += r.type_ns[static_cast<size_t>(SpanType::kDeviceCompute16)];
    w.compute32_ns += r.type_ns[static_cast<size_t>(SpanType::kDeviceCompute32)];
    w.h2d_count += r.h2d_count;
    w.d2h_count += r.d2h_count;
    w.d2d_count += r.d2d_count;
    w.h2d_bytes += r.h2d_bytes;
    w.d2h_bytes += r.d2h_bytes;
    w.d2d_bytes += r.d2d_bytes;
    w.h2d_ns += r.h2d_ns;
    w.d2h_ns += r.d2h_ns;
    w.kernel_count += r.kernel_count;
    w.small_kernel_count += r.small_kernel_count;
    w.device_busy_ns += r.device_busy_ns;
    w.has_device = w.has_device || r.has_device;
  }
  if (!step_ms.empty()) {
    // The median: the mean of the two middle values for an even count.
    const size_t mid = step_ms.size() / 2;
    std::nth_element(step_ms.begin(), step_ms.begin() + static_cast<ptrdiff_t>(mid), step_ms.end());
    double m = step_ms[mid];
    if (step_ms.size() % 2 == 0) {
      m = (m + *std::max_element(step_ms.begin(), step_ms.begin() + static_cast<ptrdiff_t>(mid))) / 2;
    }
    w.step_ms_median = m;
  }
  return w;
}

StepBreakdownSnapshot StepBreakdown::Snapshot(const WindowSel& sel) const {
  StepBreakdownSnapshot s;
  s.mode = options_.mode;
  s.window = Window(sel);
  size_t start = WindowStart(sel);
  const size_t end = WindowEnd(sel);
  if (end - start > options_.graph_rows) start = end - options_.graph_rows;
  s.rows.assign(rows_.begin() + static_cast<ptrdiff_t>(start), rows_.begin() + static_cast<ptrdiff_t>(end));
  s.steps_total = steps_total_;
  s.steps_dropped = steps_dropped_;
  return s;
}

void WriteStepWindowJson(JsonWriter& w, const StepWindow& win) {
  w.BeginObject();
  w.KV("steps", win.steps);
  w.KV("first_step", win.first_step);
  w.KV("last_step", win.last_step);
  w.KV("step_time_ms_avg", win.step_ms.mean());
  w.KV("step_time_ms_stddev", win.step_ms.stddev());
  w.KV("step_time_ms_min", win.step_ms.min);
  w.KV("step_time_ms_max", win.step_ms.max);
  w.KV("step_time_ms_median", win.step_ms_median);
  w.Key("pct");
  w.BeginObject();
  for (size_t b = 0; b < kBucketCount; ++b) w.KV(BucketKey(static_cast<Bucket>(b)), win.pct(static_cast<Bucket>(b)));
  w.EndObject();
  w.Key("avg_ms");
  w.BeginObject();
  for (size_t b = 0; b < kBucketCount; ++b) w.KV(BucketKey(static_cast<Bucket>(b)), win.bucket_ms[b].mean());
  w.EndObject();
  w.KV("device_compute_16bit_pct", win.precision16_pct());
  w.KV("device_compute_32bit_pct",
       win.compute16_ns + win.compute32_ns == 0 ? 0.0 : 100.0 - win.precision16_pct());
  w.EndObject();
}

void StepBreakdownSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.KV("mode", BreakdownModeName(mode));
  w.KV("steps_total", steps_total);
  w.KV("steps_dropped", steps_dropped);
  w.Key("window");
  WriteStepWindowJson(w, window);
  w.Key("columns");
  w.BeginArray();
  for (size_t b = 0; b < kBucketCount; ++b) w.String(BucketName(static_cast<Bucket>(b)));
  w.EndArray();
  w.Key("rows");
  w.BeginArray();
  for (const StepBreakdownRow& r : rows) {
    w.BeginObject();
    w.KV("step", r.step_num);
    w.KV("begin_ns", r.begin_ns);
    w.KV("step_ms", static_cast<double>(r.step_ns()) / 1e6);
    w.Key("ms");
    w.BeginArray();
    for (size_t b = 0; b < kBucketCount; ++b) w.Double(static_cast<double>(r.bucket_ns[b]) / 1e6);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace liveprof
