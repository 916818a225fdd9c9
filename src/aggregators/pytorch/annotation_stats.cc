#include "aggregators/pytorch/annotation_stats.h"

#include <algorithm>
#include <string_view>

#include "aggregators/catalog.h"
#include "base/json_writer.h"

namespace liveprof {

namespace {

constexpr std::string_view kStepPrefix = "ProfilerStep#";
constexpr std::string_view kStepRow = "ProfilerStep#*";

}  // namespace

AnnotationStats::AnnotationStats(const Catalog* catalog, Options options)
    : catalog_(catalog), options_(options), launches_(options.max_launches) {}

uint32_t AnnotationStats::RowOf(NameId name) {
  if (name >= row_of_name_.size()) row_of_name_.resize(std::max<size_t>(name + 1, 2 * row_of_name_.size()), kNotYet);
  uint32_t& slot = row_of_name_[name];
  if (slot != kNotYet) return slot;
  const std::string_view text = catalog_ != nullptr ? catalog_->Name(name) : std::string_view();
  if (text.empty()) return kNoRow;  // may be defined later: not cached.
  const std::string key(text.starts_with(kStepPrefix) ? kStepRow : text);
  if (const auto it = index_.find(key); it != index_.end()) return slot = it->second;
  if (rows_.size() >= options_.max_rows) return slot = kNoRow;
  slot = static_cast<uint32_t>(rows_.size());
  rows_.push_back(AnnotationRow{key});
  index_.emplace(key, slot);
  return slot;
}

void AnnotationStats::Forget(const Launch& l) {
  if (l.row != kNoRow) return;
  ++forgotten_;
  waiting_ -= l.kernels;
  unattributed_ += l.kernels;
}

// Inline in Consume, per launch (and AddKernel per kernel).
[[gnu::always_inline]] inline void AnnotationStats::AddLaunch(const Event& e) {
  bool made = false;
  const Launch* const found = LaunchOf(e.corr, &made);
  if (found == nullptr) {  // past the window already: nothing can claim it.
    ++forgotten_;
    return;
  }
  const Launch& l = *found;
  if (!made) {
    if (l.row != kNoRow) return;  // a second record of one call (runtime and driver).
    if (l.kernels == 0) return;
  }
  if (e.track >= threads_.size()) threads_.resize(std::max<size_t>(e.track + 1, 2 * threads_.size()));
  Thread& t = threads_[e.track];
  if (t.head == t.waiting.size() || t.waiting.back().ts <= e.ts) [[likely]] {
    t.waiting.push_back({e.ts, e.corr});
    // A thread whose launches no annotation claims (autograd's) keeps its
    // most recent ones only.
    t.KeepNewest(options_.max_pending_per_thread);
    return;
  }
  if (t.out_of_order.empty()) out_of_order_.push_back(e.track);
  t.out_of_order.push_back({e.ts, e.corr});
}

// What inserting each set-aside launch in time order would give, in one
// pass: ties after the launches already there, in arrival order (a stable
// sort and merge), then the oldest past the cap let go.
void AnnotationStats::Merge(Thread& t) {
  if (t.out_of_order.empty()) return;
  auto by_ts = [](const Pending& a, const Pending& b) { return a.ts < b.ts; };
  std::stable_sort(t.out_of_order.begin(), t.out_of_order.end(), by_ts);
  std::vector<Pending>& w = t.waiting;
  // Only the tail from the first set-aside launch's place moves.
  const auto from =
      std::upper_bound(w.begin() + static_cast<ptrdiff_t>(t.head), w.end(), t.out_of_order.front(), by_ts);
  const ptrdiff_t start = from - w.begin();
  const ptrdiff_t middle = static_cast<ptrdiff_t>(w.size());
  w.insert(w.end(), t.out_of_order.begin(), t.out_of_order.end());
  std::inplace_merge(w.begin() + start, w.begin() + middle, w.end(), by_ts);
  t.out_of_order.clear();
  t.KeepNewest(options_.max_pending_per_thread);
}

[[gnu::always_inline]] inline void AnnotationStats::AddKernel(const Event& e) {
  bool made = false;
  Launch* const found = LaunchOf(e.corr, &made);  // a kernel before its launch: waits.
  if (found == nullptr) {                         // its launch is past the window: forgotten.
    ++unattributed_;
    return;
  }
  Launch& l = *found;
  if (l.row != kNoRow) {
    AnnotationRow& r = rows_[l.row];
    ++r.kernels;
    r.gpu_ns += e.dur;
    ++attributed_;
    return;
  }
  ++l.kernels;
  l.kernel_ns += e.dur;
  ++waiting_;
}

void AnnotationStats::AddAnnotation(const Event& e) {
  const uint32_t row = RowOf(e.name);
  if (row == kNoRow) {
    if (catalog_ != nullptr && !catalog_->Name(e.name).empty()) ++over_cap_;
    return;
  }
  AnnotationRow& r = rows_[row];
  ++r.count;
  r.host_ns += e.dur;
  // A late annotation (after the reorder window) claims nothing: what it
  // held may have gone to its parent already.
  if (e.track >= threads_.size() || (e.flags & kFlagLate) != 0) return;
  // Claim the launches of this thread that began inside it (see the header;
  // [b, e) bounds it too, should a later launch have come first).
  Thread& t = threads_[e.track];
  Merge(t);
  std::vector<Pending>& p = t.waiting;
  auto by_ts = [](const Pending& x, uint64_t ts) { return x.ts < ts; };
  const auto first = std::lower_bound(p.begin() + static_cast<ptrdiff_t>(t.head), p.end(), e.ts, by_ts);
  const auto last = std::lower_bound(first, p.end(), e.ts + e.dur, by_ts);
  for (auto at = first; at != last; ++at) {
    Launch* const found = launches_.Find(at->corr);
    if (found == nullptr || found->row != kNoRow) continue;
    Launch& l = *found;
    l.row = row;
    r.kernels += l.kernels;
    r.gpu_ns += l.kernel_ns;
    attributed_ += l.kernels;
    waiting_ -= l.kernels;
    l.kernels = 0;
    l.kernel_ns = 0;
  }
  p.erase(first, last);
}

void AnnotationStats::Consume(std::span<const Event> events) {
  for (const Event& e : events) {
    // Ids beyond any NameTable's (2^22) are corrupt: the tables are indexed by them.
    if (e.dur > kMaxEventDurationNs || e.name >= kMaxId || e.track >= kMaxId) continue;
    switch (e.kind) {
      case EventKind::kHostSpan: AddAnnotation(e); break;
      case EventKind::kRuntimeApi:
        if (e.corr != 0) AddLaunch(e);
        break;
      case EventKind::kKernel:
        if (e.corr != 0) AddKernel(e);
        break;
      default: break;
    }
  }
  for (const TrackId track : out_of_order_) Merge(threads_[track]);
  out_of_order_.clear();
}

AnnotationStatsSnapshot AnnotationStats::Snapshot() const {
  AnnotationStatsSnapshot s;
  s.rows = rows_;
  std::sort(s.rows.begin(), s.rows.end(), [](const AnnotationRow& a, const AnnotationRow& b) {
    if (a.gpu_ns != b.gpu_ns) return a.gpu_ns > b.gpu_ns;
    if (a.host_ns != b.host_ns) return a.host_ns > b.host_ns;
    return a.name < b.name;
  });
  s.kernels_attributed = attributed_;
  s.kernels_unattributed = unattributed_ + waiting_;
  s.annotations_over_cap = over_cap_;
  s.launches_forgotten = forgotten_;
  return s;
}

void AnnotationStatsSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.Key("rows");
  w.BeginArray();
  for (const AnnotationRow& r : rows) {
    w.BeginObject();
    w.KV("name", r.name);
    w.KV("count", r.count);
    w.KV("host_ms", static_cast<double>(r.host_ns) / 1e6);
    w.KV("avg_host_us", r.count == 0 ? 0.0 : static_cast<double>(r.host_ns) / 1e3 / static_cast<double>(r.count));
    w.KV("kernels", r.kernels);
    w.KV("gpu_ms", static_cast<double>(r.gpu_ns) / 1e6);
    w.EndObject();
  }
  w.EndArray();
  w.KV("kernels_attributed", kernels_attributed);
  w.KV("kernels_unattributed", kernels_unattributed);
  w.KV("annotations_over_cap", annotations_over_cap);
  w.KV("launches_forgotten", launches_forgotten);
  w.EndObject();
}

}  // namespace liveprof
