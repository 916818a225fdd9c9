// `n` steps of the simulated GPU model in one scenario, as the pipeline would
// deliver them: the GPU's kDeviceInfo and every event in completion order,
// plus a kNameDef for every name in `names`. Shared by the tests that feed
// the simulated workload to the analyses.
#ifndef LIVEPROF_TESTS_SIMULATED_RUN_H_
#define LIVEPROF_TESTS_SIMULATED_RUN_H_

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "producers/simulated_model.h"
#include "stream/reorder_buffer.h"

namespace liveprof::test {

struct SimulatedRun {
  std::vector<Event> definitions;
  std::vector<Event> events;  // completion order.
  std::vector<SimulatedStep> steps;
};

inline SimulatedRun MakeSimulatedRun(Scenario scenario, uint32_t n, NameTable* names, uint64_t seed) {
  SimulatedModelOptions o;
  o.seed = seed;
  o.schedule = {{scenario, 1}};
  SimulatedModel model(o, names);
  SimulatedRun r;
  uint64_t start = 1'000'000'000;
  r.events.push_back(model.DeviceInfo(start));
  for (uint32_t i = 0; i < n; ++i) {
    r.steps.push_back(model.Next(start));
    start = r.steps.back().end_ns;
    r.events.insert(r.events.end(), r.steps.back().host.begin(), r.steps.back().host.end());
    r.events.insert(r.events.end(), r.steps.back().device.begin(), r.steps.back().device.end());
  }
  std::stable_sort(r.events.begin(), r.events.end(), CompletionOrderLess);
  for (NameId id = 1; id < names->size(); ++id) {
    Event d;
    d.kind = EventKind::kNameDef;
    d.name = id;
    const std::string_view s = names->Get(id);
    d.payload.name_def.data = s.data();
    d.payload.name_def.size = s.size();
    r.definitions.push_back(d);
  }
  return r;
}

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_SIMULATED_RUN_H_
