#include "import/trace_analysis.h"

#include <algorithm>
#include <unordered_map>

#include "aggregators/steps/span_type.h"
#include "stream/diagnostics.h"
#include "stream/reorder_buffer.h"

namespace liveprof {

bool ImportWhole(TraceFileImporter& importer, const std::string& path, std::vector<Event>* definitions,
                 std::vector<Event>* events, ImportReport* report, std::string* error, ProgressLine* progress) {
  const bool ok = importer.ImportFile(
      path,
      [&](std::span<const Event> defs, std::span<const Event> batch) {
        definitions->insert(definitions->end(), defs.begin(), defs.end());
        events->insert(events->end(), batch.begin(), batch.end());
      },
      report, error,
      progress ? ImportProgressFn([progress](const ImportProgress& p) { progress->Update(p); }) : ImportProgressFn());
  if (!ok && progress) progress->Clear();
  // Kineto's timestamps count from baseTimeNanoseconds (written after the
  // events): with it, the events are on the wall clock, as other ranks' are.
  if (ok && report->has_base_time && report->base_time_ns > 0) {
    const auto base = static_cast<uint64_t>(report->base_time_ns);
    for (Event& e : *events) {
      if (e.kind != EventKind::kDeviceInfo) e.ts += base;  // (ts 0: no time)
    }
  }
  return ok;
}

bool AnalyzeTrace(const std::string& path, const AnalysesOptions& options, const RenderOptions& render,
                  TraceAnalysis* out, std::string* error, ProgressLine* progress) {
  TraceFileImporter importer;
  std::vector<Event> definitions;
  std::vector<Event> events;
  if (!ImportWhole(importer, path, &definitions, &events, &out->report, error, progress)) return false;
  if (progress) progress->Say("sorting and analysing " + std::to_string(events.size()) + " events");
  std::stable_sort(events.begin(), events.end(), CompletionOrderLess);

  Diagnostics diag;
  Analyses analyses(options, &diag);
  analyses.Consume(definitions, {}, {}, 0, 0);
  constexpr size_t kSlice = size_t{1} << 16;
  for (size_t i = 0; i < events.size(); i += kSlice) {
    const std::span<const Event> slice(events.data() + i, std::min(kSlice, events.size() - i));
    analyses.Consume({}, slice, {}, slice.back().end(), slice.back().end());
  }
  if (!events.empty()) {
    out->first_ns = ~uint64_t{0};
    for (const Event& e : events) {
      if (e.kind != EventKind::kDeviceInfo) out->first_ns = std::min(out->first_ns, e.ts);  // (ts 0)
    }
    out->last_ns = events.back().end();
    if (out->first_ns > out->last_ns) out->first_ns = out->last_ns;
  }
  analyses.Flush(out->last_ns);
  // The whole trace's GPU timeline per GPU: kernels and memsets (collectives
  // by name, as the step breakdown tells them), copies.
  std::map<uint8_t, std::vector<GpuInterval>> by_device;
  std::unordered_map<NameId, bool> collective;  // by kernel name, classified once.
  auto is_collective = [&](NameId name) {
    auto it = collective.find(name);
    if (it == collective.end()) {
      it = collective.emplace(name, (ClassifyName(analyses.catalog().Name(name)) & kNameCollective) != 0).first;
    }
    return it->second;
  };
  for (const Event& e : events) {
    if (!IsDeviceKind(e.kind) || e.dur > kMaxEventDurationNs) continue;
    const GpuWork work = IsMemcpyKind(e.kind)    ? GpuWork::kMemcpy
                         : is_collective(e.name) ? GpuWork::kCommunication
                                                 : GpuWork::kCompute;
    by_device[e.device].push_back({e.ts, e.end(), work});
  }
  GpuTimelineScratch scratch;
  for (auto& [device, intervals] : by_device) {
    uint64_t first = ~uint64_t{0}, last = 0;
    for (const GpuInterval& g : intervals) first = std::min(first, g.begin), last = std::max(last, g.end);
    out->gpu_timelines[device] = ComputeGpuTimeline(&intervals, first, last, &scratch);
  }
  out->events = events.size();
  out->views = analyses.Render(render);
  out->devices = analyses.utilization().Snapshot(0);
  if (progress) progress->Clear();
  return true;
}

}  // namespace liveprof
