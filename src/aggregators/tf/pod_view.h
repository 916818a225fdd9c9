// PodView: the TF Profiler's pod viewer (docs/semantics-tf.md §11.1),
// live. A job is several workers (training ranks); each sends its own steps.
// Per worker, its step-time breakdown (§2, the same buckets as the steps
// view), aligned by step number: for each step number, each worker's step
// time and buckets, the step's median and its worst worker; per worker over
// the window, its means, input %, how often it was the worst and its lag
// behind the median; and the straggler metric the alert rules read
// (docs/alerts.md, `pod.straggler_pct`).
//
// Workers are told apart by their tracks' process (TrackDef::process; 0 is
// this process, N > 0 an ingest source's worker id). Each worker has its own
// StepAssembler, fed that worker's events only, so that correlation ids,
// which are unique only within one process, never join one worker's launch
// to another's kernel. A worker is listed once it has a step: a process
// that sends none (a DataLoader worker, "rank 0 · loader 1", or a rank not
// stepping yet) is no column of the pod (the server's sources list it).
// Its label is the name of its kProcess track ("rank 3"), else "worker N"
// ("local" for process 0).
//
// The reference a worker's step is compared with: the median of that step
// over the workers that have it (the mean of the two middle ones for an even
// count); with exactly two workers, the other worker's time (the median of
// two would halve the gap). Fewer than two: no reference, not compared.
//
// A single-process run assembles its steps once: with
// Options::share_local_steps (the pipeline's Analyses sets it), as long as no
// other process has been seen, Consume() leaves process 0's events alone and
// the pipeline hands over its own breakdown rows (AddLocalRow), so the local
// worker's numbers are the steps view's. Once another process appears, process
// 0 gets its own assembler from that point on (the step in flight then may
// come out short: its earlier events went to the pipeline only).
//
// The common range: ranks are compared over the same steps. The frontier
// is the smallest last step of the compared workers (listed, not quiet, and
// whose last step is still in the held rows); of the view_steps (at most
// max_steps) step numbers up to it, those every compared worker has are the
// common range. Each
// compared worker has a summary over it (`common`: mean step, breakdown,
// input %, lag against each step's reference, how often it was the worst),
// and the snapshot's rows are the newest view_steps at or below the
// frontier, so a worker behind the others has its cells in every row drawn
// and the worst of each row is the slow one, not the ones waiting for it.
// Rows older than the newest max_steps are kept while the common range
// reaches them, up to Options::max_held_cells cells in all the rows (then
// the oldest go and a worker whose last step went with them is no longer
// compared: `not_common` says why).
//
// A worker's summary and its straggler value come from its own newest
// cells (Options::worker_steps of them), not from the newest step numbers: a
// worker far behind the others, whose step numbers have left the window, is
// still listed with its steps, its lag and how far behind it is
// (`behind_steps`), and is the straggler it is. Each of its cells is compared
// with the median of its step number, from the rows while they are held and
// afterwards from the archive of medians the rows leave when they go
// (Options::archived_steps of them, 24 bytes each). A worker that stopped
// sending is no straggler once the others have each gone on for a window
// (max_steps) of steps. Each worker keeps worker_steps cells of ~130 bytes
// (1,024 workers: about 13 MB).
//
// Memory is bounded: the newest Options::max_steps step numbers are kept,
// and older ones the common range needs up to max_held_cells cells (a cell
// for an older one is not in the step rows, counted in
// cells_outside_window, but is in its worker's cells); at most
// Options::max_workers workers (the events of more are counted and left out).
//
// Pure: no I/O, no locks, no threads. Pipeline thread only (Analyses owns it).
#ifndef LIVEPROF_AGGREGATORS_TF_POD_VIEW_H_
#define LIVEPROF_AGGREGATORS_TF_POD_VIEW_H_

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/steps/step_breakdown.h"
#include "aggregators/steps/steps.h"
#include "base/json_writer.h"
#include "stream/diagnostics.h"
#include "stream/event.h"

