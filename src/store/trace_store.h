// TraceStore: every event the pipeline sees, kept per track for the trace
// viewer and for exports, and queried by viewport: (tracks, t0, t1, width in
// pixels) returns each event at least one pixel wide on its own and folds the
// others into per-pixel summaries, so the answer's size follows the screen,
// not the trace (docs/semantics-tf.md §9.4; as Tracy's live view, which
// folds zones narrower than 3 px).
//
// Layout. Per track, events in arrival order (the pipeline's completion
// order) in chunks of up to kChunkEvents. A chunk's columns are byte streams
// of LEB128 varints: ends as deltas from the previous end (zigzag: a late
// event may end earlier), durations, name ids, kinds, correlation ids as
// zigzag deltas, and the payload of the kinds that have one (kernel details
// and op, copy bytes, memory address and bytes, step number, counter value).
// Each chunk has a summary (count, first start, last start, last end, longest
// event, sum of durations); summaries of 16 chunks make a node of the next
// level, and so on: the level-of-detail index. Besides, each track has a
// mipmap (trace_mipmap.h): its sealed events folded by time into buckets of
// 2^k ns, per level k.
//
// The grid. A query's pixels are 2^k ns wide, the least power of two with
// 2^k * width_px >= t1 - t0, from t0 rounded down to a multiple of it; the
// result says which (t0, t1, width_px up to one more, ns_per_px), as
// Perfetto's quantised buckets do. Events at least a pixel wide that
// overlap it come one by one; the others that start in it are folded into
// the pixel of their start. Zoomed out (2^k at least the track's finest
// mipmap level), the folds are the mipmap's buckets, one per pixel, and
// the index is walked only for the wide events (nodes whose longest event
// is narrower are skipped whole) and the open chunk. Zoomed in, the walk
// goes top down and folds a whole node into one pixel when every event in
// it starts inside that pixel and is narrower; otherwise it goes down, to
// the events.
//
// Besides the producers' tracks, each GPU has rows the store derives
// (derived_rows.h): its Steps (each step over the device's own work), its
// Framework ops and its memory in use, as TF's viewer shows.
//
// Nesting depth is worked out per query, over the events it returns: an
// event's ancestors overlap the view and are at least as long, so they are
// returned too and the stack of returned events gives the exact depth.
//
// Folded summaries, per pixel: the number of events, the sum of their
// durations as a fraction of the pixel (capped at 1: nested folded events
// count twice), the longest one's name and duration, and for counter
// samples the largest value and the last to arrive.
//
// Threads: Append on the pipeline thread only; every other method on any
// thread. A std::shared_mutex: Append holds it exclusively for one batch
// (microseconds); a query shares it per track and lets a waiting Append in
// between chunks (and every 64 index nodes), so the pipeline thread waits
// for one chunk's work at most, never a whole query (bench/RESULTS.md,
// BM_AppendStallUnderQueries). A query therefore sees the chunks there were
// when its walk of a track began, some of them as later batches left them
// (a fuller open chunk, a freed one skipped); each event is counted once.
// Search and ForEach go chunk by chunk the same way. Readers wait for a
// waiting Append before taking the lock (std::shared_mutex prefers readers).
//
// Memory and disk. Without a run folder, the store keeps Options::max_bytes
// of sealed columns in RAM and past it frees the oldest sealed chunks (their
// ids stay, their events are gone; stats() says how many and up to when).
// With one (Options::dir, then Create), every chunk is written to the
// folder's segments as it seals (trace_segments.h), in one write per batch;
// past max_bytes the oldest leave RAM but stay on disk, and queries read them
// back (their index stays in RAM: a full-range view folds whole nodes and
// rarely reads). Past max_disk_bytes the oldest segments are deleted, their
// events counted as dropped. The open chunks' new events are written too,
// at each Append, as tail records (the column bytes they added), so a
// process killed after Append returned loses no event it was given (they are
// in the kernel's page cache: a machine crash may, there is no fsync); a
// clean stop (the destructor) seals the open chunks. Open reads a run's
// folder back, read-only, a killed run's open chunks from their tails.
#ifndef LIVEPROF_STORE_TRACE_STORE_H_
#define LIVEPROF_STORE_TRACE_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <atomic>

#include "store/derived_rows.h"
#include "store/trace_chunk.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace liveprof {

class SegmentLog;

// An event's place in the store: (track << 40) | index in its track.
using StoredEventId = uint64_t;
inline constexpr StoredEventId kNoEventId = UINT64_MAX;  // a device's description (ForEach).

