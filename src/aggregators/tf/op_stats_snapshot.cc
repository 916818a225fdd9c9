// OpStats's snapshot (op_stats.h): the table rows of a window, each side
// ranked and cut, the input-op table; row names parsed and interned once.
#include "aggregators/tf/op_stats.h"

#include <algorithm>
#include <string>

#include "base/top_n.h"

namespace liveprof {

namespace {

constexpr std::string_view kDatasetType = "Dataset";

// ---------------------------------------------------------------------------
// Snapshot helpers.

constexpr std::string_view kDeviceSide = "Device";
constexpr std::string_view kHostSide = "Host";

// Device-op name of a copy / memset kind (the documented deviation).
std::string_view CopyOpName(EventKind kind) {
  switch (kind) {
    case EventKind::kMemcpyHtoD: return "MemcpyHtoD";
    case EventKind::kMemcpyDtoH: return "MemcpyDtoH";
    case EventKind::kMemcpyDtoD: return "MemcpyDtoD";
    case EventKind::kMemcpyHtoH: return "MemcpyHtoH";
    case EventKind::kMemcpyPtoP: return "MemcpyPtoP";
    case EventKind::kMemcpyOther: return "Memcpy";
    case EventKind::kMemset: return "Memset";
    default: return "Unknown";
  }
}

// A table row before ranking: its names point into the row tables.
struct Group {
  std::string_view name;
  std::string_view type;
  uint64_t occurrences = 0;
  uint64_t time_ns = 0;
  uint64_t self_ns = 0;
};

// Sums by row id, with the rows touched; `max_occurrences` is the device
// roll-up rule (docs/semantics-tf.md §6.3), else occurrences add up.
class RowSums {
 public:
  RowSums(bool max_occurrences, size_t rows) : max_occurrences_(max_occurrences), sums_(rows) {}
  void Add(uint32_t row, uint64_t occurrences, uint64_t time_ns, uint64_t self_ns) {
    if (row >= sums_.size()) sums_.resize(std::max<size_t>(row + 1, sums_.size() * 2));
    Sum& s = sums_[row];
    if (!s.seen) {
      s.seen = true;
      touched_.push_back(row);
    }
    s.occurrences = max_occurrences_ ? std::max(s.occurrences, occurrences) : s.occurrences + occurrences;
    s.time_ns += time_ns;
    s.self_ns += self_ns;
  }
  // The top `n` rows (plus `idle`, if given, as one more candidate) as
  // Groups, self time descending, then name and type ascending. `order[row]`
  // is the row's rank in (name, type) order and `idle_order` IDLE's, so
  // ranking compares integers only; `name_of(row)` -> {name, type}.
  template <class NameOf>
  std::vector<Group> Top(size_t n, const std::vector<uint32_t>& order, NameOf name_of, const Group* idle,
                         uint32_t idle_order) const {
    constexpr uint32_t kIdleRow = UINT32_MAX;
    struct Ranked {
      uint64_t self_ns;
      uint32_t order;
      uint32_t row;
    };
    std::vector<Ranked> ranked;
    ranked.reserve(touched_.size() + 1);
    for (const uint32_t row : touched_) ranked.push_back({sums_[row].self_ns, order[row], row});
    if (idle != nullptr) ranked.push_back({idle->self_ns, idle_order, kIdleRow});
    KeepTopN(&ranked, n, [](const Ranked& a, const Ranked& b) {
      if (a.self_ns != b.self_ns) return a.self_ns > b.self_ns;
      return a.order < b.order;
    });
    std::vector<Group> out;
    out.reserve(ranked.size());
    for (const Ranked& r : ranked) {
      if (r.row == kIdleRow) {
        out.push_back(*idle);
        continue;
      }
      const Sum& s = sums_[r.row];
      const auto [name, type] = name_of(r.row);
      out.push_back(Group{name, type, s.occurrences, s.time_ns, s.self_ns});
    }
    return out;
  }