namespace liveprof {

// Each worker's step assembler: smaller bounds than the pipeline's own, so
// that a thousand workers do not keep a thousand times its worst case.
inline StepAssembler::Options DefaultPodStepOptions() {
  StepAssembler::Options o;
  o.max_open_steps = 64;
  o.max_waiting_events = size_t{1} << 14;
  return o;
}

struct PodViewOptions {
  StepAssembler::Options steps = DefaultPodStepOptions();
  BreakdownMode mode = BreakdownMode::kHostAndDevice;
  size_t max_steps = 200;         // step numbers kept: the newest.
  size_t max_workers = 1024;      // beyond, counted in workers_over_cap.
  size_t view_steps = 50;         // step rows a snapshot carries: the newest.
  uint32_t straggler_steps = 3;   // the snapshot's straggler: excess held this many steps.
  size_t worker_steps = 100;      // each worker's newest cells kept for its summary.
  size_t archived_steps = 16384;  // medians of step numbers that left the window.
  // Cells held in all the rows at most: rows older than the newest max_steps
  // stay while the common range needs them, up to this (~112 bytes a cell).
  size_t max_held_cells = size_t{1} << 18;
  bool share_local_steps = false;  // see the header: the pipeline's rows for process 0.
  // Keeps every worker step added, for TakeNewSteps() (a fleet agent
  // publishes them); at most this many wait (more are counted in
  // new_steps_dropped and left out). 0: none kept.
  size_t max_new_steps = 0;
};

// One worker's one step.
struct PodCell {
  uint32_t worker = 0;  // the worker id (its tracks' process).
  uint64_t end_ns = 0;  // the step's end (host clock; 0 where not known).
  // With Options::max_new_steps (a fleet agent): the worker's peak bytes in
  // use (its allocations less its frees, every allocator) from the previous
  // step's close to this one's; 0 where not known (the local process' own
  // steps, a worker that reports no allocations).
  uint64_t mem_peak_bytes = 0;
  uint64_t step_ns = 0;
  std::array<uint64_t, kBucketCount> bucket_ns{};
};

// One step number across the workers.
struct PodStepRow {
  int64_t step_num = 0;
  std::vector<PodCell> cells;     // by worker id.
  double median_ms = 0;           // over the cells.
  std::optional<uint32_t> worst;  // the slowest worker (ties: the smaller id); two cells or more.
};

// A worker over the common range (PodSnapshot::common): the same step
// numbers for every compared worker.
struct PodCommonSummary {
  uint64_t steps = 0;
  double mean_step_ms = 0;
  std::array<double, kBucketCount> mean_ms{};
  double input_pct = 0;         // 100 × Σ input / Σ step time.
  uint64_t compared_steps = 0;  // those with a reference (two cells or more).
  double lag_ms = 0;            // mean of (step − reference) over those.
  double lag_pct = 0;           // 100 × Σ (step − reference) / Σ reference.
  uint64_t worst_count = 0;     // its steps there that were the worst of the row.
};

// A worker over the window.
struct PodWorkerSummary {
  uint32_t id = 0;
  std::string label;
  uint64_t steps = 0;        // its newest cells (at most worker_steps).
  uint64_t steps_total = 0;  // every step of it added since start.
  // Where its steps come from (StepSourceLabel: "optimizer", "torch.profiler",
  // "program marks", "pattern") and its markers' name ("optimizer step").
  std::string step_source;
  std::string step_marker;
  int64_t first_step = -1, last_step = -1;
  // The newest step number of any worker less its last step: how far behind.
  int64_t behind_steps = 0;
  double mean_step_ms = 0;
  std::array<double, kBucketCount> mean_ms{};
  double input_pct = 0;         // 100 × Σ input / Σ step time (ratio of sums).
  uint64_t worst_count = 0;     // steps where it was the worst of two or more.
  uint64_t compared_steps = 0;  // its steps that have a reference.
  double lag_ms = 0;            // mean of (step − reference) over those.
  double lag_pct = 0;           // 100 × Σ (step − reference) / Σ reference.
  // Its excess over the reference held for its last straggler_steps compared
  // steps (the smallest of them); nullopt with fewer.
  std::optional<double> straggler_pct;
  // Over the common range; nullopt when it is not compared (not_common says
  // why: "stopped sending", "behind the held steps").
  std::optional<PodCommonSummary> common;
  std::string not_common;
};

// The step numbers every compared worker has (see the header).
struct PodCommonRange {
  int64_t frontier_step = -1;               // the smallest last step of the compared workers.
  int64_t first_step = -1, last_step = -1;  // the range's ends; -1: empty.
  uint64_t steps = 0;                       // step numbers in it (at most view_steps).
  uint64_t workers = 0;                     // workers compared.
};

// The largest excess held over a run of steps: the straggler metric.
struct PodStraggler {
  uint32_t worker = 0;
  std::string label;
  double pct = 0;                           // min over its last k compared steps of 100 × (t − ref) / ref.
  int64_t first_step = -1, last_step = -1;  // those k steps.
  uint64_t workers_compared = 0;            // workers that had k compared steps.
};

// A worker step as it was added: what TakeNewSteps() hands out.
struct PodNewStep {
  std::string label;  // the worker's ("rank 3").
  int64_t step_num = 0;
  PodCell cell;
};

struct PodDiagnostics {
  uint64_t steps_without_compute = 0;  // left out, as in the steps view.
  uint64_t cells_outside_window = 0;   // a step older than the kept rows (in its worker's cells only).
  uint64_t duplicate_cells = 0;        // a worker's step number seen again (the newer kept).
  uint64_t events_over_worker_cap = 0;
  uint64_t workers_over_cap = 0;
  uint64_t late_for_step = 0;  // the workers' assemblers' counts.
  uint64_t events_without_step = 0;
  uint64_t device_without_launch = 0;
  uint64_t new_steps_dropped = 0;  // over Options::max_new_steps, not taken in time.
};

struct PodSnapshot {
  BreakdownMode mode = BreakdownMode::kHostAndDevice;
  size_t window_steps = 0;  // Options::max_steps.
  uint32_t straggler_steps = 0;
  std::vector<PodWorkerSummary> workers;  // by id.
  std::vector<PodStepRow> steps;          // oldest first; the newest view_steps up to the frontier.
  int64_t newest_step = -1;               // the newest step number of any worker.
  PodCommonRange common;
  uint64_t steps_in_window = 0;  // step numbers held (steps may show fewer).
  std::optional<PodStraggler> straggler;
  uint64_t cells_total = 0;  // worker steps seen since start.
  PodDiagnostics diagnostics;
  // {"mode","window_steps","straggler_steps","buckets":[keys],"bucket_names":[...],
  //  "workers":[...],"steps":[...],"straggler":{...}|null,...}; docs/protocol.md.
  void WriteJson(JsonWriter& w) const;
};

class PodView {
 public:
  // `catalog` must outlive this and be fed each batch's definitions before
  // Consume() sees it.
  PodView(const Catalog* catalog, PodViewOptions options);
  ~PodView();
  PodView(const PodView&) = delete;
  PodView& operator=(const PodView&) = delete;

