// AnnotationStats: the user annotations view, by hand: host time per
// annotation name, kernels attributed to the innermost annotation around
// their launch on its thread (HTA's rule), in completion order whatever
// arrives first; ProfilerStep#N merged; duplicates, the caps and the
// forgetting bound counted. Then random streams against a brute-force
// reference.
#include "aggregators/pytorch/annotation_stats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "doctest/doctest.h"
#include "event_builder.h"
#include "stream/reorder_buffer.h"

namespace liveprof::annotation_stats_test {
namespace {

enum : NameId { kForward = 1, kAttention, kStep3, kStep4, kLoss, kGemm, kApi, kNameCount };

Catalog MakeCatalog() {
  Catalog c;
  const char* names[] = {"",     "forward", "attention",       "ProfilerStep#3", "ProfilerStep#4",
                         "loss", "gemm",    "cudaLaunchKernel"};
  for (NameId i = 0; i < kNameCount; ++i) c.DefineName(i, names[i]);
  return c;
}

std::map<std::string, AnnotationRow> Rows(const AnnotationStatsSnapshot& s) {
  std::map<std::string, AnnotationRow> out;
  for (const AnnotationRow& r : s.rows) out[r.name] = r;
  return out;
}

TEST_CASE("annotations: kernels go to the innermost annotation around their launch, host time to each") {
  const Catalog catalog = MakeCatalog();
  AnnotationStats stats(&catalog);
  constexpr TrackId kMain = 1, kAutograd = 2;
  // Completion order. Step 3 [0, 1000) holds forward [100, 600), which holds
  // attention [200, 300); launches at 150 (forward's), 250 (attention's), 700
  // (the step's own), and 400 on autograd's thread (no annotation there).
  std::vector<Event> events = {
      test::Launch(150, 10, 1, kApi, kMain),
      test::Kernel(170, 50, kGemm, 1),  // before its launch is claimed: waits.
      test::Launch(250, 10, 2, kApi, kMain),
      test::Launch(251, 5, 2, kApi, kMain),  // the driver record of the same call.
      test::Span(200, 100, kAttention, kMain),
      test::Launch(400, 10, 3, kApi, kAutograd),
      test::Kernel(300, 40, kGemm, 2),
      test::Span(100, 500, kForward, kMain),
      test::Kernel(420, 30, kGemm, 3),
      test::Launch(700, 10, 4, kApi, kMain),
      test::Span(0, 1000, kStep3, kMain),
      test::Kernel(720, 60, kGemm, 4),  // after its launch was claimed.
      test::Kernel(900, 5, kGemm, 99),  // a launch never seen.
      test::Span(1000, 500, kStep4, kMain),
      test::Span(1100, 100, kLoss, kMain),  // out of order, nothing pending inside: counted.
  };
  stats.Consume(events);
  const AnnotationStatsSnapshot s = stats.Snapshot();
  const auto rows = Rows(s);
  REQUIRE(rows.size() == 4);
  CHECK(rows.at("attention").count == 1);
  CHECK(rows.at("attention").host_ns == 100);
  CHECK(rows.at("attention").kernels == 1);
  CHECK(rows.at("attention").gpu_ns == 40);
  CHECK(rows.at("forward").kernels == 1);  // the waiting kernel, once forward claimed its launch.
  CHECK(rows.at("forward").gpu_ns == 50);
  CHECK(rows.at("ProfilerStep#*").count == 2);
  CHECK(rows.at("ProfilerStep#*").host_ns == 1500);
  CHECK(rows.at("ProfilerStep#*").kernels == 1);
  CHECK(rows.at("ProfilerStep#*").gpu_ns == 60);
  CHECK(rows.at("loss").kernels == 0);
  CHECK(s.kernels_attributed == 3);
  CHECK(s.kernels_unattributed == 2);  // autograd's launch (no annotation), and corr 99.
  // By GPU time, then host time.
  CHECK(s.rows[0].name == "ProfilerStep#*");
  CHECK(s.rows[1].name == "forward");
  CHECK(s.rows[2].name == "attention");

  JsonWriter w;
  s.WriteJson(w);
  const nlohmann::json j = nlohmann::json::parse(w.str());
  CHECK(j["rows"][0]["gpu_ms"] == 60e-6);
  CHECK(j["rows"][0]["avg_host_us"] == 0.75);
  CHECK(j["kernels_unattributed"] == 2);
}

TEST_CASE("annotations: late annotations claim nothing, a claim stops at the annotation's end") {
  const Catalog catalog = MakeCatalog();
  AnnotationStats stats(&catalog);
  Event late = test::Span(0, 50, kAttention, 1);
  late.flags = kFlagLate;
  Event late_launch = test::Launch(60, 5, 3, kApi, 1);
  late_launch.flags = kFlagLate;
  stats.Consume(
      std::vector<Event>{test::Launch(10, 5, 1, kApi, 1), test::Kernel(20, 5, kGemm, 1),
                         test::Launch(300, 5, 2, kApi, 1), test::Kernel(310, 7, kGemm, 2),
                         late,                                        // holds launch 1, but late: claims nothing.
                         late_launch, test::Kernel(70, 3, kGemm, 3),  // inserted in time order, before launch 2.
                         test::Span(0, 100, kForward, 1),   // out of order: launches 1 and 3, not 2 (after its end).
                         test::Span(250, 100, kLoss, 1)});  // launch 2.
  const auto rows = Rows(stats.Snapshot());
  CHECK(rows.at("attention").count == 1);
  CHECK(rows.at("attention").kernels == 0);
  CHECK(rows.at("forward").kernels == 2);
  CHECK(rows.at("forward").gpu_ns == 8);
  CHECK(rows.at("loss").kernels == 1);
  CHECK(rows.at("loss").gpu_ns == 7);
  CHECK(stats.Snapshot().kernels_unattributed == 0);
}

TEST_CASE("annotations: past the name cap and the launch memory, counted") {
  const Catalog catalog = MakeCatalog();
  AnnotationStats::Options o;
  o.max_rows = 1;
  o.max_launches = 2;
  AnnotationStats stats(&catalog, o);
  stats.Consume(std::vector<Event>{test::Launch(10, 5, 1, kApi, 1), test::Kernel(20, 5, kGemm, 1),
                                   test::Launch(30, 5, 2, kApi, 1),
                                   test::Launch(40, 5, 3, kApi, 1),  // corr 1 forgotten, with its waiting kernel.
                                   test::Span(0, 50, kForward, 1), test::Span(0, 60, kAttention, 1)});
  const AnnotationStatsSnapshot s = stats.Snapshot();
  REQUIRE(s.rows.size() == 1);
  CHECK(s.rows[0].name == "forward");
  CHECK(s.annotations_over_cap == 1);
  CHECK(s.launches_forgotten == 1);
  CHECK(s.kernels_unattributed == 1);
  CHECK(s.kernels_attributed == 0);
}

TEST_CASE("annotations: a kernel far later than its launch's window lets no newer launch go") {
  const Catalog catalog = MakeCatalog();
  AnnotationStats::Options o;
  o.max_launches = 4;
  AnnotationStats stats(&catalog, o);
  // Launches 5..8 wait for their annotation; then a kernel of launch 1, four
  // ids older than the newest window: its slot holds launch 5, which stays.
  std::vector<Event> events = {test::Launch(10, 5, 5, kApi, 1), test::Launch(20, 5, 6, kApi, 1),
                               test::Launch(30, 5, 7, kApi, 1), test::Launch(40, 5, 8, kApi, 1),
                               test::Kernel(45, 5, kGemm, 1)};
  for (uint32_t corr = 5; corr <= 8; ++corr) events.push_back(test::Kernel(50 + corr, 5, kGemm, corr));
  events.push_back(test::Launch(60, 5, 2, kApi, 1));  // a launch record as late: claimed by nothing.
  events.push_back(test::Span(0, 70, kForward, 1));
  stats.Consume(events);
  const AnnotationStatsSnapshot s = stats.Snapshot();
  REQUIRE(s.rows.size() == 1);
  CHECK(s.rows[0].kernels == 4);  // launches 5..8's, none forgotten.
  CHECK(s.kernels_attributed == 4);
  CHECK(s.kernels_unattributed == 1);  // launch 1's.
  CHECK(s.launches_forgotten == 1);    // launch 2, past the window when it came.
}

TEST_CASE("annotations: random nested streams equal a brute-force innermost-annotation reference") {
  const Catalog catalog = MakeCatalog();
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    std::vector<Event> spans, launches, kernels;
    uint32_t corr = 0;
    // Per thread, properly nested annotations (up to 3 deep) with launches inside and between.
    for (TrackId t = 1; t <= 3; ++t) {
      uint64_t at = 0;
      for (int top = 0; top < 20; ++top) {
        // Even bounds for annotations, odd ones for launches: no ties in end order.
        const uint64_t b = at + 2 * (rng() % 25), len = 200 + 2 * (rng() % 400);
        std::vector<std::pair<uint64_t, uint64_t>> stack = {{b, b + len}};
        spans.push_back(test::Span(b, len, kForward + rng() % 2, t));
        if (rng() % 2) {
          const uint64_t cb = b + 10 + 2 * (rng() % (len / 4)), cl = 2 + 2 * (rng() % ((b + len - cb - 6) / 2));
          spans.push_back(test::Span(cb, cl, kAttention + 3 * (rng() % 2), t));  // attention or loss.
        }
        for (int k = 0; k < 6; ++k) {
          const uint64_t lt = at + 1 + 2 * (rng() % ((len + 60) / 2));
          if (std::any_of(launches.begin(), launches.end(),
                          [&](const Event& l) { return l.track == t && lt < l.ts + 3 && l.ts < lt + 3; })) {
            continue;
          }
          launches.push_back(test::Launch(lt, 2, ++corr, kApi, t));
          kernels.push_back(test::Kernel(lt + rng() % 300, 1 + rng() % 100, kGemm, corr));
        }
        at = b + len + 60;
      }
    }
    // Reference: each kernel to the shortest annotation on its launch's thread containing the launch.
    std::map<std::string, std::pair<uint64_t, uint64_t>> want;  // name -> (kernels, gpu ns)
    uint64_t want_unattributed = 0;
    for (const Event& k : kernels) {
      const Event& l = launches[k.corr - 1];
      const Event* best = nullptr;
      for (const Event& s : spans) {
        if (s.track == l.track && s.ts <= l.ts && l.ts + l.dur <= s.ts + s.dur && (!best || s.dur < best->dur))
          best = &s;
      }
      if (best == nullptr) {
        ++want_unattributed;
        continue;
      }
      auto& w = want[std::string(catalog.Name(best->name))];
      ++w.first;
      w.second += k.dur;
    }
    std::vector<Event> all = spans;
    all.insert(all.end(), launches.begin(), launches.end());
    all.insert(all.end(), kernels.begin(), kernels.end());
    std::stable_sort(all.begin(), all.end(), CompletionOrderLess);
    AnnotationStats stats(&catalog);
    for (size_t i = 0; i < all.size(); i += 7) {
      stats.Consume(std::span<const Event>(all).subspan(i, std::min<size_t>(7, all.size() - i)));
    }
    const AnnotationStatsSnapshot s = stats.Snapshot();
    std::map<std::string, std::pair<uint64_t, uint64_t>> got;
    for (const AnnotationRow& r : s.rows) {
      if (r.kernels != 0) got[r.name] = {r.kernels, r.gpu_ns};
    }
    CHECK(got == want);
    CHECK(s.kernels_unattributed == want_unattributed);
  }
}

// Launches out of time order (late ones) are set aside and merged once per
// batch or before their thread's next annotation: whatever the batching,
// the result is that of inserting each in time order as it came (batches of
// one event), the per-thread cap included.
TEST_CASE("annotations: late launches give the same rows in any batching, the cap included") {
  const Catalog catalog = MakeCatalog();
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    std::vector<Event> stream;
    uint32_t corr = 0;
    for (TrackId t = 1; t <= 2; ++t) {
      for (uint64_t b = 0; b < 20'000; b += 1000) {
        std::vector<Event> inside;
        for (int k = 0; k < 12; ++k) {
          const uint64_t lt = b + 10 + 2 * (rng() % 480);
          inside.push_back(test::Launch(lt, 1, ++corr, kApi, t));
          inside.push_back(test::Kernel(lt + 5, 1 + rng() % 50, kGemm, corr));
        }
        std::sort(inside.begin(), inside.end(), CompletionOrderLess);
        stream.insert(stream.end(), inside.begin(), inside.end());
        stream.push_back(test::Span(b, 600 + 2 * (rng() % 100), kForward + rng() % 2, t));
      }
    }
    // A quarter of the launches arrive late: moved up to 60 events on.
    for (size_t i = 0; i + 1 < stream.size(); ++i) {
      if (stream[i].kind != EventKind::kRuntimeApi || rng() % 4 != 0) continue;
      const size_t to = std::min(stream.size() - 1, i + 1 + rng() % 60);
      std::rotate(stream.begin() + static_cast<ptrdiff_t>(i), stream.begin() + static_cast<ptrdiff_t>(i) + 1,
                  stream.begin() + static_cast<ptrdiff_t>(to) + 1);
    }
    AnnotationStats::Options o;
    o.max_pending_per_thread = 8 + rng() % 8;
    auto run = [&](size_t batch) {
      AnnotationStats stats(&catalog, o);
      for (size_t i = 0; i < stream.size(); i += batch) {
        stats.Consume(std::span<const Event>(stream).subspan(i, std::min(batch, stream.size() - i)));
      }
      JsonWriter w;
      stats.Snapshot().WriteJson(w);
      return w.str();
    };
    const std::string one_by_one = run(1);
    CHECK(nlohmann::json::parse(one_by_one)["kernels_attributed"].get<uint64_t>() > 0);
    CHECK(run(7) == one_by_one);
    CHECK(run(stream.size()) == one_by_one);
  }
}

