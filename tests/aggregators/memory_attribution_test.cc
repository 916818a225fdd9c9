// The memory breakdown at the peak by op (memory_state.h): each live
// allocation at the peak is attributed to the innermost host span around it
// on its own track, as the PyTorch plugin's memory view does.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aggregators/catalog.h"
#include "aggregators/tf/memory_state.h"
#include "event_builder.h"
#include "import/trace_analysis.h"
#include "real_traces.h"

namespace liveprof::memory_attribution_test {
namespace {

constexpr NameId kAlloc = 1;    // "cuda_caching"
constexpr NameId kForward = 2;  // "forward" (a user scope)
constexpr NameId kConv = 3;     // "aten::conv"
constexpr NameId kEmpty = 4;    // "aten::empty"
constexpr NameId kStep = 5;     // "ProfilerStep#7"
constexpr TrackId kMain = 1;
constexpr TrackId kOther = 2;
using Row = MemoryStateSnapshot::BreakdownRow;
using OpRow = MemoryStateSnapshot::OpRow;

Catalog Names() {
  Catalog c;
  c.DefineName(kAlloc, "cuda_caching");
  c.DefineName(kForward, "forward");
  c.DefineName(kConv, "aten::conv");
  c.DefineName(kEmpty, "aten::empty");
  c.DefineName(kStep, "ProfilerStep#7");
  return c;
}

Event AllocOn(TrackId track, uint64_t ts, uint64_t address, uint64_t bytes) {
  Event e = test::Alloc(ts, kAlloc, address, bytes);
  e.track = track;
  return e;
}

Event FreeOn(TrackId track, uint64_t ts, uint64_t address) {
  Event e = test::Free(ts, kAlloc, address);
  e.track = track;
  return e;
}

// Events in completion order, as the stream delivers them (instants at
// their ts, spans at their end; on ties the earlier in the list first).
std::vector<Event> Delivered(std::vector<Event> events) {
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  return events;
}

MemoryStateSnapshot::Memory Only(const MemoryState& s) {
  const auto snap = s.Snapshot();
  REQUIRE(snap.memories.size() == 1);
  return snap.memories[0];
}

}  // namespace

TEST_CASE("memory attribution: innermost span on the same thread, other threads and frees") {
  Catalog catalog = Names();
  MemoryState state(&catalog);
  // Main thread: forward [100, 1000) holds conv [200, 500), which holds
  // empty [300, 400). Another thread allocates inside those times too.
  state.Consume(Delivered({
      test::Span(100, 900, kForward, kMain), test::Op(200, 300, kConv, kMain), test::Op(300, 100, kEmpty, kMain),
      AllocOn(kMain, 150, 0x1000, 1000),    // forward only.
      AllocOn(kMain, 250, 0x2000, 2000),    // conv.
      AllocOn(kMain, 350, 0x3000, 4000),    // empty (innermost).
      AllocOn(kMain, 360, 0x4000, 4000),    // empty.
      AllocOn(kMain, 400, 0x5000, 8000),    // conv: empty ended at 400 ([start, end)).
      AllocOn(kOther, 310, 0x6000, 16000),  // another thread: no span there.
      AllocOn(kMain, 320, 0x7000, 500),     // empty, freed before the peak:
      FreeOn(kMain, 330, 0x7000),           // not in the breakdown.
      AllocOn(kMain, 600, 0x8000, 300),     // forward; the peak (all live): 35300.
      FreeOn(kMain, 700, 0x5000),           // after the peak: still in the breakdown.
  }));
  const auto m = Only(state);
  CHECK(m.peak_bytes == 35300);
  CHECK(m.peak_ts_ns == 600);
  CHECK(m.breakdown_at_peak);
  CHECK(m.peak_allocations == 7);
  CHECK(m.peak_attributed_allocations == 6);
  CHECK(m.peak_attributed_bytes == 35300 - 16000);
  // Total bytes descending, then size descending.
  CHECK(m.breakdown == std::vector<Row>{{"", 16000, 1, 16000},
                                        {"aten::conv", 8000, 1, 8000},
                                        {"aten::empty", 4000, 2, 8000},
                                        {"aten::conv", 2000, 1, 2000},
                                        {"forward", 1000, 1, 1000},
                                        {"forward", 300, 1, 300}});
  CHECK(m.breakdown_by_op ==
        std::vector<OpRow>{{"", 16000, 1}, {"aten::conv", 10000, 2}, {"aten::empty", 8000, 2}, {"forward", 1300, 2}});
  CHECK(m.peak_unseen_allocations == 0);
}

TEST_CASE("memory attribution: a span arriving after the peak, and after the free, still counts") {
  Catalog catalog = Names();
  MemoryState state(&catalog);
  // The op is still running at the peak: its allocations wait for it.
  state.Consume(std::vector<Event>{
      AllocOn(kMain, 100, 0x1000, 100), AllocOn(kMain, 200, 0x2000, 200),  // peak 300.
      FreeOn(kMain, 300, 0x2000),                                          // freed after the peak, before its op ends.
  });
  {
    const auto m = Only(state);
    CHECK(m.peak_bytes == 300);
    CHECK(m.peak_attributed_allocations == 0);
    CHECK(m.breakdown == std::vector<Row>{{"", 200, 1, 200}, {"", 100, 1, 100}});
  }
  // A ProfilerStep#N span is a step, not an op: it attributes nothing.
  state.Consume(std::vector<Event>{test::Span(50, 400, kStep, kMain)});
  CHECK(Only(state).peak_attributed_allocations == 0);
  state.Consume(std::vector<Event>{test::Op(150, 500, kConv, kMain)});  // holds only the 200.
  {
    const auto m = Only(state);
    CHECK(m.peak_attributed_allocations == 1);
    CHECK(m.peak_attributed_bytes == 200);
    CHECK(m.breakdown == std::vector<Row>{{"aten::conv", 200, 1, 200}, {"", 100, 1, 100}});
  }
  state.Consume(std::vector<Event>{test::Span(0, 1000, kForward, kMain)});  // holds the 100.
  {
    const auto m = Only(state);
    CHECK(m.breakdown == std::vector<Row>{{"aten::conv", 200, 1, 200}, {"forward", 100, 1, 100}});
    CHECK(m.peak_attributed_bytes == 300);
  }
  // A new, higher peak: the conv allocation is gone; the live one keeps its op.
  state.Consume(std::vector<Event>{AllocOn(kMain, 2000, 0x3000, 400)});
  const auto m = Only(state);
  CHECK(m.peak_bytes == 500);
  CHECK(m.breakdown == std::vector<Row>{{"", 400, 1, 400}, {"forward", 100, 1, 100}});
}

TEST_CASE("memory attribution: allocations give up on a span past the horizon or the cap") {
  Catalog catalog = Names();
  MemoryStateOptions options;
  options.attribution_horizon_ns = 1000;
  options.max_pending_per_track = 2;
  MemoryState state(&catalog, nullptr, options);
  state.Consume(std::vector<Event>{
      AllocOn(kMain, 100, 0x1000, 1),
      AllocOn(kMain, 1200, 0x2000, 2),  // the first waited 1100 > 1000: gives up.
      AllocOn(kMain, 1300, 0x3000, 4),
      AllocOn(kMain, 1400, 0x4000, 8),  // three waiting > 2: the oldest (0x2000) gives up.
      test::Op(0, 2000, kConv, kMain),
  });
  const auto m = Only(state);
  CHECK(m.breakdown_by_op == std::vector<OpRow>{{"aten::conv", 12, 2}, {"", 3, 2}});
}

TEST_CASE("memory attribution: a track without spans stops queueing until a span comes") {
  Catalog catalog = Names();
  MemoryStateOptions options;
  options.spanless_after = 2;
  MemoryState state(&catalog, nullptr, options);
  state.Consume(std::vector<Event>{
      AllocOn(kOther, 100, 0x1000, 1),
      AllocOn(kOther, 200, 0x2000, 2),
      AllocOn(kOther, 300, 0x3000, 4),  // 3 > 2 waited with no span: all give up.
      AllocOn(kOther, 400, 0x4000, 8),  // not queued.
      test::Op(0, 500, kConv, kOther),  // too late for them; the track has spans now.
      AllocOn(kOther, 600, 0x5000, 16),
      test::Op(550, 100, kEmpty, kOther),
  });
  const auto m = Only(state);
  CHECK(m.breakdown_by_op == std::vector<OpRow>{{"aten::empty", 16, 1}, {"", 15, 4}});
}

TEST_CASE("memory attribution: JSON says what is attributed, with no empty rows") {
  Catalog catalog = Names();
  MemoryState state(&catalog);
  state.Consume(Delivered({
      test::Op(0, 100, kConv, kMain), AllocOn(kMain, 10, 0x1000, 64), AllocOn(kOther, 20, 0x2000, 32),
      FreeOn(kMain, 200, 0x9999),  // unknown address: counted beside, not a row.
  }));
  JsonWriter w;
  state.Snapshot().WriteJson(w);
  const auto j = nlohmann::json::parse(w.str())["memories"][0];
  CHECK(j["peak_allocations"] == 2);
  CHECK(j["peak_attributed_allocations"] == 1);
  CHECK(j["peak_attributed_bytes"] == 64);
  CHECK(j["peak_unseen_allocations"] == 1);
  CHECK(j["breakdown"] == nlohmann::json::parse(
                              R"([{"op":"aten::conv","bytes":64,"occurrences":1,"total_bytes":64,"requested_bytes":0,
                                   "region":"","data_type":"","shape":""},
                                  {"op":"","bytes":32,"occurrences":1,"total_bytes":32,"requested_bytes":0,
                                   "region":"","data_type":"","shape":""}])"));
  CHECK(j["breakdown_by_op"][0] == nlohmann::json::parse(R"({"op":"aten::conv","bytes":64,"allocations":1})"));
}

