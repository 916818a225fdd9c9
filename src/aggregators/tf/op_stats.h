// OpStats: the "TF stats" / framework op stats table (docs/semantics-tf.md
// §6): for every framework op, how often it ran and how much time and self
// time it took, on the device (GPU kernels rolled up to the framework op that
// launched them) and on the host (framework ops, input-pipeline spans, nested
// per thread), with the IDLE time of each side. Op names are parsed by
// tf_op_name.h (§0.3).
//
// Host side (§6.1). Counted host ops: kFrameworkOp and kInputSpan always;
// kHostSpan only if its name parses to a known category (user scopes are
// ignored as xprof ignores user TraceMes: they neither count nor subtract),
// or is a PyTorch DataLoader's wait (pytorch::IsDataLoaderName: an input op
// of stage kWait, as liveprof run records it live). A wait inside another
// wait on its thread counts Diag::input_wait_nested; the outer one's self
// time excludes it, so the time is counted once.
// Every other kind (kRuntimeApi, kStepMarker...) is ignored. Self time comes
// from nesting on each track with the end-order trick (§13): events of a track
// arrive children first, so each track keeps a stack of completed counted ops
// not yet claimed by a parent; a new op claims every unclaimed op it contains
// (self = dur - sum of claimed direct children). An op that partially overlaps
// an unclaimed one (neither contains the other) counts Diag::span_misnested
// once and the overlapped op is not subtracted (it stays claimable by a later
// op that contains it). Per track, IDLE = (last end - first begin of its
// counted ops) - sum of their self times; tracks are summed.
//
// Device side (§6.2, §6.3). A kernel with payload.kernel.op != 0 is the device
// op "<op name>/<kernel name>"; device ops are rolled up to the framework op
// (grouped by the parsed op name and type; occurrences = max over the op's
// device ops, time and self time summed). A kernel with op == 0 keeps its own
// name, type "Unknown". Device self time = duration (kernels do not nest).
// Per device, IDLE = max(0, (max end - min begin of its events) - sum of self);
// devices are summed.
//
// DEVIATIONS from xprof, on purpose:
//  * Copies and memsets (which carry no op attribution in our Event) are
//    recorded as device ops named by their kind, with that name as type:
//    "MemcpyHtoD", "MemcpyDtoH", "MemcpyDtoD", "MemcpyHtoH", "MemcpyPtoP",
//    "Memcpy" (direction unknown), "Memset". xprof drops un-annotated copies
//    into IDLE; users want to see their copies.
//  * A framework-op name that does not parse as a TF/JAX op (PyTorch
//    "aten::conv2d") gets the whole name as its type (xprof: empty type), on
//    both sides.
//  * Input spans (kInputSpan) have type "Dataset" when the name is a tf.data
//    iterator ("Iterator::..."), else "Input"; their name is the whole name.
//  * Rows are grouped by (name, type); host rows sum occurrences, device rows
//    take the max (the §6.3 roll-up rule).
//  * The top-N cut is applied after IDLE is excluded (xprof cuts first, so its
//    "without idle" table can show 499 rows).
//  * Rank runs on from the device rows into the host rows, as in xprof.
//  * Host IDLE is clamped at 0 per track (only reachable with misnested or
//    out-of-order input).
//  * An op that ends before the latest unclaimed op of its track (out of
//    order: a late event) claims nothing and is not claimable: self = dur.
//  * Each track keeps at most Options::max_unclaimed_per_track unclaimed ops;
//    past that the oldest half is dropped (a parent of more direct children
//    than that would then over-count its self time).
//
// Windows: per the aggregator conventions, time buckets by event END time
// (Options::bucket_ns, ring of Options::max_buckets). A bucket holds per-key
// sums and per-track / per-device first begin / last end / sum of self, so
// IDLE is right over any window. Buckets that leave the ring stay only in the
// cumulative totals (the "older" accumulator is folded into the running
// totals). An op is accounted in the bucket of its own end, with the self time
// computed from its children (which may lie in earlier buckets).
//
// Pure: no I/O, no locks, no threads, nothing thrown.
#ifndef LIVEPROF_AGGREGATORS_TF_OP_STATS_H_
#define LIVEPROF_AGGREGATORS_TF_OP_STATS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/tf/tf_op_name.h"
#include "base/json_writer.h"
#include "base/string_ids.h"
#include "stream/diagnostics.h"
#include "stream/event.h"

