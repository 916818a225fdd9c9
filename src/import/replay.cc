#include "import/replay.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <unordered_map>

#include "import/trace_analysis.h"
#include "stream/clock.h"
#include "stream/reorder_buffer.h"

namespace liveprof {

namespace {

constexpr uint64_t kLoopGapNs = 1'000'000;  // between the end of a loop and the next.
constexpr size_t kSlice = 4096;             // events written between clock updates at max speed.

}  // namespace

TraceReplay::TraceReplay(Stream& stream, Options options) : stream_(stream), options_(options) {
  if (!(options_.speed > 0)) options_.speed = 1;
}

TraceReplay::~TraceReplay() { Stop(); }

bool TraceReplay::Load(const std::string& path, std::string* error, ProgressLine* progress) {
  // The importer only lives through the load: every name is interned in the
  // stream's table below.
  TraceFileImporter importer;
  std::vector<Event> definitions;
  if (!ImportWhole(importer, path, &definitions, &events_, &report_, error, progress)) return false;
  if (progress) progress->Clear();
  if (events_.empty()) {
    *error = path + ": no events to replay";
    return false;
  }
  // The file's ids become the stream's: names first (tracks use them), then
  // tracks, from their last definition (a thread's name may come late).
  std::vector<NameId> name_of;
  std::unordered_map<TrackId, TrackInfo> track_info;
  for (const Event& d : definitions) {
    if (d.kind == EventKind::kNameDef) {
      if (d.name >= name_of.size()) name_of.resize(d.name + 1, 0);
      name_of[d.name] = stream_.names().Intern(std::string_view(d.payload.name_def.data, d.payload.name_def.size));
    }
  }
  auto name = [&](NameId id) { return id < name_of.size() ? name_of[id] : NameId{0}; };
  for (const Event& d : definitions) {
    if (d.kind == EventKind::kTrackDef) {
      track_info[d.track] = TrackInfo{name(d.name), d.payload.track_def.type, d.payload.track_def.os_tid, d.device};
    }
  }
  std::unordered_map<TrackId, TrackId> track_of;
  for (const auto& [id, info] : track_info) track_of[id] = stream_.AddTrack(info);
  for (Event& e : events_) {
    e.name = name(e.name);
    const auto t = track_of.find(e.track);
    e.track = t == track_of.end() ? 0 : t->second;
    if (e.kind == EventKind::kKernel) {
      e.payload.kernel.details = name(e.payload.kernel.details);
      e.payload.kernel.op = name(e.payload.kernel.op);
    }
    if (e.kind == EventKind::kAlloc && (e.flags & kFlagAllocAnnotation) != 0) e.corr = name(e.corr);
  }
  std::stable_sort(events_.begin(), events_.end(), CompletionOrderLess);
  // The trace's first instant (device descriptions carry no time: ts 0).
  first_ts_ = ~uint64_t{0};
  for (const Event& e : events_) {
    if (e.kind != EventKind::kDeviceInfo) first_ts_ = std::min(first_ts_, e.ts);
  }
  if (first_ts_ == ~uint64_t{0}) first_ts_ = 0;
  last_end_ = events_.back().end();
  // Launch and op ids only (a flow's id may be a hash over all 32 bits).
  // Step numbers: step markers', and ProfilerStep#N spans' (what PyTorch
  // traces have; their number is in the name).
  auto step_number = [&](const Event& e, int64_t* n) {
    if (e.kind == EventKind::kStepMarker) {
      *n = e.payload.step.step_num;
      return true;
    }
    if (e.kind != EventKind::kHostSpan && e.kind != EventKind::kFrameworkOp) return false;
    constexpr std::string_view kProfilerStep = "ProfilerStep#";
    const std::string_view s = stream_.names().Get(e.name);
    if (!s.starts_with(kProfilerStep)) return false;
    const std::string_view digits = s.substr(kProfilerStep.size());
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *n);
    if (ec != std::errc() || end != digits.data() + digits.size()) return false;
    if (e.name >= profiler_step_name_.size()) profiler_step_name_.resize(e.name + 1, false);
    profiler_step_name_[e.name] = true;
    return true;
  };
  for (const Event& e : events_) {
    if (e.kind != EventKind::kFlow) max_corr_ = std::max(max_corr_, e.corr);
    int64_t n = 0;
    if (step_number(e, &n)) {
      min_step_ = max_step_ < min_step_ ? n : std::min(min_step_, n);
      max_step_ = std::max(max_step_, n);
    }
  }
  return true;
}

void TraceReplay::Start() {
  Stream::RingOptions ro;
  ro.name = "replay";
  ro.progress = RingProgress::kDeclared;
  ring_ = stream_.AddRing(ro);
  stop_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this] { Run(); });
}

