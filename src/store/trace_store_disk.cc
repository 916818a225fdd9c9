// The trace store's run folder (trace_store.h, trace_segments.h): sealed
// chunks written to segments, the memory budget that lets them go from RAM,
// the disk budget that deletes the oldest segments, and a run read back.
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "store/trace_store.h"
#include "store/trace_store_parts.h"
#include "stream/name_table.h"

namespace liveprof {
namespace {

using Record = SegmentLog::Record;

// A chunk record's body: this head, then the chunk's columns.
//   u32 track | u64 chunk index | u16 count | u8 uniform columns | u8 counters | u64 name bits
//   | node: u64 min_start, max_start, 0 (was the least end), max_end, max_dur, sum_dur | u32 longest
//     | f64 max_value, last_value
//   | u16 column ends x 6
constexpr size_t kChunkHead = 4 + 8 + 4 + 8 + 6 * 8 + 4 + 2 * 8 + 2 * kChunkColumns;
constexpr size_t kTrackBody = 4 + 4 + 1 + 1 + 8;
// A tail record's body (an open chunk's events from `from` to `to`): this
// head, then each column's bytes for them, back to back.
//   u32 track | u64 chunk index | u16 from | u16 to | u8 counters | u16 column bytes x 6
constexpr size_t kTailHead = 4 + 8 + 2 + 2 + 1 + 2 * kChunkColumns;
// Open: chunks lost in a damaged segment stay as empty placeholders (their
// ids stay); at most this many, whatever a damaged or crafted folder says.
constexpr uint64_t kMaxLostChunks = uint64_t{1} << 21;
constexpr size_t kMaxProblems = 100;

class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  template <typename T>
  Writer& operator<<(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(p_, &v, sizeof v);  // little-endian machines only (as the log's framing).
    p_ += sizeof v;
    return *this;
  }

 private:
  char* p_;
};

class Reader {
 public:
  explicit Reader(const char* p) : p_(p) {}
  template <typename T>
  Reader& operator>>(T& v) {
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return *this;
  }

 private:
  const char* p_;
};

}  // namespace

TraceStore::~TraceStore() {
  // A clean stop keeps the open chunks too (a kill keeps the sealed ones).
  if (!log_ || read_only_) return;
  std::unique_lock lock(mu_);
  derived_.Flush(&derived_events_);  // the ops held open.
  for (const Event& e : derived_events_) {
    TrackStore& t = Track(e.track);
    if (t.Append(e)) Seal(t, e.track);  // (Seal reads its chunk's own node: no Reindex needed)
  }
  for (TrackId id = 0; id < tracks_.size(); ++id) {
    if (tracks_[id] && tracks_[id]->building) Seal(*tracks_[id], id);
  }
  log_->Flush();
}

bool TraceStore::Create(std::string* error) {
  std::unique_lock lock(mu_);
  auto log = std::make_unique<SegmentLog>(options_.dir, options_.segment_bytes);
  if (!log->Create(error)) return false;
  log_ = std::move(log);
  WriteDefinitions();
  if (!log_->Flush()) {
    *error = log_->error();
    log_.reset();
    return false;
  }
  return true;
}

void TraceStore::WriteName(NameId id) {
  char head[4];
  Writer(head) << id;
  log_->Add(Record::kName, {head, 4}, names_[id]);
}

void TraceStore::WriteTrack(TrackId id) {
  const TrackInfo& t = track_info_[id];
  char body[kTrackBody];
  Writer(body) << id << t.name << static_cast<uint8_t>(t.type) << t.device << t.os_id;
  log_->Add(Record::kTrack, {body, kTrackBody});
}

void TraceStore::WriteDevice(const Event& e) {
  static_assert(std::is_trivially_copyable_v<Event>);
  log_->Add(Record::kDevice, {reinterpret_cast<const char*>(&e), sizeof e});
}

void TraceStore::WriteDefinitions() {
  for (NameId id = 0; id < names_.size(); ++id) WriteName(id);
  for (TrackId id = 0; id < track_info_.size(); ++id) WriteTrack(id);
  for (const Event& e : device_info_) WriteDevice(e);
}

