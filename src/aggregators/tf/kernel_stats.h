// KernelStats: the GPU kernel stats table (docs/semantics-tf.md §7). One
// row per kernel-op pair (kernel name, launch dims, registers, shared memory,
// TensorCore flags, op name) with occurrences and total/min/max duration; the
// top 1000 rows by total time; a per-op roll-up (total kernel time and the
// TensorCore part) for the overview and TF stats; and a log-scale duration
// histogram per kernel name with estimated percentiles. Rolling windows come
// from a ring of time buckets keyed by event end time.
//
// Pure: Consume() and Snapshot(), no I/O, no locks, no threads.
#ifndef LIVEPROF_AGGREGATORS_TF_KERNEL_STATS_H_
#define LIVEPROF_AGGREGATORS_TF_KERNEL_STATS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/string_ids.h"
#include "stream/event.h"

namespace liveprof {

class Catalog;
class Diagnostics;
class JsonWriter;

// Launch parameters parsed from a kernel's details string
// "regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z occ_pct:P
// blocks_per_sm:B warps_per_sm:W" (the last three as Kineto writes them:
// "est. achieved occupancy %", "blocks per SM", "warps per SM").
struct KernelDetails {
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_bytes = 0;
  uint32_t dynamic_shared_bytes = 0;
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  double occupancy_pct = 0;
  bool has_occupancy = false;  // occ_pct was given (0 is a value).
  double blocks_per_sm = 0;    // 0: not given.
  double warps_per_sm = 0;

  bool operator==(const KernelDetails&) const = default;
};

// Parses a details string as xprof does (§7): tokens split on spaces and
// newlines; a token is `key:value` with exactly one colon, others are
// ignored; a value that does not parse (or a dim list without exactly three
// numbers) leaves the field as it was; the last occurrence of a key wins.
// Missing dims are 1, missing numbers 0. Any thread.
KernelDetails ParseKernelDetails(std::string_view details);

// The family of tensor-core kernels `kernel_name` belongs to ("xmma",
// "nvjet", "cutlass tensorop", "flash attention", "mma shape", ...), or ""
// for a kernel that runs on CUDA cores: one table of name patterns, each
// family's reason beside it (kernel_details.cc). Covers Volta to Blackwell;
// §7's list is a subset less its FFMA false positives. Any thread.
std::string_view TensorCoreFamily(std::string_view kernel_name);

// TensorCoreFamily(kernel_name) is not empty: what "Uses TC" shows. Any thread.
bool KernelUsesTensorCore(std::string_view kernel_name);

// What "Kernel time on Tensor Cores" means, wherever it is shown (Kernel
// stats, analyze, the PyTorch page beside the plugin's figure).
inline constexpr char kTensorCoresByFamilyDefinition[] =
    "liveprof's: time of the kernels whose family runs on Tensor Cores (xmma, wgmma, nvjet, CUTLASS "
    "tensor-op, mma shapes, flash attention, ...; FFMA and SIMT kernels excluded), divided by every "
    "kernel's time: what the hardware ran";

// The §7 op-name rules: ends with Conv2D, ..., /MatMul, FusedMatMul, ...;
// contains BatchMatMul, CudnnRNNV, .... (No einsum equation in our events.)
// PyTorch ops: the profiler plugin's list (aten::conv2d, aten::mm,
// CudnnConvolutionBackward, ...), by exact name. Any thread.
bool IsOpTensorCoreEligible(std::string_view op_name);

// Duration histogram bins: exact for 0..7 ns, then 8 bins per power of two
// (bin width = 1/8 of the octave's lower bound, so at most 12.5 % relative).
inline constexpr uint32_t kDurationBinCount = 488;  // covers [0, 2^63) ns.
constexpr uint32_t DurationBin(uint64_t ns) {
  if (ns < 8) return static_cast<uint32_t>(ns);
  const uint32_t octave = 63u - static_cast<uint32_t>(__builtin_clzll(ns));  // >= 3
  const uint32_t bin = 8 + (octave - 3) * 8 + static_cast<uint32_t>((ns >> (octave - 3)) & 7);
  return bin < kDurationBinCount ? bin : kDurationBinCount - 1;
}
// Smallest duration in `bin`.
constexpr uint64_t DurationBinLowerNs(uint32_t bin) {
  if (bin < 8) return bin;
  const uint32_t octave = 3 + (bin - 8) / 8;
  return (uint64_t{8} + (bin - 8) % 8) << (octave - 3);
}
// One past the largest duration in `bin`.
constexpr uint64_t DurationBinUpperNs(uint32_t bin) {
  if (bin < 8) return bin + 1;
  const uint32_t octave = 3 + (bin - 8) / 8;
  return (uint64_t{9} + (bin - 8) % 8) << (octave - 3);
}

// One row of the table. Durations in ns; the µs columns are derived.
struct KernelStatsRow {
  uint32_t rank = 0;  // 1-based, in table order.
  std::string kernel_name;
  KernelDetails details;  // registers, shared memory, dims, occupancy.
  bool op_tc_eligible = false;
  bool kernel_uses_tc = false;
  std::string op_name;  // "" when the launch had no framework op.
  uint64_t occurrences = 0;
  uint64_t total_ns = 0;
  uint64_t min_ns = 0;
  uint64_t max_ns = 0;

