#include "aggregators/pytorch/pytorch_view.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "event_builder.h"

namespace liveprof::pytorch_view_test {
namespace {

constexpr uint64_t kUs = 1000;  // ns per µs: fixtures are written in µs.
constexpr uint64_t us(uint64_t v) { return v * kUs; }

constexpr size_t kKernel = static_cast<size_t>(PytorchRole::kKernel);
constexpr size_t kMemcpy = static_cast<size_t>(PytorchRole::kMemcpy);
constexpr size_t kMemset = static_cast<size_t>(PytorchRole::kMemset);
constexpr size_t kComm = static_cast<size_t>(PytorchRole::kCommunication);
constexpr size_t kRuntime = static_cast<size_t>(PytorchRole::kRuntime);
constexpr size_t kDataLoader = static_cast<size_t>(PytorchRole::kDataLoader);
constexpr size_t kCpuOp = static_cast<size_t>(PytorchRole::kCpuOp);
constexpr size_t kOther = static_cast<size_t>(PytorchRole::kOther);

// Name ids shared by the fixtures.
enum : NameId {
  kStep1 = 1,
  kStep2,
  kStep3,
  kNext,       // enumerate(DataLoader)#...__next__
  kCopy,       // aten::copy_
  kConv,       // aten::conv2d
  kLaunch,     // cudaLaunchKernel
  kAllReduce,  // nccl:all_reduce
  kConvKernel,
  kNcclKernel,
  kOldKernel,
  kMm,        // aten::mm
  kScope,     // a user scope
  kDataPipe,  // enumerate(DataPipe)#...
  kGloo,      // gloo:broadcast
  kStep007,   // ProfilerStep#007
  kStepBad,   // ProfilerStep#x
  kNameCount,
};

Catalog MakeCatalog() {
  Catalog c;
  c.DefineName(kStep1, "ProfilerStep#1");
  c.DefineName(kStep2, "ProfilerStep#2");
  c.DefineName(kStep3, "ProfilerStep#3");
  c.DefineName(kNext, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  c.DefineName(kCopy, "aten::copy_");
  c.DefineName(kConv, "aten::conv2d");
  c.DefineName(kLaunch, "cudaLaunchKernel");
  c.DefineName(kAllReduce, "nccl:all_reduce");
  c.DefineName(kConvKernel, "implicit_convolve_sgemm");
  c.DefineName(kNcclKernel, "ncclKernel_AllReduce_RING_LL_Sum_float");
  c.DefineName(kOldKernel, "old_kernel");
  c.DefineName(kMm, "aten::mm");
  c.DefineName(kScope, "my_scope");
  c.DefineName(kDataPipe, "enumerate(DataPipe)#MapperIterDataPipe");
  c.DefineName(kGloo, "gloo:broadcast");
  c.DefineName(kStep007, "ProfilerStep#007");
  c.DefineName(kStepBad, "ProfilerStep#x");
  return c;
}

std::string Json(const PytorchOverview& o) {
  JsonWriter w;
  o.WriteJson(w);
  return w.Take();
}

}  // namespace

// ---------------------------------------------------------------------------
// Python number helpers (expected values checked with CPython 3).

TEST_CASE("pytorch view: PyRound to an integer rounds halves to even") {
  CHECK(PyRound(2906.5) == 2906);
  CHECK(PyRound(2907.5) == 2908);
  CHECK(PyRound(0.5) == 0);
  CHECK(PyRound(1.5) == 2);
  CHECK(PyRound(2.5) == 2);
  CHECK(PyRound(-2.5) == -2);
  CHECK(PyRound(-0.5) == 0);
  CHECK(PyRound(3.4999999999999996) == 3);
  CHECK(PyRound(2.5000000000000004) == 3);
  CHECK(PyRound(4503599627370497.0) == 4503599627370497.0);  // 2^52 + 1: already integral.
  CHECK(PyRound(17445.0 / 6) == 2908);                       // the sample's Runtime average.
}

TEST_CASE("pytorch view: PyRound to 2 decimals works on the exact binary value") {
  CHECK(PyRound(0.125, 2) == 0.12);  // exact tie: to even.
  CHECK(PyRound(0.375, 2) == 0.38);  // exact tie: to even.
  CHECK(PyRound(2.675, 2) == 2.67);  // 2.67499999999999982236431605997495353221893310546875.
  CHECK(PyRound(1.005, 2) == 1.0);   // 1.00499999999999989341858963598497211933135986328125.
  CHECK(PyRound(15.625, 2) == 15.62);
  CHECK(PyRound(84.375, 2) == 84.38);
  CHECK(PyRound(0.0, 2) == 0.0);
  CHECK(PyRound(100.0 * 98598 / 187948, 2) == 52.46);  // sample step 5 Kernel.
  CHECK(PyRound(100.0 * (17445.0 / 6) / (1065553.0 / 6), 2) == 1.64);
  CHECK(PyRound(1e300, 2) == 1e300);
  CHECK(std::isnan(PyRound(std::nan(""), 2)));
}

TEST_CASE("pytorch view: PyRepr gives Python's repr text") {
  CHECK(PyRepr(7.7) == "7.7");
  CHECK(PyRepr(0.0) == "0.0");
  CHECK(PyRepr(-0.0) == "-0.0");
  CHECK(PyRepr(52.46) == "52.46");
  CHECK(PyRepr(100.0) == "100.0");
  CHECK(PyRepr(2.5) == "2.5");
  CHECK(PyRepr(-1.25) == "-1.25");
  CHECK(PyRepr(0.1 + 0.2) == "0.30000000000000004");
  CHECK(PyRepr(123456789.125) == "123456789.125");
  CHECK(PyRepr(1234567890123456.0) == "1234567890123456.0");  // 16 digits: still fixed.
  CHECK(PyRepr(9999999999999998.0) == "9999999999999998.0");
  CHECK(PyRepr(1e16) == "1e+16");
  CHECK(PyRepr(12345678901234567.0) == "1.2345678901234568e+16");
  CHECK(PyRepr(1e22) == "1e+22");
  CHECK(PyRepr(0.0001) == "0.0001");
  CHECK(PyRepr(0.00001) == "1e-05");
  CHECK(PyRepr(1.5e-7) == "1.5e-07");
  CHECK(PyRepr(5e-324) == "5e-324");
  CHECK(PyRepr(1.7976931348623157e308) == "1.7976931348623157e+308");
  CHECK(PyRepr(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(PyRepr(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(PyRepr(std::nan("")) == "nan");
}

TEST_CASE("pytorch view: PyFormatFixed is Python's :.Nf") {
  CHECK(PyFormatFixed(100 * 0.3337, 1) == "33.4");
  CHECK(PyFormatFixed(0.25, 1) == "0.2");  // exact tie: to even.
  CHECK(PyFormatFixed(0.35, 1) == "0.3");  // 0.34999999999999997...
  CHECK(PyFormatFixed(0.45, 1) == "0.5");  // 0.45000000000000001...
  CHECK(PyFormatFixed(15.625, 1) == "15.6");
  CHECK(PyFormatFixed(9.0 / 99 * 100, 1) == "9.1");
  CHECK(PyFormatFixed(2.5, 0) == "2");
}

// ---------------------------------------------------------------------------
// Hand-computed fixtures.

TEST_CASE("pytorch view: the empty-free-set quirk (section 3)") {
  // One step [0,100) fully covered by a kernel; a memcpy of 10 launched by a
  // runtime of 5 inside an operator. Kernel takes all of S, so the free set
  // is empty at Memcpy's turn: Memcpy is taken unclipped and the free set
  // reset to S minus the memcpy; lower roles are counted again.
  const Catalog catalog = MakeCatalog();
  const std::vector<Event> events = {
      test::Op(us(0), us(100), kStep1),
      test::Op(us(20), us(30), kCopy),                              // [20,50)
      test::Launch(us(25), us(5), /*corr=*/1, kLaunch),             // [25,30)
      test::Copy(EventKind::kMemcpyHtoD, us(40), us(10), 4096, 1),  // [40,50)
      test::Kernel(us(0), us(100), kConvKernel, /*corr=*/0),        // [0,100), no launch
  };
  const PytorchOverview o = ComputePytorchOverview(events, catalog);
  REQUIRE(o.steps.size() == 1);
  const PytorchOverviewStep& s = o.steps[0];
  CHECK(o.gpu_mode);  // the memcpy is credited through its runtime.
  CHECK(s.name == "1");
  CHECK(s.start_ns == 0);
  CHECK(s.end_ns == static_cast<int64_t>(us(100)));  // max(100, memcpy end 50).
  // Kernel [0,100) = 100; Memcpy (reset) [40,50) = 10; free: [0,40) [50,100);
  // Runtime [25,30) = 5; CpuOp [20,50) ∩ free = [20,25) + [30,40) = 15;
  // Other = [0,20) + [50,100) = 70. Sum 200 > Total 100.
  CHECK(s.value_ns[kKernel] == static_cast<int64_t>(us(100)));
  CHECK(s.value_ns[kMemcpy] == static_cast<int64_t>(us(10)));
  CHECK(s.value_ns[kMemset] == 0);
  CHECK(s.value_ns[kComm] == 0);
  CHECK(s.value_ns[kRuntime] == static_cast<int64_t>(us(5)));
  CHECK(s.value_ns[kDataLoader] == 0);
  CHECK(s.value_ns[kCpuOp] == static_cast<int64_t>(us(15)));
  CHECK(s.value_ns[kOther] == static_cast<int64_t>(us(70)));
  CHECK(s.total_ns == static_cast<int64_t>(us(100)));
  CHECK(s.value_us[kCpuOp] == 15.0);
  CHECK(s.pct[kKernel] == 100.0);
  CHECK(s.pct[kOther] == 70.0);
  CHECK(o.average.total_rounded_us == 100);
  CHECK(o.average.rounded_us[kMemcpy] == 10);
}

namespace {

// Three host steps (µs):
//   old_kernel [0,12) corr 99 (no runtime): unmatched leftover GPU work.
//   step 1 host [10,100):
//     __next__ [10,30) with aten::copy_ [15,25) nested (hidden by DataLoader)
//     aten::conv2d [30,40): launches [32,34) corr 1 -> kernel A [40,60),
//                           [36,38) corr 2 -> kernel B [75,110) (GPU tail)
//     nccl:all_reduce [60,80): launch [62,64) corr 3 -> nccl kernel C
//                           [60,75) on device 1 (Communication by its op)
//     launch [98,104) corr 4 straddles the step end -> kernel D [120,130),
//                           credited to no step
//   step 2 host [105,200):
//     aten::conv2d [110,155): launches [110,112) corr 5 -> kernel E [115,150),
//                           [150,152) corr 6 -> kernel F [160,210) (tail)
//     aten::copy_ [168,174): launch [170,172) corr 7 -> memcpy G [175,180)
//     __next__ [180,195) with aten::copy_ [185,190): all under kernel F
//   step 3 host [205,300): launches [220,222) corr 8 -> kernel H [225,240),
//                           [230,232) corr 9 -> kernel I [240,250)
std::vector<Event> ThreeStepFixture() {
  return {
      test::Kernel(us(0), us(12), kOldKernel, 99),
      // Step 1.
      test::Op(us(10), us(90), kStep1),
      test::Op(us(10), us(20), kNext),
      test::Op(us(15), us(10), kCopy),
      test::Op(us(30), us(10), kConv),
      test::Launch(us(32), us(2), 1, kLaunch),
      test::Launch(us(36), us(2), 2, kLaunch),
      test::Kernel(us(40), us(20), kConvKernel, 1, 100, kConv),
      test::Kernel(us(75), us(35), kConvKernel, 2, 100, kConv),
      test::Op(us(60), us(20), kAllReduce),
      test::Launch(us(62), us(2), 3, kLaunch),
      test::Kernel(us(60), us(15), kNcclKernel, 3, 101, kAllReduce, 0, /*device=*/1),
      test::Launch(us(98), us(6), 4, kLaunch),
      test::Kernel(us(120), us(10), kConvKernel, 4),
      // Step 2.
      test::Op(us(105), us(95), kStep2),
      test::Op(us(110), us(45), kConv),
      test::Launch(us(110), us(2), 5, kLaunch),
      test::Kernel(us(115), us(35), kConvKernel, 5, 100, kConv),
      test::Launch(us(150), us(2), 6, kLaunch),
      test::Kernel(us(160), us(50), kConvKernel, 6, 100, kConv),
      test::Op(us(168), us(6), kCopy),
      test::Launch(us(170), us(2), 7, kLaunch),
      test::Copy(EventKind::kMemcpyDtoH, us(175), us(5), 1024, 7),
      test::Op(us(180), us(15), kNext),
      test::Op(us(185), us(5), kCopy),
      // Step 3.
      test::Op(us(205), us(95), kStep3),
      test::Launch(us(220), us(2), 8, kLaunch),
      test::Kernel(us(225), us(15), kConvKernel, 8),
      test::Launch(us(230), us(2), 9, kLaunch),
      test::Kernel(us(240), us(10), kConvKernel, 9),
  };
}

}  // namespace

TEST_CASE("pytorch view: three steps: GPU tail, straddling runtime, leftover GPU work, 0.8 rule") {
  const Catalog catalog = MakeCatalog();
  std::vector<Event> events = ThreeStepFixture();
  // Completion order (end ascending), as the stream delivers: the function
  // sorts by ts itself.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  const PytorchOverview o = ComputePytorchOverview(events, catalog);

  CHECK(o.gpu_mode);
  CHECK_FALSE(o.fallback_step);
  CHECK(o.integer_us);
  // Device ops credited: step 1 {A, C, B} = 3, step 2 {E, F, G} = 3,
  // step 3 {H, I} = 2; 3 * 0.8 = 2.4 > 2, so step 3 is dropped.
  CHECK(o.dropped_tail_steps == 1);
  REQUIRE(o.steps.size() == 2);
  const PytorchOverviewStep& s1 = o.steps[0];
  const PytorchOverviewStep& s2 = o.steps[1];
  CHECK(s1.name == "1");
  CHECK(s2.name == "2");
  CHECK(s1.device_ops == 3);
  CHECK(s2.device_ops == 3);
  // Step 1 starts at 12: old_kernel (unmatched) ends at 12, before step 1's
  // first credited device op (A at 40). It ends at 110 (kernel B), not 130:
  // the straddling launch of D is credited to no step. Step 2 starts there,
  // and ends at 210 (kernel F).
  CHECK(s1.host_start_ns == static_cast<int64_t>(us(10)));
  CHECK(s1.host_end_ns == static_cast<int64_t>(us(100)));
  CHECK(s1.start_ns == static_cast<int64_t>(us(12)));
  CHECK(s1.end_ns == static_cast<int64_t>(us(110)));
  CHECK(s2.start_ns == static_cast<int64_t>(us(110)));
  CHECK(s2.end_ns == static_cast<int64_t>(us(210)));

  // S = [12,210). Kernel = [40,60) [75,110) [115,150) [160,210) in S, so
  // free = [12,40) [60,75) [110,115) [150,160). Memcpy G [175,180) is under
  // F: 0. Communication [60,80) -> [60,75). Runtime: [32,34) [36,38)
  // [110,112) [150,152). DataLoader [10,30) -> [12,30) ([180,195) is under F).
  // CpuOp: [30,40) minus runtimes = 6 in step 1; [112,115) [152,155) = 6 in
  // step 2 (copy_ [15,25) is hidden by DataLoader). Other: [155,160).
  const std::array<int64_t, kPytorchRoleCount> want1 = {55, 0, 0, 15, 4, 18, 6, 0};
  const std::array<int64_t, kPytorchRoleCount> want2 = {85, 0, 0, 0, 4, 0, 6, 5};
  for (size_t r = 0; r < kPytorchRoleCount; ++r) {
    CAPTURE(r);
    CHECK(s1.value_ns[r] == static_cast<int64_t>(us(static_cast<uint64_t>(want1[r]))));
    CHECK(s2.value_ns[r] == static_cast<int64_t>(us(static_cast<uint64_t>(want2[r]))));
  }
  CHECK(s1.total_us == 98.0);
  CHECK(s2.total_us == 100.0);
  // Percentages: 100*55/98 = 56.122 -> 56.12; 15/98 -> 15.31; 4/98 -> 4.08;
  // 18/98 -> 18.37; 6/98 -> 6.12.
  CHECK(s1.pct[kKernel] == 56.12);
  CHECK(s1.pct[kComm] == 15.31);
  CHECK(s1.pct[kRuntime] == 4.08);
  CHECK(s1.pct[kDataLoader] == 18.37);
  CHECK(s1.pct[kCpuOp] == 6.12);
  CHECK(s1.pct[kOther] == 0.0);
  CHECK(s2.pct[kKernel] == 85.0);
  CHECK(s2.pct[kOther] == 5.0);

  // Averages over 2 steps: Kernel 70, Comm 7.5 -> 8 (half to even), Runtime 4,
  // DataLoader 9, CpuOp 6, Other 2.5 -> 2 (half to even), Total 99.
  CHECK(o.average.total_us == 99.0);
  CHECK(o.average.total_rounded_us == 99);
  CHECK(o.average.value_us[kComm] == 7.5);
  CHECK(o.average.rounded_us[kComm] == 8);
  CHECK(o.average.value_us[kOther] == 2.5);
  CHECK(o.average.rounded_us[kOther] == 2);
  CHECK(o.average.rounded_us[kKernel] == 70);
  // 100*70/99 -> 70.71; 750/99 -> 7.58; 400/99 -> 4.04; 900/99 -> 9.09;
  // 600/99 -> 6.06; 250/99 -> 2.53.
  CHECK(o.average.pct[kKernel] == 70.71);
  CHECK(o.average.pct[kComm] == 7.58);
  CHECK(o.average.pct[kRuntime] == 4.04);
  CHECK(o.average.pct[kDataLoader] == 9.09);
  CHECK(o.average.pct[kCpuOp] == 6.06);
  CHECK(o.average.pct[kOther] == 2.53);
  CHECK(o.average.pct[kMemcpy] == 0.0);

  // Columns: all shown (kernels, memcpy, runtimes, communication).
  CHECK(o.has_kernel);
  CHECK(o.has_runtime);
  CHECK(o.has_communication);
  CHECK(o.has_memcpy_or_memset);
  const std::vector<PytorchRole> columns = {
      PytorchRole::kKernel,  PytorchRole::kMemcpy,     PytorchRole::kMemset, PytorchRole::kCommunication,
      PytorchRole::kRuntime, PytorchRole::kDataLoader, PytorchRole::kCpuOp,  PytorchRole::kOther};
  CHECK(o.columns == columns);

  // GPU Utilization over W = [12,210), 198 µs. Device 0: [40,60) [75,110)
  // [115,150) [160,210) = 140 -> 70.71. Device 1: C [60,75) = 15 -> 7.58.
  REQUIRE(o.gpus.size() == 2);
  CHECK(o.gpus[0].device == 0);
  CHECK(o.gpus[0].utilization == 140.0 / 198.0);
  CHECK(o.gpus[0].utilization_pct == 70.71);
  CHECK(o.gpus[1].device == 1);
  CHECK(o.gpus[1].utilization_pct == 7.58);

  // Recommendations: DataLoader 9/99 = 9.09% > 5% -> "9.1%"; communication
  // 7.5/99 < 10%: none; GPU 1 under 50%.
  REQUIRE(o.recommendations.size() == 2);
  CHECK(o.recommendations[0] ==
        "This run has high time cost on input data loading. 9.1% of the step time is in DataLoader. "
        "You could try to set num_workers on DataLoader's construction and <a "
        "href=\"https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading\" "
        "target=\"_blank\">enable multi-processes on data loading</a>.");
  CHECK(o.recommendations[1] ==
        "GPU 1 has low utilization. You could try to increase batch size to improve. Note: Increasing "
        "batch size may affect the speed and stability of model convergence.");

  // The JSON: the plugin's shape and text.
  const std::string json = Json(o);
  const nlohmann::json j = nlohmann::json::parse(json);
  REQUIRE(j["steps"]["columns"].size() == 17);  // Step + 8 x (number, tooltip).
  CHECK(j["steps"]["columns"][7]["name"] == "Communication");
  REQUIRE(j["steps"]["rows"].size() == 2);
  const auto& row = j["steps"]["rows"][0];
  CHECK(row[0] == "1");
  CHECK(row[1] == 55);
  CHECK(row[2] ==
        "<div class=\"visualization-tooltip\" style=\"white-space: nowrap;\">Step 1<br>Total: 98us<br>"
        "<b>Kernel: 55us</b><br>Percentage: 56.12%</div>");
  CHECK(row[4] ==
        "<div class=\"visualization-tooltip\" style=\"white-space: nowrap;\">Step 1<br>Total: 98us<br>"
        "<b>Memcpy: 0us</b><br>Percentage: 0.0%</div>");
  CHECK(row[7] == 15);
  CHECK(row[13] == 6);
  CHECK(row[14].get<std::string>().find("<b>CPU Exec: 6us</b><br>Percentage: 6.12%") != std::string::npos);
  const auto& perf = j["performance"][0];
  CHECK(perf["name"] == "Average Step Time");
  CHECK(perf["value"] == 99);
  CHECK(perf["extra"] == 100);
  CHECK(perf["children"][3]["name"] == "Communication");
  CHECK(perf["children"][3]["value"] == 8);
  CHECK(perf["children"][3]["extra"] == 7.58);
  // Floats are written as Python's json.dumps writes them.
  CHECK(json.find("{\"name\":\"Memcpy\",\"description\":\"\",\"value\":0,\"extra\":0.0}") != std::string::npos);
  CHECK(json.find("{\"name\":\"Kernel\",\"description\":\"\",\"value\":70,\"extra\":70.71}") != std::string::npos);
  CHECK(j["recommendations"] == "<ul><li>" + o.recommendations[0] + "</li><li>" + o.recommendations[1] + "</li></ul>");
  CHECK(j["gpu_metrics"]["data"][1]["value"] == "70.71 %");
  CHECK(j["environments"][1]["value"] == "GPU");
  CHECK(o.ToCsv() ==
        "Step,Kernel,Memcpy,Memset,Communication,Runtime,DataLoader,CPU Exec,Other,Total\n"
        "1,55,0,0,15,4,18,6,0,98\n"
        "2,85,0,0,0,4,0,6,5,100\n");
}

TEST_CASE("pytorch view: steps after the last GPU step are dropped, 80% exactly is kept") {
  const Catalog catalog = MakeCatalog();
  SUBCASE("a trailing step without device ops") {
    // Step 1 [0,100) launches 1 kernel; step 2 [100,200) launches none.
    const std::vector<Event> events = {
        test::Op(us(0), us(100), kStep1),
        test::Launch(us(10), us(2), 1),
        test::Kernel(us(20), us(10), kConvKernel, 1),
        test::Op(us(100), us(100), kStep2),
        test::Op(us(120), us(10), kMm),
    };
    const PytorchOverview o = ComputePytorchOverview(events, catalog);
    CHECK(o.dropped_tail_steps == 1);
    REQUIRE(o.steps.size() == 1);
    CHECK(o.steps[0].name == "1");
  }
  SUBCASE("5 then 4 device ops: 5 * 0.8 = 4 is not greater than 4") {
    std::vector<Event> events = {test::Op(us(0), us(100), kStep1), test::Op(us(100), us(100), kStep2)};
    for (uint32_t i = 0; i < 9; ++i) {
      const uint64_t base = i < 5 ? us(10) + us(10) * i : us(110) + us(10) * (i - 5);
      events.push_back(test::Launch(base, us(1), 10 + i));
      events.push_back(test::Kernel(base + us(2), us(3), kConvKernel, 10 + i));
    }
    const PytorchOverview o = ComputePytorchOverview(events, catalog);
    CHECK(o.dropped_tail_steps == 0);
    REQUIRE(o.steps.size() == 2);
    CHECK(o.steps[0].device_ops == 5);
    CHECK(o.steps[1].device_ops == 4);
  }
  SUBCASE("a single step is never dropped") {
    const std::vector<Event> events = {test::Op(us(0), us(100), kStep1), test::Launch(us(10), us(2), 1),
                                       test::Kernel(us(20), us(10), kConvKernel, 1)};
    const PytorchOverview o = ComputePytorchOverview(events, catalog);
    CHECK(o.steps.size() == 1);
  }
}

TEST_CASE("pytorch view: no ProfilerStep gives the single fallback step \"0\"") {
  const Catalog catalog = MakeCatalog();
  // Operators [100,300) and [250,400); an input span [80,130) (DataLoader,
  // and an operator for the extent: our extension); a user scope [0,1000)
  // (CpuOp, but UserAnnotations do not count for the extent); a kernel with
  // no launch [50,60) (not GPU mode: nothing credited).
  const std::vector<Event> events = {
      test::Op(us(100), us(200), kMm),
      test::Op(us(250), us(150), kMm),
      test::Input(us(80), us(50), kCopy),
      test::Span(us(0), us(1000), kScope),
      test::Kernel(us(50), us(10), kConvKernel, 7),
  };
  const PytorchOverview o = ComputePytorchOverview(events, catalog);
  CHECK(o.fallback_step);
  CHECK_FALSE(o.gpu_mode);
  REQUIRE(o.steps.size() == 1);
  const PytorchOverviewStep& s = o.steps[0];
  CHECK(s.name == "0");
  CHECK(s.start_ns == static_cast<int64_t>(us(80)));
  CHECK(s.end_ns == static_cast<int64_t>(us(400)));
  // Total 320: DataLoader [80,130) = 50; CpuOp = the rest, 270 (the scope
  // covers it all); the kernel is outside the step.
  CHECK(s.value_ns[kKernel] == 0);
  CHECK(s.value_ns[kDataLoader] == static_cast<int64_t>(us(50)));
  CHECK(s.value_ns[kCpuOp] == static_cast<int64_t>(us(270)));
  CHECK(s.value_ns[kOther] == 0);
  // 100*50/320 = 15.625 (exact tie) -> 15.62; 84.375 -> 84.38.
  CHECK(s.pct[kDataLoader] == 15.62);
  CHECK(s.pct[kCpuOp] == 84.38);
  // The kernel makes the GPU columns shown; no Communication column.
  CHECK(o.show_gpu);
  CHECK(o.columns.size() == 7);
  // DataLoader 15.625% -> "15.6%"; GPU 0: no kernel inside W -> 0 %.
  REQUIRE(o.recommendations.size() == 2);
  CHECK(o.recommendations[0].find(" 15.6% of the step time is in DataLoader.") != std::string::npos);
  CHECK(o.recommendations[1].starts_with("GPU 0 has low utilization."));
  REQUIRE(o.gpus.size() == 1);
  CHECK(o.gpus[0].utilization_pct == 0.0);
}

TEST_CASE("pytorch view: no ProfilerStep and no operator: no step at all") {
  const Catalog catalog = MakeCatalog();
  const std::vector<Event> events = {test::Span(us(0), us(10), kScope), test::Kernel(us(5), us(1), kConvKernel, 1)};
  const PytorchOverview o = ComputePytorchOverview(events, catalog);
  CHECK(o.steps.empty());
  CHECK(o.recommendations.empty());
  CHECK(o.RecommendationsHtml() == "<ul><li>N/A</li></ul>");
  const nlohmann::json j = nlohmann::json::parse(Json(o));
  CHECK(j["steps"]["rows"].empty());
  CHECK(j["performance"].empty());
  const PytorchOverview none = ComputePytorchOverview({}, catalog);
  CHECK(none.steps.empty());
  CHECK_FALSE(none.show_gpu);
}

TEST_CASE("pytorch view: step names, step markers, DataPipe and gloo names, CPU-only columns") {
  const Catalog catalog = MakeCatalog();
  // ProfilerStep#007 -> step "7" (a kHostSpan: UserAnnotation); a kStepMarker
  // step 8; "ProfilerStep#x" is not a step (an operator: CpuOp).
  const std::vector<Event> events = {
      test::Span(us(0), us(100), kStep007), test::Op(us(10), us(20), kDataPipe),  // DataLoader.
      test::Op(us(40), us(10), kGloo),                                            // Communication.
      test::Op(us(60), us(10), kStepBad),                                         // CpuOp.
      test::Step(us(100), us(50), 8),       test::Op(us(110), us(10), kMm),
  };
  const PytorchOverview o = ComputePytorchOverview(events, catalog);
  REQUIRE(o.steps.size() == 2);
  CHECK(o.steps[0].name == "7");
  CHECK(o.steps[1].name == "8");
  CHECK_FALSE(o.gpu_mode);
  CHECK(o.steps[0].value_ns[kDataLoader] == static_cast<int64_t>(us(20)));
  CHECK(o.steps[0].value_ns[kComm] == static_cast<int64_t>(us(10)));
  CHECK(o.steps[0].value_ns[kCpuOp] == static_cast<int64_t>(us(10)));
  CHECK(o.steps[0].value_ns[kOther] == static_cast<int64_t>(us(60)));
  CHECK(o.steps[1].value_ns[kCpuOp] == static_cast<int64_t>(us(10)));
  // No GPU activity: Communication, DataLoader, CPU Exec, Other only.
  CHECK_FALSE(o.show_gpu);
  const std::vector<PytorchRole> columns = {PytorchRole::kCommunication, PytorchRole::kDataLoader, PytorchRole::kCpuOp,
                                            PytorchRole::kOther};
  CHECK(o.columns == columns);
  CHECK(o.gpus.empty());
  const nlohmann::json j = nlohmann::json::parse(Json(o));
  CHECK(j["environments"][1]["value"] == "CPU");
  CHECK_FALSE(j.contains("gpu_metrics"));
}

TEST_CASE("pytorch view: device ops attach to the latest runtime seen, else the next one") {
  const Catalog catalog = MakeCatalog();
  // corr 5 is reused: kernel K1 [5,8) comes before any runtime 5 and waits
  // for the first one (R1 [20,22), in step 1); K2 [60,70) follows R1 and
  // attaches to it too; R2 [120,122) (step 2) has no device op. So step 1
  // has 2 device ops and ends at 70; step 2 has none.
  const std::vector<Event> events = {
      test::Op(us(10), us(90), kStep1),   test::Kernel(us(5), us(3), kConvKernel, 5),
      test::Launch(us(20), us(2), 5),     test::Kernel(us(60), us(10), kConvKernel, 5),
      test::Op(us(100), us(100), kStep2), test::Launch(us(120), us(2), 5),
  };
  const PytorchOverview o = ComputePytorchOverview(events, catalog);
  // Step 2 has no device op, so it is dropped (after the last GPU step).
  REQUIRE(o.steps.size() == 1);
  CHECK(o.steps[0].device_ops == 2);
  // K1 is credited, so it does not move the lower bound: start stays 10.
  CHECK(o.steps[0].start_ns == static_cast<int64_t>(us(10)));
  CHECK(o.steps[0].end_ns == static_cast<int64_t>(us(100)));
}

TEST_CASE("pytorch view: non-integer µs traces publish floats") {
  const Catalog catalog = MakeCatalog();
  // Step [0, 100.5 µs); operator [0, 33.25 µs).
  const std::vector<Event> events = {test::Op(0, 100'500, kStep1), test::Op(0, 33'250, kMm)};
  const PytorchOverview o = ComputePytorchOverview(events, catalog);
  CHECK_FALSE(o.integer_us);
  REQUIRE(o.steps.size() == 1);
  const std::string json = Json(o);
  CHECK(json.find("[\"1\",0.0,") != std::string::npos);  // DataLoader 0.0 as a float.
  CHECK(json.find("Total: 100.5us<br><b>CPU Exec: 33.25us</b>") != std::string::npos);
  CHECK(json.find(",33.25,") != std::string::npos);
  CHECK(json.find("<b>Other: 67.25us</b><br>Percentage: 66.92%") != std::string::npos);  // 66.915...
}

TEST_CASE("pytorch view: bad durations are counted and skipped") {
  const Catalog catalog = MakeCatalog();
  Diagnostics diag;
  PytorchView view(&catalog, &diag);
  const std::vector<Event> events = {
      test::Op(us(0), us(100), kStep1), test::Op(us(10), (uint64_t{1} << 62) + 1, kMm),
      test::Kernel(uint64_t{1} << 63, us(1), kConvKernel),
      test::Instant(us(5)),  // not a kind the view uses: ignored, not counted.
  };
  view.Consume(events);
  CHECK(diag.Get(Diag::bad_duration) == 2);
  CHECK(view.buffered().size() == 1);
  const PytorchOverview o = view.Snapshot();
  CHECK(o.bad_duration_events == 2);
  REQUIRE(o.steps.size() == 1);
  CHECK(o.steps[0].value_ns[kOther] == static_cast<int64_t>(us(100)));
  CHECK(ComputePytorchOverview(events, catalog).bad_duration_events == 2);
}

// ---------------------------------------------------------------------------
// Randomized: incremental equals batch, and both equal a naive reference.

namespace {

struct Gen {
  std::mt19937_64 rng;
  uint64_t Uniform(uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo + 1); }
  bool Chance(int percent) { return static_cast<int>(rng() % 100) < percent; }
};

// A random trace in whole µs with positive durations and non-overlapping host
// steps (the naive reference relies on both; see below).
std::vector<Event> RandomTrace(uint64_t seed) {
  Gen g{std::mt19937_64(seed)};
  std::vector<Event> ev;
  const int n_steps = g.Chance(10) ? 0 : static_cast<int>(g.Uniform(1, 6));
  uint64_t t = g.Uniform(0, 30);
  const NameId step_names[] = {kStep1, kStep2, kStep3};
  for (int i = 0; i < n_steps; ++i) {
    const uint64_t len = g.Uniform(30, 200);
    const int form = static_cast<int>(g.Uniform(0, 2));
    if (form == 0) {
      ev.push_back(test::Op(us(t), us(len), step_names[i % 3]));
    } else if (form == 1) {
      ev.push_back(test::Span(us(t), us(len), step_names[i % 3]));
    } else {
      ev.push_back(test::Step(us(t), us(len), 100 + i));
    }
    t += len + (g.Chance(50) ? 0 : g.Uniform(1, 20));
  }
  const uint64_t horizon = t + 60;
  const NameId host_names[] = {kMm, kCopy, kNext, kDataPipe, kAllReduce, kGloo, kScope, kStepBad};
  const int n_host = static_cast<int>(g.Uniform(0, 25));
  for (int i = 0; i < n_host; ++i) {
    const uint64_t ts = g.Uniform(0, horizon), dur = g.Uniform(1, 60);
    const int k = static_cast<int>(g.Uniform(0, 9));
    if (k == 9) {
      ev.push_back(test::Input(us(ts), us(dur), kCopy));
    } else {
      const NameId name = host_names[k % 8];
      ev.push_back(g.Chance(70) ? test::Op(us(ts), us(dur), name) : test::Span(us(ts), us(dur), name));
    }
  }
  const uint32_t n_corr = static_cast<uint32_t>(g.Uniform(1, 20));
  const int n_rt = static_cast<int>(g.Uniform(0, 25));
  for (int i = 0; i < n_rt; ++i) {
    ev.push_back(test::Launch(us(g.Uniform(0, horizon)), us(g.Uniform(1, 8)),
                              static_cast<uint32_t>(g.Uniform(1, n_corr)), kLaunch));
  }
  const int n_dev = static_cast<int>(g.Uniform(0, 30));
  const NameId ops[] = {0, kMm, kAllReduce, kGloo};
  for (int i = 0; i < n_dev; ++i) {
    const uint64_t ts = g.Uniform(0, horizon), dur = g.Uniform(1, 50);
    const uint32_t corr = static_cast<uint32_t>(g.Uniform(1, n_corr + 3));  // some never launched.
    const uint8_t device = static_cast<uint8_t>(g.Uniform(0, 1));
    const int k = static_cast<int>(g.Uniform(0, 5));
    if (k <= 2) {
      ev.push_back(test::Kernel(us(ts), us(dur), kConvKernel, corr, 100, ops[g.Uniform(0, 3)], 0, device));
    } else if (k <= 4) {
      ev.push_back(
          test::Copy(k == 3 ? EventKind::kMemcpyHtoD : EventKind::kMemcpyPtoP, us(ts), us(dur), 64, corr, 100, device));
    } else {
      ev.push_back(test::Copy(EventKind::kMemset, us(ts), us(dur), 64, corr, 100, device));
    }
  }
  std::shuffle(ev.begin(), ev.end(), g.rng);
  return ev;
}

// The naive reference: the spec's rules coded directly, slowly, on a grid of
// 1 µs ticks. It needs positive durations (then a role's carved list is empty
// exactly when it covers no tick) and non-overlapping host steps (then the
// cursor of section 1.2 credits a runtime to the step that contains it).
struct NaiveStep {
  std::string name;
  int64_t start = 0, end = 0;
  std::array<int64_t, kPytorchRoleCount> value{};
  uint64_t device_ops = 0;
};
struct Naive {
  std::vector<NaiveStep> steps;
  std::map<int, double> util;
  bool has_kernel = false, has_runtime = false, has_comm = false, has_copy = false;
};

Naive NaiveOverview(const std::vector<Event>& input, const Catalog& catalog) {
  enum Type { kDev, kRt, kHost, kStepT, kSkip };
  struct R {
    int64_t ts, end;
    Type type;
    int role;  // -1: none.
    bool kernel;
    bool cpu;
    uint32_t corr;
    int device;
    std::string step_name;
  };
  auto is_comm = [](std::string_view n) {
    for (const char* c :
         {"nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
          "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter"}) {
      if (n == c) return true;
    }
    return false;
  };
  std::vector<R> rs;
  for (const Event& e : input) {
    R r{static_cast<int64_t>(e.ts / kUs),
        static_cast<int64_t>(e.end() / kUs),
        kSkip,
        -1,
        false,
        false,
        e.corr,
        e.device,
        ""};
    const std::string name(catalog.Name(e.name));
    if (e.kind == EventKind::kKernel) {
      r.type = kDev;
      r.kernel = true;
      r.role = is_comm(catalog.Name(e.payload.kernel.op)) ? 3 : 0;
    } else if (IsMemcpyKind(e.kind)) {
      r.type = kDev;
      r.role = 1;
    } else if (e.kind == EventKind::kMemset) {
      r.type = kDev;
      r.role = 2;
    } else if (e.kind == EventKind::kRuntimeApi) {
      r.type = kRt;
      r.role = 4;
    } else if (e.kind == EventKind::kStepMarker) {
      r.type = kStepT;
      r.cpu = true;
      r.step_name = std::to_string(e.payload.step.step_num);
    } else if (e.kind == EventKind::kInputSpan) {
      r.type = kHost;
      r.role = 5;
      r.cpu = true;
    } else if (e.kind == EventKind::kFrameworkOp || e.kind == EventKind::kHostSpan) {
      r.type = kHost;
      r.cpu = e.kind == EventKind::kFrameworkOp;
      if (name == "ProfilerStep#1" || name == "ProfilerStep#2" || name == "ProfilerStep#3") {
        r.type = kStepT;
        r.cpu = true;
        r.step_name = name.substr(13);
      } else if ((name.starts_with("enumerate(DataLoader)#") && name.ends_with(".__next__")) ||
                 name.starts_with("enumerate(DataPipe)#")) {
        r.role = 5;
      } else if (is_comm(name)) {
        r.role = 3;
      } else {
        r.role = 6;
      }
    } else {
      continue;
    }
    rs.push_back(r);
  }
  std::stable_sort(rs.begin(), rs.end(), [](const R& a, const R& b) { return a.ts < b.ts; });

  Naive out;
  std::vector<size_t> step_idx;
  int64_t cpu_min = std::numeric_limits<int64_t>::max(), cpu_max = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].type == kStepT) step_idx.push_back(i);
    if (rs[i].cpu) {
      cpu_min = std::min(cpu_min, rs[i].ts);
      cpu_max = std::max(cpu_max, rs[i].end);
    }
  }
  struct HS {
    int64_t s, e;
    std::string name;
  };
  std::vector<HS> steps;
  for (size_t i : step_idx) steps.push_back({rs[i].ts, rs[i].end, rs[i].step_name});
  if (steps.empty()) {
    if (cpu_min > cpu_max) return out;
    steps.push_back({cpu_min, cpu_max, "0"});
  }
  // Launching runtime of each device op: the last one before it with its
  // corr, else the first one after it.
  std::vector<int> runtime_of(rs.size(), -1);
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].type != kDev) continue;
    for (size_t j = i; j-- > 0;) {
      if (rs[j].type == kRt && rs[j].corr == rs[i].corr) {
        runtime_of[i] = static_cast<int>(j);
        break;
      }
    }
    if (runtime_of[i] < 0) {
      for (size_t j = i + 1; j < rs.size(); ++j) {
        if (rs[j].type == kRt && rs[j].corr == rs[i].corr) {
          runtime_of[i] = static_cast<int>(j);
          break;
        }
      }
    }
  }
  // The step credited with each device op: the one containing its runtime.
  const size_t n = steps.size();
  std::vector<int> step_of(rs.size(), -1);
  std::vector<uint64_t> count(n, 0);
  std::vector<int64_t> dmin(n, std::numeric_limits<int64_t>::max()), dmax(n, std::numeric_limits<int64_t>::min());
  bool any = false;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].type != kDev || runtime_of[i] < 0) continue;
    const R& rt = rs[static_cast<size_t>(runtime_of[i])];
    for (size_t k = 0; k < n; ++k) {
      if (rt.ts >= steps[k].s && rt.end <= steps[k].e) {
        step_of[i] = static_cast<int>(k);
        ++count[k];
        dmin[k] = std::min(dmin[k], rs[i].ts);
        dmax[k] = std::max(dmax[k], rs[i].end);
        any = true;
        break;
      }
    }
  }
  std::vector<std::pair<int64_t, int64_t>> bounds(n);
  for (size_t k = 0; k < n; ++k) bounds[k] = {steps[k].s, steps[k].e};
  size_t keep = n;
  if (any) {
    int64_t prev = steps[0].s;
    if (count[0] > 0) {
      for (size_t i = 0; i < rs.size(); ++i) {
        if (rs[i].type == kDev && step_of[i] < 0 && rs[i].end < dmin[0]) prev = std::max(prev, rs[i].end);
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const int64_t s = std::max(prev, steps[k].s);
      const int64_t e = count[k] > 0 ? std::max(s, std::max(steps[k].e, dmax[k])) : std::max(steps[k].e, s);
      bounds[k] = {s, e};
      prev = e;
    }
    if (n > 1) {
      size_t last = n;
      for (size_t k = 0; k < n; ++k) {
        if (count[k] > 0) last = k;
      }
      if (last < n) {
        keep = last + 1;
        if (last > 0 && count[last - 1] * 0.8 > count[last]) keep = last;
      }
    }
  }
  // Tick grid.
  int64_t lo = 0, hi = 1;
  for (const R& r : rs) hi = std::max(hi, r.end + 1);
  for (const auto& b : bounds) hi = std::max(hi, b.second + 1);
  const size_t ticks = static_cast<size_t>(hi - lo);
  std::vector<std::vector<char>> role(7, std::vector<char>(ticks, 0));
  for (const R& r : rs) {
    if (r.role < 0) continue;
    for (int64_t t = r.ts; t < r.end; ++t) role[static_cast<size_t>(r.role)][static_cast<size_t>(t)] = 1;
  }
  for (const R& r : rs) {
    if (r.role == 0) out.has_kernel = true;
    if (r.role == 1 || r.role == 2) out.has_copy = true;
    if (r.role == 3) out.has_comm = true;
    if (r.role == 4) out.has_runtime = true;
  }
  std::vector<char> in_s(ticks, 0);
  for (size_t k = 0; k < keep; ++k) {
    for (int64_t t = bounds[k].first; t < bounds[k].second; ++t) in_s[static_cast<size_t>(t)] = 1;
  }
  // Carving with the reset rule: an empty free set gives the role all its
  // ticks, and the free set restarts from S minus them.
  std::vector<std::vector<char>> taken(8, std::vector<char>(ticks, 0));
  std::vector<char> free_set(ticks, 0);  // empty at first: Kernel is always unclipped.
  for (size_t r = 0; r < 7; ++r) {
    const bool empty = std::count(free_set.begin(), free_set.end(), 1) == 0;
    for (size_t t = 0; t < ticks; ++t) {
      if (empty) {
        taken[r][t] = role[r][t];
        free_set[t] = in_s[t] && !role[r][t];
      } else {
        taken[r][t] = role[r][t] && free_set[t];
        if (taken[r][t]) free_set[t] = 0;
      }
    }
  }
  taken[7] = free_set;
  for (size_t k = 0; k < keep; ++k) {
    NaiveStep s;
    s.name = steps[k].name;
    s.start = bounds[k].first;
    s.end = bounds[k].second;
    s.device_ops = count[k];
    for (size_t r = 0; r < 8; ++r) {
      for (int64_t t = s.start; t < s.end; ++t) s.value[r] += taken[r][static_cast<size_t>(t)];
    }
    out.steps.push_back(s);
  }
  // GPU Utilization.
  const int64_t w0 = bounds[0].first, w1 = bounds[keep - 1].second;
  for (int dev = 0; dev < 2; ++dev) {
    std::vector<char> busy(ticks, 0);
    bool seen = false;
    for (const R& r : rs) {
      if (!r.kernel || r.device != dev) continue;
      seen = true;
      for (int64_t t = r.ts; t < r.end; ++t) busy[static_cast<size_t>(t)] = 1;
    }
    if (!seen) continue;
    int64_t b = 0;
    for (int64_t t = w0; t < w1; ++t) b += busy[static_cast<size_t>(t)];
    out.util[dev] = w1 == w0 ? 0.0 : static_cast<double>(b) / static_cast<double>(w1 - w0);
  }
  return out;
}

