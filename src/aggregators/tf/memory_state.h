// MemoryState: the memory profile (TF Profiler's memory_profile tool,
// docs/semantics-tf.md §8), kept live from our kAlloc / kFree / kCounter
// events. Per memory id: bytes in use now and at the peak, the lifetime peak,
// fragmentation, a bounded downsampled timeline and a breakdown of the live
// allocations at the peak by allocation size. Pure: Consume() and Snapshot(),
// no I/O, no locks, no threads; pipeline thread only.
//
// Memory id (one profile each) = where the memory lives plus allocator name:
//   - MemoryKind kDevice / kManaged on device d: "GPU:<d> <allocator>"
//     ("GPU:0 cuda_caching");
//   - every other MemoryKind (kPinned, kPageable, kHost, kUnknown and values
//     this version does not know): "Host <allocator>" ("Host pinned_pool"),
//     whatever the event's device field says.
// <allocator> is the Catalog's string for the event's `name`, or "#<id>" when
// the name was never defined.
//
// TF's BFC allocator reports its internal stats with every event; our
// producers do not, so they are derived:
//   heap      = Σ bytes of the live allocations (an address → bytes map).
//   stack     = the last "memory/<allocator>/stack_bytes" counter, else 0.
//   capacity  = the last "memory/<allocator>/capacity_bytes" counter if > 0,
//               else for device memory Catalog::Device(d)->memory_bytes
//               (kDeviceInfo), else 0 = unknown.
//   reserved  = the last "memory/<allocator>/reserved_bytes" counter (bytes the
//               allocator holds from the driver), else unknown.
//   free      = capacity − stack − heap when capacity is known, else
//               reserved − heap when reserved is known, else 0 (clamped at 0).
// Counter contract: a kCounter whose name (looked up in the Catalog) is
// "memory/<allocator>/capacity_bytes", ".../reserved_bytes" or
// ".../stack_bytes" sets that value (payload.counter.value, bytes; negative or
// NaN reads as 0) for the memory ids of that allocator name whose device
// ordinal equals the counter event's `device` (Host ids count as device 0);
// it also applies to ids that appear later. Counters change the state but are
// not timeline points and not peak candidates: only allocs and frees are
// (as TF's allocator emits its stats only with allocation events).
//
// Fragmentation (§8.1 is (free − largest free chunk) / free over the BFC
// allocator's regions) is approximated over the address space the live
// allocations span: the gaps between live allocations inside
// [lowest live address, max(highest live end, lowest live address + reserved)],
// free = Σ gaps, largest = the widest gap; 0 when there is no gap. It costs
// O(live log live), so it is computed at Snapshot() time ("now") and at a new
// peak at most once per Options::peak_detail_interval_ns of event time per
// memory id; a peak inside that interval keeps the value of the latest peak it
// was computed at (the snapshot says which: peak_fragmentation_ts_ns).
//
// Peak (§8.2): in-use = stack + heap after an alloc/free; an event whose
// in-use is >= the peak becomes the peak (the latest event reaching it wins).
// A free of an unknown address changes nothing, so it is neither a timeline
// point nor a peak candidate (it is counted: Diag::free_unknown_address,
// num_deallocations, and peak_unseen_* when it follows the peak).
//
// Timeline (§8.3): one point per alloc/free, kept in bounded memory as a
// max-pyramid: stored points each stand for 2^k consecutive events (the one of
// largest stack + heap, the earliest on ties, as xprof's box filter keeps);
// when 2·max_points are stored, adjacent pairs merge and k grows. Snapshot()
// runs §8.3's box rule over the stored points, so with <= 2·max_points events
// the result is exactly xprof's; beyond, boxes are made of 2^k-event groups.
//
// Breakdown at the peak (§8.4's table, with the columns our events carry):
// the live allocations at the peak grouped by (op, allocation size). The op
// of an allocation is the innermost host span (kFrameworkOp, kHostSpan or
// kInputSpan; not a step, not a span named ProfilerStep#N) on the same track
// that encloses it, start <= ts < start + dur: for PyTorch traces the
// innermost cpu_op / user_annotation around the `[memory]` event on its
// thread (the PyTorch plugin's memory view attributes to the innermost
// operator node the same way); for our own
// producers the LIVEPROF_SCOPE or framework op around LIVEPROF_ALLOC. Events
// arrive by end time, so an allocation comes before the spans around it and
// the first of them to arrive whose interval holds it is the innermost: each
// track keeps its allocations not yet enclosed (time order), and a span
// attributes the ones of its interval. An allocation no span has enclosed
// within Options::attribution_horizon_ns of event time (or pushed out by
// max_pending_per_track newer ones) stays unattributed, op "" (as do
// allocations on tracks that carry no spans, e.g. CUPTI's: a track on which
// Options::spanless_after allocations waited before any span came stops
// queueing until a span arrives on it). An allocation its producer
// annotated (kFlagAllocAnnotation: TensorFlow's tf_op, region, data type,
// shape and requested size, from XPlane) is keyed by that annotation at
// once, so its row carries §8.4's other columns too; PyTorch's and our own
// events carry none of them (those columns stay empty).
// A (op, size) → count histogram of the live allocations is kept
// incrementally; the deltas since the last peak are logged, and a new peak
// replays them onto the peak's copy (or copies the histogram when the log
// grew past max(4096, 2·distinct rows)): O(1) amortized per event. An
// allocation attributed after the peak it was live at moves its count in the
// peak's copy too (the log stays the difference between the two), so the
// copy always describes the latest peak with what is known now. Frees of
// unknown addresses after the peak (allocations we never saw, live at the
// peak and not in its heap) are counted beside the table.
//
// Windows: per memory id a ring of time buckets (event end time) keeps
// alloc/free counts and the highest in-use sample; a bucket opens seeded with
// the state carried in from before it, so the peak of "the last T" includes
// memory allocated earlier and still held (its timestamp is then when that
// level was reached, possibly before the window). Ties between buckets go to
// the later event, as within one. An event older than the ring (late) goes
// to the older accumulator.
#ifndef LIVEPROF_AGGREGATORS_TF_MEMORY_STATE_H_
#define LIVEPROF_AGGREGATORS_TF_MEMORY_STATE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aggregators/catalog.h"
#include "base/json_writer.h"
#include "stream/diagnostics.h"
#include "stream/event.h"

