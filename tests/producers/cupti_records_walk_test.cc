// CuptiRecordParser's walk over a buffer: records cut by the valid size,
// kinds it skips by size, kinds it does not know, empty and misaligned
// buffers, records without timestamps, a full ring.
#include "producers/cupti_test_records.h"

namespace liveprof::cupti_test {

TEST_CASE("cupti records: a truncated buffer keeps the whole records and counts the cut") {
  Fixture f;
  RecordBuffer b;
  b.Add(KernelRecord("k"));
  const CUpti_ActivityAPI api = ApiRecord(CUPTI_ACTIVITY_KIND_RUNTIME, 1, 2);
  b.AddBytes(&api, sizeof api / 2);
  const auto r = f.Parse(b);
  CHECK(r.records == 1);
  CHECK(r.events == 1);
  CHECK_FALSE(r.complete);
  CHECK(f.Drain().size() == 1);
  CHECK(f.DiagCount(Diag::cupti_truncated_buffer) == 1);

  // Fewer bytes than a kind field.
  RecordBuffer tiny;
  const uint16_t half_kind = CUPTI_ACTIVITY_KIND_KERNEL;
  tiny.AddBytes(&half_kind, sizeof half_kind);
  CHECK_FALSE(f.Parse(tiny).complete);
  CHECK(f.DiagCount(Diag::cupti_truncated_buffer) == 2);

  // A misaligned buffer is refused whole.
  RecordBuffer shifted;
  const uint32_t pad = 0;
  shifted.AddBytes(&pad, sizeof pad);
  shifted.Add(KernelRecord("k"));
  const auto m = f.parser->Parse(shifted.data() + 4, shifted.size() - 4, *f.ring);
  CHECK(m.records == 0);
  CHECK_FALSE(m.complete);
  CHECK(f.DiagCount(Diag::cupti_truncated_buffer) == 3);
  CHECK(f.Drain().empty());
}

TEST_CASE("cupti records: a known kind without events is skipped by size, an unknown kind stops") {
  Fixture f;
  RecordBuffer b;
  CUpti_ActivityStream st{};
  st.kind = CUPTI_ACTIVITY_KIND_STREAM;
  st.streamId = kStreamId;
  b.Add(st);
  b.Add(KernelRecord("before"));
  const uint64_t unknown[4] = {9999, 1, 2, 3};
  b.AddBytes(unknown, sizeof unknown);
  b.Add(KernelRecord("after"));
  const auto r = f.Parse(b);
  CHECK(r.records == 2);
  CHECK(r.events == 1);
  CHECK_FALSE(r.complete);
  const std::vector<Event> events = f.Drain();
  REQUIRE(events.size() == 1);
  CHECK(f.Name(events[0].name) == "before");
  CHECK(f.DiagCount(Diag::cupti_unknown_record) == 1);
  CHECK(f.parser->stats().by_kind[CUPTI_ACTIVITY_KIND_STREAM] == 1);
  CHECK(f.parser->stats().ignored == 1);
}

TEST_CASE("cupti records: an empty buffer is a no-op") {
  Fixture f;
  RecordBuffer b;
  const auto r = f.parser->Parse(b.data(), 0, *f.ring);
  CHECK(r.records == 0);
  CHECK(r.events == 0);
  CHECK(r.complete);
  CHECK(f.parser->Parse(nullptr, 0, *f.ring).complete);
  CHECK(f.Drain().empty());
  CHECK(f.DiagCount(Diag::cupti_truncated_buffer) == 0);
  CHECK(f.DiagCount(Diag::cupti_unknown_record) == 0);
  CHECK(f.parser->stats().buffers == 2);
}

TEST_CASE("cupti records: records without a usable timestamp are left out and counted") {
  Fixture f;
  CUpti_ActivityKernel10 none = KernelRecord("k");
  none.start = 0;
  none.end = 0;
  CUpti_ActivityKernel10 backwards = KernelRecord("k");
  backwards.start = kT2;
  backwards.end = kT1;
  RecordBuffer b;
  b.Add(none);
  b.Add(backwards);
  b.Add(KernelRecord("k"));
  const auto r = f.Parse(b);
  CHECK(r.records == 3);
  CHECK(r.events == 1);
  CHECK(r.complete);
  CHECK(f.DiagCount(Diag::cupti_no_timestamp) == 2);
}

TEST_CASE("cupti records: a full ring drops and counts, the walk goes on") {
  Stream stream;
  auto ring = SpscRing::Create(2);
  CuptiRecordParser parser(stream);  // no clock: CUPTI ns are host ns.
  RecordBuffer b;
  for (int i = 0; i < 3; ++i) b.Add(KernelRecord("k", static_cast<uint32_t>(i)));
  const auto r = parser.Parse(b.data(), b.size(), *ring);
  CHECK(r.records == 3);
  CHECK(r.events == 2);
  CHECK(r.ring_full == 1);
  CHECK(ring->dropped() == 1);
  CHECK(parser.stats().ring_full == 1);
  std::vector<Event> events;
  ring->Drain([&](std::span<Event> s) { events.insert(events.end(), s.begin(), s.end()); });
  REQUIRE(events.size() == 2);
  CHECK(events[0].ts == kT0);  // identity mapping.
  CHECK(events[0].dur == kT1 - kT0);
}

}  // namespace liveprof::cupti_test
