// What both ends of socket ingest write: one size-prefixed Frame (a u32
// little-endian size, then the FlatBuffers bytes; docs/ingest.md). Shared by
// the server (acks, pings, controls) and the sender (hello, batches, pongs).
#ifndef LIVEPROF_PRODUCERS_INGEST_WIRE_H_
#define LIVEPROF_PRODUCERS_INGEST_WIRE_H_

#include <cstdint>
#include <string>

#include "stream/liveprof_generated.h"

namespace liveprof {

// Appends one frame whose body `build(fbb)` makes, to `out`. Returns its size
// (prefix included).
template <typename Build>
size_t AppendIngestFrame(std::string* out, wire::Body type, Build&& build, size_t initial = 64) {
  flatbuffers::FlatBufferBuilder fbb(initial);
  const flatbuffers::Offset<void> body = build(fbb);
  fbb.Finish(wire::CreateFrame(fbb, 1, type, body), wire::FrameIdentifier());
  const auto size = static_cast<uint32_t>(fbb.GetSize());
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the size prefix is little-endian");
  out->append(reinterpret_cast<const char*>(&size), 4);
  out->append(reinterpret_cast<const char*>(fbb.GetBufferPointer()), size);
  return size_t{4} + size;
}

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_INGEST_WIRE_H_
