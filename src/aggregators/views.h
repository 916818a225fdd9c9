// The table of views. A view is declared once, in LIVEPROF_VIEWS below; the
// rest derives from it: `View` and RenderedViews' strings (analyses.h), the
// WebSocket topics (web/protocol.h), the REST routes and the /api listing
// (web/rest.cc). Adding a view: a row here, its snapshot in
// Analyses::Render, its page in static/panels/.
#ifndef LIVEPROF_AGGREGATORS_VIEWS_H_
#define LIVEPROF_AGGREGATORS_VIEWS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace liveprof {

// X(name, Id, csv, steps_window, time_window, idle, feed)
//   name          the view model's "type", its topic and /api/<name>
//   Id            its `View` enumerator
//   csv           what ?format=csv gives ("": the view has no table)
//   steps_window  ?last=N (steps) applies: a view over a window of steps
//   time_window   ?last_s=T applies: steps and tables over the last T seconds
//   idle          ?include_idle=true|false applies
//   feed          published live (a WebSocket topic and a REST route); the
//                 PyTorch breakdown is rendered on request only (`liveprof
//                 analyze`, RenderOptions::pytorch)
#define LIVEPROF_VIEWS(X)                                                                  \
  X(overview, kOverview, "", true, true, false, true)                                     \
  X(steps, kSteps, "", true, true, false, true)                                           \
  X(input_pipeline, kInputPipeline, "the input ops table", true, true, false, true)       \
  X(tf_stats, kTfStats, "the TF stats table", false, true, true, true)                    \
  X(kernel_stats, kKernelStats, "the kernel stats table", false, true, false, true)       \
  X(memory, kMemory, "one summary row per allocator", false, true, false, true)           \
  X(alerts, kAlerts, "", false, false, false, true)                                       \
  X(status, kStatus, "", false, false, false, true)                                       \
  X(pod, kPod, "", false, false, false, true)                                             \
  X(modules, kModules, "", false, false, false, true)                                     \
  X(annotations, kAnnotations, "", false, false, false, true)                             \
  X(pytorch, kPytorch, "", false, false, false, false)

enum class View : uint8_t {
#define LIVEPROF_VIEW_ENUMERATOR(name, id, ...) id,
  LIVEPROF_VIEWS(LIVEPROF_VIEW_ENUMERATOR)
#undef LIVEPROF_VIEW_ENUMERATOR
};

struct ViewInfo {
  View view;
  std::string_view name;       // "kernel_stats"
  std::string_view rest_path;  // "/api/kernel_stats"
  std::string_view csv;        // what ?format=csv gives, or "".
  bool steps_window;
  bool time_window;
  bool idle;
  bool feed;
};

inline constexpr ViewInfo kViews[] = {
#define LIVEPROF_VIEW_INFO(name, id, csv, steps_window, time_window, idle, feed) \
  {View::id, #name, "/api/" #name, csv, steps_window, time_window, idle, feed},
    LIVEPROF_VIEWS(LIVEPROF_VIEW_INFO)
#undef LIVEPROF_VIEW_INFO
};
inline constexpr size_t kViewCount = std::size(kViews);

constexpr const ViewInfo& GetViewInfo(View view) { return kViews[static_cast<size_t>(view)]; }
constexpr std::string_view ViewName(View view) { return GetViewInfo(view).name; }

// The rows are in enumerator order (GetViewInfo indexes by value).
static_assert([] {
  for (size_t i = 0; i < kViewCount; ++i) {
    if (static_cast<size_t>(kViews[i].view) != i) return false;
  }
  return true;
}());

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_VIEWS_H_
