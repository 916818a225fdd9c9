// A trace store chunk's columns (trace_chunk.h): events back as they went
// in, sealed whole or with uniform columns kept once.
#include "store/trace_chunk.h"

#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "event_builder.h"

namespace liveprof::trace_chunk_test {
namespace {

using test::Span;

std::vector<Event> SealAndDecode(const ChunkBuilder& b, uint8_t uniform, size_t* sealed_bytes) {
  *sealed_bytes = b.SealedBytes(uniform);
  auto data = std::make_unique<char[]>(*sealed_bytes);
  const ColumnEnds ends = b.SealInto(data.get(), uniform);
  CHECK(ends.back() == *sealed_bytes);
  std::vector<Event> out;
  DecodeChunk(ViewOf(data.get(), ends, b.count(), uniform, b.counters()), &out);
  return out;
}

TEST_CASE("trace chunk: columns that repeat one entry are sealed once and decode for every event") {
  ChunkBuilder b;
  std::vector<Event> in;
  for (uint64_t i = 0; i < 64; ++i) in.push_back(Span(1000 + i * 50, 40 + i % 3, static_cast<NameId>(7 + i % 2)));
  for (const Event& e : in) b.Put(e);
  const uint8_t uniform = b.Uniform();
  // The kind (and its sub, flags, device), the correlation ids (all 0) and
  // the payload (zeros) repeat; times and names do not.
  CHECK(uniform == ((1 << 3) | (1 << 4) | (1 << 5)));
  size_t sealed = 0;
  const std::vector<Event> out = SealAndDecode(b, uniform, &sealed);
  CHECK(sealed + 63 * 5 == b.bytes());  // kind + extra (2 bytes), corr (1), payload (2) kept once.
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    CHECK(out[i].ts == in[i].ts);
    CHECK(out[i].dur == in[i].dur);
    CHECK(out[i].name == in[i].name);
    CHECK(out[i].kind == EventKind::kHostSpan);
    CHECK(out[i].corr == 0);
    CHECK(out[i].payload.raw[0] == 0);
  }

  // One event unlike the others: its columns are kept whole.
  Event odd = Span(5000, 10, 7);
  odd.corr = 99;
  odd.payload.raw[1] = 123456;
  b.Clear();
  in.back() = odd;
  for (const Event& e : in) b.Put(e);
  CHECK(b.Uniform() == (1 << 3));
  const std::vector<Event> again = SealAndDecode(b, b.Uniform(), &sealed);
  REQUIRE(again.size() == in.size());
  CHECK(again.back().corr == 99);
  CHECK(again.back().payload.raw[1] == 123456);
  CHECK(again[62].corr == 0);
  // Columns read from outside are checked before they are decoded.
  {
    size_t n = 0;
    const uint8_t u = b.Uniform();
    n = b.SealedBytes(u);
    std::vector<char> data(n);
    const ColumnEnds ends = b.SealInto(data.data(), u);
    CHECK(CheckChunk(data.data(), ends, b.count(), u));
    CHECK(!CheckChunk(data.data(), ends, b.count() + 1, u));  // one more event than the columns hold.
    std::vector<char> bad(n, '\x80');                         // varints that never end.
    CHECK(!CheckChunk(bad.data(), ends, b.count(), u));
    ColumnEnds unsorted = ends;
    std::swap(unsorted[0], unsorted[1]);
    CHECK(!CheckChunk(data.data(), unsorted, b.count(), u));
  }
  // One event: nothing to share.
  b.Clear();
  b.Put(in[0]);
  CHECK(b.Uniform() == 0);
}

}  // namespace
}  // namespace liveprof::trace_chunk_test