void TraceStore::Seal(TrackStore& t, TrackId id) {
  Chunk& c = t.Seal();
  const uint64_t j = t.end() - 1;
  t.AddToMipmap(j, ViewOf(c.data.get(), c.ends, c.count, c.uniform, c.counters), &scratch_events_);
  resident_bytes_ += c.DataBytes();
  resident_.push_back(id);
  if (!log_ || read_only_) return;
  const Node& n = t.levels[0].at(j);
  char head[kChunkHead];
  Writer w(head);
  w << id << j << c.count << c.uniform << c.counters << c.name_bits << n.min_start << n.max_start << c.corrs.Packed()
    << n.max_end << n.max_dur << n.sum_dur << n.longest << n.max_value << n.last_value;
  for (const uint16_t end : c.ends) w << end;
  if (log_->Full(kChunkHead + c.ends.back())) {
    log_->Rotate();
    WriteDefinitions();     // each segment names what its chunks use,
    restate_tails_ = true;  // and holds the open chunks whole (the older may go).
  }
  c.disk = log_->Add(Record::kChunk, {head, kChunkHead}, {c.data.get(), c.ends.back()});
  if (c.disk == SegmentLog::kNowhere) return;
  const uint32_t segment = SegmentLog::SegmentOf(c.disk);
  if (segment_chunks_.empty() || segment_chunks_.back().number != segment) segment_chunks_.push_back({segment, {}});
  segment_chunks_.back().tracks.push_back(id);
}

void TraceStore::WriteTails() {
  if (restate_tails_) {
    restate_tails_ = false;
    for (TrackId id = 0; id < tracks_.size(); ++id) {
      if (!tracks_[id] || !tracks_[id]->building) continue;
      tracks_[id]->logged = 0;
      tracks_[id]->logged_len = {};
      WriteTail(*tracks_[id], id);
    }
    return;
  }
  for (const TrackId id : touched_) WriteTail(*tracks_[id], id);
}

void TraceStore::WriteTail(TrackStore& t, TrackId id) {
  if (!t.building || t.open.count() <= t.logged) return;
  char head[kTailHead];
  Writer w(head);
  w << id << (t.end() - 1) << t.logged << static_cast<uint16_t>(t.open.count())
    << static_cast<uint8_t>(t.open.counters());
  tail_bytes_.clear();
  for (int c = 0; c < kChunkColumns; ++c) {
    const std::string_view col = t.open.column(c);
    w << static_cast<uint16_t>(col.size() - t.logged_len[c]);
    tail_bytes_.append(col.substr(t.logged_len[c]));
    t.logged_len[c] = static_cast<uint16_t>(col.size());
  }
  t.logged = static_cast<uint16_t>(t.open.count());
  log_->Add(Record::kTail, {head, kTailHead}, tail_bytes_);
}

