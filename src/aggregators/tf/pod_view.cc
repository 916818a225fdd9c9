// PodView: per-worker step assembly and breakdown, rows by step number, the
// workers' summaries and the straggler metric. The JSON is in
// pod_view_json.cc.
#include "aggregators/tf/pod_view.h"

#include <algorithm>
#include <limits>

namespace liveprof {

namespace {

constexpr size_t kMaxRefusedRemembered = 65536;  // distinct workers over the cap, counted.

double Ms(double ns) { return ns / 1e6; }

// A row's median step time (ns): the middle one, or the mean of the two
// middle ones for an even count. `times` is scratch, sorted here.
double Median(std::vector<uint64_t>& times) {
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  if (n == 0) return 0;
  if (n % 2 == 1) return static_cast<double>(times[n / 2]);
  return (static_cast<double>(times[n / 2 - 1]) + static_cast<double>(times[n / 2])) / 2;
}

// The slowest cell (ties: the smaller worker id); cells.size() >= 1.
size_t WorstOf(const std::vector<PodCell>& cells) {
  size_t worst = 0;
  for (size_t i = 1; i < cells.size(); ++i) {
    const PodCell& c = cells[i];
    const PodCell& w = cells[worst];
    if (c.step_ns > w.step_ns || (c.step_ns == w.step_ns && c.worker < w.worker)) worst = i;
  }
  return worst;
}

// 100 × (t − ref) / ref; ref > 0.
double ExcessPct(uint64_t t, double ref) { return (static_cast<double>(t) - ref) * 100.0 / ref; }

}  // namespace

struct PodView::Worker {
  Worker(uint32_t id, const Catalog* catalog, Diagnostics* diag, const StepAssembler::Options& options)
      : process(id), steps(catalog, diag, options) {}
  uint32_t process;
  TrackId process_track = 0;  // its kProcess track (the label); 0: none seen.
  bool has_process_track = false;
  std::string external_label;             // AddExternalStep's workers: their name.
  uint64_t mem_in_use = 0, mem_peak = 0;  // its allocations less frees (with max_new_steps).
  StepAssembler steps;
  bool has_device = false;        // a step of it had device work (the GPU rules).
  uint64_t cells = 0;             // its steps added.
  std::deque<WorkerCell> recent;  // its newest cells (worker_steps), oldest first.
  uint64_t last_cell_at = 0;      // cells_total_ when its newest cell came.
  int64_t last_step = -1;         // its largest step number.
};

PodView::PodView(const Catalog* catalog, PodViewOptions options)
    : catalog_(catalog), options_(std::move(options)), share_local_(options_.share_local_steps) {
  options_.max_steps = std::max<size_t>(options_.max_steps, 1);
  options_.max_workers = std::max<size_t>(options_.max_workers, 1);
  WorkerOf(0);  // the local process (listed, as every worker, once it has a step).
}

PodView::~PodView() = default;

PodView::Worker* PodView::WorkerOf(uint32_t process) {
  // A helper (a DataLoader worker) is no rank: no slot, no count.
  if (catalog_->IsHelper(process)) return nullptr;
  const auto it = index_.find(process);
  if (it != index_.end()) return workers_[it->second].get();
  // Process 0 always has its slot; the others count against the cap.
  if (process != 0 && workers_.size() >= options_.max_workers + 1) {
    if (refused_.size() < kMaxRefusedRemembered && refused_.insert(process).second) {
      ++counts_.workers_over_cap;
    }
    return nullptr;
  }
  if (process != 0) share_local_ = false;  // process 0 assembles its own steps from now on.
  index_.emplace(process, static_cast<uint32_t>(workers_.size()));
  workers_.push_back(std::make_unique<Worker>(process, catalog_, &diag_, options_.steps));
  routed_.emplace_back();
  return workers_.back().get();
}

void PodView::ConsumeDefinitions(std::span<const Event> definitions) {
  for (const Event& e : definitions) {
    if (e.kind != EventKind::kTrackDef) continue;
    Worker* w = WorkerOf(e.payload.track_def.process);
    if (w != nullptr && e.payload.track_def.type == TrackType::kProcess) {
      w->process_track = e.track;
      w->has_process_track = true;
    }
  }
}

void PodView::Consume(std::span<const Event> events) {
  if (share_local_) {
    // Every process but 0 is defined (kTrackDef) before its events: an event
    // on a track never defined counts as process 0's. So while no other
    // process has been seen, a batch without definitions is process 0's, and
    // the pipeline's steps are its steps.
    bool defs = false;
    for (const Event& e : events) defs |= e.kind == EventKind::kTrackDef;
    if (!defs) return;
  }
  // The worker of each event, with the last lookup remembered (a batch is
  // mostly runs of one process's events); or a helper's, or one past the cap.
  constexpr int64_t kOverCap = -2, kHelper = -3;
  uint32_t cached_process = 0;
  int64_t cached = -1;
  auto index_of = [&](const Event& e) -> int64_t {
    const uint32_t process = catalog_->Track(e.track).process;
    if (cached < 0 || process != cached_process) {
      const Worker* w = WorkerOf(process);
      cached_process = process;
      cached = w != nullptr                  ? static_cast<int64_t>(index_.at(process))
               : catalog_->IsHelper(process) ? kHelper
                                             : kOverCap;
    }
    return cached;
  };
  // Most batches come from one process (a single-process run is all of
  // them): then the batch goes to its worker as it is, with no copy.
  int64_t only = -1;
  bool single = true;
  for (const Event& e : events) {
    if (e.kind == EventKind::kTrackDef) {
      ConsumeDefinitions(std::span<const Event>(&e, 1));
      cached = -1;  // a new worker may have taken the process.
      continue;
    }
    const int64_t w = index_of(e);
    if (only == -1) only = w;
    if (w != only) single = false;
  }
  // Definitions only, or process 0's events while the pipeline's steps are
  // its steps (no other process seen: the whole batch is process 0's).
  if (only == -1 || share_local_) return;
  if (single && only >= 0) {
    Worker& w = *workers_[static_cast<size_t>(only)];
    if (options_.max_new_steps > 0) {
      for (const Event& e : events) TrackMemory(w, e);
    }
    w.steps.Consume(events);
    return;
  }
  cached = -1;
  for (const Event& e : events) {
    if (e.kind == EventKind::kTrackDef) continue;  // learnt above.
    const int64_t w = index_of(e);
    if (w == kHelper) continue;  // (a DataLoader worker's: no rank's steps)
    if (w < 0) {
      ++counts_.events_over_worker_cap;
    } else if (IsSpanKind(e.kind)) {  // what an assembler reads: markers, spans, device work.
      routed_[static_cast<size_t>(w)].push_back(e);
    } else if (options_.max_new_steps > 0) {
      TrackMemory(*workers_[static_cast<size_t>(w)], e);
    }
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (routed_[i].empty()) continue;
    workers_[i]->steps.Consume(routed_[i]);
    routed_[i].clear();
  }
}

void PodView::TrackMemory(Worker& w, const Event& e) {
  if (e.kind == EventKind::kAlloc) {
    w.mem_in_use += e.payload.memory.bytes;
    w.mem_peak = std::max(w.mem_peak, w.mem_in_use);
  } else if (e.kind == EventKind::kFree) {
    w.mem_in_use -= std::min(w.mem_in_use, e.payload.memory.bytes);
  }
}

void PodView::Advance(uint64_t watermark_ns) {
  for (const auto& w : workers_) {
    w->steps.Advance(watermark_ns);
    TakeClosed(*w);
  }
}

void PodView::Flush() {
  for (const auto& w : workers_) {
    w->steps.Flush();
    TakeClosed(*w);
  }
}

void PodView::TakeClosed(Worker& w) {
  std::vector<StepRecord> closed = w.steps.TakeClosed();
  if (closed.empty()) return;
  for (const StepRecord& s : closed) {
    if (s.has_device()) w.has_device = true;
    bool well_formed = false;
    const StepBreakdownRow row = ComputeStepBreakdown(s, options_.mode, w.has_device, &well_formed, &scratch_);
    if (!well_formed) {
      ++counts_.steps_without_compute;
      continue;
    }
    PodCell cell;
    cell.worker = w.process;
    cell.end_ns = row.end_ns;
    cell.step_ns = row.step_ns();
    cell.bucket_ns = row.bucket_ns;
    cell.mem_peak_bytes = w.mem_peak;
    w.mem_peak = w.mem_in_use;  // the next step's peak starts from what is in use now.
    ++w.cells;
    AddCell(cell, s.step_num);
  }
  w.steps.Recycle(std::move(closed));
}

void PodView::SetLocalStepSource(StepSource source, std::string marker_name) {
  local_source_ = source;
  local_marker_ = std::move(marker_name);
}

void PodView::AddLocalRow(const StepBreakdownRow& row) {
  if (!share_local_) return;
  Worker& w = *workers_[index_.at(0)];
  PodCell cell;
  cell.worker = 0;
  cell.end_ns = row.end_ns;
  cell.step_ns = row.step_ns();
  cell.bucket_ns = row.bucket_ns;
  ++w.cells;
  AddCell(cell, row.step_num);
}

void PodView::AddExternalStep(uint32_t worker, std::string_view label, int64_t step_num, const PodCell& cell) {
  if (worker == 0) return;  // (process 0 is this process: never an outside worker)
  Worker* w = WorkerOf(worker);
  if (w == nullptr) return;  // over the cap: counted.
  if (w->external_label != label) w->external_label = label;
  PodCell c = cell;
  c.worker = worker;
  ++w->cells;
  AddCell(c, step_num);
}

std::vector<PodNewStep> PodView::TakeNewSteps() {
  std::vector<PodNewStep> out;
  out.swap(new_steps_);
  return out;
}

void PodView::AddCell(const PodCell& cell, int64_t step_num) {
  ++cells_total_;
  newest_step_ = std::max(newest_step_, step_num);
  Worker& w = *workers_[index_.at(cell.worker)];
  if (options_.max_new_steps > 0) {
    if (new_steps_.size() < options_.max_new_steps) {
      new_steps_.push_back(PodNewStep{Label(w), step_num, cell});
    } else {
      ++counts_.new_steps_dropped;
    }
  }
  w.last_cell_at = cells_total_;
  w.last_step = std::max(w.last_step, step_num);
  auto remember = [&](WorkerCell c) {
    for (auto it = w.recent.begin(); it != w.recent.end(); ++it) {
      if (it->step_num == step_num) {  // the same step again: the newer kept, as the newest.
        w.recent.erase(it);
        break;
      }
    }
    w.recent.push_back(c);
    if (w.recent.size() > std::max<size_t>(options_.worker_steps, 1)) w.recent.pop_front();
  };
  if (rows_.size() >= options_.max_steps && rows_.count(step_num) == 0 && step_num < rows_.begin()->first) {
    // Behind the window: no row, but its worker's cell, compared with the
    // median its step number had when its row left (the others' cells).
    ++counts_.cells_outside_window;
    WorkerCell c{step_num, cell, true, 0};
    const auto a = std::lower_bound(archive_.begin(), archive_.end(), step_num,
                                    [](const ArchivedRow& r, int64_t n) { return r.step_num < n; });
    if (a != archive_.end() && a->step_num == step_num && a->cells > 0) c.late_ref_ns = a->median_ns;
    remember(c);
    return;
  }
  Row& row = rows_[step_num];
  row.median_ns = -1;
  remember(WorkerCell{step_num, cell, false, 0});
  bool duplicate = false;
  for (PodCell& c : row.cells) {
    if (c.worker == cell.worker) {
      ++counts_.duplicate_cells;
      c = cell;
      duplicate = true;
      break;
    }
  }
  if (!duplicate) {
    row.cells.push_back(cell);
    ++cells_held_;
  }
  TrimRows();
}

void PodView::TrimRows() {
  // Past max_steps rows, the oldest goes unless the common range reaches
  // it (the frontier's view_steps), or the rows hold more than
  // max_held_cells cells (then the frontier is worked out again: the
  // slowest worker may have gone with the row).
  bool known = false;
  int64_t keep_from = 0;
  while (rows_.size() > options_.max_steps) {
    const auto oldest = rows_.begin();
    if (cells_held_ <= options_.max_held_cells) {
      if (!known) {
        int64_t frontier = -1;
        Compared(&frontier);
        keep_from = frontier < 0 ? std::numeric_limits<int64_t>::max() : frontier - CommonSteps() + 1;
        known = true;
      }
      if (oldest->first >= keep_from) break;
    } else {
      known = false;
    }
    archive_.push_back({oldest->first, RowMedian(oldest->second), static_cast<uint32_t>(oldest->second.cells.size())});
    if (archive_.size() > options_.archived_steps) archive_.pop_front();
    cells_held_ -= oldest->second.cells.size();
    rows_.erase(oldest);
  }
}

double PodView::RowMedian(const Row& row) const {
  if (row.median_ns < 0) {
    std::vector<uint64_t> times;
    times.reserve(row.cells.size());
    for (const PodCell& c : row.cells) times.push_back(c.step_ns);
    row.median_ns = Median(times);
  }
  return row.median_ns;
}

double PodView::RowReference(const Row& row, uint64_t step_ns) const {
  const size_t cells = row.cells.size();
  if (cells < 2) return 0;
  const double median = RowMedian(row);
  return cells == 2 ? 2 * median - static_cast<double>(step_ns) : median;
}

int64_t PodView::CommonSteps() const {
  return static_cast<int64_t>(std::max<size_t>(std::min(options_.view_steps, options_.max_steps), 1));
}

uint64_t PodView::QuietAfter() const {
  return static_cast<uint64_t>(options_.max_steps) * std::max<size_t>(workers(), 1);
}

std::vector<char> PodView::Compared(int64_t* frontier) const {
  std::vector<char> out(workers_.size(), 0);
  *frontier = -1;
  if (rows_.empty()) return out;
  const int64_t oldest = rows_.begin()->first;
  const uint64_t quiet_after = QuietAfter();
  bool any = false;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = *workers_[i];
    if (!Listed(w) || cells_total_ - w.last_cell_at > quiet_after || w.last_step < oldest) continue;
    out[i] = 1;
    *frontier = any ? std::min(*frontier, w.last_step) : w.last_step;
    any = true;
  }
  return out;
}

