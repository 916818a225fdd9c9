#include "aggregators/steps.h"

#include <algorithm>
#include <charconv>

namespace liveprof {

namespace {

// launch_step_ values: (seq << 1) | satisfied, or kPendingLaunch.
constexpr uint64_t Packed(uint64_t seq, bool satisfied) { return (seq << 1) | (satisfied ? 1 : 0); }

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
  return !name.empty() && name[0] == pattern[0] &&
         MatchStepPattern(pattern.substr(1), name.substr(1), number);
}

StepAssembler::StepAssembler(const Catalog* catalog, Diagnostics* diag, Options options)
    : catalog_(catalog), diag_(diag), options_(std::move(options)) {}

const StepAssembler::NameInfo& StepAssembler::Info(NameId id) {
  if (id >= names_.size()) names_.resize(id + 1);
  NameInfo& info = names_[id];
  if (info.state != 0) return info;
  const std::string_view name = catalog_->Name(id);
  info.state = 1;
  constexpr std::string_view kProfilerStep = "ProfilerStep#";
  if (name.starts_with(kProfilerStep) &&
      ParseInt(name.substr(kProfilerStep.size()), &info.number)) {
    info.state = 2;
  } else if (!options_.name_pattern.empty()) {
    int64_t n = -1;
    if (MatchStepPattern(options_.name_pattern, name, &n)) {
      info.state = 3;
      info.number = n;
    }
  }
  info.launches = name.find("Launch") != std::string_view::npos ||
                  name.find("Memcpy") != std::string_view::npos ||
                  name.find("Memset") != std::string_view::npos;
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
      *step_num = info.number;
    } else if (info.state == 3) {
      kind = StepSource::kNamePattern;
      *step_num = info.number >= 0 ? info.number : static_cast<int64_t>(pattern_seq_);
    }
  }
  if (kind == StepSource::kNone) return false;
  // The first source seen wins; a stronger one seen later takes over.
  if (source_ == StepSource::kNone || kind < source_) source_ = kind;
  if (kind != source_) return false;
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
    if (IsMarker(e, &step_num)) {
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
    if (e.kind == EventKind::kRuntimeApi && e.corr != 0) {
      *launch_step_.Insert(e.corr).first = kPendingLaunch;
      pending_launches_.push_back(e);
    } else {
      pending_.push_back(e);
    }
  }
  if (new_step) Rescan();
  TrimWaiting();
}

void StepAssembler::TrimWaiting() {
  for (std::vector<Event>* list : {&pending_launches_, &pending_}) {
    if (list->size() <= options_.max_waiting_events) continue;
    const size_t drop = list->size() - options_.max_waiting_events / 2;
    if (list == &pending_launches_) {
      for (size_t i = 0; i < drop; ++i) {
        uint64_t unused;
        launch_step_.Erase((*list)[i].corr, &unused);
      }
    }
    if (diag_) diag_->Add(Diag::events_without_step, drop);
    list->erase(list->begin(), list->begin() + static_cast<ptrdiff_t>(drop));
  }
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
  s.rec.host_events.reserve(host_events_hint_);
  s.rec.device_events.reserve(device_events_hint_);
  if (open_.empty()) open_by_seq_ = true;
  if (it != open_.end()) open_by_seq_ = false;  // seq order is not begin order now.
  open_.insert(it, std::move(s));
  latest_marker_begin_ = std::max(latest_marker_begin_, marker.ts);
  markers_end_ = std::max(markers_end_, marker.end());
  any_marker_ = true;
}

StepAssembler::OpenStep* StepAssembler::StepAtHostTime(uint64_t ts) {
  if (open_.empty()) return nullptr;
  // Most lookups are for the newest step (its children, placed when it arrives).
  if (OpenStep& last = open_.back(); last.rec.host_begin_ns <= ts) {
    return ts < last.rec.host_end_ns ? &last : nullptr;
  }
  // Then the few before it, newest first (a handful are open when steps are
  // long); beyond those, search (thousands are open when steps are short
  // and the pipeline is behind).
  const size_t n = open_.size();
  const size_t scan_to = n > 8 ? n - 8 : 0;
  for (size_t i = n - 1; i-- > scan_to;) {
    OpenStep& s = open_[i];
    if (s.rec.host_begin_ns <= ts) return ts < s.rec.host_end_ns ? &s : nullptr;
  }
  if (scan_to == 0) return nullptr;
  auto it = std::upper_bound(open_.begin(), open_.begin() + static_cast<ptrdiff_t>(scan_to), ts,
                             [](uint64_t t, const OpenStep& o) { return t < o.rec.host_begin_ns; });
  if (it == open_.begin()) return nullptr;
  OpenStep& s = *(it - 1);
  return ts < s.rec.host_end_ns ? &s : nullptr;
}