namespace liveprof {

struct MemoryStateOptions {
  uint64_t bucket_ns = 1'000'000'000;                // window bucket width, event end time.
  size_t max_buckets = 600;                          // ring size; older buckets merge into one.
  size_t max_points = 1000;                          // timeline points a snapshot emits (§8.3).
  uint64_t peak_detail_interval_ns = 100'000'000;    // fragmentation-at-peak rate limit.
  size_t breakdown_rows = 50;                        // rows kept in the breakdown (and by op).
  uint64_t attribution_horizon_ns = 60'000'000'000;  // wait this long for an enclosing span.
  size_t max_pending_per_track = 65536;              // allocations waiting for one, per track.
  size_t spanless_after = 4096;                      // waiting on a track that never had a span: stop queueing.
};

struct MemoryStateSnapshot {
  // One timeline point: the state after one alloc/free (a stored point stands
  // for 2^k events: the one with the largest stack + heap).
  struct Point {
    uint64_t ts_ns = 0;
    uint64_t stack_bytes = 0;
    uint64_t heap_bytes = 0;
    uint64_t free_bytes = 0;
    std::optional<double> fragmentation_pct;  // only where it was computed.
    bool operator==(const Point&) const = default;
  };
  // One breakdown row: `occurrences` allocations of `bytes` each, live at
  // the peak, made inside op `op` ("" = no enclosing op known); what the
  // framework said of them where it did (XPlane: requested size, region,
  // data type, shape; "" and 0 where not said).
  struct BreakdownRow {
    std::string op;
    uint64_t bytes = 0;
    uint64_t occurrences = 0;
    uint64_t total_bytes = 0;
    uint64_t requested_bytes = 0;
    std::string region = {};
    std::string data_type = {};
    std::string shape = {};
    bool operator==(const BreakdownRow&) const = default;
  };
  // The live allocations at the peak that op `op` made.
  struct OpRow {
    std::string op;
    uint64_t bytes = 0;
    uint64_t allocations = 0;
    bool operator==(const OpRow&) const = default;
  };
  struct Memory {
    std::string id;         // "GPU:0 cuda_caching", "Host pinned_pool".
    std::string allocator;  // "cuda_caching".
    bool host = false;
    uint8_t device = 0;  // GPU ordinal; 0 for Host ids.
    // In the window.
    uint64_t num_allocations = 0;
    uint64_t num_deallocations = 0;  // includes frees of unknown addresses.
    // Configuration now.
    uint64_t capacity_bytes = 0;  // 0 = unknown.
    std::optional<uint64_t> reserved_bytes;
    // Lifetime (independent of the window).
    uint64_t lifetime_peak_heap_bytes = 0;
    uint64_t lifetime_peak_heap_ts_ns = 0;
    // Now.
    uint64_t live_allocations = 0;
    uint64_t stack_bytes = 0;
    uint64_t heap_bytes = 0;
    uint64_t free_bytes = 0;
    double fragmentation_pct = 0;
    // Peak of stack + heap in the window (false: no alloc/free ever).
    bool has_peak = false;
    uint64_t peak_bytes = 0;  // stack + heap.
    uint64_t peak_ts_ns = 0;  // may precede the window: a level carried into it.
    uint64_t peak_stack_bytes = 0;
    uint64_t peak_heap_bytes = 0;
    uint64_t peak_free_bytes = 0;
    // Fragmentation measured at peak_fragmentation_ts_ns: equal to peak_ts_ns
    // when exact, earlier when the rate limit kept an earlier peak's value.
    std::optional<double> peak_fragmentation_pct;
    uint64_t peak_fragmentation_ts_ns = 0;
    // Live allocations at the peak by (op, size), total bytes descending,
    // then size descending, then op; by op, bytes descending. Filled only
    // when this window's peak is the lifetime stack + heap peak.
    bool breakdown_at_peak = false;
    uint64_t peak_allocations = 0;             // live allocations at the peak.
    uint64_t peak_attributed_allocations = 0;  // of them, with an op.
    uint64_t peak_attributed_bytes = 0;
    // Frees of unknown addresses after the peak: allocations never seen,
    // live at the peak but not in peak_heap_bytes.
    uint64_t peak_unseen_allocations = 0;
    uint64_t peak_unseen_bytes = 0;
    std::vector<BreakdownRow> breakdown;  // <= breakdown_rows.
    std::vector<OpRow> breakdown_by_op;   // <= breakdown_rows; "" = unattributed.
    bool live_map_incomplete = false;     // a free of an unknown address was seen.
    std::vector<Point> timeline;          // <= max_points, time order.
    bool operator==(const Memory&) const = default;
  };