namespace liveprof {

// ---------------------------------------------------------------------------
// Snapshot.

struct OpStatsRow {
  int rank = 0;           // 1-based, device rows first, host rows continue.
  std::string_view side;  // "Device" or "Host" (static literals).
  std::string type;
  std::string name;
  uint64_t occurrences = 0;  // 0 for IDLE.
  uint64_t total_ns = 0;
  uint64_t self_ns = 0;
  double total_us = 0;
  double avg_us = 0;  // total / occurrences (0 if none).
  double self_us = 0;
  double avg_self_us = 0;
  double self_pct = 0;        // % of the side's total_ns (with IDLE) or op_ns (without).
  double cumulative_pct = 0;  // running sum of self_pct in row order, per side.

  bool operator==(const OpStatsRow&) const = default;
};

struct OpStatsSide {
  uint64_t total_ns = 0;         // op_ns + idle_ns.
  uint64_t op_ns = 0;            // sum of op self times.
  uint64_t idle_ns = 0;          // sum over tracks (host) or devices of their IDLE.
  std::vector<OpStatsRow> rows;  // top N by self time desc, name asc.

  bool operator==(const OpStatsSide&) const = default;
};

// One input-pipeline op (kInputSpan name), for the input-pipeline analyzer.
struct InputOpStats {
  std::string name;
  InputStage stage = InputStage::kUnknown;  // the stage last seen for this name.
  uint64_t occurrences = 0;
  uint64_t total_ns = 0;
  uint64_t self_ns = 0;
  // Waits (stage kWait) only: the part of total_ns that is waits inside it
  // (a wrapper's iterator around PyTorch's), at any depth, and how many, so
  // that the sums over waits of total_ns - nested_wait_ns and occurrences -
  // nested_waits count each waiting instant, and each batch, once.
  uint64_t nested_wait_ns = 0;
  uint64_t nested_waits = 0;

  bool operator==(const InputOpStats&) const = default;
};

struct OpStatsSnapshotOptions {
  uint64_t window_ns = 0;    // last T ns (by event end time); 0 = since start.
  bool include_idle = true;  // IDLE rows in the tables and in the % denominators.
  size_t top_n = 500;        // rows per side.
};

struct OpStatsSnapshot {
  uint64_t window_ns = 0;
  bool include_idle = true;
  OpStatsSide device;
  OpStatsSide host;
  // Every kInputSpan name (not cut to top N), self time desc, name asc.
  std::vector<InputOpStats> host_input_ops;

  // {window_ns, include_idle, device:{total_us, op_us, idle_us, rows:[{rank,
  // side, type, name, occurrences, total_us, avg_us, self_us, avg_self_us,
  // self_pct, cumulative_pct}]}, host:{...}}. Any thread.
  void WriteJson(JsonWriter& w) const;
  // Header line then one line per row, device rows then host rows; columns as
  // in OpStatsRow (rank,side,type,name,occurrences,total_us,avg_us,self_us,
  // avg_self_us,self_pct,cumulative_pct). Any thread.
  std::string ToCsv() const;

  bool operator==(const OpStatsSnapshot&) const = default;
};

struct OpStatsOptions {
  uint64_t bucket_ns = 1'000'000'000;      // width of a time bucket (by event end).
  size_t max_buckets = 600;                // buckets kept for windows.
  size_t max_unclaimed_per_track = 16384;  // bound of each track's claim stack.
};

// ---------------------------------------------------------------------------
// The aggregator.

class OpStats {
 public:
  using Options = OpStatsOptions;
  static constexpr std::string_view kIdleName = "IDLE";  // the IDLE rows' name and type.
  // The host's IDLE row when there is no device: host time no op names.
  static constexpr std::string_view kHostUnattributedName = "Host compute (unattributed)";

  // `catalog` names the ids (may be null: names are then empty); `diagnostics`
  // receives bad_duration and span_misnested (may be null).
  OpStats(const Catalog* catalog, Diagnostics* diagnostics, Options options = {});

  // Adds a batch of events in completion order (definitions already absorbed
  // by the Catalog). Pipeline thread.
  void Consume(std::span<const Event> events);

  // The table over the requested window. Pipeline thread; the result is a
  // plain value any thread may read.
  OpStatsSnapshot Snapshot(const OpStatsSnapshotOptions& options = {}) const;

