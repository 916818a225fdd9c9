#include "aggregators/steps/device_utilization.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "event_builder.h"
#include "stream/diagnostics.h"

namespace liveprof::device_utilization_test {
namespace {

constexpr NameId kGemm = 1;
constexpr TrackId kStreamA = 100;
constexpr TrackId kStreamB = 101;

Event KernelOn(uint64_t begin, uint64_t end, TrackId stream = kStreamA, uint8_t device = 0) {
  return test::Kernel(begin, end - begin, kGemm, 0, stream, 0, 0, device);
}

Event CopyOn(EventKind kind, uint64_t begin, uint64_t end, uint8_t device = 0) {
  return test::Copy(kind, begin, end - begin, /*bytes=*/4096, 0, kStreamB, device);
}

Event Late(Event e) {
  e.flags |= kFlagLate;
  return e;
}

}  // namespace

TEST_CASE("device utilization: overlapping kernels on two streams") {
  DeviceUtilization util(nullptr, nullptr);
  // End order: [0,100) A, [50,150) B, [200,250) A.
  const std::vector<Event> events = {KernelOn(0, 100, kStreamA), KernelOn(50, 150, kStreamB),
                                     KernelOn(200, 250, kStreamA)};
  util.Consume(events);
  const auto s = util.Snapshot();
  REQUIRE(s.devices.size() == 1);
  const auto& d = s.devices[0];
  CHECK(d.ordinal == 0);
  CHECK(d.busy_ns == 200);  // [0,150) + [200,250) = 150 + 50.
  CHECK(d.kernel_busy_ns == 200);
  CHECK(d.first_ns == 0);
  CHECK(d.last_ns == 250);
  CHECK(d.span_ns == 250);
  CHECK(d.utilization_pct == 80.0);  // 200 / 250.
}

TEST_CASE("device utilization: copies and memsets count as busy, not as kernel busy") {
  Catalog catalog;
  Event info;
  info.kind = EventKind::kDeviceInfo;
  info.device = 1;
  info.name = 7;
  catalog.DefineName(7, "NVIDIA A100");
  catalog.Consume(std::span(&info, 1));
  DeviceUtilization util(&catalog, nullptr);
  const std::vector<Event> events = {
      KernelOn(0, 100),                          // device 0
      CopyOn(EventKind::kMemcpyHtoD, 100, 300),  // touches the kernel.
      CopyOn(EventKind::kMemcpyDtoH, 250, 350),  // overlaps the copy.
      CopyOn(EventKind::kMemset, 400, 500),
      KernelOn(1000, 1100, kStreamA, /*device=*/1),  // device 1
      CopyOn(EventKind::kMemcpyPtoP, 1050, 1200, /*device=*/1),
      test::Op(0, 5000, 3),  // a host op: ignored.
  };
  util.Consume(events);
  const auto s = util.Snapshot();
  REQUIRE(s.devices.size() == 2);
  const auto* d0 = s.Find(0);
  REQUIRE(d0 != nullptr);
  CHECK(d0->busy_ns == 450);  // [0,350) + [400,500) = 350 + 100.
  CHECK(d0->kernel_busy_ns == 100);
  CHECK(d0->span_ns == 500);
  CHECK(d0->utilization_pct == 90.0);         // 450 / 500.
  CHECK(d0->kernel_utilization_pct == 20.0);  // 100 / 500.
  CHECK(d0->name == "");
  const auto* d1 = s.Find(1);
  REQUIRE(d1 != nullptr);
  CHECK(d1->name == "NVIDIA A100");
  CHECK(d1->busy_ns == 200);  // [1000,1200).
  CHECK(d1->kernel_busy_ns == 100);
  CHECK(d1->first_ns == 1000);
  CHECK(d1->span_ns == 200);
  CHECK(d1->utilization_pct == 100.0);

  JsonWriter w;
  s.WriteJson(w);
  const nlohmann::json j = nlohmann::json::parse(w.str());
  REQUIRE(j["devices"].size() == 2);
  CHECK(j["devices"][0]["busy_ns"] == 450);
  CHECK(j["devices"][1]["name"] == "NVIDIA A100");
  CHECK(j["devices"][1]["utilization_pct"] == 100.0);
  const std::string csv = s.ToCsv();
  CHECK(csv.find("0,,450,100,0,500,500,90,20\n") != std::string::npos);
}

TEST_CASE("device utilization: late intervals merge anywhere") {
  Diagnostics diag;
  DeviceUtilization util(nullptr, &diag);
  const std::vector<Event> in_order = {KernelOn(0, 100), KernelOn(200, 300), KernelOn(400, 500), KernelOn(600, 700)};
  util.Consume(in_order);
  CHECK(util.Snapshot().devices[0].busy_ns == 400);
  // Bridges the first two: [0,300) + [400,500) + [600,700) = 500.
  Event late = Late(KernelOn(50, 250));
  util.Consume(std::span(&late, 1));
  CHECK(util.Snapshot().devices[0].busy_ns == 500);
  // Inside a gap, touching nothing: + 30.
  late = Late(CopyOn(EventKind::kMemcpyDtoD, 320, 350));
  util.Consume(std::span(&late, 1));
  auto d = util.Snapshot().devices[0];
  CHECK(d.busy_ns == 530);
  CHECK(d.kernel_busy_ns == 500);  // a copy: not in the kernel union.
  // Fully covered: no change.
  late = Late(KernelOn(210, 290));
  util.Consume(std::span(&late, 1));
  CHECK(util.Snapshot().devices[0].busy_ns == 530);
  // Touching on both sides, [350, 400) joins [320,350) and [400,500):
  // [0,300) + [320,500) + [600,700) = 300 + 180 + 100 = 580.
  late = Late(KernelOn(350, 400));
  util.Consume(std::span(&late, 1));
  d = util.Snapshot().devices[0];
  CHECK(d.busy_ns == 580);
  CHECK(d.kernel_busy_ns == 550);  // kernels: [0,300) + [350,500) + [600,700).
  // Before everything seen so far: extends the span.
  late = Late(KernelOn(0, 0 + 10));
  util.Consume(std::span(&late, 1));
  late = Late(KernelOn(5, 20));
  util.Consume(std::span(&late, 1));
  d = util.Snapshot().devices[0];
  CHECK(d.busy_ns == 580);
  CHECK(d.span_ns == 700);
  // A late interval spanning several merged ones and a gap: [250, 650).
  late = Late(KernelOn(250, 650));
  util.Consume(std::span(&late, 1));
  d = util.Snapshot().devices[0];
  CHECK(d.busy_ns == 700);  // [0,700).
  CHECK(d.kernel_busy_ns == 700);
  CHECK(diag.Get(Diag::device_interval_beyond_history) == 0);
}

TEST_CASE("device utilization: windows split intervals at bucket boundaries") {
  constexpr uint64_t kBucket = 100;
  DeviceUtilization util(nullptr, nullptr, {.bucket_ns = kBucket, .max_buckets = 8});
  // [50, 250) covers buckets 0 (50), 1 (100), 2 (50); [300, 350) bucket 3.
  const std::vector<Event> events = {KernelOn(50, 250), KernelOn(300, 350)};
  util.Consume(events);
  auto s = util.Snapshot();
  CHECK(s.devices[0].busy_ns == 250);
  CHECK(s.devices[0].span_ns == 300);  // 350 - 50.
  // Window 100: newest end 350 - 100 = 250 -> buckets 2 and 3 = [200, ...).
  s = util.Snapshot(100);
  REQUIRE(s.devices.size() == 1);
  CHECK(s.devices[0].busy_ns == 100);  // [200,250) + [300,350).
  CHECK(s.devices[0].first_ns == 200);
  CHECK(s.devices[0].last_ns == 350);
  CHECK(s.devices[0].span_ns == 150);
  CHECK(s.devices[0].utilization_pct == doctest::Approx(100.0 * 100 / 150));
  // Window 40: 310 -> bucket 3 only.
  s = util.Snapshot(40);
  CHECK(s.devices[0].busy_ns == 50);
  CHECK(s.devices[0].span_ns == 50);
  CHECK(s.devices[0].utilization_pct == 100.0);
  // A window covering everything equals the full view.
  CHECK(util.Snapshot(10'000).devices[0].busy_ns == 250);

  // A device with nothing in the window is left out.
  const Event other = KernelOn(0, 10, kStreamA, /*device=*/3);
  util.Consume(std::span(&other, 1));
  CHECK(util.Snapshot().devices.size() == 2);
  CHECK(util.Snapshot(100).devices.size() == 1);

  // Buckets that fall out of the ring still count since start.
  const Event far = KernelOn(2000, 2050);
  util.Consume(std::span(&far, 1));
  s = util.Snapshot();
  CHECK(s.Find(0)->busy_ns == 300);  // 250 + 50.
  CHECK(s.Find(0)->span_ns == 2000);
  CHECK(s.Find(3)->busy_ns == 10);
  s = util.Snapshot(100);
  CHECK(s.Find(0)->busy_ns == 50);
  CHECK(s.Find(3) == nullptr);
}

TEST_CASE("device utilization: intervals reaching behind the kept history") {
  constexpr uint64_t kBucket = 100;
  Diagnostics diag;
  DeviceUtilization util(nullptr, &diag, {.bucket_ns = kBucket, .max_buckets = 100, .history_ns = kBucket});
  // [0,10); then [1000,1010) moves the newest bucket to 10 and the floor to
  // bucket 9's start (900): [0,10) is dropped from the interval list.
  std::vector<Event> events = {KernelOn(0, 10), KernelOn(1000, 1010)};
  util.Consume(events);
  CHECK(util.Snapshot().devices[0].busy_ns == 20);
  // A long kernel [0, 1020): behind the floor, buckets 0..8 are fully covered,
  // so their busy is exact (bucket 0: 10 counted + 90); [900,1020) is merged
  // exactly: [900,1000) + [1010,1020) new. Union [0,1020) = 1020.
  Event long_kernel = KernelOn(0, 1020);
  util.Consume(std::span(&long_kernel, 1));
  auto d = util.Snapshot().devices[0];
  CHECK(d.busy_ns == 1020);
  CHECK(d.kernel_busy_ns == 1020);
  CHECK(diag.Get(Diag::device_interval_beyond_history) == 1);

  // Partly covered bucket behind the floor: the estimate is the lower bound.
  DeviceUtilization util2(nullptr, &diag, {.bucket_ns = kBucket, .max_buckets = 100, .history_ns = kBucket});
  util2.Consume(events);
  // True union of [0,10), [50,1030), [1000,1010) = 10 + 980 = 990. Bucket 0
  // gets max(0, 50 - 10) = 40 (it had 10 at [0,10), unknown where): total
  // 10 + 40 + 800 (buckets 1..8) + [900,1030) merged: 100 + 20 = 120 new, 10 old
  // = 980 (10 under, never over).
  long_kernel = KernelOn(50, 1030);
  util2.Consume(std::span(&long_kernel, 1));
  d = util2.Snapshot().devices[0];
  CHECK(d.busy_ns == 980);
  CHECK(d.busy_ns <= d.span_ns);
  CHECK(diag.Get(Diag::device_interval_beyond_history) == 2);
  // A late interval entirely behind the floor.
  Event late = Late(KernelOn(20, 40));
  util2.Consume(std::span(&late, 1));
  CHECK(util2.Snapshot().devices[0].busy_ns == 980);  // bucket 0 already has 50 >= 20.
  CHECK(diag.Get(Diag::device_interval_beyond_history) == 3);
}

TEST_CASE("device utilization: bad durations are counted, zero lengths ignored") {
  Diagnostics diag;
  DeviceUtilization util(nullptr, &diag);
  std::vector<Event> events = {
      test::Kernel(100, (uint64_t{1} << 62) + 1, kGemm),
      test::Copy(EventKind::kMemcpyHtoD, UINT64_MAX - 5, 10, 64),
      test::Kernel(100, 0, kGemm),
      KernelOn(200, 300),
  };
  util.Consume(events);
  CHECK(diag.Get(Diag::bad_duration) == 2);
  const auto s = util.Snapshot();
  REQUIRE(s.devices.size() == 1);
  CHECK(s.devices[0].busy_ns == 100);
  CHECK(s.devices[0].span_ns == 100);
  CHECK(DeviceUtilization(nullptr, nullptr).Snapshot().devices.empty());
}

// ---------------------------------------------------------------------------
// Incremental equals batch equals a naive reference.

namespace {

struct NaiveDevice {
  uint64_t busy = 0, kernel_busy = 0, first = UINT64_MAX, last = 0;
};

// Union length of `iv` clipped to [from, inf), by sorting and sweeping.
uint64_t UnionLength(std::vector<std::pair<uint64_t, uint64_t>> iv, uint64_t from) {
  for (auto& [b, e] : iv) b = std::max(b, from);
  std::sort(iv.begin(), iv.end());
  uint64_t total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (const auto& [b, e] : iv) {
    if (b >= e) continue;
    if (open && b <= cur_e) {
      cur_e = std::max(cur_e, e);
    } else {
      if (open) total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
      open = true;
    }
  }
  if (open) total += cur_e - cur_b;
  return total;
}

std::map<uint8_t, NaiveDevice> Naive(const std::vector<Event>& events, uint64_t from) {
  std::map<uint8_t, std::vector<std::pair<uint64_t, uint64_t>>> all, kernels;
  std::map<uint8_t, NaiveDevice> out;
  for (const Event& e : events) {
    if (!IsDeviceKind(e.kind) || e.dur == 0 || e.end() <= from) continue;
    all[e.device].push_back({e.ts, e.end()});
    if (e.kind == EventKind::kKernel) kernels[e.device].push_back({e.ts, e.end()});
    NaiveDevice& d = out[e.device];
    d.first = std::min(d.first, std::max(e.ts, from));
    d.last = std::max(d.last, e.end());
  }
  for (auto& [dev, d] : out) {
    d.busy = UnionLength(all[dev], from);
    d.kernel_busy = UnionLength(kernels[dev], from);
  }
  return out;
}

void CheckSame(const DeviceUtilizationSnapshot& a, const DeviceUtilizationSnapshot& b) {
  REQUIRE(a.devices.size() == b.devices.size());
  for (size_t i = 0; i < a.devices.size(); ++i) {
    CHECK(a.devices[i].ordinal == b.devices[i].ordinal);
    CHECK(a.devices[i].busy_ns == b.devices[i].busy_ns);
    CHECK(a.devices[i].kernel_busy_ns == b.devices[i].kernel_busy_ns);
    CHECK(a.devices[i].first_ns == b.devices[i].first_ns);
    CHECK(a.devices[i].last_ns == b.devices[i].last_ns);
    CHECK(a.devices[i].utilization_pct == b.devices[i].utilization_pct);
  }
}

void CheckNaive(const DeviceUtilizationSnapshot& s, const std::map<uint8_t, NaiveDevice>& n) {
  REQUIRE(s.devices.size() == n.size());
  for (const auto& d : s.devices) {
    CAPTURE(int{d.ordinal});
    const NaiveDevice& e = n.at(d.ordinal);
    CHECK(d.busy_ns == e.busy);
    CHECK(d.kernel_busy_ns == e.kernel_busy);
    CHECK(d.first_ns == e.first);
    CHECK(d.last_ns == e.last);
    CHECK(d.span_ns == e.last - e.first);
  }
}

}  // namespace

TEST_CASE("device utilization: incremental equals batch equals naive on random streams") {
  constexpr EventKind kKinds[] = {EventKind::kKernel,     EventKind::kKernel,     EventKind::kKernel,
                                  EventKind::kMemcpyHtoD, EventKind::kMemcpyDtoH, EventKind::kMemset};
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    constexpr uint64_t kBucket = 1000;
    DeviceUtilization::Options options{
        .bucket_ns = kBucket, .max_buckets = seed % 2 ? size_t{6} : size_t{1000}, .history_ns = 20 * kBucket};
    // Intervals on 3 devices, several streams each, delivered in end order.
    std::vector<Event> events;
    const int n = 100 + static_cast<int>(rng() % 2000);
    uint64_t t = 0;
    for (int i = 0; i < n; ++i) {
      t += rng() % 200;
      const uint64_t dur = rng() % 20 == 0 ? 0 : 1 + rng() % (rng() % 4 == 0 ? 3000 : 300);
      Event e = test::Span(t, dur, kGemm, 100 + rng() % 4, kKinds[rng() % 6]);
      e.device = static_cast<uint8_t>(rng() % 3);
      events.push_back(e);
    }
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
    // Late ones: moved up to 40 places later in the stream and flagged.
    for (int i = 0; i < n / 15; ++i) {
      const size_t from = rng() % events.size();
      const size_t to = std::min(events.size() - 1, from + rng() % 40);
      Event e = events[from];
      e.flags |= kFlagLate;
      events.erase(events.begin() + static_cast<ptrdiff_t>(from));
      events.insert(events.begin() + static_cast<ptrdiff_t>(to), e);
    }
    // Host events in between: ignored.
    events.insert(events.begin() + static_cast<ptrdiff_t>(rng() % events.size()), test::Op(0, 10, 2));

    Diagnostics diag;
    DeviceUtilization batch(nullptr, &diag, options);
    DeviceUtilization incremental(nullptr, &diag, options);
    batch.Consume(events);
    for (size_t pos = 0; pos < events.size();) {
      const size_t len = std::min<size_t>(1 + rng() % 100, events.size() - pos);
      incremental.Consume(std::span(events).subspan(pos, len));
      pos += len;
      (void)incremental.Snapshot(rng() % 5000);
    }
    CHECK(diag.Get(Diag::device_interval_beyond_history) == 0);  // history covers the lateness.
    CheckSame(batch.Snapshot(), incremental.Snapshot());
    CheckNaive(batch.Snapshot(), Naive(events, 0));
    // Windows inside the ring.
    uint64_t newest = 0;
    for (const Event& e : events) {
      if (IsDeviceKind(e.kind) && e.dur > 0) newest = std::max(newest, e.end());
    }
    for (uint64_t window : {uint64_t{1}, uint64_t{700}, uint64_t{2500}, uint64_t{4999}}) {
      CAPTURE(window);
      const uint64_t from = window >= newest ? 0 : (newest - window) / kBucket * kBucket;
      CheckSame(batch.Snapshot(window), incremental.Snapshot(window));
      CheckNaive(batch.Snapshot(window), Naive(events, from));
    }
  }
}

}  // namespace liveprof::device_utilization_test