void CheckAgainstNaive(const PytorchOverview& o, const Naive& n) {
  REQUIRE(o.steps.size() == n.steps.size());
  for (size_t k = 0; k < n.steps.size(); ++k) {
    CAPTURE(k);
    const PytorchOverviewStep& s = o.steps[k];
    CHECK(s.name == n.steps[k].name);
    CHECK(s.start_ns == n.steps[k].start * static_cast<int64_t>(kUs));
    CHECK(s.end_ns == n.steps[k].end * static_cast<int64_t>(kUs));
    CHECK(s.device_ops == n.steps[k].device_ops);
    for (size_t r = 0; r < kPytorchRoleCount; ++r) {
      CAPTURE(r);
      CHECK(s.value_ns[r] == n.steps[k].value[r] * static_cast<int64_t>(kUs));
      const double total = static_cast<double>(n.steps[k].end - n.steps[k].start);
      const double want = total == 0 ? 0.0 : PyRound(100.0 * static_cast<double>(n.steps[k].value[r]) / total, 2);
      CHECK(s.pct[r] == want);
    }
  }
  CHECK(o.has_kernel == n.has_kernel);
  CHECK(o.has_runtime == n.has_runtime);
  CHECK(o.has_communication == n.has_comm);
  CHECK(o.has_memcpy_or_memset == n.has_copy);
  if (!n.steps.empty()) {
    REQUIRE(o.gpus.size() == n.util.size());
    for (const PytorchOverviewGpu& g : o.gpus) {
      CHECK(g.utilization == n.util.at(g.device));
    }
  }
}

}  // namespace