struct TraceQuery {
  std::vector<TrackId> tracks;  // empty: every track; repeats count once.
  uint64_t t0 = 0, t1 = 0;      // ns, t0 < t1: the view [t0, t1).
  uint32_t width_px = 1000;     // 1 .. kMaxWidthPx: at least this resolution.
};

struct TraceQueryResult {
  struct Slice {  // an event at least one pixel wide.
    StoredEventId id = 0;
    uint64_t ts = 0, dur = 0;
    NameId name = 0;
    uint32_t corr = 0;
    EventKind kind = EventKind::kInvalid;
    uint8_t depth = 0;  // nesting among the returned events of its track.
  };
  struct Summary {  // the events under one pixel, folded.
    uint32_t px = 0;
    uint32_t count = 0;
    double busy = 0;  // sum of durations / pixel width, at most 1.
    NameId longest = 0;
    uint64_t longest_dur = 0;
    // Counter samples (kCounter: a counter track, a GPU's memory row): the
    // largest value, and the value of the last to arrive. 0 for other events.
    double max_value = 0, last_value = 0;
  };
  struct Track {
    TrackId track = 0;
    std::vector<Slice> slices;       // by ts, then longer first.
    std::vector<Summary> summaries;  // by px.
    // A counter row's (a counter-typed track, a GPU's Memory in use): the
    // sample in force at t0, the latest to start before it (among equals,
    // the last to arrive), so a view between samples still shows the level.
    bool held = false;
    uint64_t held_ts = 0;
    double held_value = 0;
  };
  struct Flow {  // a launch and its device work, one of them at least in the view.
    StoredEventId from = 0, to = 0;
  };
  // A flow's end that is not among the slices (outside the view, or folded
  // there): enough to draw an arrow towards it. Found for a slice whose
  // launch (a runtime API call) or device work (a kernel, a copy) is not a
  // slice too, within kFlowReachNs of it (a launch before its work, the
  // work after), when at most kMaxFlowEnds ends are missing.
  struct FlowEnd {
    StoredEventId id = 0;
    TrackId track = 0;
    uint64_t ts = 0, dur = 0;
    NameId name = 0;
    EventKind kind = EventKind::kInvalid;
  };
  static constexpr uint64_t kFlowReachNs = 50'000'000;
  static constexpr size_t kMaxFlowEnds = 256;
  // The grid (above): pixel p is [t0 + p * ns_per_px, t0 + (p + 1) * ns_per_px),
  // t1 = t0 + width_px * ns_per_px (at most UINT64_MAX); ns_per_px a power
  // of two, at most 2^63.
  uint64_t t0 = 0, t1 = 0;
  uint32_t width_px = 0;
  double ns_per_px = 0;
  std::vector<Track> tracks;
  std::vector<Flow> flows;
  std::vector<FlowEnd> flow_ends;  // by id.
  uint64_t events_visited = 0;     // decoded one by one (the rest folded by node).
};

// Sets each slice's depth (sorting them by start, the longer first): the
// number of slices around it, each containing the next (a slice that only
// overlaps another, ending after it, is not its child).
void NestSlices(std::vector<TraceQueryResult::Slice>* slices);

class TraceStore {
 public:
  static constexpr uint32_t kChunkEvents = 64;
  static constexpr uint32_t kFanout = 16;
  static constexpr uint32_t kMaxWidthPx = 1 << 16;

  struct Options {
    // RAM for sealed columns: past it, the oldest sealed chunks (first
    // sealed, any track) leave RAM: to the run folder's copy when there is
    // one, else freed and counted in stats().dropped_events. The index and
    // the mipmaps (~3 bytes an event together) stay for the chunks on disk.
    uint64_t max_bytes = uint64_t{1} << 30;
    // The run folder (empty: none). Create() starts a run in it, Open()
    // reads one back.
    std::string dir;
    // Disk for the segments (0: no limit): past it, the oldest segments
    // are deleted and their events counted as dropped.
    uint64_t max_disk_bytes = 0;
    uint64_t segment_bytes = uint64_t{64} << 20;
  };
  TraceStore() : TraceStore(Options{}) {}
  explicit TraceStore(Options options);
  ~TraceStore();
  TraceStore(const TraceStore&) = delete;
  TraceStore& operator=(const TraceStore&) = delete;

  // A new run in Options::dir: the folder is created if needed and must
  // hold no segments. Before the first Append. False with `error`.
  bool Create(std::string* error);
  // The run in Options::dir read back: every chunk it holds, sealed before
  // a kill or written at a clean stop; the store is read-only after (Append
  // ignores what it gets). Records that fail their checks are skipped and
  // listed in problems(). False with `error` when there is no run there.
  bool Open(std::string* error);
  std::vector<std::string> problems() const;

