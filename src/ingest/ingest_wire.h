// What both ends of socket ingest write: one size-prefixed Frame (a u32
// little-endian size, then the FlatBuffers bytes; docs/ingest.md). Shared by
// the server (acks, pings, controls) and the sender (hello, batches, pongs).
#ifndef LIVEPROF_INGEST_INGEST_WIRE_H_
#define LIVEPROF_INGEST_INGEST_WIRE_H_

#include <cstdint>
#include <string>

#include "stream/liveprof_generated.h"

namespace liveprof {

inline constexpr uint32_t kIngestFrameVersion = 1;  // Frame.version of every ingest frame.

// Appends one frame whose body `build(fbb)` makes, to `out`. Returns its size
// (prefix included). The frame is padded with zeros (after the FlatBuffers
// bytes, which a reader's verifier ignores) to a whole multiple of 8 bytes,
// prefix included: a receiver that keeps the stream's first byte 4 bytes
// into a word (FrameSplitter) then finds every frame 8-byte aligned and reads
// it in place.
template <typename Build>
size_t AppendIngestFrame(std::string* out, wire::Body type, Build&& build, size_t initial = 64) {
  flatbuffers::FlatBufferBuilder fbb(initial);
  const flatbuffers::Offset<void> body = build(fbb);
  fbb.Finish(wire::CreateFrame(fbb, kIngestFrameVersion, type, body), wire::FrameIdentifier());
  const auto bytes = static_cast<uint32_t>(fbb.GetSize());
  const uint32_t size = bytes + (8 - (4 + bytes) % 8) % 8;
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the size prefix is little-endian");
  out->append(reinterpret_cast<const char*>(&size), 4);
  out->append(reinterpret_cast<const char*>(fbb.GetBufferPointer()), bytes);
  out->append(size - bytes, '\0');
  return size_t{4} + size;
}

}  // namespace liveprof

#endif  // LIVEPROF_INGEST_INGEST_WIRE_H_