  uint64_t window_ns = 0;        // 0 = since start.
  uint64_t now_ns = 0;           // newest event end seen.
  std::vector<Memory> memories;  // by id.

  // One JSON object {"window_ns", "now_ns", "memories": [...]}; each memory's
  // timeline is columnar ("ts_ns": [...], "heap_bytes": [...], ...).
  void WriteJson(JsonWriter& w) const;
  // One CSV row per memory id: the summary (no timeline, no breakdown).
  std::string ToCsv() const;
  bool operator==(const MemoryStateSnapshot&) const = default;
};

class MemoryState {
 public:
  using Options = MemoryStateOptions;

  // `catalog` names allocators, counters and devices (may be null: names read
  // as "#<id>", no counters, no device capacity). `diagnostics` may be null.
  explicit MemoryState(const Catalog* catalog, Diagnostics* diagnostics = nullptr, Options options = {});
  ~MemoryState();
  MemoryState(MemoryState&&) noexcept;
  MemoryState& operator=(MemoryState&&) noexcept;

  // Adds a batch of events in completion order; uses kAlloc, kFree and
  // kCounter, reads every event's end as "now". Pipeline thread.
  void Consume(std::span<const Event> events);

  // The memory profile of the last `window_ns` of event time (0 = since
  // start): counts and peak over the buckets whose interval ends after
  // now − window_ns (a window longer than the ring also reads the "older"
  // accumulator whole), the state now, and the box rule over the stored
  // timeline points that fall in those buckets. The breakdown and the
  // fragmentation at the peak are known for the lifetime peak only (and for
  // a window peak that was one when it happened). O(live allocations · log)
  // per memory id for the fragmentation now. Pipeline thread; the value may
  // go anywhere.
  // The largest window peak of stack + heap over capacity, in percent, among
  // the memory ids whose capacity is known; nullopt if none. The same peak
  // as Snapshot(window_ns) but without its timeline and fragmentation, so the
  // alert rules can ask often. Pipeline thread.
  std::optional<double> MaxUsedPct(uint64_t window_ns = 0) const;
  MemoryStateSnapshot Snapshot(uint64_t window_ns = 0) const;

