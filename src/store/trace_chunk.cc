#include "store/trace_chunk.h"

#include <algorithm>
#include <cstring>

namespace liveprof {
namespace {

enum Column { kEnds, kDurs, kNames, kKinds, kCorrs, kPayload };

// One LEB128 varint at p (room for 10 bytes); returns past it.
inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

int PayloadForm(EventKind kind) { return kind == EventKind::kKernel ? 1 : kind == EventKind::kCounter ? 2 : 0; }

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

}  // namespace

ChunkView ViewOf(const char* data, const ColumnEnds& ends, uint32_t count, uint8_t uniform, bool counters) {
  ChunkView v;
  v.count = count;
  v.uniform = uniform;
  v.counters = counters;
  for (int c = 0; c < kChunkColumns; ++c) v.col[c] = data + (c == 0 ? 0 : ends[c - 1]);
  return v;
}

namespace {

// One LEB128 varint at p; checked: not past `lim` and at most 10 bytes
// (false otherwise). Unchecked for the store's own bytes in RAM.
template <bool kChecked>
inline bool Varint(const char*& p, const char* lim, uint64_t* v) {
  uint64_t x = 0;
  for (int shift = 0;; shift += 7) {
    if constexpr (kChecked) {
      if (p >= lim || shift > 63) return false;
    }
    const auto b = static_cast<uint8_t>(*p++);
    x |= uint64_t{b & 0x7fu} << shift;
    if (b < 0x80) {
      *v = x;
      return true;
    }
  }
}

// DecodeChunk; checked, each column stops at `lim` (a read past it: false).
template <bool kChecked>
bool Decode(const ChunkView& v, const std::array<const char*, kChunkColumns>& lim, std::vector<Event>* out, uint32_t n,
            bool times_only) {
  n = std::min(n, v.count);
  out->resize(n);
  const char *pe = v.col[kEnds], *pd = v.col[kDurs], *pn = v.col[kNames], *pk = v.col[kKinds], *pc = v.col[kCorrs],
             *pp = v.col[kPayload];
  uint64_t end = 0, x = 0;
  uint32_t corr = 0;
  // (times only: the other columns are not read)
  const uint8_t uniform = times_only ? v.uniform & ((1 << kEnds) | (1 << kDurs) | (1 << kNames)) : v.uniform;
  auto get = [&](const char*& p, int column) { return Varint<kChecked>(p, lim[column], &x); };
  for (uint32_t i = 0; i < n; ++i) {
    if (uniform != 0 && i > 0) {  // a uniform column: its one entry again.
      if (uniform & (1 << kEnds)) pe = v.col[kEnds];
      if (uniform & (1 << kDurs)) pd = v.col[kDurs];
      if (uniform & (1 << kNames)) pn = v.col[kNames];
      if (uniform & (1 << kKinds)) pk = v.col[kKinds];
      if (uniform & (1 << kCorrs)) pc = v.col[kCorrs];
      if (uniform & (1 << kPayload)) pp = v.col[kPayload];
    }
    Event& e = (*out)[i];
    if (!get(pe, kEnds)) return false;
    end += static_cast<uint64_t>(UnZigZag(x));
    if (!get(pd, kDurs)) return false;
    e.dur = x;
    e.ts = end - e.dur;
    if (!get(pn, kNames)) return false;
    e.name = static_cast<NameId>(x);
    if (times_only) continue;
    if (kChecked && pk >= lim[kKinds]) return false;
    e.kind = static_cast<EventKind>(*pk++);
    if (!get(pk, kKinds)) return false;
    e.sub = static_cast<uint8_t>(x);
    e.flags = static_cast<uint8_t>(x >> 8);
    e.device = static_cast<uint8_t>(x >> 16);
    if (!get(pc, kCorrs)) return false;
    corr = static_cast<uint32_t>(static_cast<int64_t>(corr) + UnZigZag(x));
    e.corr = corr;
    e.payload.raw[0] = e.payload.raw[1] = 0;
    if (e.kind == EventKind::kKernel) {
      if (!get(pp, kPayload)) return false;
      e.payload.kernel.details = static_cast<NameId>(x);
      if (!get(pp, kPayload)) return false;
      e.payload.kernel.context = static_cast<uint32_t>(x);
      if (!get(pp, kPayload)) return false;
      e.payload.kernel.graph_id = static_cast<uint32_t>(x);
      if (!get(pp, kPayload)) return false;
      e.payload.kernel.op = static_cast<NameId>(x);
    } else if (e.kind == EventKind::kCounter) {
      if (kChecked && lim[kPayload] - pp < 8) return false;
      std::memcpy(&e.payload.counter.value, pp, 8);
      pp += 8;
    } else {
      if (!get(pp, kPayload)) return false;
      e.payload.raw[0] = x;
      if (!get(pp, kPayload)) return false;
      e.payload.raw[1] = x;
    }
  }
  return true;
}

}  // namespace

void DecodeChunk(const ChunkView& v, std::vector<Event>* out, uint32_t n, bool times_only) {
  Decode<false>(v, {}, out, n, times_only);
}

bool CheckChunk(const char* data, const ColumnEnds& ends, uint32_t count, uint8_t uniform) {
  if (count == 0 || !std::is_sorted(ends.begin(), ends.end())) return false;
  const ChunkView v = ViewOf(data, ends, count, uniform, false);
  std::array<const char*, kChunkColumns> lim;
  for (int c = 0; c < kChunkColumns; ++c) lim[c] = data + ends[c];
  thread_local std::vector<Event> scratch;
  return Decode<true>(v, lim, &scratch, count, false);
}

void ChunkBuilder::Put(const Event& e) {
  // Each column's entry is written from one value (the payload's from the
  // kind and two words): equal values, equal bytes. The columns whose
  // values all equal the first event's are sealed uniform.
  const uint64_t end = e.ts + e.dur;
  const std::array<uint64_t, kChunkColumns> value = {
      ZigZag(static_cast<int64_t>(end - last_end_)),
      e.dur,
      e.name,
      uint64_t{e.sub} | uint64_t{e.flags} << 8 | uint64_t{e.device} << 16 |
          uint64_t{static_cast<uint8_t>(e.kind)} << 24,
      ZigZag(static_cast<int64_t>(e.corr) - static_cast<int64_t>(last_corr_)),
      e.payload.raw[0]};
  last_end_ = end;
  last_corr_ = e.corr;
  uint8_t* const base = buf_.data();
  uint8_t* col[kChunkColumns];
#pragma GCC unroll 6
  for (int c = 0; c < kChunkColumns; ++c) col[c] = base + kStart[c] + len_[c];
  uint8_t* p[kChunkColumns];
  p[kEnds] = PutVarint(col[kEnds], value[kEnds]);
  p[kDurs] = PutVarint(col[kDurs], value[kDurs]);
  p[kNames] = PutVarint(col[kNames], value[kNames]);
  *col[kKinds] = static_cast<uint8_t>(e.kind);
  p[kKinds] = PutVarint(col[kKinds] + 1, value[kKinds] & 0xffffff);
  p[kCorrs] = PutVarint(col[kCorrs], value[kCorrs]);
  uint8_t* pp = col[kPayload];
  if (e.kind == EventKind::kKernel) {
    pp = PutVarint(pp, e.payload.kernel.details);
    pp = PutVarint(pp, e.payload.kernel.context);
    pp = PutVarint(pp, e.payload.kernel.graph_id);
    pp = PutVarint(pp, e.payload.kernel.op);
  } else if (e.kind == EventKind::kCounter) {
    std::memcpy(pp, &e.payload.counter.value, 8);
    pp += 8;
  } else {
    pp = PutVarint(pp, e.payload.raw[0]);
    pp = PutVarint(pp, e.payload.raw[1]);
  }
  p[kPayload] = pp;
  counters_ |= e.kind == EventKind::kCounter;
#pragma GCC unroll 6
  for (int c = 0; c < kChunkColumns; ++c) len_[c] = static_cast<uint16_t>(p[c] - base - kStart[c]);
  if (count_ == 0) {
    for (int c = 0; c < kChunkColumns; ++c) first_len_[c] = len_[c];
    first_ = value;
    first_payload_ = e.payload.raw[1];
    first_form_ = PayloadForm(e.kind);
  } else {
    unsigned differ = 0;
#pragma GCC unroll 6
    for (int c = 0; c < kChunkColumns; ++c) differ |= unsigned{value[c] != first_[c]} << c;
    // (the payload's bytes follow from both words and how the kind writes
    // them: a kernel's four ids, a counter's value, else two varints)
    differ |= unsigned{e.payload.raw[1] != first_payload_ || PayloadForm(e.kind) != first_form_} << kPayload;
    same_ = static_cast<uint8_t>(same_ & ~differ);
  }
  ++count_;
}

ChunkView ChunkBuilder::view() const {
  ChunkView v;
  v.count = count_;
  v.counters = counters_;
  for (int c = 0; c < kChunkColumns; ++c) v.col[c] = reinterpret_cast<const char*>(buf_.data() + kStart[c]);
  return v;
}

size_t ChunkBuilder::bytes() const {
  size_t n = 0;
  for (const uint16_t len : len_) n += len;
  return n;
}

size_t ChunkBuilder::SealedBytes(uint8_t uniform) const {
  size_t n = 0;
  for (int c = 0; c < kChunkColumns; ++c) n += (uniform & (1 << c)) ? first_len_[c] : len_[c];
  return n;
}

ColumnEnds ChunkBuilder::SealInto(char* out, uint8_t uniform) const {
  ColumnEnds ends{};
  size_t at = 0;
  for (int c = 0; c < kChunkColumns; ++c) {
    const size_t len = (uniform & (1 << c)) ? first_len_[c] : len_[c];
    std::memcpy(out + at, buf_.data() + kStart[c], len);
    at += len;
    ends[c] = static_cast<uint16_t>(at);
  }
  return ends;
}

void ChunkBuilder::Clear() {
  len_.fill(0);
  same_ = (1 << kChunkColumns) - 1;
  last_end_ = 0;
  last_corr_ = 0;
  count_ = 0;
  counters_ = false;
}

}  // namespace liveprof
