// MemoryState, the ops of allocations (memory_state.h, "Breakdown at the
// peak"): each allocation waits on its track for the first span that holds
// it, and the peak's (op, size) rows follow what is learned after the peak.
#include <boost/unordered/unordered_flat_map.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aggregators/pytorch/pytorch_names.h"
#include "aggregators/tf/memory_state.h"
#include "aggregators/tf/memory_state_internal.h"
#include "stream/alloc_annotation.h"

namespace liveprof {

using memory_internal::HistAdd;

bool MemoryState::IsStepName(NameId name) {
  if (catalog_ == nullptr) return false;
  if (name >= step_name_.size()) {
    if (name >= memory_internal::kDenseNames) {
      return catalog_->Name(name).starts_with("ProfilerStep#");
    }
    step_name_.resize(size_t{name} + 1, 0);
  }
  if (step_name_[name] == 0) {
    const std::string_view n = catalog_->Name(name);
    int64_t step = 0;
    const bool is_step = n.starts_with("ProfilerStep#") && pytorch::ParseStepNumber(n.substr(13), &step);
    step_name_[name] = is_step ? 2 : 1;
  }
  return step_name_[name] == 2;
}

// The allocations of the span's track inside [ts, end) are its own: arrived
// before it and after any span inside it, so it is their innermost.
void MemoryState::OnSpan(const Event& e) {
  const auto found = pending_.find(e.track);
  if (found == pending_.end()) return;
  found->second.seen_span = true;
  found->second.spanless = false;
  std::deque<Pending>& q = found->second.q;
  if (q.empty() || e.name == 0 || IsStepName(e.name)) return;
  const uint64_t end = e.ts + e.dur;
  size_t last = q.size();
  while (last > 0 && q[last - 1].ts >= end) --last;  // at or after its end: not inside.
  size_t first = last;
  while (first > 0 && q[first - 1].ts >= e.ts) --first;
  if (first == last) return;
  for (size_t i = first; i < last; ++i) Attribute(q[i], e.name);
  q.erase(q.begin() + static_cast<std::ptrdiff_t>(first), q.begin() + static_cast<std::ptrdiff_t>(last));
  pending_count_ -= last - first;
}

MemoryState::TrackQueue& MemoryState::QueueOf(TrackId track) {
  if (last_queue_ == nullptr || last_track_ != track) {
    last_queue_ = &pending_[track];
    last_track_ = track;
  }
  return *last_queue_;
}

void MemoryState::Attribute(const Pending& p, NameId op) {
  Memory& m = *memories_[p.memory];
  const RowKey from{0, p.bytes};
  const RowKey to{op, p.bytes};
  const auto it = m.live.find(p.address);
  if (it != m.live.end() && it->second.seq == p.seq) {
    it->second.op = op;
    it->second.pending = false;
    HistAdd(m.hist, from, false);
    HistAdd(m.hist, to, true);
    if (m.has_peak && p.seq <= m.peak.seq) {  // live at the peak: its copy moves too.
      HistAdd(m.peak_hist, from, false);
      HistAdd(m.peak_hist, to, true);
    } else {
      m.LogDelta(from, false);
      m.LogDelta(to, true);
    }
    return;
  }
  const auto freed = m.freed_pending.find(p.seq);
  if (freed == m.freed_pending.end()) return;  // freed before the peak: no trace left.
  m.freed_pending.erase(freed);
  HistAdd(m.peak_hist, from, false);
  HistAdd(m.peak_hist, to, true);
  m.LogDelta(to, false);  // the log still leads from the peak's copy to hist.
  m.LogDelta(from, true);
}

// `p` gives up on a span: it stays unattributed.
void MemoryState::Unpend(const Pending& p) {
  Memory& m = *memories_[p.memory];
  const auto it = m.live.find(p.address);
  if (it != m.live.end() && it->second.seq == p.seq) it->second.pending = false;
  m.freed_pending.erase(p.seq);
}

void MemoryState::BreakdownAtPeak(const Memory& m, MemoryStateSnapshot::Memory* out) const {
  out->breakdown_at_peak = true;
  out->peak_unseen_allocations = m.unseen_count;
  out->peak_unseen_bytes = m.unseen_bytes;
  auto name = [&](NameId op) { return op == 0 ? std::string() : AllocatorName(op); };
  // Rows of one op: its annotations (shapes, regions) add up.
  boost::unordered_flat_map<std::string, MemoryStateSnapshot::OpRow> by_op;
  std::vector<std::pair<RowKey, uint64_t>> rows;
  rows.reserve(m.peak_hist.size());
  m.peak_hist.ForEach([&](RowKey key, uint64_t count) { rows.emplace_back(key, count); });
  for (const auto& [key, count] : rows) {
    out->peak_allocations += count;
    if (key.op != 0) {
      out->peak_attributed_allocations += count;
      out->peak_attributed_bytes += key.bytes * count;
    }
    MemoryStateSnapshot::OpRow& r = by_op[std::string(ParseAllocAnnotation(name(key.op)).op)];
    r.bytes += key.bytes * count;
    r.allocations += count;
  }
  const size_t keep = std::min(rows.size(), options_.breakdown_rows);
  // Total bytes descending, then size descending, then op name.
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(keep), rows.end(),
                    [&](const auto& a, const auto& b) {
                      const uint64_t ta = a.first.bytes * a.second;
                      const uint64_t tb = b.first.bytes * b.second;
                      if (ta != tb) return ta > tb;
                      if (a.first.bytes != b.first.bytes) return a.first.bytes > b.first.bytes;
                      return name(a.first.op) < name(b.first.op);
                    });
  for (size_t i = 0; i < keep; ++i) {
    const auto& [key, count] = rows[i];
    const std::string text = name(key.op);
    const AllocAnnotation a = ParseAllocAnnotation(text);
    out->breakdown.push_back({std::string(a.op), key.bytes, count, key.bytes * count, a.requested_bytes,
                              std::string(a.region), std::string(a.data_type), std::string(a.shape)});
  }
  for (auto& [op, r] : by_op) {
    r.op = op;
    out->breakdown_by_op.push_back(std::move(r));
  }
  std::sort(out->breakdown_by_op.begin(), out->breakdown_by_op.end(),
            [](const auto& a, const auto& b) { return a.bytes != b.bytes ? a.bytes > b.bytes : a.op < b.op; });
  if (out->breakdown_by_op.size() > options_.breakdown_rows) {
    out->breakdown_by_op.resize(options_.breakdown_rows);
  }
}

}  // namespace liveprof
