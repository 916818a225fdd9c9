// ModuleStats: the module table from liveprof run's level-3 spans and
// counters, by hand: calls, forward total and self (less child modules on
// the same thread), backward, memory last and max; other names ignored;
// the cap counted.
#include "aggregators/pytorch/module_stats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "doctest/doctest.h"
#include "event_builder.h"
#include "stream/reorder_buffer.h"

namespace liveprof::module_stats_test {
namespace {

enum : NameId { kNet = 1, kFc1, kFc2, kFc1Backward, kFc1Memory, kFc2Memory, kOther, kBareBackward, kNameCount };

Catalog MakeCatalog() {
  Catalog c;
  const char* names[] = {"",
                         "nn.Module: Net",
                         "nn.Module: Net.fc1 (Linear)",
                         "nn.Module: Net.fc2 (Linear)",
                         "nn.Module: Net.fc1 (Linear).backward",
                         "nn.Module memory: Net.fc1 (Linear)",
                         "nn.Module memory: Net.fc2 (Linear)",
                         "a user scope",
                         "nn.Module: .backward"};
  for (NameId i = 0; i < kNameCount; ++i) c.DefineName(i, names[i]);
  return c;
}

Event Counter(uint64_t ts, NameId name, double value) { return test::Counter(ts, name, value, 9); }

const ModuleRow* Row(const ModuleStatsSnapshot& s, std::string_view name) {
  const auto it = std::find_if(s.rows.begin(), s.rows.end(), [&](const ModuleRow& r) { return r.name == name; });
  return it == s.rows.end() ? nullptr : &*it;
}

TEST_CASE("module stats: forward total and self, backward, memory, per module") {
  const Catalog c = MakeCatalog();
  ModuleStats m(&c);
  std::vector<Event> v;
  for (uint64_t i = 0; i < 2; ++i) {
    const uint64_t t = i * 1000;
    // Net [0,100) holds fc1 [10,40) and fc2 [50,90) on track 1; completion order.
    v.push_back(test::Span(t + 10, 30, kFc1, 1));
    v.push_back(Counter(t + 40, kFc1Memory, 4096.0 * (i + 1)));
    v.push_back(test::Span(t + 50, 40, kFc2, 1));
    v.push_back(test::Span(t, 100, kNet, 1));
    v.push_back(test::Span(t + 200, 25, kFc1Backward, 2));  // on the autograd thread.
    v.push_back(test::Span(t + 300, 5, kOther, 1));
    v.push_back(test::Span(t + 310, 5, kBareBackward, 1));
  }
  v.push_back(Counter(2000, kFc2Memory, std::nan("")));
  m.Consume(v);
  const ModuleStatsSnapshot s = m.Snapshot();
  REQUIRE(s.rows.size() == 3);     // Net, fc1, fc2: no user scope, no empty label.
  CHECK(s.rows[0].name == "Net");  // the most time first: 200 ns.
  const ModuleRow* net = Row(s, "Net");
  const ModuleRow* fc1 = Row(s, "Net.fc1 (Linear)");
  const ModuleRow* fc2 = Row(s, "Net.fc2 (Linear)");
  REQUIRE(net != nullptr);
  REQUIRE(fc1 != nullptr);
  REQUIRE(fc2 != nullptr);
  CHECK(net->calls == 2);
  CHECK(net->forward_ns == 200);
  CHECK(net->forward_self_ns == 60);  // 2 × (100 − 30 − 40)
  CHECK(net->backward_calls == 0);
  CHECK(fc1->forward_ns == 60);
  CHECK(fc1->forward_self_ns == 60);
  CHECK(fc1->backward_calls == 2);
  CHECK(fc1->backward_ns == 50);
  CHECK(fc1->memory_samples == 2);
  CHECK(fc1->memory_last_bytes == 8192);
  CHECK(fc1->memory_max_bytes == 8192);
  CHECK(fc2->memory_samples == 0);  // (its only sample was NaN)
  JsonWriter w;
  s.WriteJson(w);
  const auto j = nlohmann::json::parse(w.Take());
  CHECK(j["rows"].size() == 3);
  CHECK(j["rows"][0]["forward_self_ms"].get<double>() == doctest::Approx(60e-6));
  CHECK(j["rows"][2]["memory_bytes_last"].is_null());
}

TEST_CASE("module stats: names defined later are looked at then, modules past the cap counted") {
  Catalog c;
  ModuleStats m(&c, ModuleStats::Options{.max_modules = 1});
  m.Consume(std::vector<Event>{test::Span(0, 10, 1, 1)});  // name 1 not defined yet
  CHECK(m.Snapshot().rows.empty());
  c.DefineName(1, "nn.Module: A");
  c.DefineName(2, "nn.Module: B");
  m.Consume(std::vector<Event>{test::Span(20, 10, 1, 1), test::Span(40, 10, 2, 1), test::Span(60, 10, 2, 1)});
  const ModuleStatsSnapshot s = m.Snapshot();
  REQUIRE(s.rows.size() == 1);
  CHECK(s.rows[0].name == "A");
  CHECK(s.rows[0].calls == 1);
  CHECK(s.modules_over_cap == 2);
}

// A random model: per track, nested module calls (a module's children
// inside it, in order), forwards emitted in completion order; the expected
// totals and self times by brute force.
struct RandomRun {
  Catalog catalog;
  std::vector<Event> events;
  std::map<std::string, ModuleRow> expected;
};

void AddCalls(std::mt19937_64& rng, RandomRun& run, TrackId track, uint64_t begin, uint64_t end, int depth,
              std::vector<Event>* out) {
  std::uniform_int_distribution<int> pick(1, 6);
  uint64_t t = begin;
  while (t + 20 < end && depth < 4) {
    const uint64_t b = t + std::uniform_int_distribution<uint64_t>(0, 10)(rng);
    const uint64_t e = std::min(end, b + std::uniform_int_distribution<uint64_t>(10, (end - b) / 2 + 10)(rng));
    if (e <= b) break;
    const NameId name = static_cast<NameId>(pick(rng));
    std::vector<Event> children;  // its descendants (strictly inside it)
    AddCalls(rng, run, track, b + 1, e - 1, depth + 1, &children);
    uint64_t child_ns = 0;
    out->insert(out->end(), children.begin(), children.end());
    out->push_back(test::Span(b, e - b, name, track));
    ModuleRow& row = run.expected[std::string(run.catalog.Name(name)).substr(11)];
    ++row.calls;
    row.forward_ns += e - b;
    // Direct children: the descendants no other descendant contains.
    for (const Event& c : children) {
      bool direct = true;
      for (const Event& p : children) {
        if (&p != &c && p.ts <= c.ts && c.end() <= p.end() && p.dur > c.dur) direct = false;
      }
      if (direct) child_ns += c.dur;
    }
    row.forward_self_ns += (e - b) - child_ns;
    t = e;
  }
}

RandomRun MakeRandomRun(uint64_t seed) {
  RandomRun run;
  for (NameId i = 1; i <= 6; ++i) run.catalog.DefineName(i, "nn.Module: M" + std::to_string(i));
  std::mt19937_64 rng(seed);
  std::vector<std::vector<Event>> per_track(3);
  for (TrackId track = 1; track <= 3; ++track) {
    AddCalls(rng, run, track, 0, 100'000, 0, &per_track[track - 1]);
  }
  for (auto& v : per_track) run.events.insert(run.events.end(), v.begin(), v.end());
  std::stable_sort(run.events.begin(), run.events.end(), CompletionOrderLess);
  return run;
}

TEST_CASE("module stats: incremental equals batch equals a brute-force reference, on random nested calls") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    RandomRun run = MakeRandomRun(seed);
    REQUIRE(!run.expected.empty());
    ModuleStats batch(&run.catalog), chunked(&run.catalog);
    batch.Consume(run.events);
    std::mt19937_64 rng(seed * 7);
    for (size_t i = 0; i < run.events.size();) {
      const size_t n = std::min(run.events.size() - i, std::uniform_int_distribution<size_t>(1, 9)(rng));
      chunked.Consume(std::span<const Event>(run.events).subspan(i, n));
      i += n;
    }
    const ModuleStatsSnapshot a = batch.Snapshot(), b = chunked.Snapshot();
    REQUIRE(a.rows.size() == run.expected.size());
    REQUIRE(b.rows.size() == a.rows.size());
    for (size_t k = 0; k < a.rows.size(); ++k) {
      const ModuleRow& want = run.expected.at(a.rows[k].name);
      CAPTURE(a.rows[k].name);
      CHECK(a.rows[k].calls == want.calls);
      CHECK(a.rows[k].forward_ns == want.forward_ns);
      CHECK(a.rows[k].forward_self_ns == want.forward_self_ns);
      CHECK(b.rows[k].name == a.rows[k].name);
      CHECK(b.rows[k].forward_self_ns == a.rows[k].forward_self_ns);
    }
  }
}

TEST_CASE("module stats: a late forward counts in full and claims nothing") {
  const Catalog c = MakeCatalog();
  ModuleStats m(&c);
  // fc1 [10,40) and Net [0,100) in order, then a late fc2 [50,90): Net has
  // already claimed what it could (fc1), so its self time stays 70.
  m.Consume(std::vector<Event>{test::Span(10, 30, kFc1, 1), test::Span(0, 100, kNet, 1), test::Span(50, 40, kFc2, 1)});
  const ModuleStatsSnapshot s = m.Snapshot();
  CHECK(Row(s, "Net")->forward_self_ns == 70);
  CHECK(Row(s, "Net.fc2 (Linear)")->forward_ns == 40);
  CHECK(Row(s, "Net.fc2 (Linear)")->forward_self_ns == 40);
}

}  // namespace
}  // namespace liveprof::module_stats_test