  // Learns the workers from track definitions (kTrackDef; other kinds are
  // ignored). Pipeline thread.
  void ConsumeDefinitions(std::span<const Event> definitions);
  // Adds events in stream order; each goes to its worker's assembler.
  // Pipeline thread.
  void Consume(std::span<const Event> events);
  // Every event ending at or before `watermark_ns` has been consumed: closes
  // the steps that are final. Pipeline thread.
  void Advance(uint64_t watermark_ns);
  // End of stream: closes every step.
  void Flush();
  // True while process 0's steps come from the pipeline (AddLocalRow), not
  // from Consume(): share_local_steps and no other process seen yet.
  bool shares_local_steps() const { return share_local_; }
  // One of the pipeline's own breakdown rows (process 0), in order; ignored
  // unless shares_local_steps(). Pipeline thread.
  void AddLocalRow(const StepBreakdownRow& row);
  // The source of those rows' steps (the pipeline's own assembler's), for
  // the local worker's summary. Pipeline thread.
  void SetLocalStepSource(StepSource source, std::string marker_name);

  // A step of a worker fed from outside (the fleet view: a rank of another
  // host), not from events: `worker` is its id (any number but 0, chosen by
  // the caller, stable), `label` its name. Pipeline thread (the owner's).
  void AddExternalStep(uint32_t worker, std::string_view label, int64_t step_num, const PodCell& cell);
  // The worker steps added since the last call, in order (with
  // Options::max_new_steps > 0). Pipeline thread.
  std::vector<PodNewStep> TakeNewSteps();

