#include "aggregators/tf/op_stats.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "event_builder.h"

namespace liveprof::op_stats_test {
namespace {

constexpr uint64_t kUs = 1000;            // ns per µs.
constexpr uint64_t kSec = 1'000'000'000;  // ns per s.

Event OpAt(uint64_t begin_us, uint64_t end_us, NameId name, TrackId track = 1) {
  return test::Op(begin_us * kUs, (end_us - begin_us) * kUs, name, track);
}

const OpStatsRow* FindRow(const OpStatsSide& side, std::string_view name) {
  for (const OpStatsRow& r : side.rows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

// RFC 4180 reader for ToCsv() output: rows of fields.
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      row.push_back(std::move(field));
      field.clear();
      rows.push_back(std::move(row));
      row.clear();
    } else {
      field.push_back(c);
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("op stats: ParseTfOpName follows §0.3") {
  SUBCASE("TensorFlow op") {
    const ParsedOp p = ParseTfOpName("model/dense/MatMul:MatMul");
    CHECK(p.category == OpCategory::kTensorFlow);
    CHECK(p.name == "model/dense/MatMul");
    CHECK(p.type == "MatMul");
    const ParsedOp q = ParseTfOpName("ns>op-1.x:_InternalType");
    CHECK(q.category == OpCategory::kTensorFlow);
    CHECK(q.type == "_InternalType");
  }
  SUBCASE("empty type: TF op with the type derived from the last segment") {
    const ParsedOp p = ParseTfOpName("model/dense/MatMul_1:");
    CHECK(p.category == OpCategory::kTensorFlow);
    CHECK(p.name == "model/dense/MatMul_1");
    CHECK(p.type == "MatMul");
  }
  SUBCASE("tf.data iterator") {
    const ParsedOp p = ParseTfOpName("Iterator::Batch::Map::TFRecord");
    CHECK(p.category == OpCategory::kDataset);
    CHECK(p.name == "Iterator::Batch::Map::TFRecord");
    CHECK(p.type == "Dataset");
  }
  SUBCASE("memcpy prefixes, case-insensitive, only without ':'") {
    CHECK(ParseTfOpName("MemcpyHToD").category == OpCategory::kMemcpyHToD);
    CHECK(ParseTfOpName("MemcpyHToD").type == "MemcpyHToD");
    CHECK(ParseTfOpName("memcpydtoh_async").category == OpCategory::kMemcpyDToH);
    CHECK(ParseTfOpName("MEMCPYDTOD").category == OpCategory::kMemcpyDToD);
    CHECK(ParseTfOpName("MemcpyHToH").type == "MemcpyHToH");
    CHECK(ParseTfOpName("MemcpyHToD").name == "MemcpyHToD");
    CHECK(ParseTfOpName("Memcpy").category == OpCategory::kUnknown);
  }
  SUBCASE("JAX op: brackets stripped; derived type when empty") {
    const ParsedOp p = ParseTfOpName("jit(train)/transpose:transpose[permutation=(0, 3, 1, 2)]");
    CHECK(p.category == OpCategory::kJax);
    CHECK(p.name == "jit(train)/transpose");
    CHECK(p.type == "transpose");
    const ParsedOp q = ParseTfOpName("jit(f)/relu_3:");
    CHECK(q.category == OpCategory::kJax);
    CHECK(q.name == "jit(f)/relu_3");
    CHECK(q.type == "relu");
  }
  SUBCASE("PyTorch-style and user names are Unknown") {
    const ParsedOp p = ParseTfOpName("aten::conv2d");
    CHECK(p.category == OpCategory::kUnknown);
    CHECK(p.name == "aten::conv2d");
    CHECK(p.type == "");
    CHECK(ParseTfOpName("train_step").category == OpCategory::kUnknown);
    CHECK(ParseTfOpName("").category == OpCategory::kUnknown);
    CHECK(ParseTfOpName("a:b c").category == OpCategory::kUnknown);  // not TF, not JAX.
  }
  CHECK(OpCategoryName(OpCategory::kJax) == "JAX");
}

TEST_CASE("op stats: host self time from nesting, IDLE per track, idle in or out") {
  Catalog catalog;
  Diagnostics diag;
  enum : NameId { kP = 1, kC1, kG, kC2, kQ, kUser, kApi };
  catalog.DefineName(kP, "model/outer:StatefulPartitionedCall");
  catalog.DefineName(kC1, "model/dense/MatMul:MatMul");
  catalog.DefineName(kG, "model/dense/Cast:Cast");
  catalog.DefineName(kC2, "model/relu:Relu");
  catalog.DefineName(kQ, "model/add:AddV2");
  catalog.DefineName(kUser, "my_user_scope");
  catalog.DefineName(kApi, "cudaLaunchKernel");
  OpStats stats(&catalog, &diag);
  // Track 1 (µs): P [0,100) holds C1 [10,40) (holding G [15,20)) and C2 [50,70);
  // Q [130,140) stands alone. A user scope [55,65) inside C2 and a runtime API call
  // [30,35) inside C1 are ignored: they neither count nor subtract.
  // Completion order: G(20) API(35) C1(40) user(65) C2(70) P(100) Q(140).
  const std::vector<Event> events = {
      OpAt(15, 20, kG),   test::Launch(30 * kUs, 5 * kUs, 7, kApi, 1),
      OpAt(10, 40, kC1),  test::Span(55 * kUs, 10 * kUs, kUser, 1, EventKind::kHostSpan),
      OpAt(50, 70, kC2),  OpAt(0, 100, kP),
      OpAt(130, 140, kQ),
  };
  stats.Consume(events);

  // Self: G = 5; C1 = 30 - 5 = 25; C2 = 20 (user scope not subtracted);
  // P = 100 - 30 - 20 = 50; Q = 10. Sum = 110. Track span = 140 - 0 = 140, IDLE = 30.
  const OpStatsSnapshot s = stats.Snapshot();
  CHECK(s.host.op_ns == 110 * kUs);
  CHECK(s.host.idle_ns == 30 * kUs);
  CHECK(s.host.total_ns == 140 * kUs);
  CHECK(s.device.total_ns == 0);
  CHECK(s.device.rows.empty());
  REQUIRE(s.host.rows.size() == 6);  // 5 ops + IDLE.
  // Order by self desc: P 50, IDLE 30, C1 25, C2 20, Q 10, G 5.
  CHECK(s.host.rows[0].name == "model/outer");
  CHECK(s.host.rows[0].type == "StatefulPartitionedCall");
  // No device in this profile: the host's time outside ops is the program's
  // unattributed host compute, not IDLE (a device with nothing to run).
  CHECK(s.host.rows[1].name == "Host compute (unattributed)");
  CHECK(s.host.rows[1].type == "Host compute (unattributed)");
  CHECK(s.host.rows[1].occurrences == 0);
  CHECK(s.host.rows[2].name == "model/dense/MatMul");
  CHECK(s.host.rows[3].name == "model/relu");
  CHECK(s.host.rows[4].name == "model/add");
  CHECK(s.host.rows[5].name == "model/dense/Cast");
  const uint64_t expected_self_us[] = {50, 30, 25, 20, 10, 5};
  for (size_t i = 0; i < 6; ++i) {
    CHECK(s.host.rows[i].self_us == doctest::Approx(static_cast<double>(expected_self_us[i])));
    CHECK(s.host.rows[i].side == "Host");
    CHECK(s.host.rows[i].rank == static_cast<int>(i + 1));
  }
  const OpStatsRow& p = s.host.rows[0];
  CHECK(p.occurrences == 1);
  CHECK(p.total_us == doctest::Approx(100.0));
  CHECK(p.avg_us == doctest::Approx(100.0));
  CHECK(p.avg_self_us == doctest::Approx(50.0));
  // With IDLE: P = 50 / 140 = 35.714 %; cumulative after IDLE = 80 / 140 = 57.143 %.
  CHECK(p.self_pct == doctest::Approx(100.0 * 50 / 140));
  CHECK(s.host.rows[1].cumulative_pct == doctest::Approx(100.0 * 80 / 140));
  CHECK(s.host.rows[5].cumulative_pct == doctest::Approx(100.0));

  // Without IDLE: no IDLE row and the denominator is the op time, 110 µs.
  const OpStatsSnapshot n = stats.Snapshot({.include_idle = false});
  REQUIRE(n.host.rows.size() == 5);
  CHECK(FindRow(n.host, "IDLE") == nullptr);
  CHECK(n.host.rows[0].self_pct == doctest::Approx(100.0 * 50 / 110));
  CHECK(n.host.rows[1].self_pct == doctest::Approx(100.0 * 25 / 110));
  CHECK(n.host.rows[1].cumulative_pct == doctest::Approx(100.0 * 75 / 110));
  CHECK(n.host.rows[4].cumulative_pct == doctest::Approx(100.0));
  CHECK(n.host.idle_ns == 30 * kUs);  // still reported in the side totals.
  CHECK(diag.Get(Diag::span_misnested) == 0);
  CHECK(s.host_input_ops.empty());
}

TEST_CASE("op stats: host IDLE sums over tracks, input spans, known host spans count") {
  Catalog catalog;
  Diagnostics diag;
  enum : NameId { kA = 1, kRead, kIter, kKnownSpan, kTorch };
  catalog.DefineName(kA, "a:A");
  catalog.DefineName(kRead, "ReadFile");
  catalog.DefineName(kIter, "Iterator::Prefetch::Map");
  catalog.DefineName(kKnownSpan, "scope/Add:AddV2");
  catalog.DefineName(kTorch, "aten::conv2d");
  OpStats stats(&catalog, &diag);
  Event read1 = test::Input(0, 10 * kUs, kRead, 2);
  read1.sub = static_cast<uint8_t>(InputStage::kRead);
  Event read2 = test::Input(40 * kUs, 10 * kUs, kRead, 2);  // same name, later stage.
  read2.sub = static_cast<uint8_t>(InputStage::kPreprocess);
  Event iter = test::Input(5 * kUs, 50 * kUs, kIter, 3);  // on its own track.
  // Track 1: a [0,10), known host span [20,30), torch op [30,40). Span 40, self 30, idle 10.
  // Track 2: reads [0,10), [40,50). Span 50, self 20, idle 30.
  // Track 3: iterator [5,55). Span 50, self 50, idle 0.
  std::vector<Event> events = {
      OpAt(0, 10, kA),      read1, test::Span(20 * kUs, 10 * kUs, kKnownSpan, 1, EventKind::kHostSpan),
      OpAt(30, 40, kTorch), read2, iter,
  };
  std::sort(events.begin(), events.end(), [](const Event& x, const Event& y) { return x.end() < y.end(); });
  stats.Consume(events);
  const OpStatsSnapshot s = stats.Snapshot();
  CHECK(s.host.op_ns == (30 + 20 + 50) * kUs);
  CHECK(s.host.idle_ns == (10 + 30 + 0) * kUs);
  const OpStatsRow* known = FindRow(s.host, "scope/Add");
  REQUIRE(known != nullptr);
  CHECK(known->type == "AddV2");
  const OpStatsRow* torch = FindRow(s.host, "aten::conv2d");
  REQUIRE(torch != nullptr);
  CHECK(torch->type == "aten::conv2d");  // unparsed framework op: type = whole name.
  const OpStatsRow* read = FindRow(s.host, "ReadFile");
  REQUIRE(read != nullptr);
  CHECK(read->type == "Input");
  CHECK(read->occurrences == 2);
  CHECK(read->self_ns == 20 * kUs);
  const OpStatsRow* it = FindRow(s.host, "Iterator::Prefetch::Map");
  REQUIRE(it != nullptr);
  CHECK(it->type == "Dataset");
  REQUIRE(s.host_input_ops.size() == 2);
  CHECK(s.host_input_ops[0].name == "Iterator::Prefetch::Map");  // 50 µs self first.
  CHECK(s.host_input_ops[0].self_ns == 50 * kUs);
  CHECK(s.host_input_ops[1].name == "ReadFile");
  CHECK(s.host_input_ops[1].stage == InputStage::kPreprocess);  // the last one seen.
  CHECK(s.host_input_ops[1].occurrences == 2);
  CHECK(s.host_input_ops[1].total_ns == 20 * kUs);
}

TEST_CASE("op stats: device kernels roll up to their framework op, copies by kind") {
  Catalog catalog;
  Diagnostics diag;
  enum : NameId { kConv = 1, kVolta, kTranspose, kFoo, kA, kB };
  catalog.DefineName(kConv, "model/conv/Conv2D:Conv2D");
  catalog.DefineName(kVolta, "volta_scudnn_128x64");
  catalog.DefineName(kTranspose, "transpose_kernel");
  catalog.DefineName(kFoo, "foo_kernel");
  catalog.DefineName(kA, "a:A");
  catalog.DefineName(kB, "b:B");
  OpStats stats(&catalog, &diag);
  auto kernel = [](uint64_t b_us, uint64_t e_us, NameId k, NameId op, uint8_t device = 0) {
    return test::Kernel(b_us * kUs, (e_us - b_us) * kUs, k, 0, 100, op, 0, device);
  };
  // Device 0 (µs): Conv/volta [0,10) [10,20), Conv/transpose [25,30), foo [30,40) without op,
  // HtoD copy [40,45), memset [50,52). Span 52, self 42, IDLE 10.
  // Device 1: Conv/volta [100,104). Span 4, self 4, IDLE 0.
  // Host: a [0,10) on track 1: rank continues after the device rows.
  const std::vector<Event> events = {
      kernel(0, 10, kVolta, kConv),
      OpAt(0, 10, kA),
      kernel(10, 20, kVolta, kConv),
      kernel(25, 30, kTranspose, kConv),
      kernel(30, 40, kFoo, 0),
      test::Copy(EventKind::kMemcpyHtoD, 40 * kUs, 5 * kUs, 1 << 20),
      test::Copy(EventKind::kMemset, 50 * kUs, 2 * kUs, 4096),
      kernel(100, 104, kVolta, kConv, 1),
  };
  stats.Consume(events);
  const OpStatsSnapshot s = stats.Snapshot();
  CHECK(s.device.op_ns == 46 * kUs);
  CHECK(s.device.idle_ns == 10 * kUs);
  CHECK(s.device.total_ns == 56 * kUs);
  // Rows: Conv 29 (= 10 + 10 + 5 + 4), IDLE 10, foo 10 ("IDLE" < "foo_kernel"),
  // MemcpyHtoD 5, Memset 2.
  REQUIRE(s.device.rows.size() == 5);
  const OpStatsRow& conv = s.device.rows[0];
  CHECK(conv.name == "model/conv/Conv2D");
  CHECK(conv.type == "Conv2D");
  CHECK(conv.side == "Device");
  // Device ops: .../volta 3 occurrences, .../transpose 1: the op shows max = 3.
  CHECK(conv.occurrences == 3);
  CHECK(conv.total_ns == 29 * kUs);
  CHECK(conv.self_ns == 29 * kUs);
  CHECK(conv.avg_us == doctest::Approx(29.0 / 3));
  CHECK(conv.self_pct == doctest::Approx(100.0 * 29 / 56));
  CHECK(s.device.rows[1].name == "IDLE");
  CHECK(s.device.rows[2].name == "foo_kernel");
  CHECK(s.device.rows[2].type == "Unknown");
  CHECK(s.device.rows[3].name == "MemcpyHtoD");
  CHECK(s.device.rows[3].type == "MemcpyHtoD");
  CHECK(s.device.rows[4].name == "Memset");
  CHECK(s.device.rows[4].cumulative_pct == doctest::Approx(100.0));
  // Host: a [0,10) and an IDLE row of 0 ns (xprof always adds IDLE); ranks go on
  // from the 5 device rows.
  REQUIRE(s.host.rows.size() == 2);
  CHECK(s.host.rows[0].name == "a");
  CHECK(s.host.rows[0].rank == 6);
  CHECK(s.host.rows[0].self_pct == doctest::Approx(100.0));
  CHECK(s.host.rows[1].name == "IDLE");
  CHECK(s.host.rows[1].rank == 7);
  CHECK(s.host.rows[1].self_ns == 0);
}

TEST_CASE("op stats: top-N cut, tie order by name, cumulative percentages") {
  Catalog catalog;
  Diagnostics diag;
  enum : NameId { kA = 1, kB, kC, kD, kE };
  for (NameId id = kA; id <= kE; ++id) catalog.DefineName(id, std::string("op_") + char('a' + id - 1));
  OpStats stats(&catalog, &diag);
  // Sequential ops on track 1 (µs): c 20, b 20, a 20, e 10, d 5: op time 75, no gaps.
  stats.Consume(
      std::vector<Event>{OpAt(0, 20, kC), OpAt(20, 40, kB), OpAt(40, 60, kA), OpAt(60, 70, kE), OpAt(70, 75, kD)});
  const OpStatsSnapshot s = stats.Snapshot({.include_idle = false, .top_n = 3});
  REQUIRE(s.host.rows.size() == 3);
  CHECK(s.host.rows[0].name == "op_a");  // equal self: by name ascending.
  CHECK(s.host.rows[1].name == "op_b");
  CHECK(s.host.rows[2].name == "op_c");
  CHECK(s.host.rows[0].type == "op_a");  // unparsed framework op: type = name.
  CHECK(s.host.rows[2].rank == 3);
  // 20 / 75 = 26.67 % each; cumulative 26.67, 53.33, 80 (the cut rows are not in it).
  CHECK(s.host.rows[0].self_pct == doctest::Approx(100.0 * 20 / 75));
  CHECK(s.host.rows[1].cumulative_pct == doctest::Approx(100.0 * 40 / 75));
  CHECK(s.host.rows[2].cumulative_pct == doctest::Approx(80.0));
  CHECK(s.host.op_ns == 75 * kUs);
  CHECK(stats.Snapshot({.top_n = 0}).host.rows.empty());

  // Cumulative on round numbers: 50, 30, 20 -> 50 %, 80 %, 100 %.
  OpStats round(&catalog, &diag);
  round.Consume(std::vector<Event>{OpAt(0, 50, kA), OpAt(50, 80, kB), OpAt(80, 100, kC)});
  const OpStatsSnapshot r = round.Snapshot();
  REQUIRE(r.host.rows.size() == 4);  // + IDLE of 0 ns, last.
  CHECK(r.host.rows[0].cumulative_pct == 50.0);
  CHECK(r.host.rows[1].cumulative_pct == 80.0);
  CHECK(r.host.rows[2].cumulative_pct == 100.0);
  CHECK(r.host.rows[3].name == OpStats::kHostUnattributedName);  // (no device: not IDLE)
  CHECK(r.host.rows[3].self_pct == 0.0);
}

TEST_CASE("op stats: misnested spans are counted and not subtracted") {
  Catalog catalog;
  Diagnostics diag;
  enum : NameId { kA = 1, kB, kP };
  catalog.DefineName(kA, "a:A");
  catalog.DefineName(kB, "b:B");
  catalog.DefineName(kP, "p:P");
  OpStats stats(&catalog, &diag);
  // A [0,10) and B [5,15) overlap without nesting; P [0,20) contains both.
  // B does not claim A (misnested: counted once); P claims B and A.
  // Self: A 10, B 10, P 20 - 10 - 10 = 0.
  stats.Consume(std::vector<Event>{OpAt(0, 10, kA), OpAt(5, 15, kB), OpAt(0, 20, kP)});
  CHECK(diag.Get(Diag::span_misnested) == 1);
  const OpStatsSnapshot s = stats.Snapshot();
  REQUIRE(FindRow(s.host, "a") != nullptr);
  CHECK(FindRow(s.host, "a")->self_ns == 10 * kUs);
  CHECK(FindRow(s.host, "b")->self_ns == 10 * kUs);
  CHECK(FindRow(s.host, "p")->self_ns == 0);
  CHECK(FindRow(s.host, "p")->total_ns == 20 * kUs);
  CHECK(s.host.idle_ns == 0);  // span 20, self 20.
}

TEST_CASE("op stats: bad durations and out-of-range ids are counted, never crash") {
  Catalog catalog;
  Diagnostics diag;
  catalog.DefineName(1, "a:A");
  catalog.DefineName(2, "kernel");
  OpStats stats(&catalog, &diag);
  const uint64_t kAbsurd = (uint64_t{1} << 62) + 1;
  Event bad_input = test::Input(0, kAbsurd, 1, 1);
  stats.Consume(std::vector<Event>{
      test::Op(0, kAbsurd, 1), test::Kernel(0, uint64_t{1} << 63, 2), test::Copy(EventKind::kMemcpyDtoH, 5, kAbsurd, 8),
      bad_input, test::Op(0, 10, 1u << 30),      // name far beyond any NameTable id.
      test::Op(0, 10, 1, 0xFFFFFFF0u),           // track likewise.
      test::Kernel(0, 10, 2, 0, 100, 1u << 31),  // op id likewise.
  });
  CHECK(diag.Get(Diag::bad_duration) == 4);
  CHECK(diag.Get(Diag::id_out_of_range) == 3);
  const OpStatsSnapshot s = stats.Snapshot();
  CHECK(s.host.rows.empty());
  CHECK(s.device.rows.empty());
  CHECK(s.host.total_ns == 0);
  // A null catalog and null diagnostics work too (names are then "#id").
  OpStats bare(nullptr, nullptr);
  bare.Consume(std::vector<Event>{test::Op(0, 10, 3), test::Op(0, kAbsurd, 3)});
  const OpStatsSnapshot b = bare.Snapshot();
  REQUIRE(b.host.rows.size() == 2);
  CHECK(b.host.rows[0].name == "#3");
}

TEST_CASE("op stats: windows over the last T seconds from buckets, late events") {
  Catalog catalog;
  Diagnostics diag;
  enum : NameId { kX = 1, kY, kZ, kK };
  catalog.DefineName(kX, "x:X");
  catalog.DefineName(kY, "y:Y");
  catalog.DefineName(kZ, "z:Z");
  catalog.DefineName(kK, "k");
  OpStats stats(&catalog, &diag, OpStatsOptions{.bucket_ns = kSec, .max_buckets = 3});
  constexpr uint64_t kDs = kSec / 10;  // 0.1 s.
  auto op = [&](uint64_t b, uint64_t e, NameId n) { return test::Op(b * kDs, (e - b) * kDs, n); };
  Event late_x = op(16, 17, kX);  // ends in bucket 1 (still in the ring).
  late_x.flags = kFlagLate;
  Event late_y = op(1, 2, kY);  // ends in bucket 0 (evicted: cumulative only).
  late_y.flags = kFlagLate;
  // Buckets: 0: K [0,1), X [4,5); 1: Y [12,15); 2: X [23,25); 3: K [31,31.5), Z [30,32).
  // Bucket 3 pushes bucket 0 out of the 3-bucket ring.
  stats.Consume(std::vector<Event>{test::Kernel(0, kDs, kK), op(4, 5, kX), op(12, 15, kY), op(23, 25, kX),
                                   test::Kernel(31 * kDs, kDs / 2, kK), op(30, 32, kZ), late_x, late_y});
  CHECK(diag.Get(Diag::span_misnested) == 0);

  // Since start: X 0.1 + 0.2 + 0.1 = 0.4 s (3), Y 0.3 + 0.1 = 0.4 s (2), Z 0.2 s.
  // Track: 0.1 s .. 3.2 s = 3.1 s, self 1.0 s, IDLE 2.1 s. Device: 0 .. 3.15 s, self 0.15 s.
  const OpStatsSnapshot all = stats.Snapshot();
  CHECK(FindRow(all.host, "x")->occurrences == 3);
  CHECK(FindRow(all.host, "x")->self_ns == 4 * kDs);
  CHECK(FindRow(all.host, "y")->occurrences == 2);
  CHECK(all.host.op_ns == 10 * kDs);
  CHECK(all.host.idle_ns == 21 * kDs);
  CHECK(all.device.op_ns == 3 * kDs / 2);
  CHECK(all.device.idle_ns == 315 * kDs / 10 - 3 * kDs / 2);

  // Last 1 s: newest end 3.2 s, so buckets ending after 2.2 s: 2 and 3.
  // X 0.2 s, Z 0.2 s; track 2.3 .. 3.2 = 0.9 s, IDLE 0.5 s; device 3.1 .. 3.15, IDLE 0.
  const OpStatsSnapshot w1 = stats.Snapshot({.window_ns = kSec});
  CHECK(w1.window_ns == kSec);
  CHECK(FindRow(w1.host, "x")->occurrences == 1);
  CHECK(FindRow(w1.host, "y") == nullptr);
  CHECK(w1.host.op_ns == 4 * kDs);
  CHECK(w1.host.idle_ns == 5 * kDs);
  CHECK(w1.device.op_ns == kDs / 2);
  CHECK(w1.device.idle_ns == 0);

  // Last 2 s: buckets 1..3, with the late X in bucket 1. X 0.1 + 0.2, Y 0.3, Z 0.2;
  // track 1.2 .. 3.2 = 2.0 s, self 0.8 s, IDLE 1.2 s.
  const OpStatsSnapshot w2 = stats.Snapshot({.window_ns = 2 * kSec});
  CHECK(FindRow(w2.host, "x")->occurrences == 2);
  CHECK(FindRow(w2.host, "y")->occurrences == 1);
  CHECK(w2.host.op_ns == 8 * kDs);
  CHECK(w2.host.idle_ns == 12 * kDs);
  // Longer than the ring: the ring only (bucket 0 and the late Y are in "older").
  CHECK(stats.Snapshot({.window_ns = 100 * kSec}) == [&] {
    OpStatsSnapshot s = w2;
    s.window_ns = 100 * kSec;
    return s;
  }());
}

TEST_CASE("op stats: CSV parses back, JSON is valid") {
  Catalog catalog;
  Diagnostics diag;
  catalog.DefineName(1, "aten::add, fused \"x\"");
  catalog.DefineName(2, "k");
  catalog.DefineName(3, "m/MatMul:MatMul");
  OpStats stats(&catalog, &diag);
  stats.Consume(std::vector<Event>{test::Kernel(0, 3 * kUs, 2, 0, 100, 3), OpAt(0, 10, 1), OpAt(12, 20, 1)});
  const OpStatsSnapshot s = stats.Snapshot();
  const auto csv = ParseCsv(s.ToCsv());
  REQUIRE(csv.size() == 1 + s.device.rows.size() + s.host.rows.size());
  CHECK(csv[0] == std::vector<std::string>{"rank", "side", "type", "name", "occurrences", "total_us", "avg_us",
                                           "self_us", "avg_self_us", "self_pct", "cumulative_pct"});
  for (const auto& row : csv) CHECK(row.size() == 11);
  // Device: m/MatMul 3 µs, IDLE 0. Host: the comma op 18 µs (2), IDLE 2 µs.
  CHECK(csv[1][1] == "Device");
  CHECK(csv[1][3] == "m/MatMul");
  CHECK(csv[3][3] == "aten::add, fused \"x\"");
  CHECK(csv[3][2] == "aten::add, fused \"x\"");
  CHECK(csv[3][4] == "2");
  CHECK(std::stod(csv[3][5]) == s.host.rows[0].total_us);
  CHECK(std::stod(csv[3][9]) == s.host.rows[0].self_pct);
  CHECK(std::stod(csv[3][10]) == s.host.rows[0].cumulative_pct);
  CHECK(csv[4][3] == "IDLE");

  JsonWriter w;
  s.WriteJson(w);
  const nlohmann::json j = nlohmann::json::parse(w.str());
  CHECK(j["window_ns"] == 0);
  CHECK(j["include_idle"] == true);
  CHECK(j["device"]["total_us"].get<double>() == doctest::Approx(3.0));
  CHECK(j["host"]["idle_us"].get<double>() == doctest::Approx(2.0));
  REQUIRE(j["host"]["rows"].size() == 2);
  CHECK(j["host"]["rows"][0]["name"] == "aten::add, fused \"x\"");
  CHECK(j["host"]["rows"][0]["rank"] == 3);
  CHECK(j["host"]["rows"][0]["side"] == "Host");
  CHECK(j["host"]["rows"][0]["self_us"].get<double>() == doctest::Approx(18.0));
  CHECK(j["host"]["rows"][0]["avg_self_us"].get<double>() == doctest::Approx(9.0));
}

// ---------------------------------------------------------------------------
// Randomized: incremental == batch == a naive reference.

namespace {

constexpr uint64_t kRandBucketNs = 5'000;
constexpr size_t kRandMaxBuckets = 8;

struct NamedId {
  NameId id;
  const char* name;
};
// Framework-op names (also kernel attributions). 3 and 4 parse to one (name, type).
constexpr NamedId kFwNames[] = {
    {1, "layer1/MatMul:MatMul"},
    {2, "layer1/MatMul_1:"},
    {3, "dup/Foo:Foo"},
    {4, "dup/Foo:"},
    {5, "jit(f)/relu:relu"},
    {6, "aten::conv2d"},
    {7, "aten::add, fused"},
    {8, "Iterator::Batch"},
    {9, "MemcpyHToD"},
    {10, "block/conv/Conv2D:Conv2D"},
    {999, nullptr},  // never defined: "#999".
};
constexpr NamedId kSpanNames[] = {{20, "scope/Add:AddV2"},
                                  {21, "user_scope"},
                                  {22, "train_step"},
                                  {23, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"}};
constexpr NamedId kInputNames[] = {{30, "Iterator::Prefetch::Map"}, {31, "ReadFile"}, {32, "Decode"}};
constexpr NameId kApiName = 40;
constexpr NameId kFirstKernel = 50;
constexpr NameId kKernelCount = 6;

struct RandomStream {
  Catalog catalog;
  std::vector<Event> events;
};

void GenHostNode(std::mt19937& rng, TrackId track, uint64_t b, uint64_t e, int depth, std::vector<Event>* out) {
  Event ev;
  const uint32_t roll = rng() % 100;
  if (roll < 45) {
    ev = test::Op(b, e - b, kFwNames[rng() % std::size(kFwNames)].id, track);
  } else if (roll < 55) {
    ev = test::Span(b, e - b, kSpanNames[0].id, track, EventKind::kHostSpan);  // known.
  } else if (roll < 65) {
    // (23: a DataLoader's wait, an input op of stage wait.)
    ev = test::Span(b, e - b, kSpanNames[1 + rng() % 3].id, track, EventKind::kHostSpan);
  } else if (roll < 82) {
    ev = test::Input(b, e - b, kInputNames[rng() % std::size(kInputNames)].id, track);
    ev.sub = static_cast<uint8_t>(rng() % 7);  // 6: not a stage -> kUnknown.
  } else if (roll < 92) {
    ev = test::Launch(b, e - b, rng(), kApiName, track);
  } else if (roll < 97) {
    ev = test::Step(b, e - b, static_cast<int64_t>(rng() % 100), track);
  } else {
    ev = test::Counter(b, kApiName, 1.0, track);
  }
  out->push_back(ev);
  if (rng() % 20 == 0 && e > b + 1) {  // an interval that overlaps this one's end.
    out->push_back(
        test::Op(b + 1 + rng() % (e - b - 1), 1 + rng() % 200, kFwNames[rng() % std::size(kFwNames)].id, track));
  }
  if (depth >= 3 || e - b < 4) return;
  const int children = static_cast<int>(rng() % 4);
  uint64_t t = b;
  for (int i = 0; i < children && t < e; ++i) {
    const uint64_t gap = rng() % ((e - t) / 4 + 1);
    const uint64_t cb = t + gap;
    if (cb >= e) break;
    const uint64_t ce = cb + rng() % ((e - cb) / 2 + 1);  // may be 0 long.
    GenHostNode(rng, track, cb, ce, depth + 1, out);
    t = ce;
  }
}

std::unique_ptr<RandomStream> MakeRandomStream(uint32_t seed) {
  auto rs = std::make_unique<RandomStream>();
  std::mt19937 rng(seed);
  for (const auto& n : kFwNames) {
    if (n.name != nullptr) rs->catalog.DefineName(n.id, n.name);
  }
  for (const auto& n : kSpanNames) rs->catalog.DefineName(n.id, n.name);
  for (const auto& n : kInputNames) rs->catalog.DefineName(n.id, n.name);
  rs->catalog.DefineName(kApiName, "cudaLaunchKernel");
  for (NameId k = 0; k < kKernelCount; ++k) {
    rs->catalog.DefineName(kFirstKernel + k, "kernel_" + std::to_string(k));
  }
  const uint64_t horizon = 100'000 + rng() % 200'000;
  std::vector<Event>& ev = rs->events;
  for (TrackId track = 1; track <= 3; ++track) {
    uint64_t t = rng() % 1000;
    while (t < horizon) {
      t += rng() % 400;
      const uint64_t len = 20 + rng() % 3000;
      GenHostNode(rng, track, t, t + len, 0, &ev);
      t += len;
    }
  }
  for (uint8_t device = 0; device < 2; ++device) {
    for (int stream = 0; stream < 2; ++stream) {
      uint64_t t = 500 + rng() % 3000;
      while (t < horizon) {
        t += rng() % 300;
        const uint64_t dur = rng() % 800;
        if (rng() % 4 != 0) {
          static constexpr NameId kOps[] = {0, 0, 1, 3, 4, 6, 10, 999};
          ev.push_back(test::Kernel(t, dur, kFirstKernel + rng() % kKernelCount, 0, 100 + stream,
                                    kOps[rng() % std::size(kOps)], 0, device));
        } else {
          const auto kind =
              static_cast<EventKind>(static_cast<int>(EventKind::kMemcpyHtoD) + static_cast<int>(rng() % 7));
          ev.push_back(test::Copy(kind, t, dur, 64, 0, 100 + stream, device));
        }
        t += dur;
      }
    }
  }
  // Completion order: end ascending, children (later begin) first on ties.
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) {
    if (a.end() != b.end()) return a.end() < b.end();
    return a.ts > b.ts;
  });
  // Garbage: absurd durations anywhere.
  for (int i = 0; i < 20; ++i) {
    Event bad = rng() % 2 ? test::Op(rng() % horizon, (uint64_t{1} << 62) + 1 + rng() % 100, 1, 1)
                          : test::Kernel(rng() % horizon, uint64_t{1} << 63, kFirstKernel);
    ev.insert(ev.begin() + static_cast<ptrdiff_t>(rng() % (ev.size() + 1)), bad);
  }
  return rs;
}

// ---- The naive reference: per event records, then plain maps. ----

std::string RefDisplayName(const Catalog& c, NameId id) {
  const std::string_view s = c.Name(id);
  if (!s.empty() || id == 0) return std::string(s);
  return "#" + std::to_string(id);
}

struct RefHost {
  NameId name;
  bool input;
  InputStage stage;
  TrackId track;
  uint64_t begin, end, dur, self;
  uint64_t nested_wait = 0;  // a wait's: the waits it contains, at any depth.
  uint64_t nested_waits = 0;
};
struct RefDevice {
  std::tuple<int, NameId, NameId> key;  // (kind, op, kernel)
  uint8_t device;
  uint64_t begin, end, dur;
};

struct Reference {
  std::vector<RefHost> host;  // arrival order.
  std::vector<RefDevice> device;
  uint64_t misnested = 0;
  uint64_t bad = 0;
  uint64_t newest_end = 0;
};

Reference RunReference(const Catalog& catalog, const std::vector<Event>& events) {
  Reference ref;
  struct Unclaimed {
    uint64_t begin, end;  // [begin, end)
    uint64_t wait_ns;     // a wait: its duration; else the waits' it holds.
    uint64_t waits;
  };
  std::map<TrackId, std::vector<Unclaimed>> unclaimed;
  for (const Event& e : events) {
    const bool device = IsDeviceKind(e.kind);
    bool counted = e.kind == EventKind::kFrameworkOp || e.kind == EventKind::kInputSpan;
    bool input = e.kind == EventKind::kInputSpan;
    uint8_t sub = e.sub;
    if (e.kind == EventKind::kHostSpan) {
      const std::string_view n = catalog.Name(e.name);
      const bool loader = n.starts_with("enumerate(DataLoader)#") && n.ends_with(".__next__");
      counted = !n.empty() && (loader || ParseTfOpName(n).category != OpCategory::kUnknown);
      if (loader) input = true, sub = static_cast<uint8_t>(InputStage::kWait);
    }
    if (!device && !counted) continue;
    if (e.dur > (uint64_t{1} << 62)) {
      ++ref.bad;
      continue;
    }
    const uint64_t b = e.ts;
    const uint64_t en = e.ts + e.dur;
    ref.newest_end = std::max(ref.newest_end, en);
    if (device) {
      const NameId op = e.kind == EventKind::kKernel ? e.payload.kernel.op : 0;
      const NameId kernel = e.kind == EventKind::kKernel ? e.name : 0;
      ref.device.push_back({{static_cast<int>(e.kind), op, kernel}, e.device, b, en, e.dur});
      continue;
    }
    // Claim every unclaimed interval this one contains.
    auto& list = unclaimed[e.track];
    const bool wait = input && sub == static_cast<uint8_t>(InputStage::kWait);
    uint64_t children = 0, nested_wait = 0, nested_waits = 0;
    bool misnested = false;
    std::vector<Unclaimed> keep;
    for (const Unclaimed& u : list) {
      if (u.begin >= b && u.end <= en) {
        children += u.end - u.begin;
        nested_wait += u.wait_ns;
        nested_waits += u.waits;
      } else {
        if (u.begin < b && u.end > b) misnested = true;
        keep.push_back(u);
      }
    }
    keep.push_back({b, en, wait ? e.dur : nested_wait, wait ? 1 : nested_waits});
    list = std::move(keep);
    if (misnested) ++ref.misnested;
    const InputStage stage =
        sub <= static_cast<uint8_t>(InputStage::kWait) ? static_cast<InputStage>(sub) : InputStage::kUnknown;
    ref.host.push_back({e.name, input, stage, e.track, b, en, e.dur, e.dur > children ? e.dur - children : 0,
                        wait ? nested_wait : 0, wait ? nested_waits : 0});
  }
  return ref;
}

struct RefRow {
  std::string name, type;
  uint64_t occurrences = 0, time = 0, self = 0;
};

void CheckSide(const std::vector<RefRow>& groups_in, uint64_t op_ns, uint64_t idle_ns, const OpStatsSnapshotOptions& o,
               const OpStatsSide& side) {
  CHECK(side.op_ns == op_ns);
  CHECK(side.idle_ns == idle_ns);
  CHECK(side.total_ns == op_ns + idle_ns);
  std::vector<RefRow> rows = groups_in;
  if (o.include_idle && op_ns + idle_ns > 0) rows.push_back({"IDLE", "IDLE", 0, idle_ns, idle_ns});
  std::sort(rows.begin(), rows.end(), [](const RefRow& a, const RefRow& b) {
    return std::tie(b.self, a.name, a.type) < std::tie(a.self, b.name, b.type);
  });
  if (rows.size() > o.top_n) rows.resize(o.top_n);
  REQUIRE(side.rows.size() == rows.size());
  const double denominator = static_cast<double>(o.include_idle ? op_ns + idle_ns : op_ns);
  double cumulative = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpStatsRow& got = side.rows[i];
    CHECK(got.name == rows[i].name);
    CHECK(got.type == rows[i].type);
    CHECK(got.occurrences == rows[i].occurrences);
    CHECK(got.total_ns == rows[i].time);
    CHECK(got.self_ns == rows[i].self);
    const double pct = denominator == 0 ? 0 : 100.0 * static_cast<double>(rows[i].self) / denominator;
    cumulative += pct;
    CHECK(got.self_pct == doctest::Approx(pct));
    CHECK(got.cumulative_pct == doctest::Approx(cumulative));
  }
}

void CheckAgainstReference(const Catalog& catalog, const Reference& ref, const OpStatsSnapshotOptions& o,
                           const OpStatsSnapshot& got) {
  const uint64_t newest_index = ref.newest_end / kRandBucketNs;
  const uint64_t from = ref.newest_end > o.window_ns ? ref.newest_end - o.window_ns : 0;
  auto in_window = [&](uint64_t end) {
    if (o.window_ns == 0) return true;
    const uint64_t index = end / kRandBucketNs;
    return index + kRandMaxBuckets > newest_index && (index + 1) * kRandBucketNs > from;
  };
  struct Span {
    uint64_t first = UINT64_MAX, last = 0, self = 0;
    void Add(uint64_t b, uint64_t e, uint64_t s) {
      first = std::min(first, b);
      last = std::max(last, e);
      self += s;
    }
    uint64_t Idle() const { return last - first > self ? last - first - self : 0; }
  };

  // Host.
  std::map<std::pair<std::string, std::string>, RefRow> host_groups;
  std::map<TrackId, Span> tracks;
  std::map<NameId, InputOpStats> inputs;
  for (const RefHost& h : ref.host) {
    if (!in_window(h.end)) continue;
    const std::string full = RefDisplayName(catalog, h.name);
    std::string name = full, type = full;
    const ParsedOp p = ParseTfOpName(full);
    if (h.input) {
      type = p.category == OpCategory::kDataset ? "Dataset" : "Input";
      InputOpStats& in = inputs[h.name];
      in.name = full;
      in.stage = h.stage;  // arrival order: the last one wins.
      ++in.occurrences;
      in.total_ns += h.dur;
      in.self_ns += h.self;
      in.nested_wait_ns += h.nested_wait;
      in.nested_waits += h.nested_waits;
    } else if (p.category != OpCategory::kUnknown) {
      name = std::string(p.name);
      type = std::string(p.type);
    }
    RefRow& g = host_groups[{name, type}];
    g.name = name;
    g.type = type;
    ++g.occurrences;
    g.time += h.dur;
    g.self += h.self;
    tracks[h.track].Add(h.begin, h.end, h.self);
  }
  std::vector<RefRow> host_rows;
  for (const auto& [k, g] : host_groups) host_rows.push_back(g);
  uint64_t host_op = 0, host_idle = 0;
  for (const auto& [t, s] : tracks) {
    host_op += s.self;
    host_idle += s.Idle();
  }
  CheckSide(host_rows, host_op, host_idle, o, got.host);
  std::vector<InputOpStats> expected_inputs;
  for (const auto& [id, in] : inputs) expected_inputs.push_back(in);
  std::sort(expected_inputs.begin(), expected_inputs.end(), [](const auto& a, const auto& b) {
    return a.self_ns != b.self_ns ? a.self_ns > b.self_ns : a.name < b.name;
  });
  CHECK(got.host_input_ops == expected_inputs);

  // Device: device ops, then the roll-up by (name, type) with max occurrences.
  std::map<std::tuple<int, NameId, NameId>, std::pair<uint64_t, uint64_t>> device_ops;
  std::map<uint8_t, Span> devices;
  for (const RefDevice& d : ref.device) {
    if (!in_window(d.end)) continue;
    auto& s = device_ops[d.key];
    ++s.first;
    s.second += d.dur;
    devices[d.device].Add(d.begin, d.end, d.dur);
  }
  std::map<std::pair<std::string, std::string>, RefRow> device_groups;
  for (const auto& [key, s] : device_ops) {
    const auto [kind, op, kernel] = key;
    std::string name, type;
    switch (static_cast<EventKind>(kind)) {
      case EventKind::kMemcpyHtoD: name = "MemcpyHtoD"; break;
      case EventKind::kMemcpyDtoH: name = "MemcpyDtoH"; break;
      case EventKind::kMemcpyDtoD: name = "MemcpyDtoD"; break;
      case EventKind::kMemcpyHtoH: name = "MemcpyHtoH"; break;
      case EventKind::kMemcpyPtoP: name = "MemcpyPtoP"; break;
      case EventKind::kMemcpyOther: name = "Memcpy"; break;
      case EventKind::kMemset: name = "Memset"; break;
      default: break;
    }
    type = name;
    if (static_cast<EventKind>(kind) == EventKind::kKernel) {
      if (op == 0) {
        name = RefDisplayName(catalog, kernel);
        type = "Unknown";
      } else {
        const std::string full = RefDisplayName(catalog, op);
        const ParsedOp p = ParseTfOpName(full);
        name = p.category != OpCategory::kUnknown ? std::string(p.name) : full;
        type = p.category != OpCategory::kUnknown ? std::string(p.type) : full;
      }
    }
    RefRow& g = device_groups[{name, type}];
    g.name = name;
    g.type = type;
    g.occurrences = std::max(g.occurrences, s.first);
    g.time += s.second;
    g.self += s.second;
  }
  std::vector<RefRow> device_rows;
  for (const auto& [k, g] : device_groups) device_rows.push_back(g);
  uint64_t device_op = 0, device_idle = 0;
  for (const auto& [d, s] : devices) {
    device_op += s.self;
    device_idle += s.Idle();
  }
  CheckSide(device_rows, device_op, device_idle, o, got.device);
  // Ranks run 1.. over device then host rows.
  int rank = 0;
  for (const OpStatsRow& r : got.device.rows) CHECK(r.rank == ++rank);
  for (const OpStatsRow& r : got.host.rows) CHECK(r.rank == ++rank);
}

}  // namespace

TEST_CASE("op stats: incremental equals batch equals a naive reference (random streams)") {
  const std::vector<OpStatsSnapshotOptions> views = {
      {},
      {.include_idle = false},
      {.window_ns = 2 * kRandBucketNs},
      {.window_ns = 7 * kRandBucketNs / 2, .include_idle = false, .top_n = 7},
      {.window_ns = 1000 * kRandBucketNs},
      {.top_n = 5},
  };
  const OpStatsOptions options{.bucket_ns = kRandBucketNs, .max_buckets = kRandMaxBuckets};
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    const auto rs = MakeRandomStream(seed);
    const std::vector<Event>& events = rs->events;

    Diagnostics batch_diag;
    OpStats batch(&rs->catalog, &batch_diag, options);
    batch.Consume(events);

    Diagnostics inc_diag;
    OpStats incremental(&rs->catalog, &inc_diag, options);
    std::mt19937 rng(seed * 7919);
    size_t i = 0;
    while (i < events.size()) {
      const size_t n = std::min(events.size() - i, size_t{1} + rng() % 300);
      incremental.Consume(std::span<const Event>(events).subspan(i, n));
      i += n;
      if (rng() % 4 == 0) (void)incremental.Snapshot(views[rng() % views.size()]);
    }

    const Reference ref = RunReference(rs->catalog, events);
    CHECK(ref.misnested > 0);  // the generator does make some.
    CHECK(batch_diag.Get(Diag::span_misnested) == ref.misnested);
    CHECK(inc_diag.Get(Diag::span_misnested) == ref.misnested);
    CHECK(batch_diag.Get(Diag::bad_duration) == ref.bad);
    CHECK(inc_diag.Get(Diag::bad_duration) == ref.bad);
    for (const OpStatsSnapshotOptions& o : views) {
      CAPTURE(o.window_ns);
      CAPTURE(o.include_idle);
      CAPTURE(o.top_n);
      const OpStatsSnapshot b = batch.Snapshot(o);
      CHECK(incremental.Snapshot(o) == b);
      CheckAgainstReference(rs->catalog, ref, o, b);
    }
  }
}

}  // namespace liveprof::op_stats_test
