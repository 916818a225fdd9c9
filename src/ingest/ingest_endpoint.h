// Where ingest listens and senders connect: "unix:PATH" or
// "tcp:127.x.x.x:PORT". Shared by the server and the client (docs/ingest.md).
#ifndef LIVEPROF_INGEST_INGEST_ENDPOINT_H_
#define LIVEPROF_INGEST_INGEST_ENDPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace liveprof {

// "unix:/run/liveprof.sock" or "tcp:127.0.0.1:7777" (port 0: any free one).
struct IngestEndpoint {
  bool tcp = false;
  std::string path;  // unix
  std::string host;  // tcp: a loopback address (127.x.x.x); others need the web token (later).
  uint16_t port = 0;
  std::string ToString() const;
};
bool ParseIngestEndpoint(std::string_view spec, IngestEndpoint* out, std::string* error);

}  // namespace liveprof

#endif  // LIVEPROF_INGEST_INGEST_ENDPOINT_H_