  // Takes the batch's definitions (kNameDef, kTrackDef: names are copied)
  // and keeps its events. `watermark_ns` (0: not known): every event ending
  // at or before it has been given, so the derived Steps rows can make the
  // steps long done (derived_rows.h). Pipeline thread only.
  void Append(std::span<const Event> definitions, std::span<const Event> events, uint64_t watermark_ns = 0);

  // The viewport query above. Any thread.
  TraceQueryResult Query(const TraceQuery& q) const;
  // One event whole, by id (nullopt for an unknown id). Any thread.
  std::optional<Event> Get(StoredEventId id) const;
  // The first event on `tracks` (empty: all) whose name contains `text`,
  // starting after `from` (forward) or before it (backward). With
  // `from_id`, the events are ordered by (start, id) and the search starts
  // after (or before) the event (from, from_id): equal starts are stepped
  // through one by one. Any thread.
  std::optional<std::pair<StoredEventId, Event>> Search(std::string_view text, uint64_t from, bool forward,
                                                        const std::vector<TrackId>& tracks = {},
                                                        std::optional<StoredEventId> from_id = std::nullopt) const;
  // How many events on `tracks` (empty: all) have a name containing `text`,
  // and how many of them come before (ts, id) in that order. Any thread.
  struct MatchCount {
    uint64_t total = 0, before = 0;
  };
  MatchCount CountMatches(std::string_view text, uint64_t ts, StoredEventId id,
                          const std::vector<TrackId>& tracks = {}) const;
  // An area selection's sums (the viewer's box, as Perfetto's area
  // selection): the events on `tracks` (empty: all; the derived Steps and
  // Framework ops rows too; counter samples never) overlapping [t0, t1],
  // per name: how many, their whole durations, and their self time (less
  // the durations of their children on their track, nested as the query
  // nests: a child starts no earlier and ends no later). Stops after
  // `max_events` (truncated). Any thread; the lock per chunk.
  struct AreaSums {
    struct Name {
      NameId name = 0;
      uint64_t count = 0, total = 0, self = 0, max = 0;
    };
    std::vector<Name> names;  // by total, the longest first.
    uint64_t events = 0;
    uint32_t tracks = 0;  // rows with an event in it.
    bool truncated = false;
  };
  AreaSums SumArea(uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks, uint64_t max_events) const;
  // The devices' descriptions (kDeviceInfo, the latest per device, id
  // kNoEventId: they are on no timeline), then every event of `tracks`
  // (empty: all; never the derived rows) overlapping [t0, t1], track by
  // track in arrival order. Any
  // thread; the lock is taken per chunk, not held while `fn` runs, so
  // appends go on (and may add events to the open chunk's range, or free
  // chunks, meanwhile).
  void ForEach(uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
               const std::function<void(StoredEventId, const Event&)>& fn) const;
  // The same walk, stopped as soon as `fn` returns false (an export whose
  // reader went away). False if it was stopped.
  bool ForEachWhile(uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                    const std::function<bool(StoredEventId, const Event&)>& fn) const;

  // Names and tracks as defined so far, the derived rows (derived_rows.h)
  // included: a GPU's rows, unnamed; a counter name's row, a kCounter track
  // named by it. Any thread.
  std::string Name(NameId id) const;
  std::vector<std::string> Names() const;  // by NameId.
  std::vector<std::pair<TrackId, TrackInfo>> Tracks() const;

  struct Stats {
    uint64_t events = 0;  // on timelines (devices' descriptions are not).
    uint64_t chunks = 0;
    uint64_t bytes = 0;  // columns, summaries, index and mipmaps (not the name strings).
    uint64_t first_ns = 0, last_ns = 0;
    uint64_t dropped_events = 0;    // freed by the retention rule, oldest first.
    uint64_t dropped_until_ns = 0;  // the latest end among them.
    uint64_t unstored_events = 0;   // on track ids >= DerivedRows::kFirstDerivedTrack.
    uint64_t disk_bytes = 0;        // the run folder's segments.
    uint64_t segments = 0;
    uint64_t spilled_chunks = 0;  // sealed chunks only on disk now.
    uint64_t read_errors = 0;     // chunks that failed to read back (skipped).
    std::string spill_error;      // why the run folder stopped taking chunks, if it did.
  };
  Stats stats() const;