  uint64_t shared_mem_bytes() const { return uint64_t{details.static_shared_bytes} + details.dynamic_shared_bytes; }
  double total_us() const { return static_cast<double>(total_ns) / 1e3; }
  // xprof divides in integer ns before converting: (total / occurrences) / 1000.
  double avg_us() const { return occurrences == 0 ? 0.0 : static_cast<double>(total_ns / occurrences) / 1e3; }
  double min_us() const { return static_cast<double>(min_ns) / 1e3; }
  double max_us() const { return static_cast<double>(max_ns) / 1e3; }
};

// Kernel time of one framework op (all rows with that op name, not only the
// top ones): what the overview's "using TensorCore" and TF stats' "GPU
// TensorCore utilisation" read.
struct KernelOpRollup {
  std::string op_name;
  uint64_t occurrences = 0;     // kernels.
  uint64_t kernel_ns = 0;       // total kernel time.
  uint64_t tensor_core_ns = 0;  // the part from kernels that use TensorCore.
  bool op_tc_eligible = false;  // any of its rows eligible.
  double tensor_core_pct() const {
    return kernel_ns == 0 ? 0.0 : 100.0 * static_cast<double>(tensor_core_ns) / kernel_ns;
  }
};

// Duration histogram of one kernel name in the window.
struct KernelDurationHistogram {
  struct Bucket {
    uint64_t lo_ns = 0;  // inclusive.
    uint64_t hi_ns = 0;  // exclusive.
    uint64_t count = 0;
    bool operator==(const Bucket&) const = default;
  };
  std::string kernel_name;
  uint64_t count = 0;
  uint64_t min_ns = 0;
  uint64_t max_ns = 0;
  // Estimated from the buckets: the nearest-rank sample's bucket, linear
  // inside it, clamped to [min_ns, max_ns]. Always inside that bucket.
  double p50_ns = 0;
  double p90_ns = 0;
  double p99_ns = 0;
  std::vector<Bucket> buckets;  // non-empty ones, ascending.
};

struct KernelStatsSnapshot {
  uint64_t window_ns = 0;            // 0 = since start.
  uint64_t kernel_count = 0;         // kernels in the window.
  uint64_t kernel_ns = 0;            // their total duration.
  uint64_t tensor_core_ns = 0;       // the part from kernels that ran on Tensor Cores.
  uint64_t distinct_rows = 0;        // rows before the top-N cut.
  std::vector<KernelStatsRow> rows;  // total desc, then key asc.
  std::vector<KernelOpRollup> ops;   // kernel_ns desc, then name asc; top_ops of them.
  std::vector<KernelDurationHistogram> histograms;

