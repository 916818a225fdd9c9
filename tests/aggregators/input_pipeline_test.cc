// Input pipeline analyzer: the classification at its threshold boundaries,
// the ratio-of-sums percentages, the host-side breakdown by hand, and the
// input-op table.
#include <string>
#include <vector>

#include "aggregators/tf/input_pipeline.h"
#include "doctest/doctest.h"

namespace liveprof::input_pipeline_test {
namespace {

// A window of total step time 10,000 ns with `input` and `all_others` ns.
StepWindow MakeWindow(uint64_t input, uint64_t all_others) {
  StepWindow w;
  w.steps = 1;
  w.step_ns_sum = 10'000;
  w.bucket_ns[static_cast<size_t>(Bucket::kInput)] = input;
  w.bucket_ns[static_cast<size_t>(Bucket::kAllOthers)] = all_others;
  w.bucket_ns[static_cast<size_t>(Bucket::kDeviceCompute)] = 10'000 - input - all_others;
  return w;
}

TEST_CASE("input pipeline: classification at 4.99 / 5 / 19.99 / 20 %") {
  CHECK(AnalyzeInputPipeline(MakeWindow(499, 0), {}).bound == InputBound::kNot);
  CHECK(AnalyzeInputPipeline(MakeWindow(500, 0), {}).bound == InputBound::kModerately);
  CHECK(AnalyzeInputPipeline(MakeWindow(1999, 0), {}).bound == InputBound::kModerately);
  CHECK(AnalyzeInputPipeline(MakeWindow(2000, 0), {}).bound == InputBound::kHighly);
  // Below 5 % input but ≥ 3 % all others: POTENTIALLY, and its statement
  // replaces the all-others advice.
  const InputPipelineSnapshot p = AnalyzeInputPipeline(MakeWindow(100, 300), {});
  CHECK(p.bound == InputBound::kPotentially);
  CHECK(p.statement.find("3.0% of the total step time") != std::string::npos);
  CHECK(p.advice.empty());
  CHECK(AnalyzeInputPipeline(MakeWindow(100, 299), {}).bound == InputBound::kNot);
  const InputPipelineSnapshot h = AnalyzeInputPipeline(MakeWindow(2000, 0), {});
  CHECK(h.input_pct == doctest::Approx(20.0));
  CHECK(h.compute_pct == doctest::Approx(80.0));
  CHECK(h.idle_pct == doctest::Approx(0.0));
  CHECK(h.statement.find("HIGHLY input-bound because 20.0%") != std::string::npos);
  CHECK(std::string(InputBoundClass(h.bound)) == "host");
  CHECK(AnalyzeInputPipeline(StepWindow{}, {}).bound == InputBound::kUnknown);
}

TEST_CASE("input pipeline: kernel-launch, all-others and collectives levels") {
  StepWindow w = MakeWindow(0, 1500);
  w.bucket_ns[static_cast<size_t>(Bucket::kKernelLaunch)] = 300;  // 3 %: moderate.
  w.bucket_ns[static_cast<size_t>(Bucket::kDeviceCollectives)] = 299;
  const InputPipelineSnapshot s = AnalyzeInputPipeline(w, {});
  CHECK(s.kernel_launch_level == "moderate");
  CHECK(s.all_other_level == "high");  // 15 %.
  CHECK(s.collectives_level == "no");  // 2.99 %.
}

TEST_CASE("input pipeline: host-side breakdown and input-op table by hand") {
  // Two steps, 2,000 µs in all; host-to-device 400 µs in all: ratio = 200/1000 = 0.2.
  StepWindow w;
  w.steps = 2;
  w.step_ns_sum = 2'000'000;
  w.bucket_ns[static_cast<size_t>(Bucket::kInput)] = 600'000;
  w.type_ns[static_cast<size_t>(SpanType::kHostToDevice)] = 400'000;
  const std::vector<InputOpRecord> ops = {
      {"read_shard", InputStage::kRead, 4, 300'000, 300'000},
      {"decode", InputStage::kPreprocess, 4, 700'000, 600'000},
      {"Iterator::Batch::Map", InputStage::kUnknown, 2, 100'000, 100'000},
      {"to_device", InputStage::kEnqueue, 2, 100'000, 100'000},
      {"IteratorGetNext", InputStage::kUnknown, 2, 900'000, 900'000},  // not an input op.
      {"wait_batch", InputStage::kWait, 2, 800'000, 800'000},          // nor this.
  };
  const InputPipelineSnapshot s = AnalyzeInputPipeline(w, ops);
  // non_enqueue = 100 × (1 − 0.2) / 0.2 = 400 µs; total input = 300 + 600 + 100 = 1000.
  CHECK(s.enqueue_us == doctest::Approx(100));
  CHECK(s.demanded_read_us == doctest::Approx(120));  // 400 × 300 / 1000
  CHECK(s.preprocessing_us == doctest::Approx(280));  // 400 × 700 / 1000
  CHECK(s.advanced_read_us == doctest::Approx(0));
  CHECK(s.unclassified_us == doctest::Approx(0));
  CHECK(s.input_ops_seen);
  REQUIRE(s.ops.size() == 4);
  CHECK(s.ops[0].name == "decode");
  // Percent of the input ops' self time: 300 + 600 + 100 + 100 = 1,100 µs.
  CHECK(s.ops[0].self_pct == doctest::Approx(100.0 * 600 / 1100));
  CHECK(s.ops[0].total_pct == doctest::Approx(100.0 * 700 / 1100));
  CHECK(s.ops[3].name == "to_device");
  CHECK(s.ops[3].category == InputCategory::kEnqueue);
  CHECK(s.ops[1].category == InputCategory::kDemandedRead);
  CHECK(s.ops[2].name == "Iterator::Batch::Map");
  CHECK(s.ops[2].category == InputCategory::kPreprocessing);
  const std::string csv = s.OpsCsv();
  CHECK(csv.find("decode,4,0.7,") != std::string::npos);
  // The waits: IteratorGetNext and wait_batch, 1,700 µs in 4; tf.data's
  // names make the source tf.data, and its advice tf.data's.
  CHECK(s.wait_ms == doctest::Approx(1.7));
  CHECK(s.waits == 4);
  CHECK(s.wait_names == std::vector<std::string>{"IteratorGetNext", "wait_batch"});
  CHECK(s.source == InputSource::kTfData);
  CHECK(s.source_statement.empty());
  // tf.data's tips for the categories that have time, the largest first:
  // preprocessing 280, demanded reads 120, enqueue 100 (advanced: none).
  CHECK(s.enqueue_scaled);
  REQUIRE(s.recommendations.size() == 3);
  CHECK(s.recommendations[0].starts_with("Data preprocessing"));
  CHECK(s.recommendations[1].starts_with("Reading data from files on demand"));
  CHECK(s.recommendations[2].starts_with("Enqueuing data"));
}

TEST_CASE("input pipeline: no enqueue op gives the ops' self times, not zeros, a CPU job's compute is not idle") {
  // The demo's shape: host-to-device copies (ratio > 0) but no enqueue op:
  // xprof's scaling by the enqueue time would make every category 0 above
  // an op table with 1,366 ms of preprocessing.
  StepWindow w;
  w.steps = 2;
  w.step_ns_sum = 2'000'000;
  w.bucket_ns[static_cast<size_t>(Bucket::kInput)] = 100'000;
  w.bucket_ns[static_cast<size_t>(Bucket::kDeviceCompute)] = 1'500'000;
  w.type_ns[static_cast<size_t>(SpanType::kHostToDevice)] = 400'000;
  const std::vector<InputOpRecord> ops = {
      {"ParallelMapDataset::DecodeAndAugment", InputStage::kPreprocess, 4, 1'366'000, 1'366'000},
      {"TFRecordDataset::Read", InputStage::kRead, 4, 745'000, 745'000},
  };
  const InputPipelineSnapshot s = AnalyzeInputPipeline(w, ops);
  CHECK_FALSE(s.enqueue_scaled);
  CHECK(s.enqueue_us == 0);
  CHECK(s.preprocessing_us == doctest::Approx(1366));
  CHECK(s.demanded_read_us == doctest::Approx(745));
  CHECK(s.unclassified_us == doctest::Approx(0));
  REQUIRE(s.recommendations.size() == 2);  // no enqueue or advanced-read tip: no time there.
  CHECK(s.recommendations[0].starts_with("Data preprocessing"));
  CHECK_FALSE(s.compute_on_host);
  CHECK(s.compute_pct == doctest::Approx(75));
  CHECK(s.idle_pct == doctest::Approx(20));  // 100 − 5 input − 75 compute.

  // A CPU job: host compute 1,800 of 2,000 µs, input 200: compute 90 %, idle 0.
  StepWindow cpu;
  cpu.steps = 2;
  cpu.step_ns_sum = 2'000'000;
  cpu.bucket_ns[static_cast<size_t>(Bucket::kInput)] = 200'000;
  cpu.bucket_ns[static_cast<size_t>(Bucket::kHostCompute)] = 1'800'000;
  const InputPipelineSnapshot c = AnalyzeInputPipeline(cpu, {});
  CHECK(c.compute_on_host);
  CHECK(c.compute_pct == doctest::Approx(90));
  CHECK(c.idle_pct == doctest::Approx(0));
  CHECK(c.recommendations.empty());  // no source known: no tf.data tips.
}

TEST_CASE("input pipeline: a PyTorch DataLoader's waits and fetches make PyTorch's advice") {
  StepWindow w;
  w.steps = 2;
  w.step_ns_sum = 2'000'000;
  w.bucket_ns[static_cast<size_t>(Bucket::kInput)] = 1'500'000;
  // liveprof run's records: the loop's waits (one nested in a wrapper's, 200
  // µs of it), and the workers' fetches (stage preprocess).
  InputOpRecord wait{"enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", InputStage::kWait, 3, 1'400'000,
                     1'000'000};
  wait.nested_wait_ns = 200'000;
  wait.nested_waits = 1;
  const std::vector<InputOpRecord> ops = {
      wait, {"DataLoader fetch#ImageFolder", InputStage::kPreprocess, 6, 2'400'000, 2'400'000}};
  const InputPipelineSnapshot s = AnalyzeInputPipeline(w, ops);
  CHECK(s.bound == InputBound::kHighly);
  CHECK(s.source == InputSource::kPytorchDataLoader);
  CHECK(s.wait_ms == doctest::Approx(1.2));  // 1,400 - 200 µs nested.
  CHECK(s.waits == 2);                       // 3 - 1 nested: 2 batches.
  CHECK_FALSE(s.single_process_loader);
  CHECK(s.input_ops_seen);
  CHECK(s.source_statement ==
        "The input is a PyTorch DataLoader. The training loop waited 1.2 ms in 2 batches for it; "
        "below, what its loading was spent on.");
  CHECK(s.next_step == "Look at the host-side breakdown of input time below.");
  // No device in the window (a CPU job): host advice, nothing about a GPU.
  REQUIRE(s.recommendations.size() == 4);
  CHECK(s.recommendations[0].starts_with("Add workers: raise num_workers"));
  for (const std::string& r : s.recommendations) {
    CHECK_MESSAGE(r.find("GPU") == std::string::npos, r);
    CHECK_MESSAGE(r.find("pin_memory") == std::string::npos, r);
  }
  CHECK(s.recommendations[3].starts_with("Make each batch cheaper: preprocess the dataset once"));
  // With a device: the copies (pin_memory) and the GPU's transforms too.
  StepWindow g = w;
  g.has_device = true;
  const InputPipelineSnapshot sg = AnalyzeInputPipeline(g, ops);
  REQUIRE(sg.recommendations.size() == 5);
  CHECK(sg.recommendations[3].starts_with("Copy batches to the GPU faster: pin_memory=True"));
  CHECK(sg.recommendations[4].find("decode and augment on the GPU") != std::string::npos);
  // num_workers=0 (waits, no fetch in workers): its first advice names the
  // GPU only when there is one.
  const std::vector<InputOpRecord> single = {
      {"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", InputStage::kWait, 2, 1'500'000, 300'000},
      {"DataLoader fetch#TensorDataset", InputStage::kPreprocess, 2, 1'200'000, 1'200'000}};
  const InputPipelineSnapshot one_cpu = AnalyzeInputPipeline(w, single);
  REQUIRE(one_cpu.single_process_loader);
  CHECK(one_cpu.recommendations[0].find("while the model computes") != std::string::npos);
  CHECK(one_cpu.recommendations[0].find("GPU") == std::string::npos);
  const InputPipelineSnapshot one_gpu = AnalyzeInputPipeline(g, single);
  CHECK(one_gpu.recommendations[0].find("while the GPU computes") != std::string::npos);
  REQUIRE(s.ops.size() == 1);  // the fetches; the wait is not an input op.
  CHECK(s.ops[0].category == InputCategory::kPreprocessing);
  CHECK(InputSourceOf("enumerate(DataPipe)#ShufflerIterDataPipe") == InputSource::kPytorchDataLoader);
  CHECK(InputSourceOf("enumerate(DataLoader)#Foo") == InputSource::kUnknown);  // not a __next__.
  CHECK(InputSourceOf("Iterator::Prefetch") == InputSource::kTfData);
  CHECK(InputSourceOf("read_shard") == InputSource::kUnknown);
}

TEST_CASE("input pipeline: tf.data names map to the legacy categories") {
  CHECK(CategorizeInputOp("Iterator::Prefetch::TFRecord", InputStage::kUnknown) == InputCategory::kAdvancedRead);
  CHECK(CategorizeInputOp("Iterator::Batch::TFRecord", InputStage::kUnknown) == InputCategory::kDemandedRead);
  CHECK(CategorizeInputOp("Iterator::Shuffle", InputStage::kUnknown) == InputCategory::kPreprocessing);
  CHECK(CategorizeInputOp("my_loader", InputStage::kUnknown) == InputCategory::kUnknown);
  CHECK(CategorizeInputOp("IteratorGetNext", InputStage::kUnknown) == InputCategory::kNotInput);
}

TEST_CASE("input pipeline: a DataLoader's workers, busy or idle, pick the advice") {
  // 25 % of each step waits for a batch; two workers over a 1 s window.
  const InputOpRecord wait{"enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", InputStage::kWait, 10,
                           2'500, 2'500};
  const InputOpRecord fetch{"DataLoader fetch#Images", InputStage::kPreprocess, 10, 5'000, 5'000};
  const std::vector<InputOpRecord> ops = {wait, fetch};
  auto workers = [](uint64_t fetch_ns) {
    LoaderWorkersWindow w;
    w.window_ns = 1'000'000'000;
    w.workers = {{"rank 0 · loader 0", 10, fetch_ns}, {"rank 0 · loader 1", 10, fetch_ns}};
    return w;
  };
  const LoaderWorkersWindow busy_workers = workers(900'000'000), idle_workers = workers(20'000'000);
  const InputPipelineSnapshot busy = AnalyzeInputPipeline(MakeWindow(2'500, 0), ops, &busy_workers);
  CHECK(busy.loader_verdict == "busy");
  CHECK(busy.workers.busy_pct() == doctest::Approx(90.0));
  CHECK(busy.recommendations.front().starts_with("Add workers"));
  const InputPipelineSnapshot idle = AnalyzeInputPipeline(MakeWindow(2'500, 0), ops, &idle_workers);
  CHECK(idle.loader_verdict == "handoff");
  CHECK(idle.recommendations.front().find("hand-off") != std::string::npos);
  CHECK(idle.source_statement.find("busy 2.0% of it") != std::string::npos);
  CHECK(idle.next_step.find("hand-off") != std::string::npos);
  CHECK(idle.input_class_statement.starts_with("Input on \"host\""));
  // No device (MakeWindow's has_device is false): no pin_memory.
  for (const std::string& r : idle.recommendations) CHECK(r.find("pin_memory") == std::string::npos);
  // Without the workers' rows (a replayed trace): the advice as before.
  CHECK(AnalyzeInputPipeline(MakeWindow(2'500, 0), ops).loader_verdict.empty());
}

}  // namespace
}  // namespace liveprof::input_pipeline_test