// The real H200 ResNet-18 trace, against bench/memory_peak_reference.py (an
// independent walk of the JSON): its output, recorded here.
TEST_CASE("memory attribution: the H200 ResNet-18 trace matches the reference script") {
  const std::string path = test::GpuDataPath("h200/resnet18_h200_slowloader.pt.trace.json.gz");
  if (path.empty()) return;
  TraceAnalysis a;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(path, AnalysesOptions{}, RenderOptions{}, &a, &error), error);
  const auto memories = nlohmann::json::parse(a.views.memory)["memories"];
  auto find = [&](const std::string& id) {
    for (const auto& m : memories) {
      if (m["id"] == id) return m;
    }
    FAIL("no memory id " << id);
    return nlohmann::json();
  };
  struct Op {
    const char* name;
    uint64_t bytes, allocations;
  };
  const auto check = [](const nlohmann::json& m, uint64_t peak, uint64_t live, const std::vector<Op>& ops) {
    CHECK(m["peak_bytes"] == peak);
    CHECK(m["breakdown_at_peak"] == true);
    CHECK(m["peak_allocations"] == live);
    CHECK(m["peak_attributed_allocations"] == live);  // every one inside an op.
    CHECK(m["peak_attributed_bytes"] == peak);
    CHECK(m["peak_unseen_allocations"] == 0);
    REQUIRE(m["breakdown_by_op"].size() == ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      INFO("op row ", i);
      CHECK(m["breakdown_by_op"][i]["op"] == ops[i].name);
      CHECK(m["breakdown_by_op"][i]["bytes"] == ops[i].bytes);
      CHECK(m["breakdown_by_op"][i]["allocations"] == ops[i].allocations);
    }
  };
  const auto gpu = find("GPU:0 CUDA:0");
  check(gpu, 756643840, 86,
        {{"aten::empty", 319594496, 59},
         {"aten::cudnn_convolution", 306577408, 16},
         {"aten::max_pool2d_with_indices", 78118912, 2},
         {"aten::convolution_backward", 30999040, 3},
         {"aten::empty_strided", 19268608, 3},
         {"aten::mm", 2080768, 1},
         {"aten::sum", 4096, 1},
         {"aten::nll_loss_forward", 512, 1}});
  // The largest rows: a 98 MiB activation of each of the convolution and
  // its workspace (aten::empty).
  CHECK(gpu["breakdown"][0]["bytes"] == 102760448);
  CHECK(gpu["breakdown"][1]["bytes"] == 102760448);
  check(find("Host CPU:-1"), 38535424, 34, {{"aten::empty", 19267840, 33}, {"aten::cat", 19267584, 1}});
}

}  // namespace liveprof::memory_attribution_test
