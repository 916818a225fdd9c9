#include "web/trace_tile.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "stream/liveprof_generated.h"

namespace liveprof {

static_assert(kMaxTraceWidthPx == TraceStore::kMaxWidthPx, "a trace request's width is the store's");
static_assert(static_cast<uint8_t>(TileTrackType::kMemory) == static_cast<uint8_t>(wire::TileTrackType::memory),
              "TileTrackType mirrors liveprof.fbs");

std::string_view TileTrackTypeName(TileTrackType type) {
  switch (type) {
    case TileTrackType::kNone: return "";
    case TileTrackType::kHostThread: return "host_thread";
    case TileTrackType::kGpuStream: return "gpu_stream";
    case TileTrackType::kCounter: return "counter";
    case TileTrackType::kProcess: return "process";
    case TileTrackType::kSteps: return "steps";
    case TileTrackType::kFrameworkOps: return "framework_ops";
    case TileTrackType::kMemory: return "memory";
  }
  return "";
}

TileTracks::TileTracks(const TraceStore& store) : store_(store) {
  for (const auto& [id, info] : store.Tracks()) tracks_.emplace(id, info);
}

TileTrackInfo TileTracks::Describe(TrackId track) const {
  TileTrackInfo out;
  if (DerivedRows::IsDerived(track) && !DerivedRows::IsCounterRow(track)) {
    // A GPU's rows have no definition of their own: named as xprof names them.
    static constexpr std::pair<TileTrackType, const char*> kRows[] = {{TileTrackType::kSteps, "Steps"},
                                                                      {TileTrackType::kFrameworkOps, "Framework ops"},
                                                                      {TileTrackType::kMemory, "Memory in use"}};
    const auto& row = kRows[static_cast<size_t>(DerivedRows::RowOf(track))];
    out.type = row.first;
    out.name = row.second;
    out.device = DerivedRows::DeviceOf(track);
    return out;
  }
  const auto it = tracks_.find(track);
  if (it == tracks_.end()) return out;
  switch (it->second.type) {
    case TrackType::kHostThread: out.type = TileTrackType::kHostThread; break;
    case TrackType::kGpuStream: out.type = TileTrackType::kGpuStream; break;
    case TrackType::kCounter: out.type = TileTrackType::kCounter; break;
    case TrackType::kProcess: out.type = TileTrackType::kProcess; break;
  }
  out.name = store_.Name(it->second.name);
  out.device = it->second.device;
  out.os_id = it->second.os_id;
  return out;
}

uint16_t BusyTenThousandths(double busy) {
  if (!(busy > 0)) return 0;  // NaN too.
  return static_cast<uint16_t>(std::lround(std::min(busy, 1.0) * 10000));
}

std::vector<NameId> UsedNames(const TraceQueryResult& r) {
  std::vector<NameId> used;
  for (const auto& t : r.tracks) {
    for (const auto& s : t.slices) used.push_back(s.name);
    for (const auto& s : t.summaries) used.push_back(s.longest);
  }
  for (const auto& f : r.flow_ends) used.push_back(f.name);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  return used;
}

namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<wire::TileTrack> BuildTrack(FlatBufferBuilder& fbb, const TraceQueryResult::Track& t,
                                   const TileTrackInfo& info) {
  std::vector<wire::TileSlice> slices;
  slices.reserve(t.slices.size());
  for (const auto& s : t.slices) {
    slices.emplace_back(s.id, s.ts, s.dur, s.name, s.depth, static_cast<uint8_t>(s.kind));
  }
  std::vector<wire::TileSummary> summaries;
  std::vector<wire::TileCounterValue> values;
  summaries.reserve(t.summaries.size());
  for (const auto& s : t.summaries) {
    summaries.emplace_back(s.px, s.count, BusyTenThousandths(s.busy), s.longest, s.longest_dur);
    if (info.counter()) values.emplace_back(s.max_value, s.last_value);
  }
  // Children before the table that points at them (FlatBuffers builds back to front).
  const auto name = info.type == TileTrackType::kNone ? 0 : fbb.CreateString(info.name);
  const auto slice_vec = fbb.CreateVectorOfStructs(slices.data(), slices.size());
  const auto summary_vec = fbb.CreateVectorOfStructs(summaries.data(), summaries.size());
  const auto value_vec = info.counter() ? fbb.CreateVectorOfStructs(values.data(), values.size()) : 0;
  const wire::TileHeld held(t.held_ts, t.held_value);
  return wire::CreateTileTrack(fbb, t.track, static_cast<wire::TileTrackType>(info.type), name, info.device, info.os_id,
                               slice_vec, summary_vec, value_vec, t.held ? &held : nullptr);
}

}  // namespace

