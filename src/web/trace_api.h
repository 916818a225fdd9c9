// The trace viewer's REST endpoints over the pipeline's TraceStore, without
// Beast (tested without sockets), and the export behind /api/export:
//
//   /api/trace?t0=&t1=&width=&tracks=   a viewport (trace_store.h): per track
//       its slices [id, ts, dur, name, depth, kind] and per-pixel summaries
//       [px, count, busy, longest name, longest dur], the flows [from, to]
//       in view, and the names and tracks it uses. Times in ns; t0, t1
//       default to the whole store, width to 1000 px; tracks "1,2,5".
//   /api/trace/event?id=                one event whole
//   /api/trace/search?q=&from=&dir=next|prev&tracks=
//   /api/trace/area?t0=&t1=&tracks=     an area selection's sums: every
//       event overlapping it, per name (count, total, self, longest)
//   /api/export?t0=&t1=&tracks=         Chrome trace JSON, gzip (.json.gz)
//
// Pure functions; any thread (the store locks for itself). The server runs
// them on its query pool, never on the web thread, and streams /api/export
// from its export pool (http_session.cc) after CheckExport.
#ifndef LIVEPROF_WEB_TRACE_API_H_
#define LIVEPROF_WEB_TRACE_API_H_

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "store/trace_store.h"
#include "web/rest.h"
#include "web/server.h"

namespace liveprof {

// True for the paths above.
bool IsTracePath(std::string_view path);

// The answer to a trace path. `store` may be null (the pipeline keeps
// none): 404 with why. `export_fn` may be empty: /api/export says 501.
// /api/export's answer here is the whole file in one string (for callers
// without a socket); the server streams it instead.
Reply TraceReply(const RequestTarget& target, const TraceStore* store, const TraceExportFn& export_fn);

// /api/export's request, checked: what to export, or the error to answer
// (400, 404 without a store, 501 without an exporter).
struct ExportRequest {
  uint64_t t0 = 0, t1 = 0;
  std::vector<TrackId> tracks;
};
std::variant<Reply, ExportRequest> CheckExport(const RequestTarget& target, const TraceStore* store,
                                               const TraceExportFn& export_fn);

}  // namespace liveprof

#endif  // LIVEPROF_WEB_TRACE_API_H_
