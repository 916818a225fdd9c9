#include "aggregators/stream_summary.h"

#include <algorithm>

namespace liveprof {

void StreamSummary::Consume(std::span<const Event> events) {
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::kNameDef:
        catalog_.Consume(std::span(&e, 1));
        ++totals_.name_defs;
        continue;
      case EventKind::kTrackDef:
        tracks_[e.track].first = e.name;
        ++totals_.track_defs;
        continue;
      default: break;
    }
    ++totals_.events;
    if (static_cast<size_t>(e.kind) < kEventKindCount) ++totals_.by_kind[static_cast<size_t>(e.kind)];
    if (e.flags & kFlagLate) ++totals_.late;
    if (totals_.first_ts == 0 || e.ts < totals_.first_ts) totals_.first_ts = e.ts;
    totals_.last_end = std::max(totals_.last_end, e.end());
    ++tracks_[e.track].second;
    if (IsSpanKind(e.kind)) {
      NameStats& s = spans_[NameKey{e.name, e.kind}];
      ++s.count;
      s.total_ns += e.dur;
      s.max_ns = std::max(s.max_ns, e.dur);
    }
    if (e.kind == EventKind::kStepMarker) {
      totals_.steps.push_back({e.payload.step.step_num, e.ts, e.dur});
    }
  }
}

StreamSummarySnapshot StreamSummary::Snapshot(size_t top_n) const {
  StreamSummarySnapshot s = totals_;
  auto name_of = [&](NameId id) { return catalog_.DisplayName(id); };
  for (const auto& [id, t] : tracks_) {
    if (id == 0 && t.second == 0) continue;
    s.tracks.push_back({id, id == 0 ? std::string("(none)") : name_of(t.first), t.second});
  }
  std::sort(s.tracks.begin(), s.tracks.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (const auto& [key, st] : spans_) {
    s.top_names.push_back({name_of(key.name), key.kind, st.count, st.total_ns, st.max_ns});
  }
  std::sort(s.top_names.begin(), s.top_names.end(), [](const auto& a, const auto& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (s.top_names.size() > top_n) s.top_names.resize(top_n);
  return s;
}

}  // namespace liveprof