double PodView::ReferenceFor(const WorkerCell& c) const {
  if (c.late) return c.late_ref_ns;
  // Its row (held, or archived when it left): the row's median, or with
  // exactly two cells the other one's time (2 × median − its own).
  double median = 0;
  size_t cells = 0;
  if (const auto r = rows_.find(c.step_num); r != rows_.end()) {
    median = RowMedian(r->second);
    cells = r->second.cells.size();
  } else {
    const auto a = std::lower_bound(archive_.begin(), archive_.end(), c.step_num,
                                    [](const ArchivedRow& r, int64_t n) { return r.step_num < n; });
    if (a == archive_.end() || a->step_num != c.step_num) return 0;
    median = a->median_ns;
    cells = a->cells;
  }
  if (cells < 2) return 0;
  if (cells == 2) return 2 * median - static_cast<double>(c.cell.step_ns);
  return median;
}

bool PodView::Listed(const Worker& w) const { return w.cells > 0; }

void PodView::FillStepSource(const Worker& w, PodWorkerSummary* ws) const {
  ws->steps_total = w.cells;
  const bool local = share_local_ && w.process == 0;
  const StepSource source = local ? local_source_ : w.steps.source();
  ws->step_marker = local ? local_marker_ : std::string(catalog_->Name(w.steps.marker_name()));
  ws->step_source = std::string(StepSourceLabel(source, ws->step_marker));
  if (!w.external_label.empty()) ws->step_source = "fleet";  // (another host's rank: its agent's)
}

