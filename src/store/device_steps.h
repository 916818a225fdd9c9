// DeviceSteps: each GPU's "Steps" row (derived_rows.h) as TF's trace viewer
// draws it (xprof's derived_timeline.cc, DeriveStepEventsFromGroups): step
// N's span on a device runs from the first begin to the last end of that
// device's work of step N, so a GPU running behind its host shows its steps
// shifted, and a step with no work on a device has no span there.
//
// A device event's step is the step assembler's (aggregators/steps/steps.h): the
// host step holding the begin of its launch (the kRuntimeApi with the same
// correlation id); with no launch seen, or one between steps, by time: the
// step whose [begin, next step's begin) holds the work's begin. Host steps,
// launches and work are matched within a process (each has its own
// correlation ids); the rows are per device ordinal.
//
// Events come in completion order: a step's host span at its end, after
// some of its device work (kept aside, at most kMaxWaiting per process,
// until its step comes), and device work until the GPU is done with it. A
// step's spans are made once, one event per device that had work, when
//   (a) the process's device work has reached two steps later (the device
//       moved on; concurrent streams may still finish the next step's work),
//   (b) the watermark is kCloseLagNs past its host and device ends (the
//       step assembler's close_lag_ns),
//   (c) more than kMaxOpenSteps of the process wait (the oldest), or
//   (d) Flush.
// Work that comes for a step already made is left out (late_work()). The
// event made is a copy of the host step's (its kind, name, number and
// flags: every page's numbering of it, trace_api.cc) with the device's span,
// its `device` set and no correlation id; the caller puts it on its row.
//
// Cost: per device event a hash look-up and a few compares; per launch an
// insert into a flat open-addressing table (no allocation; pruned as steps
// pass, a prune's scan skipped when no launch is old enough to go); per step
// one event per device. Pure; one thread.
#ifndef LIVEPROF_STORE_DEVICE_STEPS_H_
#define LIVEPROF_STORE_DEVICE_STEPS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "stream/event.h"

namespace liveprof {

// DeviceSteps' launches: correlation id -> the launch's begin. Linear
// probing in a power-of-two table at most 3/4 full; id 0 (the empty slot's,
// and "no correlation" to every caller) is never held. As the
// std::unordered_map it replaces: the first insert of an id wins;
// EraseBefore(t) drops the entries with a begin before t (a scan, skipped
// when min_begin() >= t), the table then sized to what stays.
// Not base/flat_map.h's U64Map: that one scatters keys (a multiplicative
// hash) and erases one key at a time; this one keeps counting-up ids in
// consecutive slots and prunes by time in one rebuild.
class LaunchTable {
 public:
  size_t size() const { return size_; }
  void TryEmplace(uint32_t corr, uint64_t begin);
  const uint64_t* Find(uint32_t corr) const;
  void EraseBefore(uint64_t t);
  void Clear();
  uint64_t min_begin() const { return min_begin_; }  // (a bound: <= every begin held)

 private:
  struct Slot {
    uint32_t corr = 0;
    uint64_t begin = 0;
  };
  // Correlation ids count up: consecutive ones in consecutive slots (the
  // inserts and look-ups walk the table as a stream does); the high bits
  // folded in for ids that differ only there.
  static size_t Hash(uint32_t corr) { return corr ^ (corr >> 20); }
  void Rebuild(size_t capacity, uint64_t keep_from);  // the entries from keep_from on.
  std::vector<Slot> slots_;                           // empty, or a power of two.
  size_t size_ = 0;
  uint64_t min_begin_ = UINT64_MAX;
};

class DeviceSteps {
 public:
  DeviceSteps() = default;
  DeviceSteps(const DeviceSteps&) = delete;  // (Of's cache points into processes_)
  DeviceSteps& operator=(const DeviceSteps&) = delete;
  DeviceSteps(DeviceSteps&&) = default;
  DeviceSteps& operator=(DeviceSteps&&) = default;

  static constexpr uint64_t kCloseLagNs = 2'000'000'000;
  static constexpr size_t kMaxOpenSteps = 64;
  static constexpr size_t kMaxWaiting = size_t{1} << 16;
  static constexpr size_t kMaxLaunches = size_t{1} << 18;

  // Track `id` belongs to `process` (TrackInfo::process); undefined tracks: 0.
  void Define(TrackId id, uint32_t process);
  // A host step (a step marker, or a ProfilerStep#N span): the caller says
  // which events are steps. Steps of a process come in order of begin; one
  // that begins before the previous is ignored.
  void HostStep(const Event& step, std::vector<Event>* out);
  // A runtime API call with a correlation id: a launch its work may name.
  void Launch(const Event& api);
  // A device event (IsDeviceKind).
  void Work(const Event& e, std::vector<Event>* out);
  // Every event ending at or before `watermark_ns` has come: rule (b).
  void Advance(uint64_t watermark_ns, std::vector<Event>* out);
  // End of the stream: the work waiting by time joins the newest step, and
  // every step is made.
  void Flush(std::vector<Event>* out);
  // Device events left out: their step was made already, or they waited too long.
  uint64_t late_work() const { return late_work_; }

 private:
  struct Extent {
    uint8_t device = 0;
    uint64_t begin = 0, end = 0;
  };
  struct Step {
    Event host;
    uint64_t seq = 0;
    uint64_t last_end = 0;  // the latest of its host end and its work's ends.
    std::vector<Extent> devices;
  };
  // Device work whose step is not known yet: `at` is its launch's begin, or
  // (by_time) its own.
  struct Waiting {
    uint64_t at = 0;
    bool by_time = false;
    uint8_t device = 0;
    uint64_t begin = 0, end = 0;
  };
  struct Process {
    std::deque<Step> open;  // by begin, the oldest first.
    uint64_t next_seq = 0;
    bool any = false;           // a host step seen.
    uint64_t newest_begin = 0;  // the newest host step's.
    uint64_t newest_end = 0;
    uint64_t closed_end = 0;       // the host end of the newest step made.
    uint64_t newest_work_seq = 0;  // (+1; 0: no work placed yet)
    LaunchTable launches;          // corr -> its begin.
    size_t prune_at = 4096;
    std::vector<Waiting> waiting;  // in arrival order.
  };
  enum class Placed { kStep, kWaits, kLost };

  Process& Of(TrackId track);
  Placed Place(Process& p, Waiting w, Step** step) const;
  void Add(Process& p, Step& s, const Waiting& w, std::vector<Event>* out);
  void CloseFront(Process& p, std::vector<Event>* out);
  void PruneLaunches(Process& p);

  std::vector<uint32_t> process_of_;  // by TrackId.
  std::unordered_map<uint32_t, Process> processes_;
  // Of's last answer (a map's values stay put): most events are one process's.
  // A move empties it on both sides: the nodes move with the map, and the
  // object moved from must not reach them.
  struct LastProcess {
    uint32_t id = 0;
    Process* p = nullptr;
    LastProcess() = default;
    LastProcess(LastProcess&& o) noexcept { o.p = nullptr; }
    LastProcess& operator=(LastProcess&& o) noexcept {
      p = o.p = nullptr;
      return *this;
    }
  };
  LastProcess last_;
  uint64_t late_work_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_DEVICE_STEPS_H_
