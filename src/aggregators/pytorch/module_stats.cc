#include "aggregators/pytorch/module_stats.h"

#include <algorithm>
#include <string_view>

#include "aggregators/catalog.h"
#include "base/json_writer.h"

namespace liveprof {
namespace {

constexpr std::string_view kForwardPrefix = "nn.Module: ";
constexpr std::string_view kMemoryPrefix = "nn.Module memory: ";
constexpr std::string_view kBackwardSuffix = ".backward";
constexpr size_t kMaxUnclaimedPerTrack = 4096;  // (a forward whose parent never ends: bounded)

}  // namespace

const ModuleStats::NameRole& ModuleStats::RoleOf(NameId name) {
  if (name >= roles_.size()) roles_.resize(std::max<size_t>(name + 1, 2 * roles_.size()));
  NameRole& r = roles_[name];
  // A name not yet defined stays unknown (looked at again when it is).
  if (r.role != Role::kUnknown || !catalog_->Defined(name)) return r;
  std::string_view s = catalog_->Name(name);
  Role role = Role::kNone;
  if (s.starts_with(kMemoryPrefix)) {
    role = Role::kMemory;
    s.remove_prefix(kMemoryPrefix.size());
  } else if (s.starts_with(kForwardPrefix)) {
    s.remove_prefix(kForwardPrefix.size());
    role = Role::kForward;
    if (s.ends_with(kBackwardSuffix)) {
      role = Role::kBackward;
      s.remove_suffix(kBackwardSuffix.size());
    }
  }
  if (role == Role::kNone || s.empty()) {
    r.role = Role::kNone;
    return r;
  }
  auto it = index_.find(std::string(s));
  if (it == index_.end()) {
    if (rows_.size() >= options_.max_modules) {
      r.role = Role::kOverCap;
      return r;
    }
    it = index_.emplace(std::string(s), static_cast<uint32_t>(rows_.size())).first;
    rows_.push_back(ModuleRow{.name = std::string(s)});
  }
  r.role = role;
  r.row = it->second;
  return r;
}

void ModuleStats::AddForward(const Event& e, ModuleRow& row) {
  const uint64_t begin = e.ts, end = e.ts + e.dur;
  if (e.track >= unclaimed_.size()) unclaimed_.resize(e.track + 1);
  std::vector<Interval>& open = unclaimed_[e.track];
  uint64_t children = 0;
  if (open.empty() || open.back().end <= end) {  // (else a late one: claims nothing, not claimable)
    while (!open.empty() && open.back().begin >= begin) {
      children += open.back().end - open.back().begin;
      open.pop_back();
    }
    if (open.size() >= kMaxUnclaimedPerTrack) open.erase(open.begin(), open.begin() + open.size() / 2);
    open.push_back({begin, end});
  }
  ++row.calls;
  row.forward_ns += e.dur;
  row.forward_self_ns += e.dur > children ? e.dur - children : 0;
}

void ModuleStats::Consume(std::span<const Event> events) {
  for (const Event& e : events) {
    if (e.kind != EventKind::kHostSpan && e.kind != EventKind::kCounter) continue;
    const NameRole& r = RoleOf(e.name);
    if (r.role == Role::kNone || r.role == Role::kUnknown) continue;
    if (r.role == Role::kOverCap) {
      ++over_cap_;
      continue;
    }
    ModuleRow& row = rows_[r.row];
    if (e.kind == EventKind::kCounter) {
      if (r.role != Role::kMemory) continue;
      const double v = e.payload.counter.value;
      if (!(v == v)) continue;  // (NaN)
      row.memory_last_bytes = v;
      row.memory_max_bytes = row.memory_samples == 0 ? v : std::max(row.memory_max_bytes, v);
      ++row.memory_samples;
    } else if (r.role == Role::kForward) {
      AddForward(e, row);
    } else if (r.role == Role::kBackward) {
      ++row.backward_calls;
      row.backward_ns += e.dur;
    }
  }
}

ModuleStatsSnapshot ModuleStats::Snapshot() const {
  ModuleStatsSnapshot s;
  s.rows = rows_;
  std::sort(s.rows.begin(), s.rows.end(), [](const ModuleRow& a, const ModuleRow& b) {
    const uint64_t ta = a.forward_ns + a.backward_ns, tb = b.forward_ns + b.backward_ns;
    return ta != tb ? ta > tb : a.name < b.name;
  });
  s.modules_over_cap = over_cap_;
  return s;
}

void ModuleStatsSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.Key("rows");
  w.BeginArray();
  for (const ModuleRow& r : rows) {
    w.BeginObject();
    w.KV("name", r.name);
    w.KV("calls", r.calls);
    w.KV("forward_ms", static_cast<double>(r.forward_ns) / 1e6);
    w.KV("forward_self_ms", static_cast<double>(r.forward_self_ns) / 1e6);
    w.KV("avg_forward_us", r.calls == 0 ? 0.0 : static_cast<double>(r.forward_ns) / 1e3 / static_cast<double>(r.calls));
    w.KV("backward_calls", r.backward_calls);
    w.KV("backward_ms", static_cast<double>(r.backward_ns) / 1e6);
    w.KV("avg_backward_us", r.backward_calls == 0
                                ? 0.0
                                : static_cast<double>(r.backward_ns) / 1e3 / static_cast<double>(r.backward_calls));
    w.Key("memory_bytes_last");
    if (r.memory_samples == 0) w.Null();
    else w.Double(r.memory_last_bytes);
    w.Key("memory_bytes_max");
    if (r.memory_samples == 0) w.Null();
    else w.Double(r.memory_max_bytes);
    w.EndObject();
  }
  w.EndArray();
  w.KV("modules_over_cap", modules_over_cap);
  w.EndObject();
}

}  // namespace liveprof