std::vector<PodWorkerSummary> PodView::StepSources() const {
  std::vector<PodWorkerSummary> out;
  for (const std::unique_ptr<Worker>& w : workers_) {
    if (!Listed(*w)) continue;
    PodWorkerSummary ws;
    ws.id = w->process;
    ws.label = Label(*w);
    FillStepSource(*w, &ws);
    out.push_back(std::move(ws));
  }
  std::sort(out.begin(), out.end(), [](const PodWorkerSummary& a, const PodWorkerSummary& b) { return a.id < b.id; });
  return out;
}

size_t PodView::workers() const {
  size_t n = 0;
  for (const auto& w : workers_) n += Listed(*w) ? 1 : 0;
  return n;
}

std::string PodView::Label(const Worker& w) const {
  if (!w.external_label.empty()) return w.external_label;
  if (w.has_process_track) {
    const std::string& name = catalog_->Track(w.process_track).name;
    if (!name.empty()) return name;
  }
  return w.process == 0 ? "local" : "worker " + std::to_string(w.process);
}

std::vector<PodView::Held> PodView::HeldExcess(uint32_t k) const {
  // Per worker, its own newest cells, newest first, until k compared ones:
  // the smallest excess among them and their step range.
  // A worker that stopped sending (gone, finished early) is no straggler
  // once the others have gone on for a window's worth of steps each.
  std::vector<Held> held(workers_.size());
  const uint64_t quiet_after = QuietAfter();
  for (size_t i = 0; i < workers_.size(); ++i) {
    Held& h = held[i];
    if (cells_total_ - workers_[i]->last_cell_at > quiet_after) continue;
    const std::deque<WorkerCell>& recent = workers_[i]->recent;
    for (auto it = recent.rbegin(); it != recent.rend() && h.n < k; ++it) {
      const double r = ReferenceFor(*it);
      if (!(r > 0)) continue;
      const double pct = ExcessPct(it->cell.step_ns, r);
      h.min_pct = h.n == 0 ? pct : std::min(h.min_pct, pct);
      if (h.n == 0) h.last = it->step_num;
      h.first = it->step_num;
      ++h.n;
    }
  }
  return held;
}

