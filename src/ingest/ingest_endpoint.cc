#include "ingest/ingest_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <charconv>

namespace liveprof {

std::string IngestEndpoint::ToString() const {
  return tcp ? "tcp:" + host + ":" + std::to_string(port) : "unix:" + path;
}

bool ParseIngestEndpoint(std::string_view spec, IngestEndpoint* out, std::string* error) {
  *out = IngestEndpoint{};
  if (spec.starts_with("unix:")) {
    out->path = std::string(spec.substr(5));
    if (out->path.empty() || out->path.size() >= sizeof(sockaddr_un::sun_path)) {
      *error = "--ingest " + std::string(spec) + ": a unix socket path of 1.." +
               std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
      return false;
    }
    return true;
  }
  if (spec.starts_with("tcp:")) {
    const std::string_view rest = spec.substr(4);
    const size_t colon = rest.rfind(':');
    unsigned port = 0;
    in_addr addr{};
    const std::string host(rest.substr(0, colon == std::string_view::npos ? 0 : colon));
    const std::string_view p = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (colon == std::string_view::npos || ec != std::errc() || end != p.data() + p.size() || port > 65535 ||
        inet_pton(AF_INET, host.c_str(), &addr) != 1) {
      *error = "--ingest " + std::string(spec) + ": tcp:ADDRESS:PORT, e.g. tcp:127.0.0.1:7777";
      return false;
    }
    if ((ntohl(addr.s_addr) >> 24) != 127) {
      *error = "--ingest " + std::string(spec) + ": TCP ingest binds a loopback address (127.x.x.x) only";
      return false;
    }
    out->tcp = true;
    out->host = host;
    out->port = static_cast<uint16_t>(port);
    return true;
  }
  *error = "--ingest " + std::string(spec) + ": unix:PATH or tcp:127.0.0.1:PORT";
  return false;
}

}  // namespace liveprof