StepAssembler::OpenStep* StepAssembler::StepBySeq(uint64_t seq) {
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
  auto it = std::lower_bound(open_.begin(), open_.end(), seq,
                             [](const OpenStep& o, uint64_t v) { return o.rec.seq < v; });
  return it != open_.end() && it->rec.seq == seq ? &*it : nullptr;
}

void StepAssembler::AddToStep(OpenStep& s, const Event& e, bool by_corr) {
  StepRecord& r = s.rec;
  if (IsDeviceKind(e.kind)) {
    if (r.device_events.empty()) {
      r.device_begin_ns = e.ts;
      r.device_end_ns = e.end();
    } else {
      r.device_begin_ns = std::min(r.device_begin_ns, e.ts);
      r.device_end_ns = std::max(r.device_end_ns, e.end());
    }
    r.device_events.push_back(e);
    (by_corr ? r.device_by_corr : r.device_by_time) += 1;
    return;
  }
  r.host_events.push_back(e);
  if (e.kind == EventKind::kRuntimeApi && e.corr != 0) {
    const auto [slot, inserted] = launch_step_.Insert(e.corr);
    // A second API record of the same call (CUPTI's runtime record and the
    // driver record inside it share the correlation id): one launch.
    if (!inserted && *slot != kPendingLaunch && (*slot >> 1) == r.seq) return;
    const bool launches = Info(e.name).launches;
    *slot = Packed(r.seq, !launches);
    s.launches.push_back(e.corr);
    if (launches) ++s.outstanding_launches;
  }
}

bool StepAssembler::Place(const Event& e) {
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
    if (uint64_t* packed = launch_step_.Find(e.corr)) {
      if (*packed == kPendingLaunch) return false;  // the launch waits for its step.
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
  }
  // By time: [begin, next begin) of a step, decided once a later marker
  // bounds it (or at the end of the stream).
  if (!any_marker_) return false;
  if (e.ts >= latest_marker_begin_ && !flushing_) return false;
  if (e.corr != 0 && diag_) diag_->Add(Diag::device_without_launch);
  auto it = std::upper_bound(open_.begin(), open_.end(), e.ts,
                             [](uint64_t t, const OpenStep& o) { return t < o.rec.host_begin_ns; });
  if (it == open_.begin()) {
    if (diag_) diag_->Add(e.ts < last_closed_host_end_ ? Diag::late_for_step : Diag::events_without_step);
    return true;
  }
  AddToStep(*(it - 1), e, false);
  return true;
}

void StepAssembler::Rescan() {
  // Launches first, so that their device work finds them afterwards. Each
  // list keeps what still waits, in arrival order.
  size_t keep = 0;
  for (const Event& e : pending_launches_) {
    if (!Place(e)) {
      pending_launches_[keep++] = e;
      continue;
    }
    // Placed in no step (stepless): its device work goes by time.
    if (const uint64_t* packed = launch_step_.Find(e.corr); packed && *packed == kPendingLaunch) {
      uint64_t unused;
      launch_step_.Erase(e.corr, &unused);
    }
  }
  pending_launches_.resize(keep);
  keep = 0;
  for (const Event& e : pending_) {
    if (!Place(e)) pending_[keep++] = e;
  }
  pending_.resize(keep);
}

void StepAssembler::Advance(uint64_t watermark_ns) {
  // Waiting too long with no marker: stepless.
  if (watermark_ns > options_.max_step_ns) {
    const uint64_t limit = watermark_ns - options_.max_step_ns;
    for (std::vector<Event>* list : {&pending_launches_, &pending_}) {
      size_t keep = 0;
      for (const Event& e : *list) {
        if (e.end() < limit) {
          if (diag_) diag_->Add(Diag::events_without_step);
          uint64_t unused;
          if (list == &pending_launches_) launch_step_.Erase(e.corr, &unused);
        } else {
          (*list)[keep++] = e;
        }
      }
      list->resize(keep);
    }
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
  if (diag_) diag_->Add(Diag::events_without_step, pending_launches_.size() + pending_.size());
  pending_launches_.clear();
  pending_.clear();
  for (OpenStep& s : open_) s.rec.closed_by_timeout = true;
  Close(open_.size());
  flushing_ = false;
}

void StepAssembler::Close(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    OpenStep& s = open_.front();
    last_closed_host_end_ = std::max(last_closed_host_end_, s.rec.host_end_ns);
    closed_launches_.push_back(std::move(s.launches));
    if (closed_launches_.size() > kRememberClosed) {
      uint64_t unused;
      for (uint32_t corr : closed_launches_.front()) launch_step_.Erase(corr, &unused);
      closed_launches_.pop_front();
    }
    host_events_hint_ = s.rec.host_events.size();
    device_events_hint_ = s.rec.device_events.size();
    closed_.push_back(std::move(s.rec));
    open_.pop_front();
    ++steps_closed_;
  }
}

std::vector<StepRecord> StepAssembler::TakeClosed() {
  std::vector<StepRecord> out;
  out.swap(closed_);
  return out;
}

}  // namespace liveprof