void TraceReplay::Stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  if (ring_) ring_->closed.store(true, std::memory_order_release);
}

uint64_t TraceReplay::Moved(uint64_t t, uint64_t shift) const {
  return t < first_ts_ ? shift : t - first_ts_ + shift;  // before it: a device description (ts 0).
}

void TraceReplay::Advance(uint64_t clock_ns) {
  // Everything ending at or before it is written: the ring's progress and the
  // stream's time together.
  ring_->DeclareProgress(clock_ns);
  clock_ns_.store(clock_ns, std::memory_order_release);
}

bool TraceReplay::Write(size_t from, size_t to, uint64_t shift, uint32_t corr_shift, int64_t step_shift) {
  for (size_t i = from; i < to; ++i) {
    Event e = events_[i];
    e.ts = Moved(e.ts, shift);
    if (e.corr != 0) e.corr += corr_shift;  // each loop its own ids (wrapping after 2^32).
    if (step_shift != 0) {
      if (e.kind == EventKind::kStepMarker) {
        e.payload.step.step_num += step_shift;
      } else if (e.name < profiler_step_name_.size() && profiler_step_name_[e.name] &&
                 (e.kind == EventKind::kHostSpan || e.kind == EventKind::kFrameworkOp)) {
        e.flags |= kFlagStepShift;  // ProfilerStep#N: number N + step_shift (steps.cc).
        e.payload.step.step_num = step_shift;
      }
    }
    // Full: wait for the drain rather than drop (a failed push would count as
    // a drop). Only the drain frees slots, so room seen here stays.
    while (ring_->queue->size() >= ring_->queue->capacity()) {
      if (stop_.load(std::memory_order_relaxed)) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ring_->queue->TryPush(e);
    written_.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

void TraceReplay::Run() {
  using Wall = std::chrono::steady_clock;
  const uint64_t start_ns = HostNowNs();
  const auto wall_start = Wall::now();
  uint64_t shift = start_ns;  // where the trace's first instant lands, this loop.
  Advance(start_ns - 1);      // nothing is written yet.
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint64_t loop_start = shift;  // the trace's first instant, this loop.
    // Correlation ids are unique in a run: a loop that reused the last one's
    // would join its kernels to the last loop's launches.
    const uint32_t corr_shift =
        static_cast<uint32_t>(loops_.load(std::memory_order_relaxed) * (uint64_t{max_corr_} + 1));
    // And its own step numbers, after the last loop's.
    const int64_t step_shift = max_step_ >= min_step_ ? static_cast<int64_t>(loops_.load(std::memory_order_relaxed)) *
                                                            (max_step_ - min_step_ + 1)
                                                      : 0;
    size_t next = 0;
    while (next < events_.size() && !stop_.load(std::memory_order_relaxed)) {
      uint64_t position;  // the replay's time, in the moved trace.
      if (options_.max_speed) {
        position = MovedEnd(std::min(next + kSlice, events_.size()) - 1, loop_start);
      } else {
        const double wall = std::chrono::duration<double>(Wall::now() - wall_start).count();
        position = start_ns + static_cast<uint64_t>(wall * 1e9 * options_.speed);
      }
      // The events that have ended by then.
      size_t to = next;
      while (to < events_.size() && MovedEnd(to, loop_start) <= position) ++to;
      if (!Write(next, to, loop_start, corr_shift, step_shift)) return;
      next = to;
      // Every event ending by `position` is written (the next ends after it).
      Advance(std::max(position, Clock()));
      if (!options_.max_speed && next < events_.size()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    loops_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t loop_end = last_end_ - first_ts_ + loop_start;
    if (!options_.loop) {
      // The end. Time goes on, as it would have after the run: past the
      // reorder window at once (the last events go out), then at the wall
      // clock's pace (the last step closes, "seconds since the last step"
      // grows) until Stop().
      const uint64_t end = loop_end + ReorderBuffer::Options{}.window_ns + kLoopGapNs;
      Advance(end);
      done_.store(true, std::memory_order_release);
      const auto done_at = Wall::now();
      while (!stop_.load(std::memory_order_relaxed)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        Advance(end + static_cast<uint64_t>(
                          std::chrono::duration_cast<std::chrono::nanoseconds>(Wall::now() - done_at).count()));
      }
      return;
    }
    shift = loop_end + kLoopGapNs;
    if (!options_.max_speed) {
      // Paced: the next loop begins when the wall clock gets there.
      while (!stop_.load(std::memory_order_relaxed)) {
        const double wall = std::chrono::duration<double>(Wall::now() - wall_start).count();
        const uint64_t position = start_ns + static_cast<uint64_t>(wall * 1e9 * options_.speed);
        if (position >= shift) break;
        Advance(std::max(position, Clock()));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
}

}  // namespace liveprof
