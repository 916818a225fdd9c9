#include "aggregators/steps/steps.h"

#include <algorithm>
#include <charconv>

namespace liveprof {

namespace {

// launch_step_ values: (seq << 1) | satisfied.
constexpr uint64_t Packed(uint64_t seq, bool satisfied) { return (seq << 1) | (satisfied ? 1 : 0); }

constexpr uint32_t TypeBit(SpanType t) { return 1u << static_cast<unsigned>(t); }

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

std::string_view StepSourceName(StepSource s) {
  switch (s) {
    case StepSource::kNone: return "none";
    case StepSource::kMarker: return "step_marker";
    case StepSource::kProfilerStep: return "profiler_step";
    case StepSource::kNamePattern: return "name_pattern";
  }
  return "none";
}

std::string_view StepSourceLabel(StepSource s, std::string_view marker_name) {
  switch (s) {
    case StepSource::kNone: return "none";
    case StepSource::kMarker:
      if (marker_name == "optimizer step") return "optimizer";
      if (marker_name == "torch.profiler step") return "torch.profiler";
      return "program marks";
    case StepSource::kProfilerStep: return "torch.profiler";
    case StepSource::kNamePattern: return "pattern";
  }
  return "none";
}

bool MatchStepPattern(std::string_view pattern, std::string_view name, int64_t* number) {
  // Recursive descent over the glob; patterns are short and run once per name.
  if (pattern.empty()) return name.empty();
  if (pattern[0] == '*') {
    for (size_t skip = 0; skip <= name.size(); ++skip) {
      if (MatchStepPattern(pattern.substr(1), name.substr(skip), number)) return true;
    }
    return false;
  }
  if (pattern.starts_with("{n}")) {
    size_t digits = 0;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
    for (size_t take = digits; take >= 1; --take) {  // longest number first.
      if (MatchStepPattern(pattern.substr(3), name.substr(take), number)) {
        int64_t n = -1;
        if (!ParseInt(name.substr(0, take), &n)) return false;
        *number = n;
        return true;
      }
    }
    return false;
  }
  return !name.empty() && name[0] == pattern[0] && MatchStepPattern(pattern.substr(1), name.substr(1), number);
}

StepAssembler::StepAssembler(const Catalog* catalog, Diagnostics* diag, Options options)
    : catalog_(catalog), diag_(diag), options_(std::move(options)), launch_step_(kMaxLaunchIds, size_t{1} << 10) {}

const StepAssembler::NameInfo& StepAssembler::LearnName(NameId id) {
  if (id >= names_.size()) names_.resize(id + 1);
  NameInfo& info = names_[id];
  const std::string_view name = catalog_->Name(id);
  info.state = 1;
  constexpr std::string_view kProfilerStep = "ProfilerStep#";
  if (name.starts_with(kProfilerStep) && ParseInt(name.substr(kProfilerStep.size()), &info.number)) {
    info.state = 2;
  } else if (!options_.name_pattern.empty()) {
    int64_t n = -1;
    if (MatchStepPattern(options_.name_pattern, name, &n)) {
      info.state = 3;
      info.number = n;
    }
  }
  info.bits = ClassifyName(name);
  info.model_pass = IsModelPassName(name);
  // Calls that start device work (cudaLaunchHostFunc starts none).
  info.launches =
      (name.find("Launch") != std::string_view::npos && name.find("LaunchHostFunc") == std::string_view::npos) ||
      name.find("Memcpy") != std::string_view::npos || name.find("Memset") != std::string_view::npos;
  return info;
}

bool StepAssembler::IsMarker(const Event& e, int64_t* step_num) {
  StepSource kind = StepSource::kNone;
  if (e.kind == EventKind::kStepMarker) {
    kind = StepSource::kMarker;
    *step_num = e.payload.step.step_num;
  } else if (e.kind == EventKind::kHostSpan || e.kind == EventKind::kFrameworkOp) {
    const NameInfo& info = Info(e.name);
    if (info.state == 2) {
      kind = StepSource::kProfilerStep;
      *step_num = info.number + ((e.flags & kFlagStepShift) != 0 ? e.payload.step.step_num : 0);
    } else if (info.state == 3) {
      kind = StepSource::kNamePattern;
      *step_num = info.number >= 0 ? info.number : static_cast<int64_t>(pattern_seq_);
    }
  }
  if (kind == StepSource::kNone) return false;
  // The first source seen wins; a stronger one seen later takes over.
  if (source_ == StepSource::kNone || kind < source_) source_ = kind;
  if (kind != source_) return false;
  marker_name_ = e.name;
  if (kind == StepSource::kNamePattern) ++pattern_seq_;
  return true;
}

void StepAssembler::Consume(std::span<const Event> events) {
  bool new_step = false;
  for (const Event& e : events) {
    if (IsSpanKind(e.kind) && e.dur > kMaxEventDurationNs) {
      if (diag_) diag_->Add(Diag::bad_duration);
      continue;
    }
    int64_t step_num = 0;
    // Only these kinds can be a marker: the others skip the call.
    const bool marker_kind =
        e.kind == EventKind::kStepMarker || e.kind == EventKind::kHostSpan || e.kind == EventKind::kFrameworkOp;
    if (marker_kind && IsMarker(e, &step_num)) {
      AddStep(e, step_num);
      new_step = true;
      continue;
    }
    if (!IsHostSpanKind(e.kind) && !IsDeviceKind(e.kind)) continue;
    // A host span that begins after every marker seen so far ended can only
    // wait for its own marker (completion order: it comes after the span):
    // no lookup. Most host spans take this path.
    const bool waits = IsHostSpanKind(e.kind) && e.ts >= markers_end_;
    if (!waits && Place(e)) continue;
    if (IsLaunch(e)) min_waiting_launch_ = std::min(min_waiting_launch_, e.corr);
    min_waiting_end_ = std::min(min_waiting_end_, e.end());
    pending_.push_back(e);
  }
  if (new_step) Rescan();
  TrimWaiting();
}

void StepAssembler::UpdateWaitingMins() {
  min_waiting_launch_ = kNoWaitingLaunch;
  min_waiting_end_ = UINT64_MAX;
  for (const Event& e : pending_) {
    if (IsLaunch(e)) min_waiting_launch_ = std::min(min_waiting_launch_, e.corr);
    min_waiting_end_ = std::min(min_waiting_end_, e.end());
  }
}

void StepAssembler::TrimWaiting() {
  if (pending_.size() <= options_.max_waiting_events) return;
  const size_t drop = pending_.size() - options_.max_waiting_events / 2;
  if (diag_) diag_->Add(Diag::events_without_step, drop);
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(drop));
  UpdateWaitingMins();
}

void StepAssembler::AddStep(const Event& marker, int64_t step_num) {
  OpenStep s;
  s.rec.step_num = step_num;
  s.rec.seq = next_seq_++;
  s.rec.host_begin_ns = marker.ts;
  s.rec.host_end_ns = marker.end();
  // Markers of one source arrive in order of their ends; keep open_ sorted by
  // begin all the same (a marker may be shorter than its predecessor).
  auto it = std::upper_bound(open_.begin(), open_.end(), marker.ts,
                             [](uint64_t t, const OpenStep& o) { return t < o.rec.host_begin_ns; });
  s.launches.swap(spare_launches_);
  s.launches.clear();
  if (!spare_.empty()) {
    s.rec.host_spans.swap(spare_.back().host_spans);
    s.rec.device_spans.swap(spare_.back().device_spans);
    spare_.pop_back();
    s.rec.host_spans.clear();
    s.rec.device_spans.clear();
  }
  s.rec.host_spans.reserve(host_spans_hint_);
  s.rec.device_spans.reserve(device_spans_hint_);
  if (open_.empty()) open_by_seq_ = true;
  if (it != open_.end()) open_by_seq_ = false;  // seq order is not begin order now.
  open_.insert(it, std::move(s));
  latest_marker_begin_ = std::max(latest_marker_begin_, marker.ts);
  markers_end_ = std::max(markers_end_, marker.end());
  any_marker_ = true;
}

// Both inline in Place, their one caller, per event.
[[gnu::always_inline]] inline StepAssembler::OpenStep* StepAssembler::StepAtHostTime(uint64_t ts) {
  if (open_.empty()) return nullptr;
  // Events wait in completion order and steps are by begin, so a rescan
  // asks for the same step as the last lookup, or the one after it.
  const size_t n = open_.size();
  for (size_t i = std::min(hint_, n - 1), stop = std::min(i + 2, n); i < stop; ++i) {
    OpenStep& s = open_[i];
    if (s.rec.host_begin_ns <= ts && (i + 1 == n || ts < open_[i + 1].rec.host_begin_ns)) {
      hint_ = i;
      return ts < s.rec.host_end_ns ? &s : nullptr;
    }
  }
  auto it = std::upper_bound(open_.begin(), open_.end(), ts,
                             [](uint64_t t, const OpenStep& o) { return t < o.rec.host_begin_ns; });
  if (it == open_.begin()) return nullptr;
  hint_ = static_cast<size_t>(it - open_.begin()) - 1;
  OpenStep& s = *(it - 1);
  return ts < s.rec.host_end_ns ? &s : nullptr;
}

[[gnu::always_inline]] inline StepAssembler::OpenStep* StepAssembler::StepBySeq(uint64_t seq) {
  if (open_.empty()) return nullptr;
  if (!open_by_seq_) {  // a marker came out of order: rare, look at each.
    for (size_t i = open_.size(); i-- > 0;) {
      if (open_[i].rec.seq == seq) return &open_[i];
    }
    return nullptr;
  }
  // Steps get their seq in marker order and open_ is by begin: the same
  // order, so the offset finds it at once (or says it has closed).
  const uint64_t first = open_.front().rec.seq;
  if (seq < first) return nullptr;
  if (seq - first < open_.size() && open_[seq - first].rec.seq == seq) return &open_[seq - first];
  auto it =
      std::lower_bound(open_.begin(), open_.end(), seq, [](const OpenStep& o, uint64_t v) { return o.rec.seq < v; });
  return it != open_.end() && it->rec.seq == seq ? &*it : nullptr;
}

// Flattened: the span lists' appends and the counting inline (a call each was
// a fifth of its time on BM_StepPath).
[[gnu::flatten]] void StepAssembler::AddToStep(OpenStep& s, const Event& e, bool by_corr) {
  StepRecord& r = s.rec;
  const NameInfo& info = Info(e.name);
  const uint8_t bits = info.bits;
  if (IsDeviceKind(e.kind)) {
    if (r.device_spans.empty()) {
      r.device_begin_ns = e.ts;
      r.device_end_ns = e.end();
    } else {
      r.device_begin_ns = std::min(r.device_begin_ns, e.ts);
      r.device_end_ns = std::max(r.device_end_ns, e.end());
    }
    const SpanType t = ClassifyDeviceEvent(e, bits);
    StepSpan& span = r.device_spans.emplace_back();  // in place: a temporary's byte fields would stall the copy.
    span.begin = e.ts, span.end = e.end(), span.type = span.cpu_type = t;
    span.work = IsMemcpyKind(e.kind)                ? GpuWork::kMemcpy
                : t == SpanType::kDeviceCollectives ? GpuWork::kCommunication
                                                    : GpuWork::kCompute;
    r.device_types |= TypeBit(t);
    (by_corr ? r.device_by_corr : r.device_by_time) += 1;
    CountDeviceWork(e, &r.work);
    return;
  }
  bool ignore = false;
  const SpanType type = ClassifyHostEvent(e, bits, /*has_device=*/true, &ignore);
  if (!ignore) {
    // Without a GPU in the profile only "kernel launch" reads otherwise.
    const SpanType cpu_type =
        type == SpanType::kHostPrepare ? ClassifyHostEvent(e, bits, /*has_device=*/false, &ignore) : type;
    StepSpan& span = r.host_spans.emplace_back();
    span.begin = e.ts, span.end = e.end(), span.type = type, span.cpu_type = cpu_type;
    r.host_types |= TypeBit(type);
    r.cpu_host_types |= TypeBit(cpu_type);
    if (cpu_type == SpanType::kHostCompute && !info.model_pass) r.annotated_host_compute = true;
  }
  if (e.kind == EventKind::kRuntimeApi && e.corr != 0) {
    bool made = false;
    // An id so old that a newer one takes its slot: its device work, if it
    // ever comes, goes by time. Likewise a launch that comes after the
    // window passed it.
    uint64_t* const slot = launch_step_.FindOrMake(e.corr, &made, [](uint32_t, uint64_t) {});
    if (slot == nullptr) return;
    // A second API record of the same call (CUPTI's runtime record and the
    // driver record inside it share the correlation id): one launch.
    if (!made && (*slot >> 1) == r.seq) return;
    const bool launches = info.launches;
    *slot = Packed(r.seq, !launches);
    s.launches.push_back(e.corr);
    if (launches) ++s.outstanding_launches;
  }
}

void StepAssembler::CountDeviceWork(const Event& e, DeviceWorkCounts* w) const {
  switch (e.kind) {
    case EventKind::kKernel:
      ++w->kernel_count;
      if (e.dur < options_.small_kernel_ns) ++w->small_kernel_count;
      break;
    case EventKind::kMemcpyHtoD:
      ++w->h2d_count;
      w->h2d_bytes += e.payload.copy.bytes;
      w->h2d_ns += e.dur;
      break;
    case EventKind::kMemcpyDtoH:
      ++w->d2h_count;
      w->d2h_bytes += e.payload.copy.bytes;
      w->d2h_ns += e.dur;
      break;
    case EventKind::kMemcpyDtoD:
    case EventKind::kMemcpyPtoP:
      ++w->d2d_count;
      w->d2d_bytes += e.payload.copy.bytes;
      break;
    default: break;
  }
}

// Inline in its two per-event loops (Consume, Rescan).
[[gnu::always_inline]] inline bool StepAssembler::Place(const Event& e) {
  if (IsHostSpanKind(e.kind)) {
    if (OpenStep* s = StepAtHostTime(e.ts)) {
      AddToStep(*s, e, false);
      return true;
    }
    // Before a step whose marker we already have, and in none: stepless.
    if (any_marker_ && (e.ts < latest_marker_begin_ || e.ts < last_closed_host_end_)) {
      if (diag_) diag_->Add(Diag::events_without_step);
      return true;
    }
    return false;
  }
  // Device work: through its launch first.
  if (e.corr != 0) {
    if (uint64_t* const packed = launch_step_.Find(e.corr)) {
      if (OpenStep* s = StepBySeq(*packed >> 1)) {
        if ((*packed & 1) == 0) {
          *packed |= 1;
          --s->outstanding_launches;
        }
        AddToStep(*s, e, true);
        return true;
      }
      if (diag_) diag_->Add(Diag::late_for_step);  // its step closed already.
      return true;
    }
    // Its launch may be one that waits for its step: wait too rather than
    // go by time. This assumes correlation ids grow (CUPTI's do, per
    // process); where they do not, such work only waits until a later
    // marker and then goes by time.
    if (e.corr >= min_waiting_launch_) {
      waited_on_launch_ = true;
      return false;
    }
  }
  // By time: [begin, next begin) of a step, decided once a later marker
  // bounds it (or at the end of the stream).
  if (!any_marker_) return false;
  if (e.ts >= latest_marker_begin_ && !flushing_) return false;
  auto it = std::upper_bound(open_.begin(), open_.end(), e.ts,
                             [](uint64_t t, const OpenStep& o) { return t < o.rec.host_begin_ns; });
  if (it == open_.begin()) {
    // Before every open step: stepless (or late), and only that: work
    // launched before the first step (a model's weights copied to the GPU)
    // has its launch stepless too, and is not "without launch".
    if (diag_) diag_->Add(e.ts < last_closed_host_end_ ? Diag::late_for_step : Diag::events_without_step);
    return true;
  }
  if (e.corr != 0 && diag_) diag_->Add(Diag::device_without_launch);
  AddToStep(*(it - 1), e, false);
  return true;
}

void StepAssembler::Rescan() {
  // In arrival order, so that each step's events stay in completion order
  // (the breakdown then need not sort them). Device work that came before
  // its launch waits for a second pass, after the launch found its step.
  auto pass = [this] {
    size_t keep = 0;
    waited_on_launch_ = false;
    bool placed_launch = false;
    uint32_t min_launch = kNoWaitingLaunch;  // of the launches still waiting.
    uint64_t min_end = UINT64_MAX;
    for (const Event& e : pending_) {
      if (!Place(e)) {
        pending_[keep++] = e;
        if (IsLaunch(e)) min_launch = std::min(min_launch, e.corr);
        min_end = std::min(min_end, e.end());
        continue;
      }
      placed_launch = placed_launch || IsLaunch(e);
    }
    pending_.resize(keep);
    min_waiting_launch_ = min_launch;
    min_waiting_end_ = min_end;
    return waited_on_launch_ && placed_launch;
  };
  if (pass()) pass();
}

void StepAssembler::Advance(uint64_t watermark_ns) {
  // Waiting too long with no marker: stepless. (Looked through only when
  // the oldest waiting event is that old: a step's worth of events waits
  // here for its marker, and each batch advances.)
  if (watermark_ns > options_.max_step_ns && min_waiting_end_ < watermark_ns - options_.max_step_ns) {
    const uint64_t limit = watermark_ns - options_.max_step_ns;
    size_t keep = 0;
    for (const Event& e : pending_) {
      if (e.end() < limit) {
        if (diag_) diag_->Add(Diag::events_without_step);
      } else {
        pending_[keep++] = e;
      }
    }
    pending_.resize(keep);
    UpdateWaitingMins();
  }
  size_t n = 0;
  for (size_t i = 0; i < open_.size(); ++i) {
    const OpenStep& s = open_[i];
    const bool has_successor = i + 1 < open_.size();
    const bool settled = has_successor && s.outstanding_launches == 0;
    const bool timed_out = watermark_ns >= s.rec.host_end_ns + options_.close_lag_ns &&
                           watermark_ns >= s.rec.device_end_ns + options_.close_lag_ns;
    const bool too_many = open_.size() - i > options_.max_open_steps;
    if (!settled && !timed_out && !too_many) break;
    open_[i].rec.closed_by_timeout = !settled;
    ++n;
  }
  Close(n);
}

void StepAssembler::Flush() {
  flushing_ = true;
  Rescan();
  if (diag_) diag_->Add(Diag::events_without_step, pending_.size());
  pending_.clear();
  min_waiting_end_ = UINT64_MAX;
  min_waiting_launch_ = kNoWaitingLaunch;
  for (OpenStep& s : open_) s.rec.closed_by_timeout = true;
  Close(open_.size());
  flushing_ = false;
}

void StepAssembler::Close(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    OpenStep& s = open_[i];
    // Launches whose device work never came (a driver launch with no kernel).
    if (diag_ && s.outstanding_launches > 0) diag_->Add(Diag::launch_without_device, s.outstanding_launches);
    last_closed_host_end_ = std::max(last_closed_host_end_, s.rec.host_end_ns);
    closed_launches_.push_back(std::move(s.launches));
    if (closed_launches_.size() > kRememberClosed) {
      for (uint32_t corr : closed_launches_.front()) launch_step_.Erase(corr);
      spare_launches_.swap(closed_launches_.front());  // for the next step.
      closed_launches_.pop_front();
    }
    host_spans_hint_ = s.rec.host_spans.size();
    device_spans_hint_ = s.rec.device_spans.size();
    closed_.push_back(std::move(s.rec));
    ++steps_closed_;
  }
  open_.erase(open_.begin(), open_.begin() + static_cast<ptrdiff_t>(count));
  hint_ = hint_ > count ? hint_ - count : 0;
}

void StepAssembler::Recycle(std::vector<StepRecord>&& steps) {
  // A few spares suffice (about one step closes per batch). Lists far larger
  // than the last step's (a warm-up or a stall) are freed, not kept forever.
  constexpr size_t kSpares = 8;
  const size_t host_cap = 4 * host_spans_hint_ + 1024, device_cap = 4 * device_spans_hint_ + 1024;
  for (StepRecord& r : steps) {
    if (spare_.size() >= kSpares) break;
    if (r.host_spans.capacity() > host_cap || r.device_spans.capacity() > device_cap) continue;
    spare_.push_back(std::move(r));
  }
  steps.clear();
  // The vector itself goes back to hold the next closed steps.
  if (closed_.empty() && closed_.capacity() < steps.capacity()) closed_.swap(steps);
}

std::vector<StepRecord> StepAssembler::TakeClosed() {
  std::vector<StepRecord> out;
  out.swap(closed_);
  return out;
}

}  // namespace liveprof