  // ----- Per-key statistics; each Add() is the bucket combine. -----
  struct HostStats {  // one host op name (kFrameworkOp / known kHostSpan).
    uint64_t occurrences = 0;
    uint64_t time_ns = 0;
    uint64_t self_ns = 0;
    void Add(const HostStats& o) {
      occurrences += o.occurrences;
      time_ns += o.time_ns;
      self_ns += o.self_ns;
    }
    bool empty() const { return occurrences == 0; }
  };
  struct InputStats {  // one kInputSpan name.
    uint64_t occurrences = 0;
    uint64_t time_ns = 0;
    uint64_t self_ns = 0;
    uint64_t nested_wait_ns = 0;  // a wait's: the time of the waits it contains.
    uint64_t nested_waits = 0;    // and their count.
    uint64_t seq = 0;             // arrival number of the event that set `stage`.
    InputStage stage = InputStage::kUnknown;
    void Add(const InputStats& o) {
      occurrences += o.occurrences;
      time_ns += o.time_ns;
      self_ns += o.self_ns;
      nested_wait_ns += o.nested_wait_ns;
      nested_waits += o.nested_waits;
      if (o.seq >= seq && o.occurrences != 0) {
        seq = o.seq;
        stage = o.stage;
      }
    }
    bool empty() const { return occurrences == 0; }
  };
  struct DeviceOpStats {  // one device op (see DeviceOp).
    uint64_t occurrences = 0;
    uint64_t time_ns = 0;  // = self time.
    void Add(const DeviceOpStats& o) {
      occurrences += o.occurrences;
      time_ns += o.time_ns;
    }
    bool empty() const { return occurrences == 0; }
  };
  struct SpanStats {                                           // one host track or one device.
    uint64_t first_ns = std::numeric_limits<uint64_t>::max();  // min begin.
    uint64_t last_ns = 0;                                      // max end.
    uint64_t self_ns = 0;
    void Add(const SpanStats& o) {
      if (o.first_ns < first_ns) first_ns = o.first_ns;
      if (o.last_ns > last_ns) last_ns = o.last_ns;
      self_ns += o.self_ns;
    }
    bool empty() const { return first_ns == std::numeric_limits<uint64_t>::max(); }
    // max(0, (last - first) - self).
    uint64_t idle_ns() const {
      if (empty()) return 0;
      const uint64_t span = last_ns - first_ns;
      return span > self_ns ? span - self_ns : 0;
    }
  };

  template <class S>
  using Sparse = std::vector<std::pair<uint32_t, S>>;  // sorted by key.

  // One time bucket: the sums of the events that ended in
  // [index * bucket_ns, (index + 1) * bucket_ns).
  struct Bucket {
    uint64_t index = 0;
    Sparse<HostStats> host_ops;        // by NameId.
    Sparse<InputStats> input_ops;      // by NameId.
    Sparse<DeviceOpStats> device_ops;  // by device-op id.
    Sparse<SpanStats> tracks;          // by TrackId (host tracks).
    Sparse<SpanStats> devices;         // by device ordinal.
    // Merges `other` (newer or equal in arrival order) into this bucket.
    void Combine(const Bucket& other);
    bool empty() const {
      return host_ops.empty() && input_ops.empty() && device_ops.empty() && tracks.empty() && devices.empty();
    }
  };

 private:
  // Dense per-key sums indexed by key, with the list of keys touched (used
  // for the current bucket and for the running totals).
  template <class S>
  struct Dense {
    std::vector<S> values;
    std::vector<uint32_t> touched;  // keys whose entry is non-empty, unsorted.
    S& At(uint32_t key) {
      if (key >= values.size()) Grow(key);
      S& s = values[key];
      if (s.empty()) touched.push_back(key);
      return s;
    }
    void Grow(uint32_t key);
    void AddSparse(const Sparse<S>& sparse);
    // Moves the touched entries, sorted by key, into `out`; leaves this empty.
    void Drain(Sparse<S>* out);
  };

  // The current (newest) bucket or the running totals.
  struct DenseBucket {
    Dense<HostStats> host_ops;
    Dense<InputStats> input_ops;
    Dense<DeviceOpStats> device_ops;
    Dense<SpanStats> tracks;
    Dense<SpanStats> devices;
    void AddBucket(const Bucket& b);
    void AddDense(const DenseBucket& d);
  };

  // What a device-op id stands for.
  struct DeviceOp {
    NameId op = 0;                        // framework op (kernel with attribution), or 0.
    NameId kernel = 0;                    // kernel name, or 0 for copies.
    EventKind kind = EventKind::kKernel;  // kKernel or a copy / memset kind.
  };
  struct KernelCacheEntry {
    NameId op = 0;
    uint32_t id = 0;  // 0 = none (ids 0..kCopyKinds-1 are the copy kinds, never kernels).
  };
  static constexpr uint32_t kCopyKinds =
      static_cast<uint32_t>(EventKind::kMemset) - static_cast<uint32_t>(EventKind::kMemcpyHtoD) + 1;

  // Ids (names, tracks) at or above this are not from a NameTable
  // (NameTable::kMaxNames): counted as Diag::id_out_of_range and skipped, so
  // a corrupt id cannot blow up the dense tables.
  static constexpr uint32_t kMaxId = 1u << 22;

