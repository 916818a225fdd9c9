// ModuleStats: the module table from liveprof run's level-3 spans and
// counters, by hand: calls, forward total and self (less child modules on
// the same thread), backward, memory last and max; other names ignored;
// the cap counted.
#include "aggregators/module_stats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "doctest/doctest.h"
#include "event_builder.h"

namespace liveprof {
namespace {

enum : NameId {
  kNet = 1, kFc1, kFc2, kFc1Backward, kFc1Memory, kFc2Memory, kOther, kBareBackward, kNameCount
};

Catalog MakeCatalog() {
  Catalog c;
  const char* names[] = {"", "nn.Module: Net", "nn.Module: Net.fc1 (Linear)", "nn.Module: Net.fc2 (Linear)",
                         "nn.Module: Net.fc1 (Linear).backward", "nn.Module memory: Net.fc1 (Linear)",
                         "nn.Module memory: Net.fc2 (Linear)", "a user scope", "nn.Module: .backward"};
  for (NameId i = 0; i < kNameCount; ++i) c.DefineName(i, names[i]);
  return c;
}

Event Counter(uint64_t ts, NameId name, double value) {
  Event e = test::Instant(ts, name, 9);
  e.kind = EventKind::kCounter;
  e.payload.counter.value = value;
  return e;
}

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
  REQUIRE(s.rows.size() == 3);  // Net, fc1, fc2: no user scope, no empty label.
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

TEST_CASE("module stats: names defined later are looked at then; modules past the cap are counted") {
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

}  // namespace
}  // namespace liveprof