std::optional<PodStraggler> PodView::Straggler(uint32_t k) const {
  k = std::max<uint32_t>(k, 1);
  return StragglerOf(HeldExcess(k), k);
}

std::optional<PodStraggler> PodView::StragglerOf(const std::vector<Held>& held, uint32_t k) const {
  std::optional<PodStraggler> best;
  uint64_t compared = 0;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Held& h = held[i];
    if (h.n < k) continue;
    ++compared;
    const uint32_t id = workers_[i]->process;
    if (!best || h.min_pct > best->pct || (h.min_pct == best->pct && id < best->worker)) {
      best = PodStraggler{id, "", h.min_pct, h.first, h.last, 0};
    }
  }
  if (!best) return std::nullopt;
  best->workers_compared = compared;
  best->label = Label(*workers_[index_.at(best->worker)]);
  return best;
}

PodSnapshot PodView::Snapshot() const {
  PodSnapshot s;
  s.mode = options_.mode;
  s.window_steps = options_.max_steps;
  s.straggler_steps = options_.straggler_steps;
  s.steps_in_window = rows_.size();
  s.cells_total = cells_total_;

  s.newest_step = newest_step_;
  int64_t frontier = -1;
  const std::vector<char> compared_workers = Compared(&frontier);
  // The rows shown: the newest view_steps at or below the frontier (all of
  // them when no worker is compared); how often each worker was a step's worst.
  const int64_t shown_to = frontier >= 0 ? frontier : std::numeric_limits<int64_t>::max();
  size_t up_to = 0;
  for (const auto& [step_num, row] : rows_) up_to += step_num <= shown_to ? 1 : 0;
  const size_t shown_from = up_to > options_.view_steps ? up_to - options_.view_steps : 0;
  std::vector<uint64_t> worst_count(workers_.size());
  size_t row_index = 0;
  for (const auto& [step_num, row] : rows_) {
    const std::vector<PodCell>& cells = row.cells;
    std::optional<uint32_t> worst;
    if (cells.size() >= 2) {
      worst = cells[WorstOf(cells)].worker;
      ++worst_count[index_.at(*worst)];
    }
    const size_t at = row_index++;
    if (at >= shown_from && step_num <= shown_to) {
      PodStepRow out;
      out.step_num = step_num;
      out.cells = cells;
      std::sort(out.cells.begin(), out.cells.end(),
                [](const PodCell& a, const PodCell& b) { return a.worker < b.worker; });
      out.median_ms = Ms(RowMedian(row));
      out.worst = worst;
      s.steps.push_back(std::move(out));
    }
  }

  // The straggler column: each worker's excess held over its last
  // straggler_steps compared steps.
  const uint32_t k = std::max<uint32_t>(options_.straggler_steps, 1);
  const std::vector<Held> held = HeldExcess(k);

  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = *workers_[i];
    if (!Listed(w)) continue;
    // Its own newest cells, each against its step's reference.
    uint64_t step_ns = 0, compared = 0;
    std::array<uint64_t, kBucketCount> bucket_ns{};
    double lag_ns = 0, ref_ns = 0;
    for (const WorkerCell& c : w.recent) {
      step_ns += c.cell.step_ns;
      for (size_t b = 0; b < kBucketCount; ++b) bucket_ns[b] += c.cell.bucket_ns[b];
      const double r = ReferenceFor(c);
      if (!(r > 0)) continue;
      ++compared;
      lag_ns += static_cast<double>(c.cell.step_ns) - r;
      ref_ns += r;
    }
    PodWorkerSummary ws;
    ws.id = w.process;
    ws.label = Label(w);
    ws.steps = w.recent.size();
    FillStepSource(w, &ws);
    if (!w.recent.empty()) {
      ws.first_step = ws.last_step = w.recent.front().step_num;
      for (const WorkerCell& c : w.recent) {
        ws.first_step = std::min(ws.first_step, c.step_num);
        ws.last_step = std::max(ws.last_step, c.step_num);
      }
      ws.behind_steps = newest_step_ - ws.last_step;
      const double n = static_cast<double>(w.recent.size());
      ws.mean_step_ms = Ms(static_cast<double>(step_ns)) / n;
      for (size_t b = 0; b < kBucketCount; ++b) ws.mean_ms[b] = Ms(static_cast<double>(bucket_ns[b])) / n;
    }
    if (step_ns > 0) {
      ws.input_pct =
          100.0 * static_cast<double>(bucket_ns[static_cast<size_t>(Bucket::kInput)]) / static_cast<double>(step_ns);
    }
    ws.worst_count = worst_count[i];
    ws.compared_steps = compared;
    if (compared > 0) ws.lag_ms = Ms(lag_ns) / static_cast<double>(compared);
    if (ref_ns > 0) ws.lag_pct = 100.0 * lag_ns / ref_ns;
    if (held[i].n >= k) ws.straggler_pct = held[i].min_pct;
    if (!compared_workers[i]) {
      ws.not_common = cells_total_ - w.last_cell_at > QuietAfter() ? "stopped sending" : "behind the held steps";
    }
    s.workers.push_back(std::move(ws));
  }
  FillCommon(&s, compared_workers);
  s.common.frontier_step = frontier;
  std::sort(s.workers.begin(), s.workers.end(),
            [](const PodWorkerSummary& a, const PodWorkerSummary& b) { return a.id < b.id; });

  s.straggler = StragglerOf(held, k);
  s.diagnostics = counts_;
  s.diagnostics.late_for_step = diag_.Get(Diag::late_for_step);
  s.diagnostics.events_without_step = diag_.Get(Diag::events_without_step);
  s.diagnostics.device_without_launch = diag_.Get(Diag::device_without_launch);
  return s;
}

