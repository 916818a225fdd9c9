#include "aggregators/worker_filter.h"

namespace liveprof {

std::span<const Event> WorkerFilter::Filter(std::span<const Event> part) {
  helpers_.clear();
  if (!catalog_->multi_process()) return part;  // one process: all of it (the common case).
  if (!by_step_) {
    for (const Event& e : part) {
      if (e.kind == EventKind::kStepMarker) {
        process_ = catalog_->Track(e.track).process;
        by_step_ = true;
        break;
      }
      if (process_ == kNoProcess && e.track != 0) {
        // (A helper's event, a loader's first fetch: the process it serves.)
        const uint32_t process = catalog_->Track(e.track).process;
        const uint32_t served = catalog_->ServedProcess(process);
        process_ = served != Catalog::kNoProcess ? served : process;
      }
    }
  }
  one_worker_.clear();
  for (const Event& e : part) {
    const uint32_t process = catalog_->Track(e.track).process;
    if (e.track == 0 || process == process_) {
      one_worker_.push_back(e);
    } else if (process_ != kNoProcess && catalog_->ServedProcess(process) == process_) {
      helpers_.push_back(e);
    }
  }
  return one_worker_;
}

}  // namespace liveprof