TEST_CASE("pytorch view: incremental equals batch equals a naive reference (random traces)") {
  const Catalog catalog = MakeCatalog();
  int gpu_mode = 0, dropped = 0, fallback = 0, moved_start = 0, extended = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    CAPTURE(seed);
    const std::vector<Event> events = RandomTrace(seed);
    const PytorchOverview batch = ComputePytorchOverview(events, catalog);

    // (a) PytorchView fed in random chunks, with snapshots in between.
    PytorchView view(&catalog, nullptr);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    for (size_t i = 0; i < events.size();) {
      const size_t len = std::min<size_t>(events.size() - i, 1 + rng() % 12);
      view.Consume(std::span<const Event>(events).subspan(i, len));
      i += len;
      if (rng() % 3 == 0) (void)view.Snapshot();
    }
    const PytorchOverview incremental = view.Snapshot();
    CHECK(Json(incremental) == Json(batch));
    CHECK(incremental.ToCsv() == batch.ToCsv());

    // (b) the naive reference.
    CheckAgainstNaive(batch, NaiveOverview(events, catalog));

    // JSON always parses.
    CHECK(nlohmann::json::accept(Json(batch)));

    gpu_mode += batch.gpu_mode;
    dropped += batch.dropped_tail_steps > 0;
    fallback += batch.fallback_step;
    for (const PytorchOverviewStep& s : batch.steps) {
      moved_start += s.start_ns != s.host_start_ns;
      extended += s.end_ns > s.host_end_ns;
    }
  }
  // The generator reaches the interesting paths.
  CHECK(gpu_mode > 100);
  CHECK(dropped > 20);
  CHECK(fallback > 10);
  CHECK(moved_start > 50);
  CHECK(extended > 50);
}

