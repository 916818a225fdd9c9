// GpuHandoffs: for which spans each process's GPU data came from another
// CUPTI client than liveprof (torch.profiler's Kineto run by the program
// itself: docs/attach.md, "A script that profiles itself"). A process's GPU
// tracer (CuptiSource) steps aside while the other client traces and says
// each handoff with an instant on its "GPU tracer (liveprof)" track; this
// reads those instants, per process, into windows: "GPU data: torch.profiler
// from t0 to t1", for /api/status (gpu_handoffs) and the Sources page.
//
// Pure: Consume() and reads, no I/O, no lock. Pipeline thread only.
#ifndef LIVEPROF_AGGREGATORS_GPU_HANDOFFS_H_
#define LIVEPROF_AGGREGATORS_GPU_HANDOFFS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "stream/event.h"

namespace liveprof {

class GpuHandoffs {
 public:
  // The instants' names (producers/cupti_source.h writes them; a test
  // checks the two agree).
  static constexpr std::string_view kTo = "GPU data: to ";  // + the other client.
  static constexpr std::string_view kBack = "GPU data: back to liveprof";
  static constexpr std::string_view kNotRegained = "GPU data: not regained: ";  // + why.
  static constexpr std::string_view kFinalized = "GPU data: lost to a cuptiFinalize by another client";
  static constexpr size_t kMaxWindows = 64;  // the newest kept (windows_total() counts all).

  // One span of a process's time whose GPU data went to another client.
  struct Window {
    uint32_t process = 0;  // the catalog's (0: this server's own process).
    std::string client;    // "torch.profiler"; "another CUPTI client" after a finalize.
    uint64_t from_ns = 0;  // liveprof's kinds off (host ns).
    uint64_t to_ns = 0;    // on again; 0 while the other client still has it.
    std::string note;      // "not regained: <why>", "after a cuptiFinalize" ("" mostly).
  };

  explicit GpuHandoffs(const Catalog* catalog) : catalog_(catalog) {}

  void Consume(std::span<const Event> events);

  // Oldest first.
  const std::vector<Window>& windows() const { return windows_; }
  uint64_t windows_total() const { return windows_total_; }
  // The earliest event time seen, of any kind (the run's start, as the trace
  // viewer's axis begins); 0 before the first.
  uint64_t first_ns() const { return first_ns_; }

  // [{"worker", "label", "client", "from_ns", "to_ns", "from_s", "to_s",
  // "note"}]: from_s / to_s are seconds since first_ns() (to_s null while
  // open).
  void WriteJson(JsonWriter& w) const;

 private:
  Window* Open(uint32_t process);

  const Catalog* catalog_;
  std::vector<Window> windows_;
  uint64_t windows_total_ = 0;
  uint64_t first_ns_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_GPU_HANDOFFS_H_