  // The straggler over each worker's last `k` compared steps (k ≥ 1);
  // nullopt when no worker has k of them. Pipeline thread.
  std::optional<PodStraggler> Straggler(uint32_t k) const;
  // Worker steps added since start: the step clock of the pod's alert rules
  // (it moves whenever any worker completes a step).
  uint64_t cells_total() const { return cells_total_; }
  // Workers listed (process 0 only once it has a step).
  size_t workers() const;
  // Each listed worker's id, label, step total and step source only (the
  // rest of PodWorkerSummary left default): cheaper than Snapshot().
  std::vector<PodWorkerSummary> StepSources() const;

  PodSnapshot Snapshot() const;

 private:
  struct Worker;
  struct Row {
    std::vector<PodCell> cells;     // in arrival order.
    mutable double median_ns = -1;  // of the cells; -1: to compute (a cell came since).
  };
  // A row gone from the window: its median then, and how many cells it had.
  struct ArchivedRow {
    int64_t step_num = 0;
    double median_ns = 0;
    uint32_t cells = 0;
  };
  // One of a worker's own newest cells. `late`: it came after its row had
  // left the window; `late_ref_ns` is then the archived median (of the
  // others' cells), 0 when none.
  struct WorkerCell {
    int64_t step_num = 0;
    PodCell cell;
    bool late = false;
    double late_ref_ns = 0;
  };
  double RowMedian(const Row& row) const;
  // A held row's reference for a cell of `step_ns`; 0: fewer than two cells.
  double RowReference(const Row& row, uint64_t step_ns) const;
  // The common range's reach below the frontier: view_steps (at most max_steps).
  int64_t CommonSteps() const;
  // Worker steps (of any worker) after a worker's newest one past which it
  // is quiet: it stopped sending while the others went on for a window each.
  uint64_t QuietAfter() const;
  // Per worker (by index), whether the common range compares it; the
  // frontier (-1: none compared).
  std::vector<char> Compared(int64_t* frontier) const;
  // Drops the oldest rows past max_steps that the common range does not
  // need (or past max_held_cells), into the archive.
  void TrimRows();
  void FillCommon(PodSnapshot* s, const std::vector<char>& compared) const;
  // What `c` (worker `w`'s) is compared with; 0: nothing (fewer than two).
  double ReferenceFor(const WorkerCell& c) const;

  // The worker of process `process`, created if new; null beyond the cap.
  Worker* WorkerOf(uint32_t process);
  // Per worker (by index), its excess held over its last `k` compared
  // steps: n of them (< k: not eligible), the smallest excess, their range.
  struct Held {
    uint32_t n = 0;
    double min_pct = 0;
    int64_t first = -1, last = -1;
  };
  std::vector<Held> HeldExcess(uint32_t k) const;
  std::optional<PodStraggler> StragglerOf(const std::vector<Held>& held, uint32_t k) const;
  void TakeClosed(Worker& w);
  static void TrackMemory(Worker& w, const Event& e);
  void AddCell(const PodCell& cell, int64_t step_num);
  std::string Label(const Worker& w) const;
  bool Listed(const Worker& w) const;
  void FillStepSource(const Worker& w, PodWorkerSummary* ws) const;

  const Catalog* catalog_;
  PodViewOptions options_;
  Diagnostics diag_;  // the workers' assemblers' counters (the session's own are not doubled).
  std::vector<std::unique_ptr<Worker>> workers_;  // in order of appearance.
  std::unordered_map<uint32_t, uint32_t> index_;  // process -> index in workers_.
  std::unordered_set<uint32_t> refused_;          // processes beyond the cap (bounded).
  std::vector<std::vector<Event>> routed_;        // per worker, this batch's events.
  std::map<int64_t, Row> rows_;                   // by step number; the newest max_steps.
  std::deque<ArchivedRow> archive_;               // rows gone, oldest first (ascending steps).
  int64_t newest_step_ = -1;                      // the newest step number of any worker.
  size_t cells_held_ = 0;                         // cells in rows_.
  uint64_t cells_total_ = 0;
  bool share_local_ = false;
  PodDiagnostics counts_;
  BreakdownScratch scratch_;
  std::vector<PodNewStep> new_steps_;            // for TakeNewSteps(), at most max_new_steps.
  StepSource local_source_ = StepSource::kNone;  // SetLocalStepSource's.
  std::string local_marker_;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_TF_POD_VIEW_H_
