// WorkerFilter: which worker the views follow. With several workers (ingest
// sources, simulated ranks) every view but the pod follows one, as TF's
// tools show one host at a time; the pod view compares them all. The one
// followed is the worker of the first step marker (final), and before one
// the worker of the first event of a process (a DataLoader worker's first
// fetch: the process it serves). With one process everything passes.
//
// Pure: no I/O, no locks, no threads. Pipeline thread.
#ifndef LIVEPROF_AGGREGATORS_WORKER_FILTER_H_
#define LIVEPROF_AGGREGATORS_WORKER_FILTER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "aggregators/catalog.h"
#include "stream/event.h"

namespace liveprof {

class WorkerFilter {
 public:
  static constexpr uint32_t kNoProcess = Catalog::kNoProcess;

  // `catalog` must outlive this object.
  explicit WorkerFilter(const Catalog* catalog) : catalog_(catalog) {}

  // `part` without the other workers' events (`part` itself with one
  // process; else a span into this object, valid until the next call). The
  // events of the processes that serve the followed worker (its DataLoader
  // workers, Catalog::ServedProcess) go to helpers(), for the input
  // pipeline's tables only.
  std::span<const Event> Filter(std::span<const Event> part);
  // The last Filter()'s helper events.
  std::span<const Event> helpers() const { return helpers_; }
  // The process followed; kNoProcess before one is chosen.
  uint32_t process() const { return process_; }

 private:
  const Catalog* catalog_;
  uint32_t process_ = kNoProcess;
  bool by_step_ = false;           // chosen by a step marker (final), not by a first event.
  std::vector<Event> helpers_;     // the events of the processes serving it.
  std::vector<Event> one_worker_;  // Filter()'s output with several processes.
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_WORKER_FILTER_H_
