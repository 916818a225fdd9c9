// The table of views. A view is declared once, in LIVEPROF_VIEWS below; the
// rest derives from it: `View` and RenderedViews' strings (analyses.h), which
// views Analyses::Render renders and which of them with a CSV, the WebSocket
// topics (web/protocol.h), the REST routes, what is rendered on request and
// the /api listing (web/rest.cc), the feed's hello (`views`: each view's
// window flags, CSV and delivery, which the dashboard reads), and the tests'
// lists. Adding a view: its aggregator, a row here, its snapshot in
// Analyses::Render (one `put`), its page in static/panels/, its section in
// docs/protocol.md (a test checks the keys both ways), its tests
// (docs/architecture.md, "Adding a view").
#ifndef LIVEPROF_AGGREGATORS_VIEWS_H_
#define LIVEPROF_AGGREGATORS_VIEWS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace liveprof {

// X(name, Id, csv, steps_window, time_window, idle, delivery)
//   name          the view model's "type", its topic and /api/<name>
//   Id            its `View` enumerator
//   csv           what ?format=csv gives ("": the view has no table)
//   steps_window  ?last=N (steps) applies: a view over a window of steps
//   time_window   ?last_s=T applies: steps and tables over the last T seconds
//   idle          ?include_idle=true|false applies
//   delivery      kFeed: rendered at every publication, a WebSocket topic and
//                 /api/<name>; kOnRequest: rendered for each /api/<name>
//                 request only (RenderOptions::on_request), never on the
//                 feed: the PyTorch breakdown, a batch recompute
#define LIVEPROF_VIEWS(X)                                                            \
  X(overview, kOverview, "", true, true, false, kFeed)                               \
  X(steps, kSteps, "", true, true, false, kFeed)                                     \
  X(input_pipeline, kInputPipeline, "the input ops table", true, true, false, kFeed) \
  X(tf_stats, kTfStats, "the TF stats table", false, true, true, kFeed)              \
  X(kernel_stats, kKernelStats, "the kernel stats table", false, true, false, kFeed) \
  X(memory, kMemory, "one summary row per allocator", false, true, false, kFeed)     \
  X(alerts, kAlerts, "", false, false, false, kFeed)                                 \
  X(status, kStatus, "", false, false, false, kFeed)                                 \
  X(pod, kPod, "", false, false, false, kFeed)                                       \
  X(modules, kModules, "", false, false, false, kFeed)                               \
  X(annotations, kAnnotations, "", false, false, false, kFeed)                       \
  X(pytorch, kPytorch, "", false, false, false, kOnRequest)

enum class Delivery : uint8_t { kFeed, kOnRequest };

// The JSON view models' protocol version ("v"). Bump on a breaking change.
inline constexpr int kViewProtocolVersion = 1;

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
  Delivery delivery;
  constexpr bool feed() const { return delivery == Delivery::kFeed; }
  constexpr bool on_request() const { return delivery == Delivery::kOnRequest; }
};

inline constexpr ViewInfo kViews[] = {
#define LIVEPROF_VIEW_INFO(name, id, csv, steps_window, time_window, idle, delivery) \
  {View::id, #name, "/api/" #name, csv, steps_window, time_window, idle, Delivery::delivery},
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
