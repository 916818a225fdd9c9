// The table of views (aggregators/views.h) drives what is rendered, and
// docs/protocol.md documents what is rendered: every view of the table is
// rendered (those delivered on request when asked), a view whose row names a
// table has its CSV and the others none, and each view's example in
// docs/protocol.md has exactly the keys of the view's JSON, both ways.
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "aggregators/analyses.h"
#include "doctest/doctest.h"
#include "simulated_run.h"
#include "web/protocol.h"

namespace liveprof::views_table_test {
namespace {

using nlohmann::json;

// The simulated input-bound workload of docs/protocol.md's examples: six
// steps, through every analysis (the PyTorch view's buffer on).
RenderedViews RenderSimulated(const RenderOptions& ro) {
  NameTable names;
  const test::SimulatedRun run = test::MakeSimulatedRun(Scenario::kInputBound, 6, &names, 1);
  Diagnostics diag;
  AnalysesOptions o;
  o.pytorch_view = true;
  Analyses a(o, &diag);
  const uint64_t end = run.events.back().end();
  a.Consume(run.definitions, run.events, {}, end, end);
  a.Flush(end);
  return a.Render(ro);
}

TEST_CASE("views table: every view is rendered, a table's CSV where its row names one") {
  RenderOptions ro;
  ro.csv = true;
  const RenderedViews published = RenderSimulated(ro);
  ro.on_request = true;
  const RenderedViews asked = RenderSimulated(ro);
  for (const ViewInfo& v : kViews) {
    CAPTURE(v.name);
    // On request only where the table says so.
    CHECK(published.json(v.view).empty() == v.on_request());
    const json j = json::parse(asked.json(v.view));
    CHECK(j["type"] == std::string(v.name));
    CHECK(j["v"] == kViewProtocolVersion);
    CHECK(j.size() > 3);  // more than its head.
    if (v.csv.empty()) {
      CHECK(asked.csv(v.view).empty());
    } else {
      const std::string& csv = asked.csv(v.view);
      REQUIRE(!csv.empty());
      CHECK(csv.find('\n') != std::string::npos);  // a header line at least.
      CHECK(published.csv(v.view) == csv);
    }
  }
}

// The key paths of a JSON value: "a", "a.b", "rows[].name"; arrays by the
// union of their elements' keys. Maps keyed by data (names, ids) are paths
// ending in "{}", their keys not listed.
void KeyPaths(const json& j, const std::string& at, std::set<std::string>* out) {
  static const std::set<std::string> kMaps = {
      // keyed by data: diagnostics and counts by name, kinds by value.
      "diagnostics", "by_kind", "events_by_kind", "kinds", "counts",
  };
  if (j.is_object()) {
    const std::string name = at.substr(at.find_last_of('.') + 1);
    if (kMaps.contains(name)) {
      out->insert(at + "{}");
      return;
    }
    for (const auto& [key, value] : j.items()) {
      const std::string path = at.empty() ? key : at + "." + key;
      out->insert(path);
      KeyPaths(value, path, out);
    }
  } else if (j.is_array()) {
    for (const json& e : j) KeyPaths(e, at + "[]", out);
  }
}

// The first ```json block after the heading of view `name` in protocol.md.
std::string DocumentedExample(const std::string& doc, std::string_view name) {
  for (const std::string& heading : {"#### `" + std::string(name) + "`", "### `" + std::string(name) + "`"}) {
    const size_t at = doc.find(heading + "\n");
    if (at == std::string::npos) continue;
    const size_t open = doc.find("```json\n", at);
    const size_t next = doc.find("\n#", at + heading.size());
    if (open == std::string::npos || (next != std::string::npos && open > next)) return "";
    const size_t body = open + 8;
    return doc.substr(body, doc.find("\n```", body) - body);
  }
  return "";
}

TEST_CASE("views table: docs/protocol.md's example of each feed view has the view's keys, both ways") {
  std::ifstream in(std::string(LIVEPROF_SOURCE_DIR) + "/docs/protocol.md");
  REQUIRE(in.good());
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RenderOptions ro;
  ro.steps = WindowSel{.last_steps = 2};
  const RenderedViews v = RenderSimulated(ro);
  for (const ViewInfo& info : kViews) {
    if (!info.feed()) continue;  // (the PyTorch view: described in prose, rendered on request)
    CAPTURE(info.name);
    const std::string example = DocumentedExample(doc, info.name);
    REQUIRE_MESSAGE(!example.empty(), "docs/protocol.md has no example of the view");
    json documented;
    REQUIRE_NOTHROW(documented = json::parse(example));
    const json rendered = json::parse(v.json(info.view));
    std::set<std::string> doc_keys, view_keys;
    KeyPaths(documented, "", &doc_keys);
    KeyPaths(rendered, "", &view_keys);
    // Inside an array the example leaves empty or the simulated run leaves
    // empty, or a value one side has null (one worker: no straggler), the
    // other side's keys cannot be checked: left out of both.
    auto empty_arrays = [](const json& j) {
      std::set<std::string> out;
      std::function<void(const json&, const std::string&)> walk = [&](const json& x, const std::string& at) {
        if (x.is_null()) {
          out.insert(at);
        } else if (x.is_object()) {
          for (const auto& [k, e] : x.items()) walk(e, at.empty() ? k : at + "." + k);
        } else if (x.is_array()) {
          if (x.empty()) out.insert(at + "[]");
          for (const json& e : x) walk(e, at + "[]");
        }
      };
      walk(j, "");
      return out;
    };
    std::set<std::string> unknowable = empty_arrays(documented);
    for (const std::string& p : empty_arrays(rendered)) unknowable.insert(p);
    auto knowable = [&](const std::string& path) {
      for (const std::string& u : unknowable) {
        if (path.starts_with(u + ".") || path.starts_with(u + "[]")) return false;
      }
      return true;
    };
    std::ostringstream undocumented, absent;
    for (const std::string& k : view_keys) {
      if (knowable(k) && !doc_keys.contains(k)) undocumented << " " << k;
    }
    for (const std::string& k : doc_keys) {
      if (knowable(k) && !view_keys.contains(k)) absent << " " << k;
    }
    CHECK_MESSAGE(undocumented.str().empty(), "rendered but not in docs/protocol.md:" << undocumented.str());
    CHECK_MESSAGE(absent.str().empty(), "in docs/protocol.md but not rendered:" << absent.str());
  }
}

}  // namespace
}  // namespace liveprof::views_table_test