  struct Interval {
    uint64_t begin;
    uint64_t end;
    uint64_t wait_ns = 0;  // a wait: its duration; else the waits' it holds.
    uint32_t waits = 0;    // a wait: 1; else the waits it holds.
  };
  struct TrackState {
    std::vector<Interval> unclaimed;  // begins strictly increasing, ends non-decreasing.
  };

  // One counted host op / one device event: nesting, then its deltas go to
  // the current bucket (fast path) or, late, to an older bucket and the totals.
  // A host op after the checks every one gets (a bad duration, an id out of range).
  void ConsumeCheckedHostOp(const Event& e, bool input);
  void ConsumeHostOp(const Event& e, bool input);
  void ConsumeDevice(const Event& e, uint32_t device_op);
  uint32_t KernelOpId(NameId kernel, NameId op);
  uint32_t NewDeviceOp(NameId op, NameId kernel, EventKind kind);
  static size_t PairHash(uint64_t key);
  void GrowPairTable();
  // What a kHostSpan of this name is to the tables.
  enum class HostSpanRole : uint8_t { kUnknown = 0, kIgnored, kOp, kInputWait };
  HostSpanRole RoleOfHostSpan(NameId name);
  // Moves to the bucket of `end`; false if `end` belongs to an older bucket
  // (then `late_` receives the deltas instead).
  bool SelectBucket(uint64_t end);
  void FreezeCurrent();
  void ApplyLate();
  void Count(Diag d, uint64_t n = 1);
  // The catalog's name of `id`, or "#<id>" for a name never defined.
  std::string DisplayName(NameId id) const;
  // The table row (name, type) of a host name, an input name or a device op:
  // parsed and interned on first use, cached once its names are defined (a
  // defined name never changes), so a snapshot groups by integer ids.
  enum class RowSource : uint8_t { kHost, kInput, kDevice };
  uint32_t RowOf(RowSource source, uint32_t id) const;
  uint32_t InternRow(std::string_view name, std::string_view type) const;
  // Every row's rank in (name, type) order: ties in self time are broken by
  // it. Brought up to date when rows were added since the last call.
  const std::vector<uint32_t>& RowOrder() const;
  std::string_view Name(NameId id) const { return catalog_ != nullptr ? catalog_->Name(id) : std::string_view(); }

  const Catalog* catalog_;
  Diagnostics* diagnostics_;
  Options options_;

  // Nesting state.
  std::vector<TrackState> tracks_;
  std::vector<HostSpanRole> host_span_roles_;  // by NameId; kUnknown: not decided yet.
  uint64_t input_seq_ = 0;

  // Device-op ids.
  std::vector<DeviceOp> device_ops_;
  std::vector<uint32_t> unattributed_kernel_id_;    // by kernel NameId; 0 = none.
  std::vector<KernelCacheEntry> attributed_cache_;  // by kernel NameId: last op seen.
  // (op << 32 | kernel) -> device-op id: open addressing, linear probing,
  // power-of-two capacity, at most half full. Key 0 = empty (op is never 0).
  struct PairSlot {
    uint64_t key = 0;
    uint32_t id = 0;
  };
  std::vector<PairSlot> attributed_ids_;
  size_t attributed_count_ = 0;

  // Snapshot-side row tables (see RowOf).
  struct RowName {
    uint32_t name = 0;  // ids in row_strings_.
    uint32_t type = 0;
  };
  static constexpr uint32_t kNoRow = UINT32_MAX;
  mutable StringIds row_strings_;  // names and types.
  mutable StringIds row_keys_;     // "name\0type" -> row id.
  mutable std::vector<RowName> rows_;
  mutable std::vector<uint32_t> row_cache_[3];  // by RowSource, then id; kNoRow = not cached.
  mutable std::vector<uint32_t> sorted_rows_;   // row ids in (name, type) order.
  mutable std::vector<uint32_t> row_order_;     // by row id: its index in sorted_rows_.
  uint32_t idle_row_ = 0;                       // the row named IDLE, for its rank.

  // Buckets.
  bool has_current_ = false;
  uint64_t current_index_ = 0;
  uint64_t current_begin_ = 1;  // the current bucket covers [begin, end);
  uint64_t current_end_ = 0;    // empty until the first event.
  uint64_t newest_end_ = 0;     // latest event end seen.
  DenseBucket current_;
  std::deque<Bucket> ring_;  // frozen buckets, index ascending, all < current_index_.
  DenseBucket totals_;       // everything except the current bucket.
  // Late event: its bucket index and deltas, applied by ApplyLate().
  uint64_t late_index_ = 0;
  Bucket late_;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_TF_OP_STATS_H_
