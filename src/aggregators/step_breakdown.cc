#include "aggregators/step_breakdown.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "aggregators/tf_op_name.h"

namespace liveprof {

namespace {

constexpr auto EndLess = [](const Segment& a, const Segment& b) { return a.end < b.end; };

// The device and host runs, each sorted by end if it is not, merged into one.
const std::vector<Segment>& MergeByEnd(BreakdownScratch* scratch) {
  std::vector<Segment>& d = scratch->device_segs;
  std::vector<Segment>& h = scratch->host_segs;
  for (std::vector<Segment>* run : {&d, &h}) {
    if (!std::is_sorted(run->begin(), run->end(), EndLess)) {
      std::stable_sort(run->begin(), run->end(), EndLess);
    }
  }
  if (h.empty()) return d;
  if (d.empty()) return h;
  scratch->merged.resize(d.size() + h.size());
  std::merge(d.begin(), d.end(), h.begin(), h.end(), scratch->merged.begin(), EndLess);
  return scratch->merged;
}

struct SweepResult {
  std::array<uint64_t, kSpanTypeCount> type_ns{};
  uint64_t covered_ns = 0;  // covered by any segment.
  uint64_t device_ns = 0;   // covered by a device segment.
};

// The time each type is the highest one present (§2.5), without sorting the
// boundaries: for each type t present, L(t) = |union of the segments of type
// >= t|, and type t owns L(t) - L(next type present). A union over segments
// taken by DESCENDING end needs one running component: a segment that ends at
// or after the component's begin joins it (its end cannot pass the
// component's end), else it starts a new one wholly to the left. So one
// backward pass over `segs` (sorted by end) updates, per segment, the
// components of every threshold at or below its type.
SweepResult SweepByPriority(const std::vector<Segment>& segs, uint32_t present) {
  SweepResult out;
  constexpr uint64_t kNone = ~uint64_t{0};
  std::array<uint64_t, kSpanTypeCount + 1> lo, hi, len{};
  lo.fill(kNone);
  hi.fill(kNone);
  // Component kSpanTypeCount: device segments, for the busy time.
  constexpr size_t kDevice = kSpanTypeCount;
  auto join = [&](size_t j, uint64_t b, uint64_t e) {
    if (e >= lo[j]) {
      lo[j] = std::min(lo[j], b);
    } else {
      len[j] += hi[j] - lo[j];
      hi[j] = e;
      lo[j] = b;
    }
  };
  // rank[t]: how many types present are <= t, so a segment of type t
  // updates the components 0..rank[t]-1 (the thresholds at or below it).
  std::array<uint8_t, kSpanTypeCount> rank{};
  for (size_t t = 0, n = 0; t < kSpanTypeCount; ++t) {
    if (present & (1u << t)) ++n;
    rank[t] = static_cast<uint8_t>(n);
  }
  for (size_t i = segs.size(); i-- > 0;) {
    const Segment& s = segs[i];
    for (size_t j = 0; j < rank[s.type]; ++j) join(j, s.begin, s.end);
    if (s.device) join(kDevice, s.begin, s.end);
  }
  for (size_t j = 0; j <= kSpanTypeCount; ++j) len[j] += hi[j] - lo[j];
  uint32_t types = present;
  for (size_t j = 0; types != 0; ++j) {
    const unsigned t = static_cast<unsigned>(std::countr_zero(types));
    types &= types - 1;
    out.type_ns[t] = len[j] - (types != 0 ? len[j + 1] : 0);
  }
  out.covered_ns = present != 0 ? len[0] : 0;
  out.device_ns = len[kDevice];
  return out;
}

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

  // Each event taking part becomes a segment clipped to the span, in two
  // runs (device, host), each in order of end already when events arrive in
  // completion order (else sorted), then merged.
  std::vector<Segment>& device_segs = scratch->device_segs;
  std::vector<Segment>& host_segs = scratch->host_segs;
  device_segs.clear();
  host_segs.clear();
  const uint64_t sb = row.begin_ns, se = row.end_ns;
  bool has_compute = false;
  uint32_t present = 0;  // bit t: a segment of type t exists.
  auto add = [&](std::vector<Segment>& segs, const Event& e, SpanType t, bool device) {
    const uint64_t b = std::max(e.ts, sb), en = std::min(e.end(), se);
    if (en <= b) return;  // outside the span: it changes nothing.
    segs.push_back({b, en, static_cast<uint8_t>(t), device});
    present |= 1u << static_cast<unsigned>(t);
  };
  if (use_device) {
    device_segs.reserve(step.device_events.size());
    for (const Event& e : step.device_events) {
      const SpanType t = ClassifyDeviceEvent(e, scratch->NameBits(catalog, e.name));
      if (t == SpanType::kDeviceCompute16 || t == SpanType::kDeviceCompute32) has_compute = true;
      add(device_segs, e, t, true);
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
  if (use_host) {
    host_segs.reserve(step.host_events.size());
    for (const Event& e : step.host_events) {
      bool ignore = false;
      const SpanType t =
          ClassifyHostEvent(e, scratch->NameBits(catalog, e.name), device_step, &ignore);
      if (ignore) continue;
      if (t == SpanType::kHostCompute) has_compute = has_compute || !device_step;
      add(host_segs, e, t, false);
    }
  }
  *well_formed = has_compute;
  present &= ~1u;  // "unknown" time is what nothing else covers.
  const std::vector<Segment>& segs = MergeByEnd(scratch);
  const SweepResult r = SweepByPriority(segs, present);
  for (size_t t = 1; t < kSpanTypeCount; ++t) row.type_ns[t] = r.type_ns[t];
  row.type_ns[0] = row.step_ns() - r.covered_ns;
  row.device_busy_ns = r.device_ns;
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
