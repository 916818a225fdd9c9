// A chunk of the trace store (trace_store.h): up to 64 events of one track
// in arrival order, as six byte columns of LEB128 varints:
//
//   ends      end times as zigzag deltas from the previous end (a late event
//             may end earlier than the one before it)
//   durs      durations
//   names     name ids
//   kinds     the kind byte, then a varint of sub | flags << 8 | device << 16
//   corrs     correlation ids as zigzag deltas
//   payload   per kind: a kernel's details, context, graph id and op; a
//             counter's 8 raw bytes; two varints otherwise (copy bytes,
//             memory address and bytes, step number, ...)
//
// A ChunkBuilder encodes the open chunk; sealed, the columns go back to back
// into one buffer (in RAM, and as the body of a segment record on disk:
// trace_segments.h), described by the ends of the columns. A column whose
// entries are all the same bytes (a host span's kind, its zero correlation
// id and payload; a GPU stream's kind and device) is sealed as its first
// entry alone, and marked uniform: the decoder reads that entry for every
// event. DecodeChunk reads either form.
#ifndef LIVEPROF_STORE_TRACE_CHUNK_H_
#define LIVEPROF_STORE_TRACE_CHUNK_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "stream/event.h"

namespace liveprof {

inline constexpr int kChunkColumns = 6;

// Where a chunk's columns begin (the decoder reads `count` events' worth),
// and which hold one entry for all (bit c: column c).
struct ChunkView {
  std::array<const char*, kChunkColumns> col{};
  uint32_t count = 0;
  uint8_t uniform = 0;
  bool counters = false;  // it holds counter samples (kCounter), whose values queries fold.
};

// The sealed columns' ends, as offsets into their buffer (a sealed chunk is
// at most a few KiB: 64 events of at most ~70 bytes).
using ColumnEnds = std::array<uint16_t, kChunkColumns>;

ChunkView ViewOf(const char* data, const ColumnEnds& ends, uint32_t count, uint8_t uniform, bool counters);

// Decodes the first `n` events of `v` (all when n >= count) into `out`
// (track unset); only their times and names when `times_only`.
void DecodeChunk(const ChunkView& v, std::vector<Event>* out, uint32_t n = UINT32_MAX, bool times_only = false);
// Whether sealed columns read from outside (a segment) decode within their
// bounds: DecodeChunk trusts what it is given.
bool CheckChunk(const char* data, const ColumnEnds& ends, uint32_t count, uint8_t uniform);

class ChunkBuilder {
 public:
  // The most one event's entry takes in each column (varints of 64-bit
  // deltas, 32-bit ids and correlations; a kernel's four ids; two 64-bit
  // varints of payload).
  static constexpr std::array<uint16_t, kChunkColumns> kMaxEntry = {10, 10, 5, 5, 5, 20};
  static constexpr uint32_t kMaxEvents = 64;

  void Put(const Event& e);  // at most kMaxEvents before Clear.
  uint32_t count() const { return count_; }
  bool counters() const { return counters_; }
  ChunkView view() const;
  size_t bytes() const;  // as built (every entry).
  // Column c's bytes as built (every entry: no column is uniform), for the
  // run folder's records of an open chunk (trace_store_disk.cc).
  std::string_view column(int c) const { return {reinterpret_cast<const char*>(buf_.data() + kStart[c]), len_[c]}; }
  // Sealing: the columns that are one entry repeated (a bit each), the bytes
  // they take sealed so, and the columns back to back into `out` (that many
  // bytes) with their ends.
  uint8_t Uniform() const { return count_ < 2 ? 0 : same_; }
  size_t SealedBytes(uint8_t uniform) const;
  ColumnEnds SealInto(char* out, uint8_t uniform) const;
  void Clear();

 private:
  // Column c starts at kStart[c] in buf_, with len_[c] bytes written: fixed
  // room, so a varint is written with no capacity check (appends are the
  // store's hot path).
  static constexpr std::array<uint16_t, kChunkColumns + 1> kStart = [] {
    std::array<uint16_t, kChunkColumns + 1> at{};
    for (int c = 0; c < kChunkColumns; ++c) at[c + 1] = static_cast<uint16_t>(at[c] + kMaxEntry[c] * kMaxEvents);
    return at;
  }();
  std::array<uint8_t, kStart[kChunkColumns]> buf_;
  std::array<uint16_t, kChunkColumns> len_{};
  std::array<uint16_t, kChunkColumns> first_len_{};  // the first event's entry, per column,
  std::array<uint64_t, kChunkColumns> first_{};      // the value it was written from
  uint64_t first_payload_ = 0;                       // (and the payload's second word,
  int first_form_ = 0;                               // and how its kind writes it).
  uint8_t same_ = (1 << kChunkColumns) - 1;          // columns whose entries so far all equal the first.
  uint64_t last_end_ = 0;                            // the encoder's state: deltas from these.
  uint32_t last_corr_ = 0;
  uint32_t count_ = 0;
  bool counters_ = false;
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_TRACE_CHUNK_H_
