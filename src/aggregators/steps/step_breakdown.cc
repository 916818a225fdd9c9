#include "aggregators/steps/step_breakdown.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace liveprof {

namespace {

constexpr auto EndLess = [](const StepSpan& a, const StepSpan& b) { return a.end < b.end; };

// `spans` if in order of end (the usual case: events come in completion
// order), else a sorted copy in `copy`.
std::span<const StepSpan> ByEnd(const std::vector<StepSpan>& spans, std::vector<StepSpan>* copy) {
  if (std::is_sorted(spans.begin(), spans.end(), EndLess)) return spans;
  copy->assign(spans.begin(), spans.end());
  std::stable_sort(copy->begin(), copy->end(), EndLess);
  return *copy;
}

// The time each type is the highest one present (docs/semantics-tf.md §2.5), without sorting the
// boundaries: for each type t present, L(t) = |union of the segments of type
// >= t|, and type t owns L(t) - L(next type present). A union over segments
// taken by DESCENDING end needs one running component (DescendingEndUnion,
// gpu_timeline.h), so one backward pass joins each segment to the union of
// every threshold at or below its type, and one more for the device
// segments (busy time).
class PrioritySweep {
 public:
  explicit PrioritySweep(uint32_t present) : present_(present & ~1u) {  // 0: what nothing covers.
    // rank_[t]: how many types present are <= t; a segment of type t updates
    // the components 0..rank_[t]-1 (the thresholds at or below it).
    for (size_t t = 0, n = 0; t < kSpanTypeCount; ++t) {
      if (present_ & (1u << t)) ++n;
      rank_[t] = static_cast<uint8_t>(n);
    }
  }
  // Segments in order of descending end.
  void Add(uint64_t b, uint64_t e, SpanType type, bool device) {
    for (size_t j = 0, n = rank_[static_cast<size_t>(type)]; j < n; ++j) u_[j].Join(b, e);
    if (device) u_[kDevice].Join(b, e);
  }
  // Fills type_ns (type 0 = the span minus everything covered) and the busy time.
  void Finish(uint64_t span_ns, std::array<uint64_t, kSpanTypeCount>* type_ns, uint64_t* device_ns) {
    std::array<uint64_t, kSpanTypeCount + 1> len;
    for (size_t j = 0; j <= kDevice; ++j) len[j] = u_[j].Length();
    uint32_t types = present_;
    for (size_t j = 0; types != 0; ++j) {
      const unsigned t = static_cast<unsigned>(std::countr_zero(types));
      types &= types - 1;
      (*type_ns)[t] = len[j] - (types != 0 ? len[j + 1] : 0);
    }
    (*type_ns)[0] = span_ns - (present_ != 0 ? len[0] : 0);
    *device_ns = len[kDevice];
  }

 private:
  static constexpr size_t kDevice = kSpanTypeCount;
  uint32_t present_;
  std::array<uint8_t, kSpanTypeCount> rank_{};
  std::array<DescendingEndUnion, kSpanTypeCount + 1> u_{};
};

}  // namespace

std::string_view BucketName(Bucket b) {
  static constexpr std::string_view kNames[kBucketCount] = {
      "Device compute", "Device to device", "Device collective communication",
      "Host compute",   "Kernel launch",    "Input",
      "Output",         "Compilation",      "All others"};
  return kNames[static_cast<size_t>(b)];
}

std::string_view BucketKey(Bucket b) {
  static constexpr std::string_view kKeys[kBucketCount] = {"device_compute", "device_to_device", "device_collectives",
                                                           "host_compute",   "kernel_launch",    "input",
                                                           "output",         "compilation",      "all_others"};
  return kKeys[static_cast<size_t>(b)];
}

std::string_view BreakdownModeName(BreakdownMode m) {
  return m == BreakdownMode::kDeviceOnly ? "device_only" : "host_and_device";
}

StepBreakdownRow ComputeStepBreakdown(const StepRecord& step, BreakdownMode mode, bool profile_has_device,
                                      bool* well_formed) {
  BreakdownScratch scratch;
  return ComputeStepBreakdown(step, mode, profile_has_device, well_formed, &scratch);
}