  // "Kernel time using Tensor Cores": tensor_core_ns / kernel_ns, %.
  double tensor_core_pct() const {
    return kernel_ns == 0 ? 0.0 : 100.0 * static_cast<double>(tensor_core_ns) / static_cast<double>(kernel_ns);
  }
  // The roll-up of `op_name`, or null.
  const KernelOpRollup* Op(std::string_view op_name) const;
  // One JSON object: window, totals, rows (µs columns), ops, histograms.
  void WriteJson(JsonWriter& w) const;
  // The table as CSV (header line + one line per row), the xprof columns.
  std::string ToCsv() const;
};

struct KernelStatsOptions {
  uint64_t bucket_ns = 1'000'000'000;  // time bucket width (by event end).
  size_t max_buckets = 600;            // ring size; older buckets merge into "older".
};

struct KernelStatsQuery {
  uint64_t window_ns = 0;  // last `window_ns` of end time; 0 = since start.
  size_t top_n = 1000;     // rows kept (xprof keeps 1000).
  size_t top_ops = 1000;   // roll-up entries kept, by kernel time (computed over every row).
  // Histogram of this kernel name only; otherwise of the first
  // `histogram_names` distinct kernel names of the top rows.
  std::optional<std::string> histogram_for;
  size_t histogram_names = 10;
};

class KernelStats {
 public:
  using Options = KernelStatsOptions;
  using Query = KernelStatsQuery;
  static constexpr size_t kMaxRows = 1000;

  // `catalog` names kernels, details and ops (may be null: names are "");
  // `diagnostics` may be null. Pipeline thread.
  KernelStats(const Catalog* catalog, Diagnostics* diagnostics, Options options = Options());

  // Adds the kKernel events of a batch (stream order; kFlagLate events may
  // end before earlier ones and land in their own bucket). Zero-length
  // kernels are skipped as xprof does; dur > 2^62 counts bad_duration.
  // Pipeline thread.
  void Consume(std::span<const Event> events);

  // The table over the query's window. Pipeline thread; the result is a
  // plain value any thread may read.
  KernelStatsSnapshot Snapshot(const Query& query = Query()) const;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  struct RowStats {
    uint64_t count = 0;
    uint64_t total = 0;
    uint64_t min = UINT64_MAX;
    uint64_t max = 0;
    void Add(uint64_t d) {
      ++count;
      total += d;
      min = d < min ? d : min;
      max = d > max ? d : max;
    }
    void Combine(const RowStats& o);
  };
  // A histogram in a bucket: bins [lo, lo + len) at pool[offset...].
  struct HistRef {
    uint32_t offset = 0;
    uint16_t lo = 0;
    uint16_t len = 0;
  };
  // What one time bucket (or the "older" accumulator) holds.
  struct Bucket {
    int64_t index = -1;          // absolute bucket number; -1 = unused.
    std::vector<RowStats> rows;  // by triple id.
    std::vector<HistRef> hists;  // by kernel-name slot.
    std::vector<uint64_t> pool;  // histogram counts.

    void Reset(int64_t new_index);
    void AddHist(uint32_t slot, uint32_t bin, uint64_t n) {
      if (slot < hists.size()) {
        HistRef& h = hists[slot];
        const uint32_t i = bin - h.lo;
        if (i < h.len) {
          pool[h.offset + i] += n;
          return;
        }
      }
      AddHistSlow(slot, bin, n);
    }
    void AddHistSlow(uint32_t slot, uint32_t bin, uint64_t n);
    void Combine(const Bucket& o);
  };
  // One (kernel, details, op) name triple: the unit of aggregation.
  struct Triple {
    NameId kernel = 0;
    NameId details = 0;
    NameId op = 0;
    uint32_t next = kNone;  // next triple of the same kernel name.
    uint32_t name_slot = 0;
  };
  // What the names of a triple mean; computed once when the names are known.
  struct TripleInfo {
    KernelDetails details;
    bool uses_tc = false;
    bool eligible = false;
    bool resolved = false;  // false: some name was undefined; resolve at snapshot.
  };