 private:
  struct Sum {
    uint64_t occurrences = 0;
    uint64_t time_ns = 0;
    uint64_t self_ns = 0;
    bool seen = false;
  };
  bool max_occurrences_;
  std::vector<Sum> sums_;
  std::vector<uint32_t> touched_;
};

double SafeDivide(double a, double b) { return b == 0 ? 0.0 : a / b; }

// Ranks, cuts and fills one side's rows; `rank` runs on across sides.
template <class NameOf>
void FillSide(const RowSums& sums, const std::vector<uint32_t>& order, uint32_t idle_row, NameOf name_of,
              uint64_t op_ns, uint64_t idle_ns, bool include_idle, size_t top_n, std::string_view side_name, int* rank,
              OpStatsSide* side) {
  side->op_ns = op_ns;
  side->idle_ns = idle_ns;
  side->total_ns = op_ns + idle_ns;
  const Group idle{OpStats::kIdleName, OpStats::kIdleName, 0, idle_ns, idle_ns};
  const bool with_idle = include_idle && side->total_ns > 0;
  const std::vector<Group> groups = sums.Top(top_n, order, name_of, with_idle ? &idle : nullptr, order[idle_row]);
  const double denominator_us = static_cast<double>(include_idle ? side->total_ns : side->op_ns) / 1e3;
  double cumulative = 0;
  side->rows.reserve(groups.size());
  for (const Group& g : groups) {
    OpStatsRow r;
    r.rank = ++*rank;
    r.side = side_name;
    r.type.assign(g.type);
    r.name.assign(g.name);
    r.occurrences = g.occurrences;
    r.total_ns = g.time_ns;
    r.self_ns = g.self_ns;
    r.total_us = static_cast<double>(g.time_ns) / 1e3;
    r.self_us = static_cast<double>(g.self_ns) / 1e3;
    r.avg_us = SafeDivide(r.total_us, static_cast<double>(g.occurrences));
    r.avg_self_us = SafeDivide(r.self_us, static_cast<double>(g.occurrences));
    r.self_pct = 100.0 * SafeDivide(r.self_us, denominator_us);
    cumulative += r.self_pct;
    r.cumulative_pct = cumulative;
    side->rows.push_back(std::move(r));
  }
}

}  // namespace

std::string OpStats::DisplayName(NameId id) const {
  if (catalog_ == nullptr) return "#" + std::to_string(id);
  return catalog_->DisplayName(id);
}

uint32_t OpStats::InternRow(std::string_view name, std::string_view type) const {
  std::string key(name);
  key.push_back('\0');
  key.append(type);
  const uint32_t row = row_keys_.Id(key);
  if (row == rows_.size()) rows_.push_back(RowName{row_strings_.Id(name), row_strings_.Id(type)});
  return row;
}

uint32_t OpStats::RowOf(RowSource source, uint32_t id) const {
  std::vector<uint32_t>& cache = row_cache_[static_cast<size_t>(source)];
  if (id < cache.size() && cache[id] != kNoRow) return cache[id];
  // The name the row is made of, and whether it is final.
  uint32_t row = kNoRow;
  NameId named = 0;  // the id whose definition the row depends on (0: none).
  if (source == RowSource::kDevice) {
    const DeviceOp& d = device_ops_[id];
    if (d.kind != EventKind::kKernel) {
      const std::string_view name = CopyOpName(d.kind);
      row = InternRow(name, name);
    } else if (d.op == 0) {
      row = InternRow(DisplayName(d.kernel), "Unknown");
      named = d.kernel;
    } else {
      named = d.op;
    }
  } else {
    named = id;
  }
  if (row == kNoRow) {
    const std::string full = DisplayName(named);
    const ParsedOp p = ParseTfOpName(full);
    if (source == RowSource::kInput) {
      row = InternRow(full, p.category == OpCategory::kDataset ? kDatasetType : std::string_view("Input"));
    } else if (p.category != OpCategory::kUnknown) {
      row = InternRow(p.name, p.type);
    } else {
      row = InternRow(full, full);
    }
  }
  if (named == 0 || catalog_ == nullptr || catalog_->Defined(named)) {
    if (id >= cache.size()) cache.resize(std::max<size_t>(id + 1, cache.size() * 2), kNoRow);
    cache[id] = row;
  }
  return row;
}

const std::vector<uint32_t>& OpStats::RowOrder() const {
  const uint32_t n = static_cast<uint32_t>(rows_.size());
  const uint32_t old = static_cast<uint32_t>(sorted_rows_.size());
  if (old == n) return row_order_;
  // Sort the new rows, merge them into the sorted list, renumber: string
  // comparisons only when rows appear, never on a render without new ones.
  auto before = [this](uint32_t a, uint32_t b) {
    const std::string_view an = row_strings_[rows_[a].name], bn = row_strings_[rows_[b].name];
    if (an != bn) return an < bn;
    return row_strings_[rows_[a].type] < row_strings_[rows_[b].type];
  };
  for (uint32_t row = old; row < n; ++row) sorted_rows_.push_back(row);
  std::sort(sorted_rows_.begin() + old, sorted_rows_.end(), before);
  std::inplace_merge(sorted_rows_.begin(), sorted_rows_.begin() + old, sorted_rows_.end(), before);
  row_order_.resize(n);
  for (uint32_t i = 0; i < n; ++i) row_order_[sorted_rows_[i]] = i;
  return row_order_;
}

OpStatsSnapshot OpStats::Snapshot(const OpStatsSnapshotOptions& options) const {
  OpStatsSnapshot snap;
  snap.window_ns = options.window_ns;
  snap.include_idle = options.include_idle;

  // The sums over the window: the running totals (or the window's buckets)
  // and the current bucket, each read in place.
  DenseBucket window;
  if (options.window_ns != 0) {
    const uint64_t from = newest_end_ > options.window_ns ? newest_end_ - options.window_ns : 0;
    for (const Bucket& b : ring_) {
      if ((b.index + 1) * options_.bucket_ns > from) window.AddBucket(b);
    }
  }
  const DenseBucket* parts[] = {options.window_ns == 0 ? &totals_ : &window, &current_};
  // Per track and per device the parts are merged first: IDLE is not additive.
  Dense<SpanStats> tracks;
  Dense<SpanStats> devices;
  for (const DenseBucket* part : parts) {
    for (const uint32_t key : part->tracks.touched) tracks.At(key).Add(part->tracks.values[key]);
    for (const uint32_t key : part->devices.touched) {
      devices.At(key).Add(part->devices.values[key]);
    }
  }
  auto names_of = [this](uint32_t row) {
    return std::pair<std::string_view, std::string_view>(row_strings_[rows_[row].name], row_strings_[rows_[row].type]);
  };

  // Device side.
  // A device op's occurrences add up over the parts; a row takes the max
  // over its device ops (§6.3), so the parts are merged per op first.
  Dense<DeviceOpStats> device_ops;
  for (const DenseBucket* part : parts) {
    for (const uint32_t id : part->device_ops.touched) {
      device_ops.At(id).Add(part->device_ops.values[id]);
    }
  }
  RowSums device(/*max_occurrences=*/true, rows_.size());
  for (const uint32_t id : device_ops.touched) {
    const DeviceOpStats& s = device_ops.values[id];
    device.Add(RowOf(RowSource::kDevice, id), s.occurrences, s.time_ns, s.time_ns);
  }
  uint64_t device_op_ns = 0;
  uint64_t device_idle_ns = 0;
  for (const uint32_t key : devices.touched) {
    device_op_ns += devices.values[key].self_ns;
    device_idle_ns += devices.values[key].idle_ns();
  }
  int rank = 0;
  const std::vector<uint32_t>& order = RowOrder();
  FillSide(device, order, idle_row_, names_of, device_op_ns, device_idle_ns, options.include_idle, options.top_n,
           kDeviceSide, &rank, &snap.device);

  // Host side: counted host ops and input spans; the input spans also make
  // the input-op table (every one of them, merged by name).
  RowSums host(/*max_occurrences=*/false, rows_.size());
  for (const DenseBucket* part : parts) {
    for (const uint32_t id : part->host_ops.touched) {
      const HostStats& s = part->host_ops.values[id];
      host.Add(RowOf(RowSource::kHost, id), s.occurrences, s.time_ns, s.self_ns);
    }
  }
  Dense<InputStats> inputs;  // by row.
  for (const DenseBucket* part : parts) {
    for (const uint32_t id : part->input_ops.touched) {
      const InputStats& s = part->input_ops.values[id];
      const uint32_t row = RowOf(RowSource::kInput, id);
      host.Add(row, s.occurrences, s.time_ns, s.self_ns);
      inputs.At(row).Add(s);
    }
  }
  snap.host_input_ops.reserve(inputs.touched.size());
  for (const uint32_t row : inputs.touched) {
    const InputStats& s = inputs.values[row];
    InputOpStats in;
    in.name = row_strings_[rows_[row].name];
    in.stage = s.stage;
    in.occurrences = s.occurrences;
    in.total_ns = s.time_ns;
    in.self_ns = s.self_ns;
    in.nested_wait_ns = s.nested_wait_ns;
    in.nested_waits = s.nested_waits;
    snap.host_input_ops.push_back(std::move(in));
  }
  std::sort(snap.host_input_ops.begin(), snap.host_input_ops.end(), [](const InputOpStats& a, const InputOpStats& b) {
    if (a.self_ns != b.self_ns) return a.self_ns > b.self_ns;
    return a.name < b.name;
  });
  uint64_t host_op_ns = 0;
  uint64_t host_idle_ns = 0;
  for (const uint32_t key : tracks.touched) {
    host_op_ns += tracks.values[key].self_ns;
    host_idle_ns += tracks.values[key].idle_ns();
  }
  RowOrder();  // the host side may have added rows.
  FillSide(host, order, idle_row_, names_of, host_op_ns, host_idle_ns, options.include_idle, options.top_n, kHostSide,
           &rank, &snap.host);
  // With no device at all (a CPU job), a host thread's time outside its ops
  // is not IDLE, which in the TF tools means a device with nothing to run:
  // it is the program's host compute that no op names (the optimizer's
  // step, Python), said so.
  if (snap.device.total_ns == 0) {
    for (OpStatsRow& r : snap.host.rows) {
      if (r.name == kIdleName && r.type == kIdleName) r.name = r.type = std::string(kHostUnattributedName);
    }
  }
  return snap;
}

}  // namespace liveprof
