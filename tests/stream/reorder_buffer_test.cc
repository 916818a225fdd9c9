#include "stream/reorder_buffer.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "event_builder.h"

namespace liveprof::reorder_buffer_test {
namespace {

constexpr uint64_t kWindowNs = 1'000'000;  // 1 ms.
constexpr uint64_t kTickNs = 100'000;      // releases every 0.1 ms of simulated time.

struct Arrival {
  uint64_t at;  // when the event reaches the buffer.
  Event event;
};

// Events ending every ~1 us on `sources` sources, each reaching the buffer
// `delay` after it ended, with delay uniform in [0, max_delay).
std::vector<Arrival> MakeArrivals(size_t n, uint32_t sources, uint64_t max_delay, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint64_t> dur(0, 5'000), delay(0, max_delay - 1), gap(0, 2'000);
  std::vector<Arrival> out;
  uint64_t end = 10 * kWindowNs;
  for (size_t i = 0; i < n; ++i) {
    end += gap(rng);
    const uint64_t d = dur(rng);
    Event e = test::Span(end - d, d, 0, static_cast<TrackId>(i % sources));
    e.corr = static_cast<uint32_t>(i);
    out.push_back({end + delay(rng), e});
  }
  std::stable_sort(out.begin(), out.end(), [](const Arrival& a, const Arrival& b) { return a.at < b.at; });
  return out;
}

struct Result {
  std::vector<Event> ordered, late;
  uint64_t expected_late = 0;
};

void Append(const ReorderBuffer::Released& r, std::vector<Event>* out, std::vector<Event>* late);

// Feeds arrivals tick by tick, releasing at each tick like the drain loop.
Result Simulate(const std::vector<Arrival>& arrivals, ReorderBuffer& buffer) {
  Result r;
  size_t i = 0;
  uint64_t now = arrivals.front().at;
  bool released = false;
  while (i < arrivals.size()) {
    now += kTickNs;
    for (; i < arrivals.size() && arrivals[i].at <= now; ++i) {
      // The buffer's promise at this moment: late iff end <= its watermark.
      if (released && arrivals[i].event.end() <= buffer.watermark()) ++r.expected_late;
      buffer.Push(arrivals[i].event.track, std::span(&arrivals[i].event, 1));
    }
    Append(buffer.Release(now), &r.ordered, &r.late);
    released = true;
  }
  Append(buffer.Flush(), &r.ordered, &r.late);
  return r;
}

void Append(const ReorderBuffer::Released& r, std::vector<Event>* out, std::vector<Event>* late) {
  out->insert(out->end(), r.events.begin(), r.events.end());
  late->insert(late->end(), r.late.begin(), r.late.end());
}

bool InCompletionOrder(const std::vector<Event>& v) { return std::is_sorted(v.begin(), v.end(), CompletionOrderLess); }

}  // namespace

TEST_CASE("reorder: shuffled input within the window comes out in order, none late") {
  Diagnostics diag;
  ReorderBuffer buffer({.window_ns = kWindowNs, .max_pending = 1 << 20}, &diag);
  const auto arrivals = MakeArrivals(50'000, 4, kWindowNs / 2, 1);
  const Result r = Simulate(arrivals, buffer);
  CHECK(r.ordered.size() == arrivals.size());
  CHECK(r.late.empty());
  CHECK(InCompletionOrder(r.ordered));
  CHECK(diag.Get(Diag::late_events) == 0);
  CHECK(buffer.pending() == 0);
  // Nothing lost or duplicated.
  std::vector<bool> seen(arrivals.size());
  for (const Event& e : r.ordered) {
    CHECK_FALSE(seen[e.corr]);
    seen[e.corr] = true;
  }
}

TEST_CASE("reorder: events later than the window are counted and handed out apart") {
  Diagnostics diag;
  ReorderBuffer buffer({.window_ns = kWindowNs, .max_pending = 1 << 20}, &diag);
  const auto arrivals = MakeArrivals(50'000, 3, 3 * kWindowNs, 2);
  const Result r = Simulate(arrivals, buffer);
  CHECK(r.expected_late > 0);
  CHECK(r.late.size() == r.expected_late);
  CHECK(diag.Get(Diag::late_events) == r.expected_late);
  CHECK(r.ordered.size() + r.late.size() == arrivals.size());
  CHECK(InCompletionOrder(r.ordered));  // the ordered output is never wrong.
  for (const Event& e : r.late) CHECK((e.flags & kFlagLate) != 0);
}

TEST_CASE("reorder: a child that ends with its parent comes first") {
  ReorderBuffer buffer({.window_ns = 0, .max_pending = 100}, nullptr);
  const Event parent = test::Span(100, 50, 1);
  const Event child = test::Span(120, 30, 2);
  const Event earlier = test::Span(90, 10, 3);
  const Event batch[] = {parent, child, earlier};  // a producer that wrote out of order.
  buffer.Push(0, batch);
  std::vector<Event> out, late;
  Append(buffer.Release(1'000), &out, &late);
  REQUIRE(out.size() == 3);
  CHECK(out[0].name == 3);
  CHECK(out[1].name == 2);
  CHECK(out[2].name == 1);
  CHECK(buffer.watermark() == 1'000);
}

TEST_CASE("reorder: sources are merged, events younger than the window wait") {
  ReorderBuffer buffer({.window_ns = 100, .max_pending = 100}, nullptr);
  const Event a[] = {test::Instant(10), test::Instant(30), test::Instant(250)};
  const Event b[] = {test::Instant(20), test::Instant(40)};
  buffer.Push(1, a);
  buffer.Push(2, b);
  std::vector<Event> out, late;
  Append(buffer.Release(200), &out, &late);  // cutoff 100.
  REQUIRE(out.size() == 4);
  CHECK(out[0].ts == 10);
  CHECK(out[1].ts == 20);
  CHECK(out[2].ts == 30);
  CHECK(out[3].ts == 40);
  CHECK(buffer.pending() == 1);
  CHECK(buffer.watermark() == 100);
  Append(buffer.Flush(), &out, &late);
  CHECK(out.back().ts == 250);
  CHECK(buffer.watermark() == 250);
}

TEST_CASE("reorder: over max_pending the oldest go early, counted") {
  Diagnostics diag;
  ReorderBuffer buffer({.window_ns = 1'000'000, .max_pending = 10}, &diag);
  std::vector<Event> in;
  for (uint64_t i = 1; i <= 100; ++i) in.push_back(test::Instant(1'000 + i));
  buffer.Push(0, in);
  std::vector<Event> out, late;
  Append(buffer.Release(2'000), &out, &late);  // cutoff 0: nothing is old enough.
  CHECK(out.size() == 90);
  CHECK(buffer.pending() == 10);
  CHECK(diag.Get(Diag::reorder_forced_release) == 90);
  CHECK(out.back().ts == 1'090);
  CHECK(buffer.watermark() == 1'090);
  // An event behind the moved watermark is late, not misplaced.
  const Event old = test::Instant(1'050);
  buffer.Push(0, std::span(&old, 1));
  CHECK(diag.Get(Diag::late_events) == 1);
}

TEST_CASE("reorder: sources that say how far they got release before the window closes") {
  constexpr uint64_t kMs = 1'000'000;
  Diagnostics diag;
  ReorderBuffer buffer({.window_ns = 250 * kMs}, &diag);
  constexpr uint64_t kNow = 1000 * kMs;
  const Event a = test::Span(kNow - 30 * kMs, kMs, 0, 1);  // ended 29 ms ago.
  const Event b = test::Span(kNow - 8 * kMs, kMs, 0, 2);   // ended 7 ms ago.
  buffer.Push(1, std::span<const Event>(&a, 1));
  buffer.Push(2, std::span<const Event>(&b, 1));

  // Source 2 cannot say: the window holds both back.
  buffer.SetProgress(1, kNow - 5 * kMs);
  ReorderBuffer::Released r = buffer.Release(kNow);
  CHECK(r.events.empty());
  CHECK(buffer.watermark() == kNow - 250 * kMs);
  CHECK(buffer.progress() == 0);

  // Both say: everything up to the lesser progress goes, and no further.
  buffer.SetProgress(2, kNow - 10 * kMs);
  r = buffer.Release(kNow);
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].track == 1);
  CHECK(buffer.watermark() == kNow - 10 * kMs);
  CHECK(buffer.progress() == kNow - 10 * kMs);

  // Progress never moves back, and the cutoff never passes now.
  buffer.SetProgress(2, kNow - 100 * kMs);
  buffer.SetProgress(1, kNow + 50 * kMs);
  buffer.SetProgress(2, kNow + 50 * kMs);
  r = buffer.Release(kNow);
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].track == 2);
  CHECK(buffer.watermark() == kNow);
  CHECK(buffer.progress() == kNow);

  // A closed source does not hold the others back; one that says nothing does.
  buffer.CloseSource(2);
  buffer.SetProgress(1, kNow + 60 * kMs);
  buffer.Release(kNow + 70 * kMs);
  CHECK(buffer.watermark() == kNow + 60 * kMs);
  CHECK(buffer.progress() == kNow + 60 * kMs);
  buffer.SetProgress(3, 0);
  buffer.Release(kNow + 80 * kMs);
  CHECK(buffer.watermark() == kNow + 60 * kMs);  // the window's cutoff is older.
  CHECK(buffer.progress() == 0);
  CHECK(diag.Get(Diag::late_events) == 0);
}

TEST_CASE("reorder: a source that says it is behind is waited for, up to declared_max_wait") {
  // CUPTI's case: a host source is up to date, the GPU source's buffers come
  // a second late and it says so; its events must not come late.
  constexpr uint64_t kMs = 1'000'000;
  Diagnostics diag;
  ReorderBuffer buffer({.window_ns = 250 * kMs, .declared_max_wait_ns = 3000 * kMs}, &diag);
  constexpr uint64_t kNow = 10'000 * kMs;
  const Event host = test::Span(kNow - 1200 * kMs, kMs, 0, 1);
  buffer.Push(1, std::span<const Event>(&host, 1));
  buffer.SetProgress(1, kNow - 1 * kMs);
  buffer.SetProgress(2, kNow - 1500 * kMs);  // delivered up to 1.5 s ago.
  ReorderBuffer::Released r = buffer.Release(kNow);
  CHECK(r.events.empty());  // the host span ended after what source 2 delivered.
  CHECK(buffer.watermark() == kNow - 1500 * kMs);

  // Source 2's buffer comes: a kernel that ended before the host span, 1.3 s
  // ago, is put in order, not late.
  const Event kernel = test::Span(kNow - 1400 * kMs, 100 * kMs, 0, 2);
  buffer.Push(2, std::span<const Event>(&kernel, 1));
  buffer.SetProgress(2, kNow - 100 * kMs);
  r = buffer.Release(kNow);
  REQUIRE(r.events.size() == 2);
  CHECK(r.events[0].track == 2);  // the kernel ended 1,300 ms ago,
  CHECK(r.events[1].track == 1);  // the host span 1,199 ms ago.
  CHECK(r.late.empty());
  CHECK(buffer.watermark() == kNow - 100 * kMs);

  // A source that stays behind holds the others back only declared_max_wait.
  const Event later = test::Span(kNow + 100 * kMs, kMs, 0, 3);
  buffer.Push(1, std::span<const Event>(&later, 1));
  buffer.SetProgress(1, kNow + 5000 * kMs);
  r = buffer.Release(kNow + 5000 * kMs);
  REQUIRE(r.events.size() == 1);
  CHECK(buffer.watermark() == kNow + 2000 * kMs);  // now - 3 s; source 2 said now - 5.1 s.
  CHECK(buffer.progress() == kNow - 100 * kMs);
  CHECK(diag.Get(Diag::late_events) == 0);
}

TEST_CASE("reorder: a backlog goes out in slices of max_release, in order, none late") {
  Diagnostics diag;
  ReorderBuffer buffer({.window_ns = 1000, .max_pending = 1 << 20, .max_release = 100}, &diag);
  std::vector<Event> a, b;
  for (uint64_t i = 0; i < 500; ++i) {
    a.push_back(test::Span(10 * i, 5, 0, 1));      // ends 5, 15, 25...
    b.push_back(test::Span(10 * i + 2, 5, 0, 2));  // ends 7, 17, 27...
  }
  buffer.Push(1, a);
  buffer.Push(2, b);
  std::vector<Event> out;
  int releases = 0;
  for (bool more = true; more; ++releases) {
    const ReorderBuffer::Released r = buffer.Release(1'000'000);
    CHECK(r.events.size() <= 100);
    out.insert(out.end(), r.events.begin(), r.events.end());
    if (!r.events.empty()) CHECK(buffer.watermark() >= r.events.back().end());
    more = buffer.has_backlog();
  }
  CHECK(releases == 10);
  REQUIRE(out.size() == 1000);
  CHECK(std::is_sorted(out.begin(), out.end(), CompletionOrderLess));
  CHECK(diag.Get(Diag::late_events) == 0);
  // Ties at the cap go together rather than never.
  ReorderBuffer ties({.window_ns = 1000, .max_pending = 1 << 20, .max_release = 10}, &diag);
  std::vector<Event> same(50, test::Span(100, 5, 0, 1));
  ties.Push(1, same);
  CHECK(ties.Release(1'000'000).events.size() == 50);
}

TEST_CASE("reorder: many sources merge in one pass into completion order, ties by source") {
  // Six sources, each sorted, with ends that collide across sources (and
  // equal events): the release equals a stable sort of the sources' events
  // taken source after source (the order their queues opened).
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint64_t> gap(0, 3), dur(0, 2);
  ReorderBuffer buffer({.window_ns = 1000}, nullptr);
  std::vector<Event> all;
  for (uint32_t s = 0; s < 6; ++s) {
    std::vector<Event> in;
    uint64_t end = 100;
    for (uint32_t i = 0; i < 400 + 50 * s; ++i) {
      end += gap(rng);
      const uint64_t d = std::min<uint64_t>(dur(rng), end);
      in.push_back(test::Span(end - d, d, 0, s));
      in.back().corr = s * 10'000 + i;
    }
    std::stable_sort(in.begin(), in.end(), CompletionOrderLess);
    buffer.Push(s, in);
    all.insert(all.end(), in.begin(), in.end());
  }
  std::stable_sort(all.begin(), all.end(), CompletionOrderLess);
  const ReorderBuffer::Released r = buffer.Release(1'000'000);
  REQUIRE(r.events.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if (r.events[i].corr != all[i].corr) FAIL("at " << i << ": " << r.events[i].corr << " for " << all[i].corr);
  }
  CHECK(buffer.pending() == 0);
}

}  // namespace liveprof::reorder_buffer_test