void TraceStore::Retain() {
  // Memory: past max_bytes the oldest sealed chunks leave RAM, for their
  // copy on disk; without one (no run folder) they are gone. A track's
  // chunks seal in order, so a track's entry in resident_ is its chunk
  // resident_from.
  while (resident_bytes_ > options_.max_bytes && !resident_.empty()) {
    const TrackId id = resident_.front();
    resident_.pop_front();
    TrackStore& t = *tracks_[id];
    const uint64_t j = t.resident_from++;
    if (j < t.base()) continue;  // deleted with its segment already.
    Chunk& c = t.chunk(j);
    resident_bytes_ -= c.DataBytes();
    if (log_ && log_->Durable(c.disk)) {
      c.data.reset();
      ++spilled_chunks_;
    } else if (j == t.base()) {
      dropped_until_ns_ = std::max(dropped_until_ns_, t.levels[0].at(j).max_end);
      const uint64_t freed = t.FreeFront();
      if (!DerivedRows::IsDerived(id)) dropped_events_ += freed;
    } else {  // behind chunks on disk, and not written (the log failed): its events are lost.
      dropped_until_ns_ = std::max(dropped_until_ns_, t.levels[0].at(j).max_end);
      if (!DerivedRows::IsDerived(id)) dropped_events_ += c.count;
      t.mip.DropBefore(t.levels[0].at(j).max_start + 1);
      c = Chunk{};  // an empty placeholder: its ids stay, queries skip it.
      t.levels[0].at(j) = Node{};
      t.RefreshAncestors(j);
    }
  }
  // Disk: past max_disk_bytes the oldest segments are deleted, and their
  // chunks with them (each the front one of its track by then).
  if (!log_ || options_.max_disk_bytes == 0) return;
  while (log_->disk_bytes() > options_.max_disk_bytes && !segment_chunks_.empty() &&
         segment_chunks_.front().number != log_->current()) {
    for (const TrackId id : segment_chunks_.front().tracks) {
      TrackStore& t = *tracks_[id];
      const Chunk& c = t.chunks.front();
      if (c.data) {
        resident_bytes_ -= c.DataBytes();
      } else {
        --spilled_chunks_;
      }
      dropped_until_ns_ = std::max(dropped_until_ns_, t.levels[0].nodes.front().max_end);
      const uint64_t freed = t.FreeFront();
      if (!DerivedRows::IsDerived(id)) dropped_events_ += freed;
    }
    log_->Delete(segment_chunks_.front().number);
    segment_chunks_.pop_front();
  }
}

ChunkView TraceStore::View(const TrackStore& t, uint64_t j, std::string* scratch) const {
  if (t.is_open(j)) return t.open.view();
  const Chunk& c = t.chunk(j);
  if (c.count == 0) return ChunkView{};  // lost in a damaged segment (Open).
  if (c.data) return ViewOf(c.data.get(), c.ends, c.count, c.uniform, c.counters);
  // Its record as written: this process sealed it, or Open checked that it
  // decodes (CheckChunk); the CRC says the bytes are still those.
  const std::string_view body =
      log_ && c.disk != SegmentLog::kNowhere ? log_->Read(c.disk, kChunkHead + c.ends.back(), scratch) : "";
  if (!body.empty()) {
    TrackId track = 0;
    uint64_t index = 0;
    Reader(body.data()) >> track >> index;
    if (index == j && &t == FindTrack(track))
      return ViewOf(body.data() + kChunkHead, c.ends, c.count, c.uniform, c.counters);
  }
  read_errors_.fetch_add(1, std::memory_order_relaxed);
  return ChunkView{};
}