std::string EncodeTraceTile(uint32_t id, const TraceQueryResult& r, const TraceStore::Stats& stats,
                            const TraceStore& store) {
  size_t items = r.flows.size();
  for (const auto& t : r.tracks) items += t.slices.size() + t.summaries.size();
  FlatBufferBuilder fbb(1024 + items * sizeof(wire::TileSlice));

  const TileTracks described(store);
  std::vector<Offset<wire::TileTrack>> tracks;
  tracks.reserve(r.tracks.size());
  for (const auto& t : r.tracks) tracks.push_back(BuildTrack(fbb, t, described.Describe(t.track)));
  const auto track_vec = fbb.CreateVector(tracks);

  std::vector<wire::TileFlow> flows;
  flows.reserve(r.flows.size());
  for (const auto& f : r.flows) flows.emplace_back(f.from, f.to);
  const auto flow_vec = fbb.CreateVectorOfStructs(flows.data(), flows.size());
  std::vector<wire::TileFlowEnd> flow_ends;
  flow_ends.reserve(r.flow_ends.size());
  for (const auto& f : r.flow_ends) {
    flow_ends.emplace_back(f.id, f.ts, f.dur, f.track, f.name, static_cast<uint8_t>(f.kind));
  }
  const auto flow_end_vec = fbb.CreateVectorOfStructs(flow_ends.data(), flow_ends.size());

  std::vector<Offset<wire::NameDef>> names;
  for (const NameId n : UsedNames(r)) names.push_back(wire::CreateNameDef(fbb, n, fbb.CreateString(store.Name(n))));
  const auto name_vec = fbb.CreateVector(names);
  const auto spill_error = stats.spill_error.empty() ? 0 : fbb.CreateString(stats.spill_error);

  wire::TraceTileBuilder tile(fbb);
  tile.add_id(id);
  tile.add_t0(r.t0);
  tile.add_t1(r.t1);
  tile.add_width_px(r.width_px);
  tile.add_ns_per_px(r.ns_per_px);
  tile.add_first_ns(stats.first_ns);
  tile.add_last_ns(stats.last_ns);
  tile.add_dropped_events(stats.dropped_events);
  tile.add_events(stats.events);
  tile.add_unstored_events(stats.unstored_events);
  tile.add_disk_bytes(stats.disk_bytes);
  tile.add_spilled_chunks(stats.spilled_chunks);
  tile.add_read_errors(stats.read_errors);
  if (!spill_error.IsNull()) tile.add_spill_error(spill_error);
  tile.add_tracks(track_vec);
  tile.add_flows(flow_vec);
  tile.add_names(name_vec);
  tile.add_flow_ends(flow_end_vec);
  const auto body = tile.Finish();
  wire::FinishFrameBuffer(fbb, wire::CreateFrame(fbb, kFrameVersion, wire::Body::TraceTile, body.Union()));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

std::variant<std::string, DecodeError> AnswerTraceRequest(const TraceRequest& request, const TraceStore* store) {
  if (store == nullptr) {
    return DecodeError{"no_trace_store", "trace: this server keeps no trace store (started with it off)", request.id};
  }
  // As /api/trace: the stats first, then the query, so the tile's store
  // counts are never newer than its events.
  const TraceStore::Stats stats = store->stats();
  auto [t0, t1] = WholeRange(stats);
  if (request.t0) t0 = *request.t0;
  if (request.t1) t1 = *request.t1;
  if (t1 <= t0) {
    // Only with a default left in: a request with both was refused at decoding.
    return DecodeError{"bad_message",
                       "t1: " + std::to_string(t1) + (request.t1 ? "" : " (just past the store's last event)") +
                           " is not after t0 (" + std::to_string(t0) + (request.t0 ? "" : ", the store's first event") +
                           ")",
                       request.id};
  }
  const TraceQueryResult r = store->Query({request.tracks, t0, t1, request.width_px});
  // A FlatBuffer stops at 2 GiB: a tile of ~65,536 px on thousands of rows
  // is refused before it is built (~32 bytes an item).
  uint64_t items = 0;
  for (const auto& t : r.tracks) items += t.slices.size() + t.summaries.size();
  if (items > kMaxTileItems) {
    return DecodeError{"too_large",
                       "trace: " + std::to_string(items) + " slices and pixels, more than a tile holds (" +
                           std::to_string(kMaxTileItems) + "): fewer tracks, a narrower width or range",
                       request.id};
  }
  return EncodeTraceTile(request.id, r, stats, *store);
}

}  // namespace liveprof
