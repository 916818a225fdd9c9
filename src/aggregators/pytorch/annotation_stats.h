// AnnotationStats: the user annotations view, as Holistic Trace Analysis
// attributes GPU kernels to annotations: for every annotation name
// (record_function ranges, Kineto's user_annotation, LIVEPROF_SCOPE, NVTX
// ranges: kHostSpan), how often it ran, its host time, and the GPU time of
// the kernels launched while it was the innermost annotation on the
// launching thread (launch and kernel joined by correlation id). Every
// ProfilerStep#N is one row, "ProfilerStep#*": what the steps launched
// outside any other annotation.
//
// Streaming: events come in completion order, so an annotation arrives
// after the launch calls inside it, and an inner one before its parent.
// Each thread keeps its launches no annotation has claimed yet (in time
// order); an arriving annotation [b, e) claims those that began at or after
// b (all inside it: a launch beginning at or after e would end after it,
// and so arrive after it), which makes the innermost annotation the
// claimant. A kernel adds its time to the row of its launch, or waits on the
// launch until an annotation claims it. Kineto's gpu_user_annotation rows
// are not used: they hold only the work launched from the annotating thread
// (a training step's backward, launched from autograd's thread, falls
// outside: gpu_timeline.h).
//
// Bounded: at most Options::max_rows names (more counted,
// annotations_over_cap); the launches of the last Options::max_launches
// correlation ids (rounded up to a power of two) remembered, an older one
// forgotten when a newer id takes its slot (counted launches_forgotten when
// unclaimed); the last Options::max_pending_per_thread unclaimed launches of
// a thread. A late annotation (kFlagLate) counts its time but claims
// nothing. Totals since the start. Pure: no I/O, no locks, no threads.
// Pipeline thread only.
#ifndef LIVEPROF_AGGREGATORS_PYTORCH_ANNOTATION_STATS_H_
#define LIVEPROF_AGGREGATORS_PYTORCH_ANNOTATION_STATS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/corr_window.h"
#include "stream/event.h"

namespace liveprof {

class Catalog;
class JsonWriter;

struct AnnotationRow {
  std::string name;
  uint64_t count = 0;
  uint64_t host_ns = 0;  // the annotations' durations, summed.
  uint64_t kernels = 0;  // kernels launched with it innermost.
  uint64_t gpu_ns = 0;   // their durations, summed.
};

struct AnnotationStatsSnapshot {
  std::vector<AnnotationRow> rows;    // by GPU time, then host time, descending; ties by name.
  uint64_t kernels_attributed = 0;    // kernels whose launch an annotation holds.
  uint64_t kernels_unattributed = 0;  // kernels whose launch was seen in no annotation (yet).
  uint64_t annotations_over_cap = 0;
  uint64_t launches_forgotten = 0;
  void WriteJson(JsonWriter& w) const;
};

class AnnotationStats {
 public:
  struct Options {
    size_t max_rows = 4096;
    size_t max_launches = size_t{1} << 20;
    size_t max_pending_per_thread = size_t{1} << 16;
  };
  explicit AnnotationStats(const Catalog* catalog) : AnnotationStats(catalog, Options{}) {}
  AnnotationStats(const Catalog* catalog, Options options);

  void Consume(std::span<const Event> events);
  AnnotationStatsSnapshot Snapshot() const;

 private:
  static constexpr uint32_t kMaxId = 1u << 22;  // NameTable::kMaxNames.
  static constexpr uint32_t kNoRow = UINT32_MAX;
  static constexpr uint32_t kNotYet = UINT32_MAX - 1;  // a name not looked at yet.
  struct Launch {                                      // 16 bytes: with its id, a table slot of 24.
    uint32_t row = kNoRow;                             // the claiming annotation's row.
    uint32_t kernels = 0;                              // kernels that came before the claim, and their time.
    uint64_t kernel_ns = 0;
  };
  struct Pending {
    uint64_t ts;
    uint32_t corr;
  };
  // A thread's launches no annotation has claimed yet. One arriving out of
  // time order (late, after the reorder window) is set aside and merged in
  // before the thread's next annotation or at the batch's end: inserted
  // one by one, a batch of 20 k late launches into a full list moved ~32 k
  // entries each and held the pipeline thread 130-190 ms (bench/RESULTS.md).
  struct Thread {
    std::vector<Pending> waiting;  // by ts, from [head] on (before it: let go).
    size_t head = 0;
    std::vector<Pending> out_of_order;  // in arrival order.
    // Lets go of the oldest past `cap`, moving the rest down now and then.
    void KeepNewest(size_t cap) {
      if (waiting.size() - head > cap) head = waiting.size() - cap;
      if (head >= 4096 && 2 * head >= waiting.size()) {
        waiting.erase(waiting.begin(), waiting.begin() + static_cast<ptrdiff_t>(head));
        head = 0;
      }
    }
  };
  uint32_t RowOf(NameId name);
  void AddAnnotation(const Event& e);
  void AddLaunch(const Event& e);
  void AddKernel(const Event& e);
  // Null for a correlation id older than the window (launches_forgotten).
  Launch* LaunchOf(uint32_t corr, bool* made) {
    return launches_.FindOrMake(corr, made, [this](uint32_t, const Launch& l) { Forget(l); });
  }
  // Lets go of a launch whose slot a newer id takes.
  void Forget(const Launch& l);
  void Merge(Thread& t);

  const Catalog* catalog_;
  Options options_;
  std::vector<uint32_t> row_of_name_;  // by NameId: a row, kNoRow, or kNotYet.
  std::vector<AnnotationRow> rows_;
  std::unordered_map<std::string, uint32_t> index_;  // name -> row.
  std::vector<Thread> threads_;                      // by TrackId.
  std::vector<TrackId> out_of_order_;                // threads with launches set aside in this batch.
  CorrWindow<Launch> launches_;                      // by correlation id: the newest max_launches ids.
  uint64_t attributed_ = 0;                          // kernels in a row.
  uint64_t unattributed_ = 0;                        // kernels whose launch was forgotten unclaimed.
  uint64_t waiting_ = 0;                             // kernels on launches not claimed yet.
  uint64_t over_cap_ = 0, forgotten_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_PYTORCH_ANNOTATION_STATS_H_
