// GpuHandoffs: the windows whose GPU data went to another CUPTI client, per
// process, from the instants each process's GPU tracer writes (names as
// producers/cupti_source.h writes them), and their JSON in /api/status.
#include "aggregators/gpu_handoffs.h"

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "event_builder.h"
#include "stream/stream.h"

namespace liveprof::gpu_handoffs_test {
namespace {

constexpr uint64_t kT0 = 5'000'000'000;  // the run's first event.
constexpr uint64_t kSecond = 1'000'000'000;
constexpr NameId kTo = 1, kBack = 2, kNotRegained = 3, kFinalized = 4, kOther = 5, kRank0 = 6, kRank1 = 7;
constexpr TrackId kRank0Label = 10, kRank0Tracer = 11, kRank1Label = 20, kRank1Tracer = 21;

Catalog MakeCatalog() {
  Catalog c;
  std::vector<Event> d;
  auto name = [&](NameId id, const char* s) { d.push_back(test::NameDef(id, s, std::string_view(s).size())); };
  name(kTo, "GPU data: to torch.profiler");
  name(kBack, "GPU data: back to liveprof");
  name(kNotRegained, "GPU data: not regained: CONCURRENT_KERNEL: CUPTI_ERROR_NOT_READY (10)");
  name(kFinalized, "GPU data: lost to a cuptiFinalize by another client");
  name(kOther, "GPU data: a name this version does not know");
  name(kRank0, "rank 0");
  name(kRank1, "rank 1");
  d.push_back(TrackDefEvent(kRank0Label, {kRank0, TrackType::kProcess, 0, 0, 1}));
  d.push_back(TrackDefEvent(kRank0Tracer, {0, TrackType::kHostThread, 0, 0, 1}));
  d.push_back(TrackDefEvent(kRank1Label, {kRank1, TrackType::kProcess, 0, 0, 2}));
  d.push_back(TrackDefEvent(kRank1Tracer, {0, TrackType::kHostThread, 0, 0, 2}));
  c.Consume(d);
  return c;
}

}  // namespace

TEST_CASE("gpu handoffs: per process, torch.profiler's windows from the tracer's instants") {
  const Catalog catalog = MakeCatalog();
  GpuHandoffs h(&catalog);
  // Rank 0: a window of 2 s, then one not regained at first; rank 1: a
  // cuptiFinalize seen, regained; then a window still open.
  h.Consume(std::vector<Event>{
      test::Span(kT0, 10, 0, kRank0Tracer), test::Instant(kT0 + 1 * kSecond, kTo, kRank0Tracer),
      test::Instant(kT0 + 1 * kSecond + 1, kTo, kRank0Tracer),  // (a second "to": the same window)
      test::Instant(kT0 + 3 * kSecond, kBack, kRank0Tracer), test::Instant(kT0 + 4 * kSecond, kFinalized, kRank1Tracer),
      test::Instant(kT0 + 4 * kSecond + 500'000'000, kBack, kRank1Tracer),
      test::Instant(kT0 + 5 * kSecond, kTo, kRank0Tracer), test::Instant(kT0 + 6 * kSecond, kNotRegained, kRank0Tracer),
      test::Instant(kT0 + 6 * kSecond, kOther, kRank0Tracer), test::Instant(kT0 + 7 * kSecond, kBack, kRank0Tracer),
      test::Instant(kT0 + 8 * kSecond, kTo, kRank1Tracer),
      test::Instant(kT0 + 9 * kSecond, kBack, kRank0Tracer),  // (rank 0 has none open: nothing)
  });
  REQUIRE(h.windows().size() == 4);
  CHECK(h.windows_total() == 4);
  CHECK(h.first_ns() == kT0);
  const auto& w = h.windows();
  CHECK((w[0].process == 1 && w[0].client == "torch.profiler" && w[0].from_ns == kT0 + kSecond &&
         w[0].to_ns == kT0 + 3 * kSecond && w[0].note.empty()));
  CHECK((w[1].process == 2 && w[1].client == "another CUPTI client" && w[1].note == "after a cuptiFinalize" &&
         w[1].to_ns == kT0 + 4 * kSecond + 500'000'000));
  CHECK((w[2].process == 1 && w[2].to_ns == kT0 + 7 * kSecond &&
         w[2].note == "not regained: CONCURRENT_KERNEL: CUPTI_ERROR_NOT_READY (10)"));
  CHECK((w[3].process == 2 && w[3].client == "torch.profiler" && w[3].to_ns == 0));

  JsonWriter json;
  h.WriteJson(json);
  CHECK(json.str() ==
        R"x([{"worker":1,"label":"rank 0","client":"torch.profiler","from_ns":6000000000,"to_ns":8000000000,)x"
        R"x("from_s":1.000,"to_s":3.000,"note":""},)x"
        R"x({"worker":2,"label":"rank 1","client":"another CUPTI client","from_ns":9000000000,)x"
        R"x("to_ns":9500000000,"from_s":4.000,"to_s":4.500,"note":"after a cuptiFinalize"},)x"
        R"x({"worker":1,"label":"rank 0","client":"torch.profiler","from_ns":10000000000,"to_ns":12000000000,)x"
        R"x("from_s":5.000,"to_s":7.000,"note":"not regained: CONCURRENT_KERNEL: CUPTI_ERROR_NOT_READY (10)"},)x"
        R"x({"worker":2,"label":"rank 1","client":"torch.profiler","from_ns":13000000000,"to_ns":0,)x"
        R"x("from_s":8.000,"to_s":null,"note":""}])x");
}

TEST_CASE("gpu handoffs: the newest windows are kept, all counted") {
  const Catalog catalog = MakeCatalog();
  GpuHandoffs h(&catalog);
  std::vector<Event> events;
  const size_t n = GpuHandoffs::kMaxWindows + 6;
  for (size_t i = 0; i < n; ++i) {
    events.push_back(test::Instant(kT0 + 2 * i * kSecond, kTo, kRank0Tracer));
    events.push_back(test::Instant(kT0 + (2 * i + 1) * kSecond, kBack, kRank0Tracer));
  }
  h.Consume(events);
  CHECK(h.windows().size() == GpuHandoffs::kMaxWindows);
  CHECK(h.windows_total() == n);
  CHECK(h.windows().front().from_ns == kT0 + 2 * 6 * kSecond);
  CHECK(h.windows().back().to_ns == kT0 + (2 * (n - 1) + 1) * kSecond);
}

}  // namespace liveprof::gpu_handoffs_test
