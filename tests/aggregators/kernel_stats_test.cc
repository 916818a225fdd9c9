#include "aggregators/tf/kernel_stats.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "event_builder.h"
#include "stream/diagnostics.h"

namespace liveprof::kernel_stats_test {
namespace {

// Name ids used by the hand-computed tests.
constexpr NameId kH884 = 1;  // "volta_h884gemm_128x64" (TensorCore).
constexpr NameId kElementwise = 2;
constexpr NameId kSgemm = 3;      // "sgemm_largek" (no TensorCore).
constexpr NameId kS1688 = 4;      // "turing_fp16_s1688cudnn_fp16" (TensorCore).
constexpr NameId kOpMatMul = 10;  // "model/dense/MatMul" (eligible by name).
constexpr NameId kOpRelu = 11;    // "model/dense/Relu".
constexpr NameId kOpCustom = 12;  // "model/custom_op" (not eligible by name).
constexpr NameId kDetailsA = 20;
constexpr NameId kDetailsB = 21;

constexpr uint64_t kT0 = 1'000'000;  // an arbitrary start time.

Event KernelAt(uint64_t end, uint64_t dur, NameId name, NameId op = 0, NameId details = 0) {
  return test::Kernel(end - dur, dur, name, /*corr=*/0, /*track=*/100, op, details);
}

Catalog HandCatalog() {
  Catalog c;
  c.DefineName(kH884, "volta_h884gemm_128x64");
  c.DefineName(kElementwise, "elementwise_kernel");
  c.DefineName(kSgemm, "sgemm_largek");
  c.DefineName(kS1688, "turing_fp16_s1688cudnn_fp16");
  c.DefineName(kOpMatMul, "model/dense/MatMul");
  c.DefineName(kOpRelu, "model/dense/Relu");
  c.DefineName(kOpCustom, "model/custom_op");
  c.DefineName(kDetailsA,
               "regs:64 static_shared:1024 dynamic_shared:2048 grid:10,1,1 block:128,1,1 "
               "occ_pct:50");
  c.DefineName(kDetailsB, "regs:32 grid:4,2,1 block:256,1,1 occ_pct:100.0");
  return c;
}

const KernelStatsRow* FindRow(const KernelStatsSnapshot& s, std::string_view kernel, std::string_view op) {
  for (const KernelStatsRow& r : s.rows) {
    if (r.kernel_name == kernel && r.op_name == op) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("kernel stats: details parsing") {
  SUBCASE("every field") {
    const KernelDetails d =
        ParseKernelDetails("regs:64 static_shared:1024 dynamic_shared:2048 grid:10,2,3 block:128,4,1 occ_pct:62.5");
    CHECK(d.registers_per_thread == 64);
    CHECK(d.static_shared_bytes == 1024);
    CHECK(d.dynamic_shared_bytes == 2048);
    CHECK(d.grid == std::array<uint32_t, 3>{10, 2, 3});
    CHECK(d.block == std::array<uint32_t, 3>{128, 4, 1});
    CHECK(d.occupancy_pct == 62.5);
  }
  SUBCASE("missing fields: numbers 0, dims 1") {
    const KernelDetails d = ParseKernelDetails("regs:16");
    CHECK(d.registers_per_thread == 16);
    CHECK(d.static_shared_bytes == 0);
    CHECK(d.dynamic_shared_bytes == 0);
    CHECK(d.grid == std::array<uint32_t, 3>{1, 1, 1});
    CHECK(d.block == std::array<uint32_t, 3>{1, 1, 1});
    CHECK(d.occupancy_pct == 0);
    CHECK(ParseKernelDetails("") == KernelDetails{});
  }
  SUBCASE("newlines and repeated spaces separate tokens") {
    const KernelDetails d = ParseKernelDetails("regs:8\nblock:32,1,1  grid:7,1,1\n");
    CHECK(d.registers_per_thread == 8);
    CHECK(d.block == std::array<uint32_t, 3>{32, 1, 1});
    CHECK(d.grid == std::array<uint32_t, 3>{7, 1, 1});
  }
  SUBCASE("odd tokens are ignored, a field keeps its value") {
    const KernelDetails d = ParseKernelDetails(
        "regs static_shared:abc dynamic_shared:-5 grid:1,2 block:4,x,1 occ_pct:nan "
        "a:b:c regs:1:2 unknown:7 :9 grid:3,4,5,6 static_shared:99999999999");
    CHECK(d.registers_per_thread == 0);
    CHECK(d.static_shared_bytes == 0);                  // not a number; out of uint32 range.
    CHECK(d.dynamic_shared_bytes == 0);                 // negative.
    CHECK(d.grid == std::array<uint32_t, 3>{1, 1, 1});  // 2 and 4 parts.
    CHECK(d.block == std::array<uint32_t, 3>{1, 1, 1});
    CHECK(d.occupancy_pct == 0);  // not finite.
  }
  SUBCASE("last occurrence wins; '+' and a trailing tab are accepted as absl does") {
    const KernelDetails d = ParseKernelDetails("regs:10 regs:+12\t grid:2,2,2 grid:bad");
    CHECK(d.registers_per_thread == 12);
    CHECK(d.grid == std::array<uint32_t, 3>{2, 2, 2});  // the bad one leaves it.
  }
}

TEST_CASE("kernel stats: TensorCore patterns and op eligibility") {
  for (const char* name :
       {"volta_h884gemm_128x64", "turing_fp16_s1688cudnn_fp16", "ampere_16816gemm", "xmma_gemm_f16f16",
        "sm80_xmma_implicit_gemm", "hmma_kernel", "i8816_x", "i16832_y", "c1688_z", "h1688_w", "s884_v", "conv1x1_u",
        "conv2d_c1_k1_t", "dgrad_1x1_stride_2x2_s", "direct_group_r", "first_layer_wgrad_kernel_q",
        "xmma_sparse_conv_p", "xmma_sparse_gemm_o", "xmma_warp_specialized_implicit_gemm_n"}) {
    CAPTURE(name);
    CHECK(KernelUsesTensorCore(name));
  }
  // By kernel family: a bare xmma kernel is xmma's; its FFMA
  // kernels, CUTLASS SIMT and sm50 builds are not.
  for (const char* name : {"xmma", "nvjet_sm90_tst_128x64", "cutlass_tensorop_s1688dgrad", "flash_fwd_kernel",
                           "fmha_cutlassF_f16_aligned_64x64_rf_sm80", "sm90_gmma_kernel", "MmaTensorOpPolicy"}) {
    CAPTURE(name);
    CHECK(KernelUsesTensorCore(name));
  }
  for (const char* name : {"sgemm_largek", "elementwise_kernel", "h88", "", "HMMA", "sm80_xmma_gemm_f32f32_ffma_x",
                           "cutlass_80_simt_sgemm_64x64", "fmha_cutlassF_f32_aligned_64x64_rf_sm50",
                           "multi_tensor_apply_kernel", "cudnnTensorStruct"}) {
    CAPTURE(name);
    CHECK_FALSE(KernelUsesTensorCore(name));
  }
  for (const char* op :
       {"model/conv/Conv2D", "a/Conv2DBackpropFilter", "a/Conv2DBackpropInput", "b/Conv3D", "c/DepthwiseConv2dNative",
        "c/DepthwiseConv2dNativeBackpropFilter", "c/DepthwiseConv2dNativeBackpropInput", "model/dense/MatMul",
        "d/_FusedMatMul", "e/CudnnRNN", "f/BatchMatMulV2", "g/CudnnRNNV3", "h/CudnnRNNForward_x",
        "i/CudnnRNNBackpropV3", "j/XlaDot", "j/XlaDotV2", "FusedConv2D"}) {
    CAPTURE(op);
    CHECK(IsOpTensorCoreEligible(op));
  }
  for (const char* op : {"model/dense/Relu", "MatMul", "model/MatMulX", "Conv2DX", "e/CudnnRNNX", "", "xladot"}) {
    CAPTURE(op);
    CHECK_FALSE(IsOpTensorCoreEligible(op));
  }
}

TEST_CASE("kernel stats: hand-computed rows, roll-up per op, JSON and CSV") {
  const Catalog catalog = HandCatalog();
  Diagnostics diag;
  KernelStats stats(&catalog, &diag);
  const std::vector<Event> events = {
      KernelAt(kT0 + 1000, 1000, kH884, kOpMatMul, kDetailsA),
      KernelAt(kT0 + 2000, 500, kElementwise, kOpRelu),
      KernelAt(kT0 + 4000, 3000, kH884, kOpMatMul, kDetailsA),
      KernelAt(kT0 + 4500, 700, kElementwise, kOpRelu),
      KernelAt(kT0 + 6500, 2001, kH884, kOpMatMul, kDetailsA),
      KernelAt(kT0 + 7000, 400, kElementwise),                  // no op.
      KernelAt(kT0 + 8000, 900, kSgemm, kOpMatMul, kDetailsB),  // eligible op, no TC.
      KernelAt(kT0 + 9000, 800, kS1688, kOpCustom),             // TC kernel: op eligible.
      KernelAt(kT0 + 9500, 300, kS1688),                        // TC kernel, no op.
      KernelAt(kT0 + 9600, 0, kSgemm, kOpMatMul),               // zero length: skipped.
  };
  stats.Consume(events);
  const KernelStatsSnapshot s = stats.Snapshot();
  CHECK(diag.Get(Diag::bad_duration) == 0);
  // 1000+500+3000+700+2001+400+900+800+300 = 9601 over 9 kernels.
  CHECK(s.kernel_count == 9);
  CHECK(s.kernel_ns == 9601);
  CHECK(s.distinct_rows == 6);
  REQUIRE(s.rows.size() == 6);

  // Totals: h884/MatMul 6001, elementwise/Relu 1200, sgemm 900, s1688/custom 800,
  // elementwise/"" 400, s1688/"" 300.
  const KernelStatsRow& r0 = s.rows[0];
  CHECK(r0.rank == 1);
  CHECK(r0.kernel_name == "volta_h884gemm_128x64");
  CHECK(r0.op_name == "model/dense/MatMul");
  CHECK(r0.occurrences == 3);
  CHECK(r0.total_ns == 6001);  // 1000 + 3000 + 2001.
  CHECK(r0.min_ns == 1000);
  CHECK(r0.max_ns == 3000);
  CHECK(r0.total_us() == 6.001);
  CHECK(r0.avg_us() == 2.0);  // 6001 / 3 = 2000 ns in integer division, as xprof.
  CHECK(r0.min_us() == 1.0);
  CHECK(r0.max_us() == 3.0);
  CHECK(r0.details.registers_per_thread == 64);
  CHECK(r0.shared_mem_bytes() == 3072);  // 1024 + 2048.
  CHECK(r0.details.grid == std::array<uint32_t, 3>{10, 1, 1});
  CHECK(r0.details.block == std::array<uint32_t, 3>{128, 1, 1});
  CHECK(r0.details.occupancy_pct == 50);
  CHECK(r0.kernel_uses_tc);
  CHECK(r0.op_tc_eligible);

  const KernelStatsRow& r1 = s.rows[1];
  CHECK(r1.rank == 2);
  CHECK(r1.kernel_name == "elementwise_kernel");
  CHECK(r1.op_name == "model/dense/Relu");
  CHECK(r1.occurrences == 2);
  CHECK(r1.total_ns == 1200);  // 500 + 700.
  CHECK(r1.min_ns == 500);
  CHECK(r1.max_ns == 700);
  CHECK(r1.avg_us() == 0.6);
  CHECK_FALSE(r1.kernel_uses_tc);
  CHECK_FALSE(r1.op_tc_eligible);
  CHECK(r1.details == KernelDetails{});  // no details: zeros and 1,1,1 dims.

  const KernelStatsRow& r2 = s.rows[2];
  CHECK(r2.kernel_name == "sgemm_largek");
  CHECK(r2.total_ns == 900);
  CHECK_FALSE(r2.kernel_uses_tc);
  CHECK(r2.op_tc_eligible);  // "/MatMul".
  CHECK(r2.details.grid == std::array<uint32_t, 3>{4, 2, 1});
  CHECK(r2.details.occupancy_pct == 100.0);

  const KernelStatsRow* tc_custom = FindRow(s, "turing_fp16_s1688cudnn_fp16", "model/custom_op");
  REQUIRE(tc_custom != nullptr);
  CHECK(tc_custom->rank == 4);
  CHECK(tc_custom->kernel_uses_tc);
  CHECK(tc_custom->op_tc_eligible);  // its kernel uses TensorCore.
  const KernelStatsRow* tc_no_op = FindRow(s, "turing_fp16_s1688cudnn_fp16", "");
  REQUIRE(tc_no_op != nullptr);
  CHECK(tc_no_op->rank == 6);
  CHECK(tc_no_op->kernel_uses_tc);
  CHECK_FALSE(tc_no_op->op_tc_eligible);  // xprof: no op, no eligibility.
  CHECK(FindRow(s, "elementwise_kernel", "")->rank == 5);

  // Roll-up: MatMul = 6001 (TC) + 900 (sgemm) = 6901, of which 6001 TensorCore.
  const KernelOpRollup* matmul = s.Op("model/dense/MatMul");
  REQUIRE(matmul != nullptr);
  CHECK(matmul->occurrences == 4);
  CHECK(matmul->kernel_ns == 6901);
  CHECK(matmul->tensor_core_ns == 6001);
  CHECK(matmul->op_tc_eligible);
  CHECK(matmul->tensor_core_pct() == doctest::Approx(100.0 * 6001 / 6901));
  const KernelOpRollup* relu = s.Op("model/dense/Relu");
  REQUIRE(relu != nullptr);
  CHECK(relu->kernel_ns == 1200);
  CHECK(relu->tensor_core_ns == 0);
  CHECK_FALSE(relu->op_tc_eligible);
  const KernelOpRollup* none = s.Op("");
  REQUIRE(none != nullptr);
  CHECK(none->kernel_ns == 700);       // 400 + 300.
  CHECK(none->tensor_core_ns == 300);  // the s1688 one.
  REQUIRE(s.ops.size() == 4);
  // kernel_ns descending: MatMul 6901, Relu 1200, custom 800, "" 700.
  CHECK(s.ops[0].op_name == "model/dense/MatMul");
  CHECK(s.ops[1].op_name == "model/dense/Relu");
  CHECK(s.ops[2].op_name == "model/custom_op");
  CHECK(s.ops[3].op_name == "");

  // JSON parses and carries the µs columns.
  JsonWriter w;
  s.WriteJson(w);
  const nlohmann::json j = nlohmann::json::parse(w.str());
  CHECK(j["kernel_count"] == 9);
  CHECK(j["rows"].size() == 6);
  CHECK(j["rows"][0]["kernel_name"] == "volta_h884gemm_128x64");
  CHECK(j["rows"][0]["block"] == "128,1,1");
  CHECK(j["rows"][0]["grid"] == "10,1,1");
  CHECK(j["rows"][0]["shared_mem_bytes"] == 3072);
  CHECK(j["rows"][0]["total_us"] == 6.001);
  CHECK(j["rows"][0]["avg_us"] == 2.0);
  CHECK(j["rows"][0]["op_tc_eligible"] == true);
  CHECK(j["ops"][0]["tensor_core_ns"] == 6001);
  CHECK(j["histograms"].size() == 4);  // distinct kernel names of the rows.

  const std::string csv = s.ToCsv();
  CHECK(csv.rfind("rank,kernel_name,registers_per_thread,shared_mem_bytes,block,grid,occupancy_pct,"
                  "op_tc_eligible,kernel_uses_tc,op_name,occurrences,total_us,avg_us,min_us,max_us\n"
                  "1,volta_h884gemm_128x64,64,3072,\"128,1,1\",\"10,1,1\",50,true,true,"
                  "model/dense/MatMul,3,6.001,2,1,3\n",
                  0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 7);
}

TEST_CASE("kernel stats: rows with equal keys merge, occupancy is not part of the key") {
  Catalog catalog;
  catalog.DefineName(1, "k");
  catalog.DefineName(2, "regs:8 grid:2,1,1 occ_pct:25");
  catalog.DefineName(3, "grid:2,1,1 regs:8 occ_pct:75");  // same key, other order/occupancy.
  KernelStats stats(&catalog, nullptr);
  const std::vector<Event> events = {KernelAt(kT0 + 100, 100, 1, 0, 2), KernelAt(kT0 + 200, 50, 1, 0, 3)};
  stats.Consume(events);
  const auto s = stats.Snapshot();
  REQUIRE(s.rows.size() == 1);
  CHECK(s.rows[0].occurrences == 2);
  CHECK(s.rows[0].total_ns == 150);
  CHECK(s.rows[0].min_ns == 50);
  CHECK(s.rows[0].details.occupancy_pct == 75);  // the larger one.
}

TEST_CASE("kernel stats: names defined after the kernel are resolved at snapshot") {
  Catalog catalog;
  KernelStats stats(&catalog, nullptr);
  const Event e = KernelAt(kT0 + 100, 100, /*name=*/1, /*op=*/2, /*details=*/3);
  stats.Consume(std::span(&e, 1));
  catalog.DefineName(1, "volta_h884gemm");
  catalog.DefineName(2, "m/custom");
  catalog.DefineName(3, "regs:40 grid:3,1,1");
  const auto s = stats.Snapshot();
  REQUIRE(s.rows.size() == 1);
  CHECK(s.rows[0].kernel_name == "volta_h884gemm");
  CHECK(s.rows[0].op_name == "m/custom");
  CHECK(s.rows[0].details.registers_per_thread == 40);
  CHECK(s.rows[0].details.grid == std::array<uint32_t, 3>{3, 1, 1});
  CHECK(s.rows[0].kernel_uses_tc);
  CHECK(s.rows[0].op_tc_eligible);
}

TEST_CASE("kernel stats: top-1000 cut, ties by the key tuple ascending") {
  Catalog catalog;
  constexpr int kKernels = 1005;
  std::vector<std::string> names;
  for (int i = 0; i < kKernels; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "k%04d", i);
    names.push_back(buf);
    catalog.DefineName(static_cast<NameId>(1 + i), buf);
  }
  // Extra ties sharing one name: grid/block/op order decides.
  constexpr NameId kTie = 2000, kGridA = 2001, kGridB = 2002, kOpA = 2003, kOpB = 2004;
  catalog.DefineName(kTie, "a_tie");
  catalog.DefineName(kGridA, "grid:2,1,1");
  catalog.DefineName(kGridB, "grid:1,5,1 block:64,1,1");
  catalog.DefineName(kOpA, "op_a");
  catalog.DefineName(kOpB, "op_b");

  KernelStats stats(&catalog, nullptr);
  std::vector<Event> events;
  uint64_t end = kT0;
  // Reverse order of arrival, so arrival order cannot explain the result.
  for (int i = kKernels - 1; i >= 0; --i) {
    end += 10;
    events.push_back(KernelAt(end, i % 3 == 0 ? 20 : 10, static_cast<NameId>(1 + i)));
  }
  events.push_back(KernelAt(end += 10, 20, kTie, kOpB, kGridA));
  events.push_back(KernelAt(end += 10, 20, kTie, kOpA, kGridA));
  events.push_back(KernelAt(end += 10, 20, kTie, kOpA, kGridB));
  stats.Consume(events);
  const KernelStatsSnapshot s = stats.Snapshot();
  CHECK(s.distinct_rows == kKernels + 3);
  REQUIRE(s.rows.size() == KernelStats::kMaxRows);

  // Expected: total 20 first (the three "a_tie" rows, then k0000, k0003, ...),
  // then total 10 by name, cut at 1000.
  // a_tie rows by (grid asc): grid 1,5,1 < 2,1,1; then op_a < op_b.
  CHECK(s.rows[0].kernel_name == "a_tie");
  CHECK(s.rows[0].details.grid == std::array<uint32_t, 3>{1, 5, 1});
  CHECK(s.rows[1].op_name == "op_a");
  CHECK(s.rows[1].details.grid == std::array<uint32_t, 3>{2, 1, 1});
  CHECK(s.rows[2].op_name == "op_b");
  std::vector<std::string> expected;
  for (int i = 0; i < kKernels; i += 3) expected.push_back(names[i]);  // 335 names.
  for (int i = 0; i < kKernels; ++i) {
    if (i % 3 != 0) expected.push_back(names[i]);
  }
  expected.resize(KernelStats::kMaxRows - 3);
  for (size_t i = 3; i < s.rows.size(); ++i) {
    CAPTURE(i);
    CHECK(s.rows[i].kernel_name == expected[i - 3]);
    CHECK(s.rows[i].rank == i + 1);
  }
  // The smaller top_n of a query.
  KernelStats::Query q;
  q.top_n = 5;
  CHECK(stats.Snapshot(q).rows.size() == 5);
}

TEST_CASE("kernel stats: histogram bins") {
  // Exact below 8 ns; then 8 per octave.
  for (uint64_t v = 0; v < 8; ++v) {
    CHECK(DurationBin(v) == v);
    CHECK(DurationBinLowerNs(static_cast<uint32_t>(v)) == v);
    CHECK(DurationBinUpperNs(static_cast<uint32_t>(v)) == v + 1);
  }
  CHECK(DurationBin(8) == 8);
  CHECK(DurationBin(15) == 15);
  // 16 = octave 4, width 2: [16, 18) is bin 8 + 8 + 0.
  CHECK(DurationBin(16) == 16);
  CHECK(DurationBinLowerNs(16) == 16);
  CHECK(DurationBinUpperNs(16) == 18);
  // 100: octave 6 (64..127), width 8, 100 >> 3 = 12 -> sub 4 -> [96, 104).
  CHECK(DurationBinLowerNs(DurationBin(100)) == 96);
  CHECK(DurationBinUpperNs(DurationBin(100)) == 104);
  // 1000: octave 9, width 64, 1000 >> 6 = 15 -> sub 7 -> [960, 1024).
  CHECK(DurationBinLowerNs(DurationBin(1000)) == 960);
  CHECK(DurationBinUpperNs(DurationBin(1000)) == 1024);
  // Bins tile the line, and each holds what it says, up to 2^62.
  for (uint32_t b = 0; b + 1 < kDurationBinCount; ++b) {
    CHECK(DurationBinUpperNs(b) == DurationBinLowerNs(b + 1));
  }
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t v = (rng() >> (rng() % 64)) & ((uint64_t{1} << 62) | ((uint64_t{1} << 62) - 1));
    const uint32_t b = DurationBin(v);
    CAPTURE(v);
    CHECK(DurationBinLowerNs(b) <= v);
    CHECK(v < DurationBinUpperNs(b));
    if (v >= 8) {
      CHECK((DurationBinUpperNs(b) - DurationBinLowerNs(b)) * 8 <= DurationBinLowerNs(b));
    }
  }
  CHECK(DurationBin(uint64_t{1} << 62) < kDurationBinCount);
}

TEST_CASE("kernel stats: histogram buckets and percentile estimates") {
  Catalog catalog;
  catalog.DefineName(1, "gemm");
  catalog.DefineName(2, "other");
  catalog.DefineName(3, "op_x");
  KernelStats stats(&catalog, nullptr);
  std::vector<Event> events;
  uint64_t end = kT0;
  // 90 kernels of 1000 ns and 10 of 5000 ns; half of the 1000s under another
  // op (a second row), which the per-name histogram combines.
  for (int i = 0; i < 90; ++i) events.push_back(KernelAt(end += 10'000, 1000, 1, i % 2 ? 3 : 0));
  for (int i = 0; i < 10; ++i) events.push_back(KernelAt(end += 10'000, 5000, 1));
  events.push_back(KernelAt(end += 10'000, 7, 2));
  stats.Consume(events);

  KernelStats::Query q;
  q.histogram_for = "gemm";
  const KernelStatsSnapshot s = stats.Snapshot(q);
  REQUIRE(s.histograms.size() == 1);
  const KernelDurationHistogram& h = s.histograms[0];
  CHECK(h.kernel_name == "gemm");
  CHECK(h.count == 100);
  CHECK(h.min_ns == 1000);
  CHECK(h.max_ns == 5000);
  // 1000 -> [960, 1024); 5000: octave 12, width 512, 5000 >> 9 = 9 -> sub 1 ->
  // [4608, 5120).
  REQUIRE(h.buckets.size() == 2);
  CHECK(h.buckets[0] == KernelDurationHistogram::Bucket{960, 1024, 90});
  CHECK(h.buckets[1] == KernelDurationHistogram::Bucket{4608, 5120, 10});
  // p50: rank ceil(0.5 * 100) = 50, in the first bucket: 960 + 64 * (50 - 0.5) / 90
  // = 995.2, clamped to min 1000.
  CHECK(h.p50_ns == 1000.0);
  // p90: rank 90, still the first bucket: 960 + 64 * 89.5 / 90 = 1023.644...
  CHECK(h.p90_ns == doctest::Approx(960.0 + 64.0 * 89.5 / 90.0));
  // p99: rank 99, second bucket: 4608 + 512 * (9 - 0.5) / 10 = 5043.2 -> max 5000.
  CHECK(h.p99_ns == 5000.0);

  // Default: histograms of the top rows' distinct names, in row order.
  const KernelStatsSnapshot all = stats.Snapshot();
  REQUIRE(all.histograms.size() == 2);
  CHECK(all.histograms[0].kernel_name == "gemm");
  CHECK(all.histograms[1].kernel_name == "other");
  CHECK(all.histograms[1].buckets.size() == 1);
  CHECK(all.histograms[1].buckets[0] == KernelDurationHistogram::Bucket{7, 8, 1});
  CHECK(all.histograms[1].p50_ns == 7.0);
  KernelStats::Query one;
  one.histogram_names = 1;
  CHECK(stats.Snapshot(one).histograms.size() == 1);
  KernelStats::Query unknown;
  unknown.histogram_for = "no_such_kernel";
  CHECK(stats.Snapshot(unknown).histograms.empty());
}

TEST_CASE("kernel stats: windows, ring overflow and a late kernel") {
  Catalog catalog;
  catalog.DefineName(1, "a");
  catalog.DefineName(2, "b");
  constexpr uint64_t kBucket = 1000;
  KernelStats stats(&catalog, nullptr, {.bucket_ns = kBucket, .max_buckets = 3});
  // Buckets by end: 0 -> a 100; 1 -> a 200; 3 -> b 50; 4 -> a 300, b 60.
  std::vector<Event> events = {KernelAt(500, 100, 1), KernelAt(1500, 200, 1), KernelAt(3500, 50, 2),
                               KernelAt(4200, 300, 1), KernelAt(4900, 60, 2)};
  stats.Consume(events);
  // Ring of 3 holds buckets 2..4; 0 and 1 merged into "older".
  const auto all = stats.Snapshot();
  CHECK(all.kernel_count == 5);
  CHECK(all.kernel_ns == 710);  // 100 + 200 + 50 + 300 + 60.
  KernelStats::Query q;
  q.window_ns = 1000;  // newest end 4900 - 1000 = 3900: buckets ending after it = bucket 3..4.
  auto w = stats.Snapshot(q);
  CHECK(w.kernel_count == 3);
  CHECK(w.kernel_ns == 410);  // 50 + 300 + 60.
  q.window_ns = 500;          // 4400 -> bucket 4 only.
  w = stats.Snapshot(q);
  CHECK(w.kernel_count == 2);
  CHECK(w.kernel_ns == 360);
  REQUIRE(w.rows.size() == 2);
  CHECK(w.rows[0].kernel_name == "a");
  CHECK(w.rows[0].total_ns == 300);

  // A late kernel ending in bucket 3 lands there, not in the newest bucket.
  Event late = KernelAt(3800, 40, 2);
  late.flags = kFlagLate;
  stats.Consume(std::span(&late, 1));
  w = stats.Snapshot(q);  // bucket 4 only: unchanged.
  CHECK(w.kernel_ns == 360);
  q.window_ns = 1000;  // buckets 3..4.
  w = stats.Snapshot(q);
  CHECK(w.kernel_ns == 450);  // 410 + 40.
  // A late kernel older than the ring goes to "older": only the full view has it.
  late = KernelAt(700, 5, 2);
  late.flags = kFlagLate;
  stats.Consume(std::span(&late, 1));
  CHECK(stats.Snapshot(q).kernel_ns == 450);
  CHECK(stats.Snapshot().kernel_ns == 755);     // 710 + 40 + 5.
  CHECK(stats.Snapshot().rows[1].min_ns == 5);  // "b": 50, 60, 40, 5.
}

TEST_CASE("kernel stats: bad durations are counted, never a crash") {
  Catalog catalog;
  catalog.DefineName(1, "k");
  Diagnostics diag;
  KernelStats stats(&catalog, &diag);
  std::vector<Event> events = {
      test::Kernel(100, (uint64_t{1} << 62) + 1, 1),  // absurd duration.
      test::Kernel(UINT64_MAX - 10, 100, 1),          // end overflows.
      test::Kernel(100, 0, 1),                        // zero: skipped, not counted.
      test::Kernel(100, uint64_t{1} << 62, 1),        // the largest allowed.
      test::Kernel(200, 10, 4'000'000'000u),          // a name id far beyond the dense range.
      test::Kernel(300, 10, 1, 0, 100, /*op=*/3'000'000'000u, /*details=*/4'100'000'000u),
  };
  stats.Consume(events);
  CHECK(diag.Get(Diag::bad_duration) == 2);
  const auto s = stats.Snapshot();
  CHECK(s.kernel_count == 3);
  // "k" with an undefined op id shows op "" and merges with "k" without op;
  // the undefined kernel name is a row "" of its own.
  CHECK(s.rows.size() == 2);
  // A null catalog and no diagnostics work too.
  KernelStats bare(nullptr, nullptr);
  bare.Consume(events);
  CHECK(bare.Snapshot().kernel_count == 3);
}

// ---------------------------------------------------------------------------
// Incremental equals batch equals a naive reference.

namespace {

struct RandomSetup {
  Catalog catalog;
  std::vector<NameId> kernels, details, ops;
};

RandomSetup MakeSetup() {
  RandomSetup r;
  const char* kernel_names[] = {"volta_h884gemm",   "sgemm_64",    "elementwise", "reduce",
                                "ampere_16816gemm", "copy_kernel", "xmma_gemm_a", "softmax"};
  NameId id = 1;
  for (const char* n : kernel_names) {
    r.catalog.DefineName(id, n);
    r.kernels.push_back(id++);
  }
  const char* details[] = {"", "regs:32 grid:8,1,1 block:128,1,1 occ_pct:50",
                           "grid:8,1,1 block:128,1,1 regs:32 occ_pct:25",  // same key as above.
                           "regs:64 static_shared:512 dynamic_shared:256 grid:4,4,1", "regs:16 bogus block:1,2"};
  r.details.push_back(0);
  for (const char* d : details) {
    r.catalog.DefineName(id, d);
    r.details.push_back(id++);
  }
  const char* ops[] = {"m/dense/MatMul", "m/relu", "m/conv/Conv2D", "m/custom"};
  r.ops.push_back(0);
  for (const char* o : ops) {
    r.catalog.DefineName(id, o);
    r.ops.push_back(id++);
  }
  return r;
}

// Naive kernel stats: a std::map over the full key of strings and parsed
// fields, from scratch.
struct NaiveRow {
  uint64_t count = 0, total = 0, min = UINT64_MAX, max = 0;
  double occ = 0;
  std::vector<uint64_t> durations;
};
using NaiveKey = std::tuple<std::string, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
                            uint32_t, bool, bool, std::string>;

// Independent bin bounds: largest power of two at most v, width = p / 8.
std::pair<uint64_t, uint64_t> NaiveBin(uint64_t v) {
  if (v < 8) return {v, v + 1};
  uint64_t p = 8;
  while (p <= v / 2) p *= 2;
  const uint64_t width = p / 8;
  const uint64_t lo = p + (v - p) / width * width;
  return {lo, lo + width};
}

struct NaiveResult {
  std::vector<std::pair<NaiveKey, NaiveRow>> rows;           // table order.
  std::map<std::string, std::pair<uint64_t, uint64_t>> ops;  // total, tc.
  uint64_t count = 0, total = 0;
};

NaiveResult Naive(const Catalog& c, const std::vector<Event>& events, uint64_t min_end) {
  std::map<NaiveKey, NaiveRow> rows;
  NaiveResult out;
  for (const Event& e : events) {
    if (e.kind != EventKind::kKernel || e.dur == 0 || e.dur > (uint64_t{1} << 62)) continue;
    if (e.ts + e.dur < min_end) continue;
    const std::string kernel(c.Name(e.name));
    const std::string op(c.Name(e.payload.kernel.op));
    const KernelDetails d = ParseKernelDetails(c.Name(e.payload.kernel.details));
    const bool tc = KernelUsesTensorCore(kernel);
    const bool eligible = e.payload.kernel.op != 0 && (tc || IsOpTensorCoreEligible(op));
    NaiveRow& r =
        rows[NaiveKey{kernel, d.grid[0], d.grid[1], d.grid[2], d.block[0], d.block[1], d.block[2],
                      d.registers_per_thread, d.static_shared_bytes, d.dynamic_shared_bytes, tc, eligible, op}];
    ++r.count;
    r.total += e.dur;
    r.min = std::min(r.min, e.dur);
    r.max = std::max(r.max, e.dur);
    r.occ = std::max(r.occ, d.occupancy_pct);
    r.durations.push_back(e.dur);
    ++out.count;
    out.total += e.dur;
    auto& op_row = out.ops[op];
    op_row.first += e.dur;
    if (tc) op_row.second += e.dur;
  }
  out.rows.assign(rows.begin(), rows.end());
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
  return out;
}

void CheckSame(const KernelStatsSnapshot& a, const KernelStatsSnapshot& b) {
  CHECK(a.kernel_count == b.kernel_count);
  CHECK(a.kernel_ns == b.kernel_ns);
  CHECK(a.distinct_rows == b.distinct_rows);
  REQUIRE(a.rows.size() == b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    CHECK(a.rows[i].kernel_name == b.rows[i].kernel_name);
    CHECK(a.rows[i].op_name == b.rows[i].op_name);
    CHECK(a.rows[i].details == b.rows[i].details);
    CHECK(a.rows[i].occurrences == b.rows[i].occurrences);
    CHECK(a.rows[i].total_ns == b.rows[i].total_ns);
    CHECK(a.rows[i].min_ns == b.rows[i].min_ns);
    CHECK(a.rows[i].max_ns == b.rows[i].max_ns);
  }
  REQUIRE(a.ops.size() == b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    CHECK(a.ops[i].op_name == b.ops[i].op_name);
    CHECK(a.ops[i].kernel_ns == b.ops[i].kernel_ns);
    CHECK(a.ops[i].tensor_core_ns == b.ops[i].tensor_core_ns);
  }
  REQUIRE(a.histograms.size() == b.histograms.size());
  for (size_t i = 0; i < a.histograms.size(); ++i) {
    CHECK(a.histograms[i].kernel_name == b.histograms[i].kernel_name);
    CHECK(a.histograms[i].buckets == b.histograms[i].buckets);
    CHECK(a.histograms[i].p50_ns == b.histograms[i].p50_ns);
    CHECK(a.histograms[i].p90_ns == b.histograms[i].p90_ns);
    CHECK(a.histograms[i].p99_ns == b.histograms[i].p99_ns);
  }
}

void CheckAgainstNaive(const KernelStatsSnapshot& s, const NaiveResult& n, size_t top_n) {
  CHECK(s.kernel_count == n.count);
  CHECK(s.kernel_ns == n.total);
  CHECK(s.distinct_rows == n.rows.size());
  REQUIRE(s.rows.size() == std::min(top_n, n.rows.size()));
  for (size_t i = 0; i < s.rows.size(); ++i) {
    const auto& [key, row] = n.rows[i];
    const KernelStatsRow& r = s.rows[i];
    CAPTURE(i);
    CHECK(r.kernel_name == std::get<0>(key));
    CHECK(r.details.grid == std::array<uint32_t, 3>{std::get<1>(key), std::get<2>(key), std::get<3>(key)});
    CHECK(r.details.registers_per_thread == std::get<7>(key));
    CHECK(r.kernel_uses_tc == std::get<10>(key));
    CHECK(r.op_tc_eligible == std::get<11>(key));
    CHECK(r.op_name == std::get<12>(key));
    CHECK(r.occurrences == row.count);
    CHECK(r.total_ns == row.total);
    CHECK(r.min_ns == row.min);
    CHECK(r.max_ns == row.max);
    CHECK(r.details.occupancy_pct == row.occ);
  }
  REQUIRE(s.ops.size() == n.ops.size());
  for (const KernelOpRollup& op : s.ops) {
    const auto it = n.ops.find(op.op_name);
    REQUIRE(it != n.ops.end());
    CHECK(op.kernel_ns == it->second.first);
    CHECK(op.tensor_core_ns == it->second.second);
  }
  // Histograms: per kernel name, the bins of every duration; the percentile
  // estimates inside the bin of the true nearest-rank value.
  for (const KernelDurationHistogram& h : s.histograms) {
    std::vector<uint64_t> durations;
    for (const auto& [key, row] : n.rows) {
      if (std::get<0>(key) == h.kernel_name) {
        durations.insert(durations.end(), row.durations.begin(), row.durations.end());
      }
    }
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> bins;
    for (uint64_t d : durations) ++bins[NaiveBin(d)];
    std::vector<KernelDurationHistogram::Bucket> expected;
    for (const auto& [range, count] : bins) expected.push_back({range.first, range.second, count});
    CHECK(h.buckets == expected);
    CHECK(h.count == durations.size());
    std::sort(durations.begin(), durations.end());
    for (const auto& entry : {std::pair{0.5, h.p50_ns}, {0.9, h.p90_ns}, {0.99, h.p99_ns}}) {
      const auto& p = entry.first;
      const auto& est = entry.second;
      size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(durations.size())));
      rank = std::max<size_t>(rank, 1);
      const auto [lo, hi] = NaiveBin(durations[rank - 1]);
      CAPTURE(p);
      CHECK(est >= static_cast<double>(lo));
      CHECK(est < static_cast<double>(hi));
      CHECK(est >= static_cast<double>(durations.front()));
      CHECK(est <= static_cast<double>(durations.back()));
    }
  }
}

}  // namespace

TEST_CASE("kernel stats: incremental equals batch equals naive on random streams") {
  const RandomSetup setup = MakeSetup();
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    constexpr uint64_t kBucket = 10'000;
    // Small rings in some seeds so buckets fall into "older".
    const size_t max_buckets = seed % 2 ? 4 : 1000;
    std::vector<Event> events;
    uint64_t end = 5'000;
    const int n = 200 + static_cast<int>(rng() % 3000);
    for (int i = 0; i < n; ++i) {
      end += rng() % 300;
      // Durations spread over several octaves, a few zero.
      const uint64_t dur = rng() % 50 == 0 ? 0 : 1 + (rng() % 4000 >> (rng() % 8));
      const NameId k = setup.kernels[rng() % setup.kernels.size()];
      Event e = KernelAt(end, std::min<uint64_t>(dur, end), k, setup.ops[rng() % setup.ops.size()],
                         setup.details[rng() % setup.details.size()]);
      if (rng() % 25 == 0 && end > 30'000) {  // a late kernel, ending up to 3 buckets back.
        const uint64_t back = rng() % 30'000;
        e.ts -= std::min(e.ts, back);
        e.flags = kFlagLate;
      }
      if (rng() % 40 == 0) events.push_back(test::Op(end, 10, 1));  // ignored kinds.
      events.push_back(e);
    }
    KernelStats::Options options{.bucket_ns = kBucket, .max_buckets = max_buckets};
    KernelStats batch(&setup.catalog, nullptr, options);
    KernelStats incremental(&setup.catalog, nullptr, options);
    batch.Consume(events);
    for (size_t pos = 0; pos < events.size();) {
      const size_t len = std::min<size_t>(1 + rng() % 300, events.size() - pos);
      incremental.Consume(std::span(events).subspan(pos, len));
      pos += len;
      (void)incremental.Snapshot();
    }
    KernelStats::Query q;
    q.top_n = 15;
    q.histogram_names = 8;
    const auto a = batch.Snapshot(q);
    const auto b = incremental.Snapshot(q);
    CheckSame(a, b);
    CheckAgainstNaive(a, Naive(setup.catalog, events, 0), q.top_n);
    // A window inside the ring: events ending in the buckets that end after
    // (newest end - window).
    uint64_t newest = 0;
    for (const Event& e : events) {
      if (e.kind == EventKind::kKernel && e.dur > 0) newest = std::max(newest, e.end());
    }
    q.window_ns = 2 * kBucket + rng() % kBucket;
    const uint64_t min_end = q.window_ns >= newest ? 0 : (newest - q.window_ns) / kBucket * kBucket;
    const auto wa = batch.Snapshot(q);
    CheckSame(wa, incremental.Snapshot(q));
    CheckAgainstNaive(wa, Naive(setup.catalog, events, min_end), q.top_n);
  }
}

}  // namespace liveprof::kernel_stats_test