 private:
  struct Node;
  struct Level;
  struct Chunk;
  struct TrackStore;
  TrackStore& Track(TrackId id);
  const TrackStore* FindTrack(TrackId id) const;
  void KeepDevice(const Event& e);
  void QueryTrack(const TrackStore& t, TrackId id, const TraceQueryResult& grid, TraceQueryResult::Track* out,
                  uint64_t* visited, std::shared_lock<std::shared_mutex>& lock) const;
  void HeldBefore(const TrackStore& t, uint64_t t0, TraceQueryResult::Track* out,
                  std::shared_lock<std::shared_mutex>& lock) const;
  // A reader's lock, once no Append waits for it.
  std::shared_lock<std::shared_mutex> LockShared() const;
  // If an Append waits: lets the lock go until it has had it, then takes it
  // back (the caller re-reads what it holds references to).
  void LetWriterIn(std::shared_lock<std::shared_mutex>& lock) const;
  void WaitForWriter() const;
  bool IsCounterRow(TrackId id) const;
  NameId CounterRowName(const TrackStore& t, TrackId id) const;  // a derived counter row's.
  // A query's flows: those with both ends among the slices, then those
  // with one end only there (the other found, FlowEnd). trace_store_find.cc
  void FindFlows(TraceQueryResult* r) const;
  // The names Search and CountMatches take: per name id, whether it matches;
  // returns the name_bits of the chunks that may hold one (0: none).
  uint64_t MatchingNames(std::string_view text, std::vector<bool>* match) const;
  // fn(id, event) for each event on `tracks` (empty: all) named like `text`,
  // in the chunks whose index node `want_chunk` takes (Search, CountMatches).
  void ForEachMatch(std::string_view text, const std::vector<TrackId>& tracks,
                    const std::function<bool(const Node&)>& want_chunk,
                    const std::function<void(StoredEventId, Event&)>& fn) const;

  // trace_store_disk.cc:
  void Seal(TrackStore& t, TrackId id);  // its open chunk, to RAM and to the run folder.
  void Retain();                         // the memory and disk budgets.
  ChunkView View(const TrackStore& t, uint64_t j, std::string* scratch) const;  // from RAM or disk.
  void WriteName(NameId id);
  void WriteTrack(TrackId id);
  void WriteDevice(const Event& e);
  void WriteDefinitions();
  // The open chunks' events since their last tail record: the touched
  // tracks', or every open chunk's from its start after a new segment began
  // (each segment restates them, as it does the names).
  void WriteTails();
  void WriteTail(TrackStore& t, TrackId id);

  Options options_;
  mutable std::shared_mutex mu_;
  mutable std::atomic<uint32_t> writers_waiting_{0};  // Appends waiting for mu_.
  std::deque<TrackId> resident_;                      // the track of each sealed chunk in RAM, in sealing order.
  uint64_t resident_bytes_ = 0;                       // their columns.
  std::unique_ptr<SegmentLog> log_;                   // the run folder, if any.
  bool read_only_ = false;                            // a run read back (Open).
  struct SegmentChunks {
    uint32_t number = 0;
    std::vector<TrackId> tracks;  // of its chunks, in order.
  };
  std::deque<SegmentChunks> segment_chunks_;
  uint64_t spilled_chunks_ = 0;
  mutable std::atomic<uint64_t> read_errors_{0};
  std::vector<std::string> problems_;
  uint64_t dropped_events_ = 0, dropped_until_ns_ = 0;
  std::vector<std::unique_ptr<TrackStore>> tracks_;  // by TrackId.
  std::vector<TrackId> track_ids_;                   // those tracks_ holds, ascending (a few among thousands of ids).
  std::vector<TrackInfo> track_info_;                // by TrackId.
  std::deque<std::string> name_text_;                // owned copies.
  std::vector<std::string_view> names_;              // by NameId, into name_text_.
  uint64_t events_ = 0;
  std::vector<Event> device_info_;  // kDeviceInfo events, kept whole.
  uint64_t unstored_events_ = 0;    // on a track id the derived rows reserve.
  DerivedRows derived_;
  std::vector<Event> derived_events_;  // reused per batch.
  std::vector<TrackId> touched_;       // the tracks an Append added to.
  bool restate_tails_ = false;         // a new segment began: WriteTails writes every open chunk whole.
  std::string tail_bytes_;             // a tail record's columns (WriteTail).
  std::vector<Event> scratch_events_;  // a chunk decoded for the mipmap (Seal, Open).
  uint64_t first_ns_ = UINT64_MAX, last_ns_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_TRACE_STORE_H_
