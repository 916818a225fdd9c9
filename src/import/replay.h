// TraceReplay: a trace file fed through the live path (`liveprof replay`),
// as if a producer were writing it now: its events, in completion order, go
// into a ring of the Stream, paced at `speed` times the trace's own time, or
// as fast as the pipeline takes them (`max_speed`). A full ring makes the
// replay wait, never drop: the replay is no profiled program.
//
// Time: the trace is moved to start at the host time of Start() (each loop
// one millisecond after the previous one ended, with its correlation ids
// moved past the previous loop's); durations and gaps stay the trace's, so every analysis reads as it would on the
// original run. The stream runs on the replay's clock (Clock(), to be the drain loop's clock:
// DrainLoop::Options::clock): the replay's position in the moved trace,
// which it also declares as the ring's progress. Windows, the reorder buffer
// and alerts therefore keep the trace's time at any speed, and no event can
// be late.
//
// Memory: the events are held (48 bytes each) and sorted once, as
// AnalyzeTrace does.
#ifndef LIVEPROF_IMPORT_REPLAY_H_
#define LIVEPROF_IMPORT_REPLAY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "import/chrome_trace.h"
#include "import/progress.h"
#include "stream/stream.h"

namespace liveprof {

class TraceReplay {
 public:
  struct Options {
    double speed = 1;        // times the trace's time; > 0.
    bool max_speed = false;  // as fast as the ring drains (speed ignored).
    bool loop = false;       // start again after the end, until Stop().
  };
  TraceReplay(Stream& stream, Options options);
  ~TraceReplay();  // Stop()s.
  TraceReplay(const TraceReplay&) = delete;
  TraceReplay& operator=(const TraceReplay&) = delete;

  // Imports and sorts `path`, interning its names and tracks in the stream.
  // false with *error on an unreadable file or one without events. Before
  // Start(); `progress` may be null.
  bool Load(const std::string& path, std::string* error, ProgressLine* progress = nullptr);

  // Starts / stops the replay thread. Stop() is idempotent and closes the ring.
  void Start();
  void Stop();

  // The stream's time for the drain loop (see the header). Any thread.
  uint64_t Clock() const { return clock_ns_.load(std::memory_order_acquire); }
  // True once the last event of the last loop is written (never with loop).
  bool done() const { return done_.load(std::memory_order_acquire); }
  uint64_t events_written() const { return written_.load(std::memory_order_relaxed); }
  uint64_t loops_done() const { return loops_.load(std::memory_order_relaxed); }
  size_t events() const { return events_.size(); }
  uint64_t span_ns() const { return last_end_ - first_ts_; }
  const ImportReport& report() const { return report_; }

 private:
  void Run();
  // Writes events_[from, to) moved by `shift` (time) and `corr_shift`
  // (correlation ids) and `step_shift` (step numbers); false if stopped
  // meanwhile.
  bool Write(size_t from, size_t to, uint64_t shift, uint32_t corr_shift, int64_t step_shift);
  void Advance(uint64_t clock_ns);
  // A time of the file moved so that its first instant lands on `shift`.
  uint64_t Moved(uint64_t t, uint64_t shift) const;
  uint64_t MovedEnd(size_t i, uint64_t shift) const { return Moved(events_[i].end(), shift); }

  Stream& stream_;
  Options options_;
  ImportReport report_;
  std::vector<Event> events_;  // remapped to the stream's ids, completion order.
  uint64_t first_ts_ = 0, last_end_ = 0;
  uint32_t max_corr_ = 0;  // the largest correlation id in the file.
  // The file's step numbers (kStepMarker): each loop numbers its steps on
  // from the last loop's, by (max − min + 1), so steps never repeat.
  int64_t min_step_ = 0, max_step_ = -1;
  std::vector<bool> profiler_step_name_;  // by NameId: a ProfilerStep#N name.
  std::shared_ptr<Ring> ring_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> clock_ns_{0};
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> loops_{0};
};

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_REPLAY_H_
