// Diagnostics: one table of named counters for everything odd that the stream
// and its producers saw (late events, bad names, unmatched step ends). Ring
// drops are counted in each ring (see spsc_ring.h) and summed by the Stream.
// Counting is the whole error path on the record side: the profiled program is
// never thrown at, blocked or crashed. The table travels with every snapshot.
#ifndef LIVEPROF_STREAM_DIAGNOSTICS_H_
#define LIVEPROF_STREAM_DIAGNOSTICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace liveprof {

// kLate: delivered, but after the analysis it belonged to had moved on (the
// event itself is kept: trace store, op and kernel tables). Shown apart from
// losses: the dashboard's "dropped" counts kDataLoss and ring drops only.
enum class Severity : uint8_t { kInfo, kDataLoss, kError, kLate };

// X(name, severity, description)
#define LIVEPROF_DIAGNOSTICS(X)                                                                                 \
  X(no_ring_dropped, kDataLoss,                                                                                 \
    "events dropped because their thread had no ring (creation failed or the "                                  \
    "thread was exiting)")                                                                                      \
  X(ring_create_failed, kError, "producer rings that could not be created (capacity 0, too large, no memory)")  \
  X(late_events, kLate, "events that ended before the reorder window's watermark; delivered apart")             \
  X(reorder_forced_release, kInfo, "events released before their window closed because the buffer hit its cap") \
  X(null_name, kError, "a null name was passed to the tracing API")                                             \
  X(name_truncated, kError, "a name longer than NameTable::kMaxNameBytes was cut")                              \
  X(name_table_full, kDataLoss, "a new name could not be interned: table full")                                 \
  X(step_end_without_begin, kError, "a step end arrived with no open step")                                     \
  X(span_end_without_begin, kError, "a span end arrived with no open span")                                     \
  X(span_stack_overflow, kError, "BeginSpan nested deeper than kMaxOpenSpans")                                  \
  /* Seen by the analyses (src/aggregators/). */                                                                \
  X(bad_duration, kError,                                                                                       \
    "a span with a negative or absurd duration (over 2^62 ns); left out of the "                                \
    "analyses")                                                                                                 \
  X(device_without_launch, kInfo,                                                                               \
    "device events whose launch (correlation id) was never seen; joined to a "                                  \
    "step by time")                                                                                             \
  X(late_for_step, kLate,                                                                                       \
    "device events that arrived after their step was closed; left out of that "                                 \
    "step's breakdown (still in the op, kernel and memory tables)")                                             \
  X(events_without_step, kInfo,                                                                                 \
    "host and device events outside every step (before the first, between "                                     \
    "steps, or no step marker within max_step_ns)")                                                             \
  X(step_without_compute, kInfo,                                                                                \
    "steps with no device compute in a profile with a device; left out of the "                                 \
    "breakdown as xprof does (a CPU-only step always has its row)")                                             \
  X(free_unknown_address, kError, "a free of an address with no live allocation")                               \
  X(alloc_address_reused, kError, "an allocation at an address still live; the earlier one is taken as freed")  \
  X(span_misnested, kError,                                                                                     \
    "a span that overlaps a sibling on its thread without containing it; "                                      \
    "its overlapped neighbour is not subtracted from its self time")                                            \
  X(id_out_of_range, kError,                                                                                    \
    "events whose name or track id is beyond any NameTable id (2^22); left out "                                \
    "of the op tables")                                                                                         \
  X(input_wait_nested, kInfo,                                                                                   \
    "waits for input (IteratorGetNext, a PyTorch DataLoader's __next__) inside "                                \
    "another on the same thread, e.g. a wrapper's iterator around PyTorch's: "                                  \
    "their time counted once")                                                                                  \
  X(launch_without_device, kInfo,                                                                               \
    "launch calls (runtime or driver API) whose kernel, copy or memset never "                                  \
    "arrived before their step closed")                                                                         \
  X(device_interval_beyond_history, kInfo,                                                                      \
    "late or very long device intervals that reached behind the utilization "                                   \
    "history kept in memory; busy time there estimated from bucket totals")                                     \
  /* Seen by the CUPTI producer (src/producers/cupti_*). */                                                     \
  X(cupti_dropped_records, kDataLoss,                                                                           \
    "GPU activity records CUPTI dropped (no free buffer in our pool, or a full "                                \
    "device buffer): cuptiActivityGetNumDroppedRecords")                                                        \
  X(cupti_unknown_record, kDataLoss,                                                                            \
    "CUPTI buffers cut short at a record of a kind this build does not know "                                   \
    "(its size is unknown, so the rest of the buffer was skipped)")                                             \
  X(cupti_truncated_buffer, kDataLoss,                                                                          \
    "CUPTI buffers whose valid size ended inside a record, or not 8-byte "                                      \
    "aligned; the rest of the buffer was skipped")                                                              \
  X(cupti_no_timestamp, kDataLoss,                                                                              \
    "CUPTI records with no usable timestamp (start and end 0, end before "                                      \
    "start, or a span over 2^62 ns); left out")                                                                 \
  X(cupti_unmatched_marker, kError,                                                                             \
    "NVTX range ends (CUPTI MARKER records) with no open start, or starts "                                     \
    "beyond the open-range cap; left out")

enum class Diag : uint8_t {
#define LIVEPROF_DIAG_ENUM(name, sev, desc) name,
  LIVEPROF_DIAGNOSTICS(LIVEPROF_DIAG_ENUM)
#undef LIVEPROF_DIAG_ENUM
      kCount
};

struct DiagInfo {
  std::string_view name;
  Severity severity;
  std::string_view description;
};

// Static description of counter `d`.
const DiagInfo& DiagnosticInfo(Diag d);

// Thread-safe counters. Increments are relaxed atomics: they are rare events,
// off the hot path. Any thread may call any method.
class Diagnostics {
 public:
  void Add(Diag d, uint64_t n = 1) { counters_[static_cast<size_t>(d)].fetch_add(n, std::memory_order_relaxed); }
  uint64_t Get(Diag d) const { return counters_[static_cast<size_t>(d)].load(std::memory_order_relaxed); }
  // Every counter back to 0 (a fork's child starts its own counts).
  void Reset() {
    for (auto& c : counters_) c.store(0, std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Diag::kCount)> counters_{};
};

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_DIAGNOSTICS_H_