 private:
  struct Memory;  // per memory id, in memory_state.cc.
  struct CounterSetting {
    std::string allocator;
    uint8_t device = 0;
    uint64_t capacity = 0;  // 0 = not set.
    bool has_reserved = false;
    uint64_t reserved = 0;
    uint64_t stack = 0;
  };
  enum class CounterField : uint8_t { kUnparsed, kNotMemory, kCapacity, kReserved, kStack };

  Memory& Lookup(NameId allocator, uint8_t memory_kind, uint8_t device);
  Memory& Create(NameId allocator, bool host, uint8_t device, uint64_t key);
  void OnMemoryEvent(const Event& e);
  void OnCounter(const Event& e);
  void Record(Memory& m, const Event& e, uint32_t allocs, uint32_t frees);
  void OnNewPeak(Memory& m, uint64_t ts, double* fragmentation_pct);
  void RefreshConfig(Memory& m);
  // An allocation waiting for its enclosing span.
  struct Pending {
    uint64_t ts = 0;
    uint64_t address = 0;
    uint64_t bytes = 0;
    uint64_t seq = 0;     // its sample's seq in its memory id.
    uint32_t memory = 0;  // index into memories_.
  };
  void OnSpan(const Event& e);
  void Attribute(const Pending& p, NameId op);
  void Unpend(const Pending& p);
  bool IsStepName(NameId name);
  void BreakdownAtPeak(const Memory& m, MemoryStateSnapshot::Memory* out) const;
  std::string AllocatorName(NameId id) const;
  uint64_t BucketIndex(uint64_t end);

  const Catalog* catalog_;
  Diagnostics* diagnostics_;
  Options options_;
  uint64_t now_ = 0;
  std::vector<std::unique_ptr<Memory>> memories_;
  // key = allocator << 9 | (host ? 0 : 1 + device); dense by allocator below
  // kDenseNames, a hash map above.
  std::vector<std::vector<std::pair<uint16_t, uint32_t>>> by_name_;
  std::unordered_map<uint64_t, uint32_t> by_key_;
  uint64_t last_key_ = ~uint64_t{0};
  Memory* last_ = nullptr;
  // Counters: per counter NameId what it sets; the allocator name it names.
  std::vector<CounterField> counter_field_;
  std::vector<std::string> counter_allocator_;
  std::vector<CounterSetting> settings_;
  // Bucket of the last event, [bucket_start_, bucket_end_): avoids a division
  // per event.
  uint64_t bucket_start_ = 0;
  uint64_t bucket_end_ = 0;
  uint64_t bucket_index_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> scratch_;  // fragmentation.
  // Per track, the allocations waiting for an enclosing span (time order).
  struct TrackQueue {
    std::deque<Pending> q;  // time order.
    bool seen_span = false;
    bool spanless = false;  // no span came while spanless_after waited: do not queue.
  };
  TrackQueue& QueueOf(TrackId track);
  std::unordered_map<TrackId, TrackQueue> pending_;  // node-based: stable addresses.
  TrackId last_track_ = 0;
  TrackQueue* last_queue_ = nullptr;
  size_t pending_count_ = 0;
  std::vector<uint8_t> step_name_;  // per NameId: 0 unknown, 1 no, 2 ProfilerStep#N.
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_TF_MEMORY_STATE_H_
