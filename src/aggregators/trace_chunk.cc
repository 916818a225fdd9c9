#include "aggregators/trace_chunk.h"

#include <algorithm>
#include <cstring>

namespace liveprof {
namespace {

enum Column { kEnds, kDurs, kNames, kKinds, kCorrs, kPayload };

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

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
bool Decode(const ChunkView& v, const std::array<const char*, kChunkColumns>& lim, std::vector<Event>* out,
            uint32_t n, bool times_only) {
  n = std::min(n, v.count);
  out->resize(n);
  const char *pe = v.col[kEnds], *pd = v.col[kDurs], *pn = v.col[kNames], *pk = v.col[kKinds],
             *pc = v.col[kCorrs], *pp = v.col[kPayload];
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
  const uint64_t end = e.ts + e.dur;
  PutVarint(&cols_[kEnds], ZigZag(static_cast<int64_t>(end - last_end_)));
  last_end_ = end;
  PutVarint(&cols_[kDurs], e.dur);
  PutVarint(&cols_[kNames], e.name);
  cols_[kKinds].push_back(static_cast<char>(e.kind));
  PutVarint(&cols_[kKinds], uint64_t{e.sub} | uint64_t{e.flags} << 8 | uint64_t{e.device} << 16);
  PutVarint(&cols_[kCorrs], ZigZag(static_cast<int64_t>(e.corr) - static_cast<int64_t>(last_corr_)));
  last_corr_ = e.corr;
  std::string& payload = cols_[kPayload];
  if (e.kind == EventKind::kKernel) {
    PutVarint(&payload, e.payload.kernel.details);
    PutVarint(&payload, e.payload.kernel.context);
    PutVarint(&payload, e.payload.kernel.graph_id);
    PutVarint(&payload, e.payload.kernel.op);
  } else if (e.kind == EventKind::kCounter) {
    char raw[8];
    std::memcpy(raw, &e.payload.counter.value, 8);
    payload.append(raw, 8);
  } else {
    PutVarint(&payload, e.payload.raw[0]);
    PutVarint(&payload, e.payload.raw[1]);
  }
  counters_ |= e.kind == EventKind::kCounter;
  if (count_ == 0) {  // (the columns were empty)
    for (int c = 0; c < kChunkColumns; ++c) first_len_[c] = static_cast<uint16_t>(cols_[c].size());
  }
  ++count_;
}

ChunkView ChunkBuilder::view() const {
  ChunkView v;
  v.count = count_;
  v.counters = counters_;
  for (int c = 0; c < kChunkColumns; ++c) v.col[c] = cols_[c].data();
  return v;
}

size_t ChunkBuilder::bytes() const {
  size_t n = 0;
  for (const std::string& c : cols_) n += c.size();
  return n;
}

uint8_t ChunkBuilder::Uniform() const {
  if (count_ < 2) return 0;
  uint8_t uniform = 0;
  for (int c = 0; c < kChunkColumns; ++c) {
    const std::string& col = cols_[c];
    const size_t len = first_len_[c];
    if (len == 0 || col.size() != len * count_) continue;
    bool same = true;
    for (size_t at = len; same && at < col.size(); at += len) same = std::memcmp(col.data(), col.data() + at, len) == 0;
    if (same) uniform |= static_cast<uint8_t>(1 << c);
  }
  return uniform;
}

size_t ChunkBuilder::SealedBytes(uint8_t uniform) const {
  size_t n = 0;
  for (int c = 0; c < kChunkColumns; ++c) n += (uniform & (1 << c)) ? first_len_[c] : cols_[c].size();
  return n;
}

ColumnEnds ChunkBuilder::SealInto(char* out, uint8_t uniform) const {
  ColumnEnds ends{};
  size_t at = 0;
  for (int c = 0; c < kChunkColumns; ++c) {
    const size_t len = (uniform & (1 << c)) ? first_len_[c] : cols_[c].size();
    std::memcpy(out + at, cols_[c].data(), len);
    at += len;
    ends[c] = static_cast<uint16_t>(at);
  }
  return ends;
}

void ChunkBuilder::Clear() {
  for (std::string& c : cols_) c.clear();  // keeps the capacity for the next chunk.
  last_end_ = 0;
  last_corr_ = 0;
  count_ = 0;
  counters_ = false;
}

}  // namespace liveprof
