// Trace-viewer tiles in binary: the TraceTile body of a liveprof.wire.Frame
// (src/stream/liveprof.fbs), the answer to a WebSocket `trace` request
// (protocol.h, docs/protocol.md). A tile is the very viewport /api/trace
// gives in JSON (trace_api.h) for the same query; what both encodings take
// from the store (how a track is described, which names a viewport uses,
// the busy fraction's rounding, the default range) is here, so that they
// cannot drift apart. Without Beast: tested without sockets.
//
// Pure functions; any thread (the store locks for itself).
#ifndef LIVEPROF_WEB_TRACE_TILE_H_
#define LIVEPROF_WEB_TRACE_TILE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "store/trace_store.h"
#include "web/protocol.h"

namespace liveprof {

// What a viewport's row is: the JSON's "type". Values are liveprof.fbs's
// TileTrackType. kNone: a track the store has no definition of.
enum class TileTrackType : uint8_t {
  kNone = 0,
  kHostThread = 1,
  kGpuStream = 2,
  kCounter = 3,
  kProcess = 4,
  kSteps = 5,  // a GPU's derived rows (store/derived_rows.h).
  kFrameworkOps = 6,
  kMemory = 7,
};
// "host_thread", "gpu_stream", "counter", "process", "steps",
// "framework_ops", "memory"; "" for kNone.
std::string_view TileTrackTypeName(TileTrackType type);

// One row of a viewport as both encodings describe it.
struct TileTrackInfo {
  TileTrackType type = TileTrackType::kNone;  // kNone: name, device, os_id unsent.
  std::string name;
  uint8_t device = 0;
  uint64_t os_id = 0;
  // Its summaries carry counter values (max_value, last_value).
  bool counter() const { return type == TileTrackType::kCounter || type == TileTrackType::kMemory; }
};

// The store's track definitions, read once per viewport.
class TileTracks {
 public:
  explicit TileTracks(const TraceStore& store);
  TileTrackInfo Describe(TrackId track) const;

 private:
  const TraceStore& store_;
  std::unordered_map<TrackId, TrackInfo> tracks_;
};

// A summary's busy fraction as a viewport gives it: in 1/10000 of the pixel,
// 0..10000 (the JSON writes it with four decimals, the tile as this integer).
uint16_t BusyTenThousandths(double busy);

// The name ids a viewport's slices and summaries use: sorted, unique.
std::vector<NameId> UsedNames(const TraceQueryResult& r);

// The range a viewport takes by default, [t0, t1): the store's first event
// to its last end, included (an instant there too).
inline std::pair<uint64_t, uint64_t> WholeRange(const TraceStore::Stats& s) {
  const uint64_t last = std::max(s.last_ns, s.first_ns);
  return {s.first_ns, last == UINT64_MAX ? last : last + 1};
}

// The most slices and folded pixels one tile carries (a FlatBuffer stops at
// 2 GiB): a bigger answer is refused with "too_large".
inline constexpr uint64_t kMaxTileItems = uint64_t{32} << 20;

// One finished, verifiable binary frame (file identifier "LPF1",
// Frame.version kFrameVersion) with a TraceTile body: the viewport `r`
// (its own grid: r.t0, r.t1, r.width_px, r.ns_per_px), the store's `stats`
// and the names and tracks the viewport uses, answering request `id`.
std::string EncodeTraceTile(uint32_t id, const TraceQueryResult& r, const TraceStore::Stats& stats,
                            const TraceStore& store);

// The answer to a `trace` request: its viewport as EncodeTraceTile's frame,
// or an error carrying the request's id ("no_trace_store" when `store` is
// null, "bad_message" when the range left by the defaults is empty).
std::variant<std::string, DecodeError> AnswerTraceRequest(const TraceRequest& request, const TraceStore* store);

}  // namespace liveprof

#endif  // LIVEPROF_WEB_TRACE_TILE_H_