void PodView::FillCommon(PodSnapshot* s, const std::vector<char>& compared) const {
  // The frontier's view_steps step numbers that every compared worker has,
  // newest first; each compared worker's cells there, against each row's
  // reference. (`s->workers` is in the order of workers_ here, listed only.)
  int64_t frontier = -1;
  size_t n_compared = 0;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!compared[i]) continue;
    ++n_compared;
    frontier = frontier < 0 ? workers_[i]->last_step : std::min(frontier, workers_[i]->last_step);
  }
  s->common.workers = n_compared;
  if (n_compared == 0) return;
  struct Sums {
    uint64_t steps = 0, step_ns = 0, compared = 0, worst = 0;
    std::array<uint64_t, kBucketCount> bucket_ns{};
    double lag_ns = 0, ref_ns = 0;
  };
  std::vector<Sums> sums(workers_.size());
  const int64_t from = frontier - CommonSteps() + 1;
  std::vector<const PodCell*> mine(workers_.size());
  for (auto it = rows_.upper_bound(frontier); it != rows_.begin();) {
    --it;
    if (it->first < from) break;
    const Row& row = it->second;
    std::fill(mine.begin(), mine.end(), nullptr);
    size_t have = 0;
    for (const PodCell& c : row.cells) {
      const size_t i = index_.at(c.worker);
      if (compared[i]) {
        mine[i] = &c;
        ++have;
      }
    }
    if (have < n_compared) continue;  // a compared worker lacks this step.
    const uint32_t worst = row.cells[WorstOf(row.cells)].worker;
    if (s->common.steps++ == 0) s->common.last_step = it->first;
    s->common.first_step = it->first;
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (mine[i] == nullptr) continue;
      const PodCell& c = *mine[i];
      Sums& m = sums[i];
      ++m.steps;
      m.step_ns += c.step_ns;
      for (size_t b = 0; b < kBucketCount; ++b) m.bucket_ns[b] += c.bucket_ns[b];
      if (row.cells.size() >= 2 && worst == c.worker) ++m.worst;
      const double r = RowReference(row, c.step_ns);
      if (!(r > 0)) continue;
      ++m.compared;
      m.lag_ns += static_cast<double>(c.step_ns) - r;
      m.ref_ns += r;
    }
  }
  for (PodWorkerSummary& ws : s->workers) {
    const size_t i = index_.at(ws.id);
    if (!compared[i]) continue;
    const Sums& m = sums[i];
    PodCommonSummary c;
    c.steps = m.steps;
    c.worst_count = m.worst;
    c.compared_steps = m.compared;
    if (m.steps > 0) {
      const double n = static_cast<double>(m.steps);
      c.mean_step_ms = Ms(static_cast<double>(m.step_ns)) / n;
      for (size_t b = 0; b < kBucketCount; ++b) c.mean_ms[b] = Ms(static_cast<double>(m.bucket_ns[b])) / n;
    }
    if (m.step_ns > 0) {
      c.input_pct = 100.0 * static_cast<double>(m.bucket_ns[static_cast<size_t>(Bucket::kInput)]) /
                    static_cast<double>(m.step_ns);
    }
    if (m.compared > 0) c.lag_ms = Ms(m.lag_ns) / static_cast<double>(m.compared);
    if (m.ref_ns > 0) c.lag_pct = 100.0 * m.lag_ns / m.ref_ns;
    ws.common = c;
  }
}

}  // namespace liveprof