TEST_CASE("pytorch view: a bounded buffer drops the oldest steps whole") {
  const Catalog catalog = MakeCatalog();
  // 40 steps of 100 µs, each with an operator, a launch and its kernel, the
  // kernel running 30 µs past the step end (a GPU tail), in completion order.
  std::vector<Event> events;
  for (uint32_t i = 0; i < 40; ++i) {
    const uint64_t t = us(100) * i;
    events.push_back(test::Step(t, us(100), i));
    events.push_back(test::Op(t + us(10), us(20), kMm));
    events.push_back(test::Launch(t + us(15), us(2), i + 1));
    events.push_back(test::Kernel(t + us(60), us(70), kConvKernel, i + 1));
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  PytorchViewOptions options;
  options.max_events = 40;
  PytorchView view(&catalog, nullptr, options);
  for (size_t i = 0; i < events.size(); i += 7) {
    view.Consume(std::span<const Event>(events).subspan(i, std::min<size_t>(7, events.size() - i)));
    CHECK(view.buffered().size() <= options.max_events);
  }
  const uint64_t cut = view.cut_ns();
  CHECK(cut > 0);
  CHECK(cut % us(100) == 0);  // a step start.
  // The buffer is exactly the events with ts >= cut or end > cut.
  std::vector<Event> want;
  for (const Event& e : events) {
    if (e.ts >= cut || e.end() > cut) want.push_back(e);
  }
  REQUIRE(view.buffered().size() == want.size());
  CHECK(std::equal(want.begin(), want.end(), view.buffered().begin(),
                   [](const Event& a, const Event& b) { return a.ts == b.ts && a.kind == b.kind && a.dur == b.dur; }));
  CHECK(view.dropped_events() == events.size() - want.size());
  const PytorchOverview o = view.Snapshot();
  CHECK(o.dropped_events == events.size() - want.size());
  // The previous step's kernel still running at the cut is an unmatched
  // leftover: it moves the first kept step's start to its end (+30 µs), as
  // the plugin does for a trace that starts mid-run.
  REQUIRE(!o.steps.empty());
  CHECK(o.steps.front().host_start_ns == static_cast<int64_t>(cut));
  CHECK(o.steps.front().start_ns == static_cast<int64_t>(cut + us(30)));
  CHECK(o.steps.back().name == "39");
  // The same as the batch function over the kept events.
  PytorchOverview batch = ComputePytorchOverview(want, catalog);
  batch.dropped_events = o.dropped_events;
  CHECK(Json(o) == Json(batch));

  // Batches larger than the buffer's spare room: it is cut before it would
  // grow (no reallocation: in a live run each moved the whole buffer into
  // fresh pages), and holds the same invariant.
  PytorchView big(&catalog, nullptr, options);
  const Event* first_buffer = nullptr;
  for (size_t i = 0; i < events.size(); i += 25) {
    big.Consume(std::span<const Event>(events).subspan(i, std::min<size_t>(25, events.size() - i)));
    if (first_buffer == nullptr) first_buffer = big.buffered().data();
    CHECK(big.buffered().data() == first_buffer);
    CHECK(big.buffered().size() <= options.max_events);
  }
  for (const Event& e : big.buffered()) CHECK((e.ts >= big.cut_ns() || e.end() > big.cut_ns()));
  CHECK(big.dropped_events() + big.buffered().size() == events.size());
  CHECK(big.cut_ns() % us(100) == 0);
}

}  // namespace liveprof::pytorch_view_test
