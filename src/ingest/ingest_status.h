// /api/status's "ingest" member (docs/protocol.md): every source the ingest
// server has seen, connected or not, as a JSON array.
#ifndef LIVEPROF_INGEST_INGEST_STATUS_H_
#define LIVEPROF_INGEST_INGEST_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ingest/ingest_server.h"

namespace liveprof {

// `sources` as IngestServer::Sources() gives them; `now_ns` (host clock) is
// what a capture's seconds_left counts from.
std::string IngestSourcesJson(const std::vector<IngestServer::SourceStatus>& sources, uint64_t now_ns);

}  // namespace liveprof

#endif  // LIVEPROF_INGEST_INGEST_STATUS_H_
