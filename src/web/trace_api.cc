#include "web/trace_api.h"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "base/json_writer.h"
#include "stream/alloc_annotation.h"
#include "stream/event.h"
#include "web/trace_tile.h"

namespace liveprof {
namespace {

constexpr uint64_t kMaxAreaEvents = 20'000'000;  // an area's sums stop there (truncated).
constexpr size_t kMaxAreaNames = 1000;

// "1,2,5" -> {1, 2, 5}; nullopt on anything else.
std::optional<std::vector<TrackId>> TrackList(std::string_view text) {
  std::vector<TrackId> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const auto n = WholeNumber(text.substr(0, comma));
    if (!n || *n > UINT32_MAX) return std::nullopt;
    out.push_back(static_cast<TrackId>(*n));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return out;
}

Reply Json(std::string body) { return Reply{200, "application/json", std::move(body)}; }

// A replay's later loops number their ProfilerStep#N spans on (kFlagStepShift,
// replay.cc; steps.cc reads them so): the span is named as every page numbers
// that step, ProfilerStep#<N + shift>, and its step_num is that number.
std::string ShownName(const TraceStore& store, const Event& e, int64_t* step_num) {
  std::string name = store.Name(e.name);
  constexpr std::string_view kProfilerStep = "ProfilerStep#";
  if ((e.flags & kFlagStepShift) == 0 || !std::string_view(name).starts_with(kProfilerStep)) return name;
  const auto n = WholeNumber(std::string_view(name).substr(kProfilerStep.size()));
  if (!n || *n > INT32_MAX) return name;
  *step_num = static_cast<int64_t>(*n) + e.payload.step.step_num;
  return std::string(kProfilerStep) + std::to_string(*step_num);
}

void EventJson(JsonWriter& w, const TraceStore& store, StoredEventId id, const Event& e) {
  w.BeginObject();
  w.KV("id", id);
  w.KV("track", uint64_t{e.track});
  w.KV("kind", EventKindName(e.kind));
  int64_t shifted_step = -1;
  w.KV("name", ShownName(store, e, &shifted_step));
  if (shifted_step >= 0) w.KV("step_num", shifted_step);
  w.KV("ts", e.ts);
  w.KV("dur", e.dur);
  // An annotated allocation's corr is a name (event.h): its fields instead.
  const bool annotated = e.kind == EventKind::kAlloc && (e.flags & kFlagAllocAnnotation) != 0;
  w.KV("corr", annotated ? uint64_t{0} : uint64_t{e.corr});
  w.KV("device", uint64_t{e.device});
  switch (e.kind) {
    case EventKind::kKernel:
      w.KV("details", store.Name(e.payload.kernel.details));
      w.KV("op", store.Name(e.payload.kernel.op));
      w.KV("context", uint64_t{e.payload.kernel.context});
      w.KV("graph_id", uint64_t{e.payload.kernel.graph_id});
      break;
    case EventKind::kAlloc:
    case EventKind::kFree:
      w.KV("address", e.payload.memory.address);
      w.KV("bytes", e.payload.memory.bytes);
      if (annotated) {
        const std::string text(store.Name(e.corr));
        const AllocAnnotation a = ParseAllocAnnotation(text);
        w.KV("op", a.op);
        w.KV("region", a.region);
        w.KV("data_type", a.data_type);
        w.KV("shape", a.shape);
        w.KV("requested_bytes", a.requested_bytes);
      }
      break;
    case EventKind::kStepMarker: w.KV("step_num", e.payload.step.step_num); break;
    case EventKind::kCounter: w.KV("value", e.payload.counter.value); break;
    default:
      if (IsDeviceKind(e.kind)) w.KV("bytes", e.payload.copy.bytes);
      break;
  }
  w.EndObject();
}

// The query parameters every trace path shares, checked; `allowed` lists
// the others the path takes.
struct Params {
  uint64_t t0 = 0, t1 = 0;
  uint32_t width = 1000;
  std::vector<TrackId> tracks;
  std::string error;
};

Params ReadParams(const RequestTarget& target, const TraceStore::Stats& stats,
                  std::initializer_list<std::string_view> allowed) {
  Params p;
  std::tie(p.t0, p.t1) = WholeRange(stats);
  for (const auto& [key, value] : target.query) {
    if (key == "token" || std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      if (key != "token") p.error = "unknown query parameter '" + key + "' for " + target.path;
      continue;
    }
    if (key == "t0" || key == "t1" || key == "width" || key == "from" || key == "from_id" || key == "id") {
      const auto n = WholeNumber(value);
      if (!n) {
        p.error = key + "='" + value + "': expected a whole number" + (key == "width" ? " of pixels" : " (ns)");
        return p;
      }
      if (key == "t0") p.t0 = *n;
      if (key == "t1") p.t1 = *n;
      if (key == "width") {
        if (*n < 1 || *n > TraceStore::kMaxWidthPx) {
          p.error = "width='" + value + "': expected 1.." + std::to_string(TraceStore::kMaxWidthPx) + " pixels";
          return p;
        }
        p.width = static_cast<uint32_t>(*n);
      }
    } else if (key == "tracks") {
      const auto list = TrackList(value);
      if (!list) {
        p.error = "tracks='" + value + "': expected track ids separated by commas";
        return p;
      }
      p.tracks = *list;
    }
  }
  if (p.error.empty() && p.t1 <= p.t0) p.error = "t1 must be after t0";
  return p;
}

Reply Viewport(const RequestTarget& target, const TraceStore& store) {
  const TraceStore::Stats stats = store.stats();
  const Params p = ReadParams(target, stats, {"t0", "t1", "width", "tracks"});
  if (!p.error.empty()) return ErrorReply(400, p.error);
  const TraceQueryResult r = store.Query({p.tracks, p.t0, p.t1, p.width});
  const TileTracks described(store);  // what the binary tile says of each row too (trace_tile.h).
  JsonWriter w;
  w.BeginObject();
  w.KV("type", "trace");
  w.KV("v", 1);
  w.KV("t0", r.t0);
  w.KV("t1", r.t1);
  w.KV("width_px", r.width_px);
  w.KV("ns_per_px", r.ns_per_px);
  w.KV("first_ns", stats.first_ns);
  w.KV("last_ns", stats.last_ns);
  w.KV("dropped_events", stats.dropped_events);
  w.KV("events", stats.events);
  w.KV("unstored_events", stats.unstored_events);
  w.KV("disk_bytes", stats.disk_bytes);  // the run folder's (--trace-dir), 0 without one.
  w.KV("spilled_chunks", stats.spilled_chunks);
  w.KV("read_errors", stats.read_errors);
  if (!stats.spill_error.empty()) w.KV("spill_error", stats.spill_error);
  w.Key("tracks");
  w.BeginArray();
  for (const auto& t : r.tracks) {
    w.BeginObject();
    w.KV("track", uint64_t{t.track});
    const TileTrackInfo info = described.Describe(t.track);
    if (info.type != TileTrackType::kNone) {  // a track never defined: its id alone.
      w.KV("name", info.name);
      w.KV("type", TileTrackTypeName(info.type));
      w.KV("device", uint64_t{info.device});
      w.KV("os_id", info.os_id);
    }
    w.Key("slices");  // [id, ts, dur, name, depth, kind]
    w.BeginArray();
    for (const auto& s : t.slices) {
      w.BeginArray();
      w.UInt(s.id);
      w.UInt(s.ts);
      w.UInt(s.dur);
      w.UInt(s.name);
      w.UInt(s.depth);
      w.String(EventKindName(s.kind));
      w.EndArray();
    }
    w.EndArray();
    w.Key("summaries");  // [px, count, busy, longest name, longest dur (, max value, last value)]
    w.BeginArray();
    for (const auto& s : t.summaries) {
      w.BeginArray();
      w.UInt(s.px);
      w.UInt(s.count);
      w.Fixed(BusyTenThousandths(s.busy) / 1e4, 4);  // the tile's busy_e4, to the digit.
      w.UInt(s.longest);
      w.UInt(s.longest_dur);
      if (info.counter()) {  // its summaries carry the values of counter samples.
        w.Double(s.max_value);
        w.Double(s.last_value);
      }
      w.EndArray();
    }
    w.EndArray();
    if (t.held) {  // [ts, value]: a counter row's sample in force at t0.
      w.Key("held");
      w.BeginArray();
      w.UInt(t.held_ts);
      w.Double(t.held_value);
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("flows");
  w.BeginArray();
  for (const auto& f : r.flows) {
    w.BeginArray();
    w.UInt(f.from);
    w.UInt(f.to);
    w.EndArray();
  }
  w.EndArray();
  w.Key("flow_ends");  // [id, track, ts, dur, name, kind]: flows' ends that are not slices here.
  w.BeginArray();
  for (const auto& f : r.flow_ends) {
    w.BeginArray();
    w.UInt(f.id);
    w.UInt(f.track);
    w.UInt(f.ts);
    w.UInt(f.dur);
    w.UInt(f.name);
    w.String(EventKindName(f.kind));
    w.EndArray();
  }
  w.EndArray();
  w.Key("names");  // the names the slices, summaries and flow ends use, by id.
  w.BeginObject();
  for (const NameId n : UsedNames(r)) w.KV(std::to_string(n), store.Name(n));
  w.EndObject();
  w.EndObject();
  return Json(w.Take());
}

Reply OneEvent(const RequestTarget& target, const TraceStore& store) {
  const auto id_text = target.Param("id");
  const auto id = id_text ? WholeNumber(*id_text) : std::nullopt;
  if (!id) return ErrorReply(400, "id: expected an event id (a whole number, from /api/trace)");
  for (const auto& [key, value] : target.query) {
    if (key != "id" && key != "token")
      return ErrorReply(400, "unknown query parameter '" + key + "' for " + target.path);
  }
  const std::optional<Event> e = store.Get(*id);
  if (!e) return ErrorReply(404, "no event " + std::to_string(*id) + " (unknown, or freed by the retention rule)");
  JsonWriter w;
  EventJson(w, store, *id, *e);
  return Json(w.Take());
}

Reply Search(const RequestTarget& target, const TraceStore& store) {
  const Params p = ReadParams(target, store.stats(), {"q", "from", "from_id", "dir", "tracks"});
  if (!p.error.empty()) return ErrorReply(400, p.error);
  const auto text = target.Param("q");
  if (!text || text->empty()) return ErrorReply(400, "q: the text to find in event names is missing");
  const std::string_view dir = target.Param("dir").value_or("next");
  if (dir != "next" && dir != "prev") return ErrorReply(400, "dir='" + std::string(dir) + "': expected next or prev");
  const auto from_text = target.Param("from");
  const uint64_t from = from_text ? WholeNumber(*from_text).value_or(0) : (dir == "next" ? 0 : UINT64_MAX);
  const auto from_id_text = target.Param("from_id");
  const std::optional<StoredEventId> from_id =
      from_id_text ? WholeNumber(*from_id_text) : std::optional<StoredEventId>();
  const auto found = store.Search(*text, from, dir == "next", p.tracks, from_id);
  // The matches, and the found one's place among them by (ts, id): "k of N".
  const TraceStore::MatchCount count =
      store.CountMatches(*text, found ? found->second.ts : from, found ? found->first : from_id.value_or(0), p.tracks);
  JsonWriter w;
  w.BeginObject();
  w.KV("type", "trace_search");
  w.KV("v", 1);
  w.KV("matches", count.total);
  if (found) w.KV("index", count.before + 1);  // 1-based.
  w.Key("event");
  if (found) {
    EventJson(w, store, found->first, found->second);
  } else {
    w.Null();
  }
  w.EndObject();
  return Json(w.Take());
}

// An area selection's sums (TraceStore::SumArea): every event in it, per name.
Reply Area(const RequestTarget& target, const TraceStore& store) {
  const Params p = ReadParams(target, store.stats(), {"t0", "t1", "tracks"});
  if (!p.error.empty()) return ErrorReply(400, p.error);
  const TraceStore::AreaSums sums = store.SumArea(p.t0, p.t1, p.tracks, kMaxAreaEvents);
  JsonWriter w;
  w.BeginObject();
  w.KV("type", "trace_area");
  w.KV("v", 1);
  w.KV("t0", p.t0);
  w.KV("t1", p.t1);
  w.KV("events", sums.events);
  w.KV("tracks", uint64_t{sums.tracks});
  w.KV("truncated", sums.truncated);
  w.KV("names_total", uint64_t{sums.names.size()});
  w.Key("names");  // [name, count, total ns, self ns, max ns], the longest total first.
  w.BeginArray();
  for (size_t i = 0; i < sums.names.size() && i < kMaxAreaNames; ++i) {
    const auto& a = sums.names[i];
    w.BeginArray();
    w.String(store.Name(a.name));
    w.UInt(a.count);
    w.UInt(a.total);
    w.UInt(a.self);
    w.UInt(a.max);
    w.EndArray();
  }
  w.EndArray();
  w.EndObject();
  return Json(w.Take());
}

Reply Export(const RequestTarget& target, const TraceStore& store, const TraceExportFn& export_fn) {
  std::variant<Reply, ExportRequest> checked = CheckExport(target, &store, export_fn);
  if (Reply* error = std::get_if<Reply>(&checked)) return std::move(*error);
  const ExportRequest& e = std::get<ExportRequest>(checked);
  std::string gz, error;
  const bool ok = export_fn(
      store, e.t0, e.t1, e.tracks,
      [&gz](std::string_view piece) {
        gz.append(piece);
        return true;
      },
      &error);
  if (!ok) return ErrorReply(500, "export failed: " + error);
  return Reply{200, "application/gzip", std::move(gz)};
}

}  // namespace

std::variant<Reply, ExportRequest> CheckExport(const RequestTarget& target, const TraceStore* store,
                                               const TraceExportFn& export_fn) {
  if (!target.error.empty()) return ErrorReply(400, target.error);
  if (store == nullptr) return ErrorReply(404, "this server keeps no trace store (started with it off)");
  const Params p = ReadParams(target, store->stats(), {"t0", "t1", "tracks"});
  if (!p.error.empty()) return ErrorReply(400, p.error);
  if (!export_fn) return ErrorReply(501, "this server was started without an exporter");
  return ExportRequest{p.t0, p.t1, p.tracks};
}

bool IsTracePath(std::string_view path) {
  return path == "/api/trace" || path == "/api/trace/event" || path == "/api/trace/search" ||
         path == "/api/trace/area" || path == "/api/export";
}

Reply TraceReply(const RequestTarget& target, const TraceStore* store, const TraceExportFn& export_fn) {
  if (!target.error.empty()) return ErrorReply(400, target.error);
  if (store == nullptr) return ErrorReply(404, "this server keeps no trace store (started with it off)");
  if (target.path == "/api/trace") return Viewport(target, *store);
  if (target.path == "/api/trace/event") return OneEvent(target, *store);
  if (target.path == "/api/trace/search") return Search(target, *store);
  if (target.path == "/api/trace/area") return Area(target, *store);
  if (target.path == "/api/export") return Export(target, *store, export_fn);
  return ErrorReply(404, "no endpoint " + target.path);
}

}  // namespace liveprof