// The launch table grows while ids pass its size (4 Ki slots, doubling):
// a stream through six doublings, kernels before and after their claims,
// loses and double-counts nothing.
TEST_CASE("annotations: 200 k launches (past the table's first sizes) all attributed") {
  const Catalog catalog = MakeCatalog();
  AnnotationStats stats(&catalog);
  constexpr TrackId kMain = 1;
  constexpr uint32_t kLaunches = 200'000;
  std::vector<Event> events;
  uint64_t kernel_ns = 0;
  for (uint32_t corr = 1; corr <= kLaunches; ++corr) {
    const uint64_t t = uint64_t{corr} * 100;
    if (corr % 2 == 0) events.push_back(test::Kernel(t + 20, 7, kGemm, corr));  // before its claim.
    events.push_back(test::Launch(t, 10, corr, kApi, kMain));
    events.push_back(test::Span(t - 5, 50, kForward, kMain));
    if (corr % 2 == 1) events.push_back(test::Kernel(t + 20, 7, kGemm, corr));  // after it.
    kernel_ns += 7;
    if (events.size() >= 4096) {
      stats.Consume(events);
      events.clear();
    }
  }
  stats.Consume(events);
  const AnnotationStatsSnapshot s = stats.Snapshot();
  const auto rows = Rows(s);
  REQUIRE(rows.size() == 1);
  CHECK(rows.at("forward").count == kLaunches);
  CHECK(rows.at("forward").kernels == kLaunches);
  CHECK(rows.at("forward").gpu_ns == kernel_ns);
  CHECK(s.kernels_attributed == kLaunches);
  CHECK(s.kernels_unattributed == 0);
  CHECK(s.launches_forgotten == 0);
}

}  // namespace
}  // namespace liveprof::annotation_stats_test