StepBreakdownRow ComputeStepBreakdown(const StepRecord& step, BreakdownMode mode, bool profile_has_device,
                                      bool* well_formed, BreakdownScratch* scratch) {
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

  row.work = step.work;
  // Both runs by descending end, merged on the fly, each span cut to the
  // step's span (cutting keeps the order).
  const uint32_t host_types = device_step ? step.host_types : step.cpu_host_types;
  const uint32_t present = (use_device ? step.device_types : 0) | (use_host ? host_types : 0);
  constexpr uint32_t kCompute = (1u << static_cast<unsigned>(SpanType::kDeviceCompute16)) |
                                (1u << static_cast<unsigned>(SpanType::kDeviceCompute32));
  // A device step needs device compute (xprof: a group without it has no
  // step). A CPU-only step always has its row: with no host compute span in
  // it that the program named (an unannotated job: liveprof run's PyTorch
  // hooks mark steps, input and the model's forward and backward only; or
  // host level 1) its time that nothing else claims is host compute (the
  // optimizer's step, the loss, Python), so input and compute still add up
  // to the step.
  const bool unannotated_cpu = !device_step && !step.annotated_host_compute;
  *well_formed = device_step ? (present & kCompute) != 0 : true;
  const std::span<const StepSpan> dev =
      use_device ? ByEnd(step.device_spans, &scratch->device) : std::span<const StepSpan>();
  const std::span<const StepSpan> host =
      use_host ? ByEnd(step.host_spans, &scratch->host) : std::span<const StepSpan>();
  const uint64_t sb = row.begin_ns, se = row.end_ns;
  PrioritySweep sweep(present);
  // The step's GPU timeline over its device work's own range, in the same
  // pass (the device work is by descending end here too).
  GpuTimelineSweep gpu(step.device_begin_ns, step.device_end_ns);
  for (size_t i = dev.size(), k = host.size(); i > 0 || k > 0;) {
    const bool device = k == 0 || (i > 0 && dev[i - 1].end >= host[k - 1].end);
    const StepSpan& s = device ? dev[--i] : host[--k];
    if (device) gpu.Add(s.begin, s.end, s.work);
    const uint64_t b = std::max(s.begin, sb), e = std::min(s.end, se);
    if (e <= b) continue;  // outside the step's span.
    sweep.Add(b, e, device || device_step ? s.type : s.cpu_type, device);
  }
  sweep.Finish(row.step_ns(), &row.type_ns, &row.device_busy_ns);
  if (use_device) {
    row.gpu = gpu.Finish();
  } else if (step.has_device()) {  // a CPU-only reading of a step with device work: not walked above.
    GpuTimelineSweep cpu_gpu(step.device_begin_ns, step.device_end_ns);
    const std::span<const StepSpan> all = ByEnd(step.device_spans, &scratch->device);
    for (size_t i = all.size(); i > 0; --i) cpu_gpu.Add(all[i - 1].begin, all[i - 1].end, all[i - 1].work);
    row.gpu = cpu_gpu.Finish();
  }
  if (unannotated_cpu) {
    row.type_ns[static_cast<size_t>(SpanType::kHostCompute)] += row.type_ns[static_cast<size_t>(SpanType::kUnknown)];
    row.type_ns[static_cast<size_t>(SpanType::kUnknown)] = 0;
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
  return step_ns_sum == 0
             ? 0
             : 100.0 * static_cast<double>(bucket_ns[static_cast<size_t>(b)]) / static_cast<double>(step_ns_sum);
}

double StepWindow::precision16_pct() const {
  const uint64_t all = compute16_ns + compute32_ns;
  return all == 0 ? 0 : 100.0 * static_cast<double>(compute16_ns) / static_cast<double>(all);
}

StepBreakdown::StepBreakdown(Diagnostics* diag, Options options) : diag_(diag), options_(options) {}

void StepBreakdown::Consume(std::span<const StepRecord> steps) {
  for (const StepRecord& s : steps) {
    if (s.has_device()) has_device_ = true;
    ++steps_total_;
    bool well_formed = false;
    StepBreakdownRow row = ComputeStepBreakdown(s, options_.mode, has_device_, &well_formed, &scratch_);
    if (!well_formed) {
      ++steps_dropped_;
      if (diag_) diag_->Add(Diag::step_without_compute);
      continue;
    }
    rows_.push_back(row);
    ++rows_added_;
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
    w.h2d_count += r.work.h2d_count;
    w.d2h_count += r.work.d2h_count;
    w.d2d_count += r.work.d2d_count;
    w.h2d_bytes += r.work.h2d_bytes;
    w.d2h_bytes += r.work.d2h_bytes;
    w.d2d_bytes += r.work.d2d_bytes;
    w.h2d_ns += r.work.h2d_ns;
    w.d2h_ns += r.work.d2h_ns;
    w.kernel_count += r.work.kernel_count;
    w.small_kernel_count += r.work.small_kernel_count;
    w.device_busy_ns += r.device_busy_ns;
    w.gpu.Add(r.gpu);
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
    for (double& x : step_ms) x = std::abs(x - m);
    std::nth_element(step_ms.begin(), step_ms.begin() + static_cast<ptrdiff_t>(mid), step_ms.end());
    double mad = step_ms[mid];
    if (step_ms.size() % 2 == 0) {
      mad = (mad + *std::max_element(step_ms.begin(), step_ms.begin() + static_cast<ptrdiff_t>(mid))) / 2;
    }
    w.step_ms_mad = mad;
  }
  return w;
}

StepBreakdownSnapshot StepBreakdown::Snapshot(const WindowSel& sel) const {
  StepBreakdownSnapshot s;
  s.mode = options_.mode;
  s.window = Window(sel);
  size_t start = WindowStart(sel);
  const size_t end = WindowEnd(sel);
  if (end - start > options_.graph_rows) {
    s.rows_left_out = end - start - options_.graph_rows;
    start = end - options_.graph_rows;
  }
  s.rows.assign(rows_.begin() + static_cast<ptrdiff_t>(start), rows_.begin() + static_cast<ptrdiff_t>(end));
  s.steps_total = steps_total_;
  s.steps_dropped = steps_dropped_;
  s.rows_cap = options_.graph_rows;
  s.steps_kept = options_.max_steps;
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
  w.KV("device_compute_32bit_pct", win.compute16_ns + win.compute32_ns == 0 ? 0.0 : 100.0 - win.precision16_pct());
  w.EndObject();
}

void StepBreakdownSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.KV("mode", BreakdownModeName(mode));
  w.KV("steps_total", steps_total);
  w.KV("steps_dropped", steps_dropped);
  w.KV("rows_cap", rows_cap);
  w.KV("rows_left_out", rows_left_out);
  w.KV("steps_kept", steps_kept);
  w.Key("window");
  WriteStepWindowJson(w, window);
  if (window.has_device) {  // the window's steps' GPU timelines, summed.
    w.Key("gpu_timeline");
    window.gpu.WriteJson(w);
  }
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
    if (r.has_device) {
      w.Key("gpu");
      r.gpu.WriteJson(w);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace liveprof
