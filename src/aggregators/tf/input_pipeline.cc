#include "aggregators/tf/input_pipeline.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "aggregators/pytorch/pytorch_names.h"

namespace liveprof {

namespace {

std::string Pct1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

double Ratio(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

bool EndsWithAny(std::string_view s, std::initializer_list<std::string_view> suffixes) {
  for (std::string_view x : suffixes)
    if (s.ends_with(x)) return true;
  return false;
}

bool ContainsAny(std::string_view s, std::initializer_list<std::string_view> parts) {
  for (std::string_view x : parts)
    if (s.find(x) != std::string_view::npos) return true;
  return false;
}

}  // namespace

std::string_view InputBoundName(InputBound b) {
  switch (b) {
    case InputBound::kHighly: return "HIGHLY input-bound";
    case InputBound::kModerately: return "MODERATELY input-bound";
    case InputBound::kPotentially: return "POTENTIALLY input-bound";
    case InputBound::kNot: return "NOT input-bound";
    case InputBound::kUnknown: break;
  }
  return "unknown";
}

std::string_view InputBoundClass(InputBound b) {
  switch (b) {
    case InputBound::kHighly: return "host";
    case InputBound::kModerately:
    case InputBound::kPotentially: return "both";
    case InputBound::kNot: return "device";
    case InputBound::kUnknown: break;
  }
  return "unknown";
}

InputBound ClassifyInputBound(double input_pct, double all_other_pct) {
  if (input_pct >= kHighlyInputBoundPct) return InputBound::kHighly;
  if (input_pct >= kModeratelyInputBoundPct) return InputBound::kModerately;
  if (all_other_pct >= kPotentiallyAllOtherPct) return InputBound::kPotentially;
  return InputBound::kNot;
}

std::string_view Level(double pct, double high, double moderate) {
  return pct >= high ? "high" : pct >= moderate ? "moderate" : "no";
}

std::string_view InputCategoryName(InputCategory c) {
  switch (c) {
    case InputCategory::kEnqueue: return "Enqueue";
    case InputCategory::kDemandedRead: return "Demanded file read";
    case InputCategory::kAdvancedRead: return "Advanced file read";
    case InputCategory::kPreprocessing: return "Preprocessing";
    case InputCategory::kUnknown: return "Unknown";
    case InputCategory::kNotInput: break;
  }
  return "Not an input op";
}

InputCategory CategorizeInputOp(std::string_view name, InputStage stage) {
  switch (stage) {
    case InputStage::kEnqueue: return InputCategory::kEnqueue;
    case InputStage::kRead: return InputCategory::kDemandedRead;
    case InputStage::kAdvancedRead: return InputCategory::kAdvancedRead;
    case InputStage::kPreprocess: return InputCategory::kPreprocessing;
    case InputStage::kWait: return InputCategory::kNotInput;
    case InputStage::kUnknown: break;
  }
  // IteratorGetNext suffers the stall, it does not cause it (docs/semantics-tf.md §3.4 item 1).
  if (name.starts_with("IteratorGetNext")) return InputCategory::kNotInput;
  if (name.starts_with("InfeedEnqueue") || name.starts_with("MemcpyHToD")) return InputCategory::kEnqueue;
  if (name.starts_with("Iterator::")) {  // legacy tf.data rules (§3.4 item 2).
    if (EndsWithAny(name,
                    {"::TFRecord", "::TextLine", "::FixedLengthRecord", "::SSTable", "::RecordIO", "::ArrayRecord"})) {
      return ContainsAny(name, {"::MemoryReader", "::MemoryWriter", "::Interleave", "::Prefetch", "::ParallelMap"})
                 ? InputCategory::kAdvancedRead
                 : InputCategory::kDemandedRead;
    }
    return InputCategory::kPreprocessing;
  }
  return InputCategory::kUnknown;
}

std::string_view InputSourceId(InputSource s) {
  switch (s) {
    case InputSource::kPytorchDataLoader: return "pytorch_dataloader";
    case InputSource::kTfData: return "tf_data";
    case InputSource::kUnknown: break;
  }
  return "unknown";
}

std::string_view InputSourceName(InputSource s) {
  switch (s) {
    case InputSource::kPytorchDataLoader: return "PyTorch DataLoader";
    case InputSource::kTfData: return "tf.data";
    case InputSource::kUnknown: break;
  }
  return "";
}

InputSource InputSourceOf(std::string_view name) {
  if (pytorch::IsDataLoaderName(name) || name.starts_with("DataLoader fetch#")) {
    return InputSource::kPytorchDataLoader;
  }
  if (name.starts_with("Iterator::") || name.starts_with("IteratorGetNext")) return InputSource::kTfData;
  return InputSource::kUnknown;
}

uint64_t LoaderWorkersWindow::fetch_ns() const {
  uint64_t sum = 0;
  for (const LoaderWorkerRow& r : workers) sum += r.fetch_ns;
  return sum;
}

double LoaderWorkersWindow::busy_pct() const {
  const double capacity = static_cast<double>(window_ns) * static_cast<double>(workers.size());
  return capacity > 0 ? std::min(100.0, 100.0 * static_cast<double>(fetch_ns()) / capacity) : 0;
}

void LoaderWorkers::Consume(std::span<const Event> events) {
  for (const Event& e : events) {
    if (e.kind != EventKind::kInputSpan || e.sub == static_cast<uint8_t>(InputStage::kWait)) continue;
    if (e.dur > kMaxEventDurationNs) continue;
    const uint32_t process = catalog_ != nullptr ? catalog_->Track(e.track).process : 0;
    std::string label(catalog_ != nullptr ? catalog_->ProcessLabel(process) : std::string_view());
    if (label.empty()) label = "process " + std::to_string(process);
    auto w = std::find_if(workers_.begin(), workers_.end(), [&](const Worker& x) { return x.label == label; });
    if (w == workers_.end()) {
      workers_.push_back(Worker{label, {}});
      std::sort(workers_.begin(), workers_.end(), [](const Worker& a, const Worker& b) { return a.label < b.label; });
      w = std::find_if(workers_.begin(), workers_.end(), [&](const Worker& x) { return x.label == label; });
    }
    const InputStage stage =
        e.sub <= static_cast<uint8_t>(InputStage::kWait) ? static_cast<InputStage>(e.sub) : InputStage::kUnknown;
    w->fetches.push_back(Fetch{e.ts, e.ts + e.dur, e.name, stage});
    if (w->fetches.size() > max_fetches_) w->fetches.pop_front();
    newest_end_ = std::max(newest_end_, e.ts + e.dur);
    auto t = std::find_if(totals_.begin(), totals_.end(), [&](const auto& x) { return x.first == e.name; });
    if (t == totals_.end()) {
      totals_.emplace_back(e.name, InputOpStats{});
      t = totals_.end() - 1;
    }
    t->second.stage = stage;
    ++t->second.occurrences;
    t->second.total_ns += e.dur;
    t->second.self_ns += e.dur;
  }
}

LoaderWorkersWindow LoaderWorkers::Window(uint64_t begin_ns, uint64_t end_ns) const {
  LoaderWorkersWindow out;
  out.window_ns = end_ns > begin_ns ? end_ns - begin_ns : 0;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const Worker& w : workers_) {
    LoaderWorkerRow row{w.label, 0, 0};
    spans.clear();
    for (const Fetch& f : w.fetches) {
      if (f.end <= begin_ns || f.begin >= end_ns) continue;
      ++row.fetches;
      spans.emplace_back(std::max(f.begin, begin_ns), std::min(f.end, end_ns));
    }
    std::sort(spans.begin(), spans.end());
    uint64_t covered_to = 0;  // the union: a nested or overlapping span counted once.
    for (const auto& [b, e] : spans) {
      const uint64_t from = std::max(b, covered_to);
      if (e > from) row.fetch_ns += e - from;
      covered_to = std::max(covered_to, e);
    }
    out.workers.push_back(std::move(row));
  }
  return out;
}

std::vector<InputOpStats> LoaderWorkers::Ops(uint64_t window_ns) const {
  std::vector<std::pair<NameId, InputOpStats>> by_name;
  if (window_ns == 0) {
    by_name = totals_;
  } else {
    const uint64_t from = newest_end_ > window_ns ? newest_end_ - window_ns : 0;
    for (const Worker& w : workers_) {
      for (const Fetch& f : w.fetches) {
        if (f.end < from) continue;
        auto t = std::find_if(by_name.begin(), by_name.end(), [&](const auto& x) { return x.first == f.name; });
        if (t == by_name.end()) {
          by_name.emplace_back(f.name, InputOpStats{});
          t = by_name.end() - 1;
        }
        t->second.stage = f.stage;
        ++t->second.occurrences;
        t->second.total_ns += f.end - f.begin;
        t->second.self_ns += f.end - f.begin;
      }
    }
  }
  std::vector<InputOpStats> out;
  for (auto& [name, s] : by_name) {
    s.name = catalog_ != nullptr ? catalog_->DisplayName(name) : "#" + std::to_string(name);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

std::string Seconds(uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", static_cast<double>(ns) / 1e9);
  return buf;
}

// "Make each batch cheaper", for a job with a GPU or with none.
std::string CheaperBatches(bool gpu) {
  return gpu ? "Make each batch cheaper: decode and augment on the GPU (torchvision.transforms.v2 on tensors, "
               "NVIDIA DALI), or preprocess the dataset once, offline."
             : "Make each batch cheaper: preprocess the dataset once, offline, and cache decoded samples; "
               "batch the transforms (torchvision.transforms.v2 on whole tensors).";
}

// The DataLoader's advice when its workers' rows are known.
std::vector<std::string> WorkerRecommendations(const InputPipelineSnapshot& s) {
  const std::string n = std::to_string(s.workers.workers.size());
  const std::string busy = Pct1(s.workers.busy_pct());
  std::vector<std::string> out;
  if (s.loader_verdict == "busy") {
    out = {
        "Add workers: raise num_workers on the DataLoader. Its " + n + " workers were busy fetching " + busy +
            "% of these steps' time: they do not keep up, and the training loop waits for them.",
        CheaperBatches(s.window.has_device),
        "Load further ahead: prefetch_factor (batches each worker loads in advance, 2 by default) "
        "absorbs batches that take longer than others.",
        "Keep the workers between epochs: persistent_workers=True (otherwise every epoch starts "
        "them again and its first batches wait for it).",
    };
  } else {
    out = {
        "More workers will not help: its " + n + " workers were idle most of these steps' time (busy " + busy +
            "%), so each batch was ready before the loop asked for it. The loop's wait is the hand-off of "
            "each batch from a worker to the training process (the loader's queue, unpickling, shared "
            "memory), paid once per batch.",
        "Hand over fewer, larger tensors: collate each batch into a few stacked tensors rather than many "
        "small tensors or Python objects (each one crosses between the processes on its own).",
        "Use larger batches: the hand-off is paid once per batch, so fewer, larger batches pay it less often.",
        "Keep the workers between epochs: persistent_workers=True (otherwise every epoch starts "
        "them again and its first batches wait for it).",
    };
  }
  if (s.window.has_device) {
    out.push_back(
        "Copy batches to the GPU faster: pin_memory=True on the DataLoader, and "
        ".to(device, non_blocking=True) on each batch.");
  }
  return out;
}

std::string_view InputClassStatement(InputBound b, bool has_device) {
  if (b == InputBound::kNot && !has_device) {
    return "Input on \"device\" (TF's name; this job has no device, so: the host's compute): the step's own "
           "work sets the step time; input is not the limit (under 5 % of the step time waits for it).";
  }
  switch (b) {
    case InputBound::kHighly:
      return "Input on \"host\": waiting for input is the largest part of the step (20 % or more of the step "
             "time): shorten the input first.";
    case InputBound::kModerately:
      return "Input on \"both\": waiting for input is a part of the step time (5 % to 20 %), the step's own "
             "work the rest: both matter.";
    case InputBound::kPotentially:
      return "Input on \"both\": little time waits for input as such, but 3 % or more is 'All Others', "
             "which may be input (I/O) or Python: both may matter.";
    case InputBound::kNot:
      return "Input on \"device\": the step's own work sets the step time; input is not the limit "
             "(under 5 % of the step time waits for it).";
    case InputBound::kUnknown: break;
  }
  return "";
}

}  // namespace

namespace {

// The recommendations (§3.4's four for tf.data; PyTorch's knobs for a
// DataLoader: torch.utils.data.DataLoader's documentation).
std::vector<std::string> Recommendations(const InputPipelineSnapshot& s) {
  const bool single_process = s.single_process_loader;
  if (s.source == InputSource::kPytorchDataLoader && !single_process && !s.loader_verdict.empty()) {
    return WorkerRecommendations(s);
  }
  if (s.source == InputSource::kPytorchDataLoader) {
    // A job with no device gets the host's advice: no copies to a GPU, the
    // batches made cheaper on the CPU.
    const bool gpu = s.window.has_device;
    std::vector<std::string> out = {
        single_process
            ? (gpu ? "Load batches in parallel: this DataLoader has num_workers=0, so the training loop "
                     "loads every batch itself. Set num_workers (e.g. to the CPU cores each GPU can have) so "
                     "that worker processes prepare the next batches while the GPU computes."
                   : "Load batches in parallel: this DataLoader has num_workers=0, so the training loop "
                     "loads every batch itself. Set num_workers (2 to 4 to start) so that worker processes "
                     "prepare the next batches while the model computes; on a CPU-only job they share the "
                     "cores with the model's own threads (torch.set_num_threads), so measure both.")
            : "Add workers: raise num_workers on the DataLoader (its workers do not keep up: the "
              "training loop still waits for them).",
        "Keep the workers between epochs: persistent_workers=True (otherwise every epoch starts "
        "them again and its first batches wait for it).",
        "Load further ahead: prefetch_factor (batches each worker loads in advance, 2 by default) "
        "absorbs batches that take longer than others.",
    };
    if (gpu) {
      out.push_back(
          "Copy batches to the GPU faster: pin_memory=True on the DataLoader, and "
          ".to(device, non_blocking=True) on each batch.");
    }
    out.push_back(CheaperBatches(gpu));
    return out;
  }
  // tf.data's four (§3.4), each only for a category that has time, the
  // largest first; none for a pipeline whose stages are not known.
  const std::pair<double, const char*> tips[] = {
      {s.enqueue_us, "Enqueuing data: you may want to combine small input data chunks into fewer but larger chunks."},
      {s.preprocessing_us,
       "Data preprocessing: you may increase num_parallel_calls in Dataset map() or preprocess the data "
       "offline."},
      {s.advanced_read_us,
       "Reading data from files in advance: you may tune parameters in the following functions "
       "(prefetch size, interleave cycle_length, reader buffer_size)."},
      {s.demanded_read_us,
       "Reading data from files on demand: you should read data IN ADVANCE using prefetch, "
       "interleave or a reader buffer."},
  };
  std::vector<std::pair<double, const char*>> shown;
  for (const auto& t : tips) {
    if (t.first > 0) shown.push_back(t);
  }
  std::stable_sort(shown.begin(), shown.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (const auto& t : shown) out.emplace_back(t.second);
  return out;
}

}  // namespace

InputPipelineSnapshot AnalyzeInputPipeline(const StepWindow& w, std::span<const InputOpRecord> input_ops,
                                           const LoaderWorkersWindow* workers) {
  InputPipelineSnapshot s;
  s.window = w;
  if (workers != nullptr && !workers->workers.empty()) s.workers = *workers;
  const uint64_t step = w.step_ns_sum;
  auto bucket = [&](Bucket b) { return w.bucket_ns[static_cast<size_t>(b)]; };
  s.input_pct = Ratio(bucket(Bucket::kInput), step);
  s.output_pct = Ratio(bucket(Bucket::kOutput), step);
  s.compute_on_host = bucket(Bucket::kDeviceCompute) == 0 && bucket(Bucket::kDeviceCollectives) == 0 &&
                      bucket(Bucket::kHostCompute) > 0;
  s.compute_pct = Ratio(bucket(s.compute_on_host ? Bucket::kHostCompute : Bucket::kDeviceCompute), step);
  s.collectives_pct = Ratio(bucket(Bucket::kDeviceCollectives), step);
  s.idle_pct = std::max(0.0, 100 - s.input_pct - s.output_pct - s.compute_pct - s.collectives_pct);
  s.kernel_launch_pct = Ratio(bucket(Bucket::kKernelLaunch), step);
  s.all_other_pct = Ratio(bucket(Bucket::kAllOthers), step);
  s.kernel_launch_level = Level(s.kernel_launch_pct, kHighKernelLaunchPct, kModerateKernelLaunchPct);
  s.all_other_level = Level(s.all_other_pct, kHighAllOtherPct, kModerateAllOtherPct);
  s.collectives_level = Level(s.collectives_pct, kHighCollectivesPct, kModerateCollectivesPct);

  // Host side first: the statements below need to know whether input ops ran.
  double cat_us[6] = {};
  uint64_t self_sum = 0;
  uint64_t wait_ns = 0;
  uint64_t source_ns[3] = {};  // by InputSource: the self time of its ops.
  for (const InputOpRecord& op : input_ops) {
    const InputSource source = InputSourceOf(op.name);
    source_ns[static_cast<size_t>(source)] += std::max<uint64_t>(op.self_ns, 1);
    const InputCategory c = CategorizeInputOp(op.name, op.stage);
    if (c == InputCategory::kNotInput) {  // the loop's waits: their whole time, each instant once.
      wait_ns += op.total_ns - std::min(op.total_ns, op.nested_wait_ns);
      s.waits += op.occurrences - std::min(op.occurrences, op.nested_waits);
      s.wait_names.push_back(op.name);
      if (op.name.find("_SingleProcessDataLoaderIter") != std::string::npos) s.single_process_loader = true;
      continue;
    }
    cat_us[static_cast<size_t>(c)] += static_cast<double>(op.self_ns) / 1e3;
    self_sum += op.self_ns;
  }
  for (const InputOpRecord& op : input_ops) {
    const InputCategory c = CategorizeInputOp(op.name, op.stage);
    if (c == InputCategory::kNotInput) continue;
    s.ops.push_back({op.name, op.occurrences, static_cast<double>(op.total_ns) / 1e6,
                     static_cast<double>(op.self_ns) / 1e6, Ratio(op.total_ns, self_sum), Ratio(op.self_ns, self_sum),
                     c});
  }
  std::sort(s.ops.begin(), s.ops.end(), [](const auto& a, const auto& b) {
    return a.self_ms != b.self_ms ? a.self_ms > b.self_ms : a.name < b.name;
  });
  const double enqueue = cat_us[static_cast<size_t>(InputCategory::kEnqueue)];
  const double demanded = cat_us[static_cast<size_t>(InputCategory::kDemandedRead)];
  const double advanced = cat_us[static_cast<size_t>(InputCategory::kAdvancedRead)];
  const double preprocessing = cat_us[static_cast<size_t>(InputCategory::kPreprocessing)];
  const double total_input = demanded + advanced + preprocessing;
  // §3.4 items 5-7: the GPU ratio = average host-to-device time / average step.
  const double h2d_avg = w.steps ? static_cast<double>(w.type_ns[static_cast<size_t>(SpanType::kHostToDevice)]) /
                                       static_cast<double>(w.steps)
                                 : 0;
  const double step_avg = w.steps ? static_cast<double>(step) / static_cast<double>(w.steps) : 0;
  const double ratio = step_avg > 0 ? std::min(1.0, h2d_avg / step_avg) : 0;
  // xprof scales by the enqueue time; with copies but no enqueue op (no
  // prefetch-to-device stage, a PyTorch job) that gives 0 to every category
  // above an op table full of time: the ops' self times are shown instead.
  s.enqueue_scaled = ratio > 0 && enqueue > 0;
  const double non_enqueue = s.enqueue_scaled ? enqueue * (1 - ratio) / ratio : total_input;
  s.enqueue_us = enqueue;
  if (total_input > 0) {
    s.demanded_read_us = non_enqueue * demanded / total_input;
    s.advanced_read_us = non_enqueue * advanced / total_input;
    s.preprocessing_us = non_enqueue * preprocessing / total_input;
  }
  s.unclassified_us = std::max(0.0, non_enqueue - s.demanded_read_us - s.advanced_read_us - s.preprocessing_us);
  s.input_ops_seen = demanded > 0 || advanced > 0 || preprocessing > 0;
  s.wait_ms = static_cast<double>(wait_ns) / 1e6;
  std::sort(s.wait_names.begin(), s.wait_names.end());
  const uint64_t pytorch_ns = source_ns[static_cast<size_t>(InputSource::kPytorchDataLoader)];
  const uint64_t tf_ns = source_ns[static_cast<size_t>(InputSource::kTfData)];
  s.source = pytorch_ns == 0 && tf_ns == 0 ? InputSource::kUnknown
             : pytorch_ns >= tf_ns         ? InputSource::kPytorchDataLoader
                                           : InputSource::kTfData;
  if (s.source == InputSource::kPytorchDataLoader) {
    char buf[64];  // "988.6 ms in 4 ", "870.4 s in 3522 ".
    const bool seconds = s.wait_ms >= 10'000;
    std::snprintf(buf, sizeof(buf), "%.1f %s in %llu ", seconds ? s.wait_ms / 1e3 : s.wait_ms, seconds ? "s" : "ms",
                  static_cast<unsigned long long>(s.waits));
    s.source_statement =
        "The input is a PyTorch DataLoader" +
        std::string(s.single_process_loader ? " with num_workers=0 (_SingleProcessDataLoaderIter): the "
                                              "training loop loads each batch itself"
                                            : "") +
        ". The training loop waited " + buf + (s.waits == 1 ? "batch" : "batches") + " for it" +
        (s.input_ops_seen ? "; below, what its loading was spent on."
                          : ". The trace shows when the loop waited, not what the loader spent the "
                            "time on: run the job under `liveprof run` to time each batch's fetch "
                            "(in the workers too).");
    if (!s.workers.workers.empty() && !s.single_process_loader) {
      s.loader_verdict = s.workers.busy_pct() >= kLoaderWorkersBusyPct ? "busy" : "handoff";
      const size_t n = s.workers.workers.size();
      uint64_t fetches = 0;
      for (const LoaderWorkerRow& r : s.workers.workers) fetches += r.fetches;
      s.source_statement += " Its " + std::to_string(n) + (n == 1 ? " worker process" : " worker processes") +
                            " fetched " + std::to_string(fetches) + " batches in these steps' time, busy " +
                            Pct1(s.workers.busy_pct()) + "% of it (fetch time " + Seconds(s.workers.fetch_ns()) +
                            " / (" + Seconds(s.workers.window_ns) + " x " + std::to_string(n) + " workers)): " +
                            (s.loader_verdict == "busy" ? "they do not keep up."
                                                        : "mostly idle, so the loop's wait is the hand-off of each "
                                                          "batch, not its loading.");
    }
  }

  // Device side: the classification and its statements (§3.2-3.3).
  if (step == 0) {
    s.bound = InputBound::kUnknown;
    s.statement = "No step time measured. Therefore we cannot tell where the performance bottleneck is.";
  } else {
    s.bound = ClassifyInputBound(s.input_pct, s.all_other_pct);
    const std::string in = Pct1(s.input_pct);
    switch (s.bound) {
      case InputBound::kHighly:
        s.statement = "Your program is HIGHLY input-bound because " + in +
                      "% of the total step time sampled is waiting for input. Therefore, you "
                      "should first focus on reducing the input time.";
        break;
      case InputBound::kModerately:
        s.statement = "Your program is MODERATELY input-bound because " + in +
                      "% of the total step time sampled is waiting for input. Therefore, you "
                      "would need to reduce both the input time and other time.";
        break;
      case InputBound::kPotentially:
        s.statement = "Your program is POTENTIALLY input-bound because " + Pct1(s.all_other_pct) +
                      "% of the total step time sampled is spent on 'All Others' time (which "
                      "could be due to I/O or Python execution or both).";
        break;
      default:
        s.statement = "Your program is NOT input-bound because only " + in +
                      "% of the total step time sampled is waiting for input. Therefore, you "
                      "should focus on reducing other time.";
    }
    s.input_class_statement = InputClassStatement(s.bound, w.has_device);
    if (s.kernel_launch_level != "no") {
      s.advice.push_back(Pct1(s.kernel_launch_pct) + "% of the total step time sampled is spent on 'Kernel Launch'." +
                         (s.input_ops_seen ? " It could be due to CPU contention with tf.data. In "
                                             "this case, you may try to set the environment "
                                             "variable TF_GPU_THREAD_MODE=gpu_private."
                                           : ""));
    }
    if (s.all_other_level != "no" && s.bound != InputBound::kPotentially) {
      s.advice.push_back(Pct1(s.all_other_pct) +
                         "% of the total step time sampled is spent on 'All Others' time. This "
                         "could be due to Python execution overhead.");
    }
    if (s.collectives_level != "no") {
      s.advice.push_back(Pct1(s.collectives_pct) +
                         "% of the total step time sampled is spent on 'Device Collective "
                         "Communication'.");
    }
  }
  if (s.bound == InputBound::kHighly || s.bound == InputBound::kModerately || s.bound == InputBound::kPotentially) {
    s.next_step = s.loader_verdict == "handoff"
                      ? "The DataLoader's workers were mostly idle: the wait is each batch's hand-off to the "
                        "training loop; see what to try below."
                  : s.input_ops_seen ? "Look at the host-side breakdown of input time below."
                  : s.source == InputSource::kPytorchDataLoader
                      ? "The wait is a PyTorch DataLoader's: see what to try below."
                      : "Your input pipeline is not instrumented by stage: mark its reading, "
                        "preprocessing and enqueue parts (LIVEPROF_INPUT with a stage, or "
                        "liveprof.input()) to see where the host spends the input time.";
  } else {
    s.next_step = "You may skip the rest of this page.";
  }
  s.recommendations = Recommendations(s);
  return s;
}

void InputPipelineSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.Key("window");
  WriteStepWindowJson(w, window);
  w.Key("device_side");
  w.BeginObject();
  w.KV("input_pct_avg", window.input_pct.mean());
  w.KV("input_pct_stddev", window.input_pct.stddev());
  w.KV("input_pct_min", window.input_pct.min);
  w.KV("input_pct_max", window.input_pct.max);
  w.EndObject();
  w.Key("bottleneck");
  w.BeginObject();
  w.KV("input_pct", input_pct);
  w.KV("output_pct", output_pct);
  w.KV("compute_pct", compute_pct);
  w.KV("compute_on", compute_on_host ? "host" : "device");
  w.KV("collectives_pct", collectives_pct);
  w.KV("idle_pct", idle_pct);
  w.KV("kernel_launch_pct", kernel_launch_pct);
  w.KV("all_other_pct", all_other_pct);
  w.KV("input_classification", InputBoundName(bound));
  w.KV("input_class", InputBoundClass(bound));
  w.KV("kernel_launch_level", kernel_launch_level);
  w.KV("all_other_level", all_other_level);
  w.KV("collectives_level", collectives_level);
  w.KV("input_class_statement", input_class_statement);
  w.KV("statement", statement);
  w.KV("next_step", next_step);
  w.Key("advice");
  w.BeginArray();
  for (const std::string& a : advice) w.String(a);
  w.EndArray();
  w.EndObject();
  w.Key("host_side");
  w.BeginObject();
  w.KV("enqueue_scaled", enqueue_scaled);
  w.KV("enqueue_us", enqueue_us);
  w.KV("demanded_file_read_us", demanded_read_us);
  w.KV("advanced_file_read_us", advanced_read_us);
  w.KV("preprocessing_us", preprocessing_us);
  w.KV("unclassified_non_enqueue_us", unclassified_us);
  w.KV("input_ops_seen", input_ops_seen);
  w.KV("source", InputSourceId(source));
  w.KV("source_name", InputSourceName(source));
  w.KV("source_statement", source_statement);
  w.KV("wait_ms", wait_ms);
  w.KV("waits", waits);
  w.KV("single_process_loader", single_process_loader);
  w.KV("loader_verdict", loader_verdict);
  w.Key("workers");
  w.BeginObject();
  w.KV("window_ms", static_cast<double>(workers.window_ns) / 1e6);
  w.KV("fetch_ms", static_cast<double>(workers.fetch_ns()) / 1e6);
  w.KV("busy_pct", workers.busy_pct());
  w.Key("rows");
  w.BeginArray();
  for (const LoaderWorkerRow& r : workers.workers) {
    w.BeginObject();
    w.KV("process", r.label);
    w.KV("fetches", r.fetches);
    w.KV("fetch_ms", static_cast<double>(r.fetch_ns) / 1e6);
    w.KV("busy_pct",
         workers.window_ns ? 100.0 * static_cast<double>(r.fetch_ns) / static_cast<double>(workers.window_ns) : 0.0);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Key("wait_names");
  w.BeginArray();
  for (const std::string& n : wait_names) w.String(n);
  w.EndArray();
  w.Key("ops");
  w.BeginArray();
  for (const OpRow& r : ops) {
    w.BeginObject();
    w.KV("name", r.name);
    w.KV("count", r.occurrences);
    w.KV("total_ms", r.total_ms);
    w.KV("total_pct", r.total_pct);
    w.KV("self_ms", r.self_ms);
    w.KV("self_pct", r.self_pct);
    w.KV("category", InputCategoryName(r.category));
    w.EndObject();
  }
  w.EndArray();
  w.Key("recommendations");
  w.BeginArray();
  for (const std::string& r : recommendations) w.String(r);
  w.EndArray();
  w.EndObject();
  w.EndObject();
}

std::string InputPipelineSnapshot::OpsCsv() const {
  std::string out = "name,count,total_ms,total_pct,self_ms,self_pct,category\n";
  for (const OpRow& r : ops) {
    AppendCsvField(&out, r.name);
    out += ',' + std::to_string(r.occurrences) + ',';
    AppendCsvNumber(&out, r.total_ms);
    out += ',';
    AppendCsvNumber(&out, r.total_pct);
    out += ',';
    AppendCsvNumber(&out, r.self_ms);
    out += ',';
    AppendCsvNumber(&out, r.self_pct);
    out += ',';
    AppendCsvField(&out, InputCategoryName(r.category));
    out += '\n';
  }
  return out;
}

}  // namespace liveprof
