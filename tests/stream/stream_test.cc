#include "stream/stream.h"

#include <doctest/doctest.h>

namespace liveprof::stream_test {

TEST_CASE("stream: a ring of capacity 0 or beyond the maximum is refused, named and counted") {
  Stream stream(Stream::Options{.ring_capacity = 0});
  std::string error;
  CHECK(stream.AddRing({.name = "thread 7"}, &error) == nullptr);
  CHECK(error == "ring 'thread 7': ring capacity 0: a ring must hold at least one event");
  CHECK(stream.AddRing({.name = "huge", .capacity = SpscRing::kMaxCapacity * 2}, &error) == nullptr);
  CHECK(error.find("ring 'huge'") == 0);
  CHECK(stream.diagnostics().Get(Diag::ring_create_failed) == 2);
  CHECK(stream.Stats().empty());
  // A good ring still works after the refusals.
  auto ring = stream.AddRing({.name = "ok", .capacity = 4});
  REQUIRE(ring != nullptr);
  CHECK(ring->queue->capacity() == 4);
}

TEST_CASE("stream: totals keep the counts of retired rings") {
  Stream stream(Stream::Options{.ring_capacity = 2});
  auto ring = stream.AddRing({.name = "short-lived"});
  REQUIRE(ring != nullptr);
  Event e;
  e.kind = EventKind::kInstant;
  for (int i = 0; i < 5; ++i) ring->queue->TryPush(e);
  CHECK(stream.TotalPublished() == 2);
  CHECK(stream.TotalDropped() == 3);
  stream.RemoveRing(ring.get());
  CHECK(stream.Stats().empty());
  CHECK(stream.TotalPublished() == 2);
  CHECK(stream.TotalDropped() == 3);
  stream.diagnostics().Add(Diag::no_ring_dropped, 4);  // events of a thread with no ring.
  CHECK(stream.TotalDropped() == 7);
}

TEST_CASE("stream: tracks are dense from 1 and readable from any thread") {
  Stream stream;
  const TrackId a = stream.AddTrack({stream.names().Intern("train 1"), TrackType::kHostThread, 1, 0});
  const TrackId b = stream.AddTrack({stream.names().Intern("stream 7"), TrackType::kGpuStream, 7, 1});
  CHECK(a == 1);
  CHECK(b == 2);
  CHECK(stream.track_count() == 3);
  CHECK(stream.track(b).type == TrackType::kGpuStream);
  CHECK(stream.track(b).device == 1);
  CHECK(stream.names().Get(stream.track(a).name) == "train 1");
  CHECK(stream.track(99).name == 0);
}

}  // namespace liveprof::stream_test