  uint32_t FindOrAddTriple(NameId kernel, NameId details, NameId op) {
    uint32_t t = kernel < heads_.size() ? heads_[kernel] : HeadSlow(kernel);
    while (t != kNone) {
      const Triple& tr = triples_[t];
      if (tr.details == details && tr.op == op) return t;
      t = tr.next;
    }
    return AddTriple(kernel, details, op);
  }
  // What a §7 row key stands for (several triples may share one: details
  // strings that differ only in occupancy or token order).
  struct RowInfo {
    uint32_t kernel_name = 0;  // id in kernel_names_.
    uint32_t op_name = 0;      // id in op_names_.
    KernelDetails details;     // occupancy_pct unused: it is per triple.
    bool uses_tc = false;
    bool eligible = false;
  };

  uint32_t HeadSlow(NameId kernel) const;
  // The row of triple `t`, interned on first use and cached once all of its
  // names are defined (a defined name never changes). Snapshot side.
  uint32_t RowOf(uint32_t t) const;
  uint32_t AddTriple(NameId kernel, NameId details, NameId op);
  // The meaning of a triple's names; `details` = its parsed details, or null
  // to parse them now; `same_kernel` = an earlier triple's info of the same
  // kernel name, resolved (its uses_tc holds: a defined name never changes),
  // or null to match the kernel name against the Tensor Core patterns.
  TripleInfo Resolve(const Triple& tr, const KernelDetails* details, const TripleInfo* same_kernel = nullptr) const;
  const KernelDetails& CachedDetails(NameId details);
  std::string_view Name(NameId id) const;
  // The bucket for an event ending at `end` (advances the ring, or finds an
  // older bucket, or the older accumulator).
  Bucket* BucketForEnd(uint64_t end);
  // Fills `out` with the buckets of the window (and the older accumulator
  // when the window covers all time).
  void WindowBuckets(uint64_t window_ns, std::vector<const Bucket*>* out) const;

  const Catalog* catalog_;
  Diagnostics* diagnostics_;
  Options options_;

  // Triples, and per kernel NameId the head of its chain.
  std::vector<Triple> triples_;
  // Resolved again at snapshot when a name was not defined at first sight.
  mutable std::vector<TripleInfo> triple_info_;
  std::vector<uint32_t> heads_;                     // by kernel NameId (dense ids).
  std::unordered_map<NameId, uint32_t> far_heads_;  // ids too large for heads_.
  std::vector<NameId> slot_names_;                  // kernel NameId by name slot.
  std::unordered_map<NameId, KernelDetails> details_cache_;

  // Snapshot-side tables, grown lazily by RowOf(): the snapshot groups and
  // ranks by these integer ids and spells out only the rows it returns.
  mutable std::vector<uint32_t> row_of_triple_;  // kNone until cached.
  mutable std::vector<RowInfo> rows_;            // by row id.
  mutable StringIds row_keys_;                   // the §7 tuple, serialized.
  mutable StringIds kernel_names_;
  mutable StringIds op_names_;

  // Time buckets.
  std::vector<Bucket> ring_;
  Bucket older_;
  int64_t newest_ = -1;     // absolute index of the newest bucket.
  Bucket* cur_ = nullptr;   // the newest bucket.
  uint64_t cur_begin_ = 0;  // its time range [cur_begin_, cur_begin_ + cur_len_).
  uint64_t cur_len_ = 0;    // 0 until the first bucket exists.
  uint64_t last_end_ = 0;   // newest event end.
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_TF_KERNEL_STATS_H_