bool TraceStore::Open(std::string* error) {
  std::unique_lock lock(mu_);
  auto log = std::make_unique<SegmentLog>(options_.dir, options_.segment_bytes);
  uint64_t lost_chunks = 0, more_problems = 0;
  auto problem = [&](uint64_t pos, const std::string& what) {
    if (problems_.size() >= kMaxProblems) return void(++more_problems);
    problems_.push_back("segment " + std::to_string(SegmentLog::SegmentOf(pos)) + ", byte " +
                        std::to_string(pos & ((uint64_t{1} << 40) - 1)) + ": " + what);
  };
  // Per track, the last open chunk its tail records built up (Record::kTail).
  struct Tail {
    uint64_t chunk = 0, pos = 0;
    uint16_t count = 0;  // 0: none, or broken (a record that did not follow).
    bool counters = false;
    std::array<std::string, kChunkColumns> cols;
  };
  std::map<TrackId, Tail> tails;
  auto on_record = [&](Record type, std::string_view body, uint64_t pos) {
    if (type == Record::kName && body.size() >= 4) {
      NameId id;
      Reader(body.data()) >> id;
      if (id >= NameTable::kMaxNames) return problem(pos, "name id " + std::to_string(id) + " out of range");
      if (id >= names_.size()) names_.resize(size_t{id} + 1);
      if (names_[id] == body.substr(4)) return;  // restated by a later segment.
      name_text_.emplace_back(body.substr(4));
      names_[id] = name_text_.back();
    } else if (type == Record::kTrack && body.size() == kTrackBody) {
      TrackId id;
      TrackInfo info;
      uint8_t kind;
      Reader(body.data()) >> id >> info.name >> kind >> info.device >> info.os_id;
      info.type = static_cast<TrackType>(kind);
      if (id >= DerivedRows::kFirstDerivedTrack) return problem(pos, "track id " + std::to_string(id) + " reserved");
      if (kind > static_cast<uint8_t>(TrackType::kProcess)) {  // one this build does not know: a plain row.
        problem(pos,
                "track " + std::to_string(id) + ": type " + std::to_string(kind) + " unknown, shown as a host thread");
        info.type = TrackType::kHostThread;
      }
      if (id >= track_info_.size()) track_info_.resize(size_t{id} + 1);
      track_info_[id] = info;
    } else if (type == Record::kDevice && body.size() == sizeof(Event)) {
      Event e;
      std::memcpy(&e, body.data(), sizeof e);
      if (e.kind != EventKind::kDeviceInfo) return problem(pos, "a device record that is not a description");
      KeepDevice(e);
    } else if (type == Record::kChunk && body.size() >= kChunkHead) {
      TrackId id;
      uint64_t j;
      Chunk c;
      Node n;
      Reader r(body.data());
      uint8_t counters = 0;
      uint64_t corr_span = 0;
      r >> id >> j >> c.count >> c.uniform >> counters >> c.name_bits >> n.min_start >> n.max_start >> corr_span >>
          n.max_end >> n.max_dur >> n.sum_dur >> n.longest >> n.max_value >> n.last_value;
      c.corrs = CorrRange::Unpacked(corr_span);
      for (uint16_t& end : c.ends) r >> end;
      n.count = c.count;
      c.counters = counters == 1;
      c.disk = pos;
      const bool ends_ok = std::is_sorted(c.ends.begin(), c.ends.end()) && kChunkHead + c.ends.back() == body.size();
      if (c.count == 0 || c.count > kChunkEvents || !ends_ok ||
          !CheckChunk(body.data() + kChunkHead, c.ends, c.count, c.uniform) || c.uniform >= (1 << kChunkColumns) ||
          counters > 1 || id >= DerivedRows::kEndDerivedTrack || j >= (uint64_t{1} << 34)) {
        return problem(pos, "a chunk record that does not hold together");
      }
      TrackStore& t = Track(id);
      if (!t.chunks.empty() && (j < t.end() || j - t.end() > kMaxLostChunks - lost_chunks)) {
        return problem(pos, "chunk " + std::to_string(j) + " of track " + std::to_string(id) + " after chunk " +
                                std::to_string(t.end() - 1));
      }
      while (!t.chunks.empty() && t.end() < j) {  // lost ones: empty.
        t.AddFromDisk(t.end(), Chunk{}, Node{});
        ++lost_chunks;
      }
      t.AddFromDisk(j, c, n);
      t.AddToMipmap(j, ViewOf(body.data() + kChunkHead, c.ends, c.count, c.uniform, c.counters), &scratch_events_);
      ++spilled_chunks_;
      if (DerivedRows::IsDerived(id)) return;
      events_ += c.count;
      first_ns_ = std::min(first_ns_, n.min_start);
      last_ns_ = std::max(last_ns_, n.max_end);
    } else if (type == Record::kTail && body.size() >= kTailHead) {
      TrackId id;
      uint64_t j;
      uint16_t from, to;
      uint8_t counters;
      std::array<uint16_t, kChunkColumns> len;
      Reader r(body.data());
      r >> id >> j >> from >> to >> counters;
      size_t sum = 0;
      for (uint16_t& n : len) r >> n, sum += n;
      if (id >= DerivedRows::kEndDerivedTrack || j >= (uint64_t{1} << 34) || from >= to || to > kChunkEvents ||
          counters > 1 || kTailHead + sum != body.size()) {
        return problem(pos, "a tail record that does not hold together");
      }
      Tail& t = tails[id];
      if (from == 0) {
        t = Tail{j, pos, 0, false, {}};
      } else if (t.count != from || t.chunk != j) {
        problem(pos, "the tail of chunk " + std::to_string(j) + " of track " + std::to_string(id) + " from event " +
                         std::to_string(from) + " follows no record of its events before");
        t.count = 0;
        return;
      }
      size_t at = kTailHead;
      for (int c = 0; c < kChunkColumns; ++c) {
        t.cols[c].append(body.substr(at, len[c]));
        at += len[c];
      }
      t.count = to;
      t.counters = t.counters || counters == 1;
    } else {
      problem(pos, "a record of type " + std::to_string(static_cast<int>(type)) + " and " +
                       std::to_string(body.size()) + " bytes, unknown");
    }
  };
  if (!log->Open(on_record, &problems_, error)) return false;
  // The chunks a kill left open, from their tails: each the last of its track.
  for (auto& [id, tail] : tails) {
    TrackStore& t = Track(id);
    if (tail.count == 0 || (!t.chunks.empty() && tail.chunk < t.end())) continue;  // sealed since, or broken.
    const uint64_t j = tail.chunk;
    if (!t.chunks.empty() && j - t.end() > kMaxLostChunks - lost_chunks) {
      problem(tail.pos, "the tail of chunk " + std::to_string(j) + " of track " + std::to_string(id) + " after chunk " +
                            std::to_string(t.end() - 1));
      continue;
    }
    Chunk c;
    size_t bytes = 0;
    bool fits = true;  // at most 64 entries of kMaxEntry bytes a column (a damaged or crafted folder may say more).
    for (int col = 0; col < kChunkColumns; ++col) {
      fits = fits && tail.cols[col].size() <= size_t{ChunkBuilder::kMaxEntry[col]} * ChunkBuilder::kMaxEvents;
      bytes += tail.cols[col].size();
      c.ends[col] = static_cast<uint16_t>(bytes);
    }
    if (!fits) {
      problem(tail.pos, "the tail of chunk " + std::to_string(j) + " of track " + std::to_string(id) +
                            " holds more bytes than 64 events take");
      continue;
    }
    c.data.reset(new char[std::max<size_t>(bytes, 1)]);
    for (int col = 0; col < kChunkColumns; ++col) {
      std::memcpy(c.data.get() + (col == 0 ? 0 : c.ends[col - 1]), tail.cols[col].data(), tail.cols[col].size());
    }
    c.count = tail.count;
    c.counters = tail.counters;
    if (!CheckChunk(c.data.get(), c.ends, c.count, 0)) {
      problem(tail.pos,
              "the tail of chunk " + std::to_string(j) + " of track " + std::to_string(id) + " does not decode");
      continue;
    }
    const ChunkView v = ViewOf(c.data.get(), c.ends, c.count, 0, c.counters);
    DecodeChunk(v, &scratch_events_);
    Node n;
    for (const Event& e : scratch_events_) {
      n.Add(e.ts, e.dur, e.name, ValueOf(e));
      c.name_bits |= uint64_t{1} << (e.name & 63);
      c.corrs.Add(e.corr);
    }
    while (!t.chunks.empty() && t.end() < j) {  // lost ones: empty.
      t.AddFromDisk(t.end(), Chunk{}, Node{});
      ++lost_chunks;
    }
    t.AddFromDisk(j, c, n);
    t.chunks.back().data = std::move(c.data);  // in RAM: no record of it whole.
    resident_bytes_ += t.chunks.back().DataBytes();
    t.AddToMipmap(j, v, &scratch_events_);
    if (DerivedRows::IsDerived(id)) continue;
    events_ += c.count;
    first_ns_ = std::min(first_ns_, n.min_start);
    last_ns_ = std::max(last_ns_, n.max_end);
  }
  if (more_problems > 0) problems_.push_back("and " + std::to_string(more_problems) + " more problems");
  log_ = std::move(log);
  read_only_ = true;
  for (const auto& t : tracks_) {
    if (t) t->Reindex();
  }
  return true;
}

std::vector<std::string> TraceStore::problems() const {
  std::shared_lock lock(mu_);
  return problems_;
}

}  // namespace liveprof
