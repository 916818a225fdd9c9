#include "stream/spsc_ring.h"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "event_builder.h"

namespace liveprof::spsc_ring_test {
namespace {

std::vector<Event> DrainAll(SpscRing& ring) {
  std::vector<Event> out;
  ring.Drain([&](std::span<Event> s) { out.insert(out.end(), s.begin(), s.end()); });
  return out;
}

}  // namespace

TEST_CASE("ring: a bad capacity is refused with a message that says why") {
  std::string error;
  CHECK(SpscRing::Create(0, &error) == nullptr);
  CHECK(error.find("capacity 0") != std::string::npos);
  error.clear();
  CHECK(SpscRing::Create(SpscRing::kMaxCapacity + 1, &error) == nullptr);
  CHECK(error.find("above the maximum") != std::string::npos);
  auto ring = SpscRing::Create(5);
  REQUIRE(ring != nullptr);
  CHECK(ring->capacity() == 8);
}

TEST_CASE("ring: a full ring drops the new event and counts it exactly") {
  constexpr size_t kCapacity = 8;
  constexpr uint32_t kPushes = 20;
  auto ring = SpscRing::Create(kCapacity);
  REQUIRE(ring != nullptr);
  uint32_t accepted = 0;
  for (uint32_t i = 0; i < kPushes; ++i) accepted += ring->TryPush(test::Seq(i, i, 1)) ? 1 : 0;
  CHECK(accepted == kCapacity);
  CHECK(ring->dropped() == kPushes - kCapacity);
  CHECK(ring->published() == kCapacity);
  const std::vector<Event> out = DrainAll(*ring);
  REQUIRE(out.size() == kCapacity);
  for (uint32_t i = 0; i < kCapacity; ++i) CHECK(out[i].corr == i);  // the first ones are kept.
  CHECK(ring->TryPush(test::Seq(99, 99, 1)));                        // room again after the drain.
  CHECK(ring->dropped() == kPushes - kCapacity);
}

TEST_CASE("ring: order is kept across wrap-around and two-piece drains") {
  auto ring = SpscRing::Create(16);
  REQUIRE(ring != nullptr);
  uint32_t next_in = 0, next_out = 0;
  size_t two_piece_drains = 0;
  for (int round = 0; round < 200; ++round) {
    const int burst = 1 + (round * 7) % 16;
    for (int i = 0; i < burst; ++i, ++next_in) REQUIRE(ring->TryPush(test::Seq(next_in, next_in, 1)));
    int pieces = 0;
    ring->Drain([&](std::span<Event> s) {
      ++pieces;
      for (const Event& e : s) CHECK(e.corr == next_out++);
    });
    if (pieces == 2) ++two_piece_drains;
  }
  CHECK(next_out == next_in);
  CHECK(two_piece_drains > 0);  // the wrap path was exercised.
  CHECK(ring->dropped() == 0);
}

TEST_CASE("ring: a bulk push takes what fits, across the wrap, and counts the rest as dropped") {
  auto ring = SpscRing::Create(8);
  REQUIRE(ring != nullptr);
  std::vector<Event> in;
  for (uint32_t i = 0; i < 20; ++i) in.push_back(test::Seq(i, i, 1));
  CHECK(ring->TryPushBulk(std::span<const Event>(in.data(), 5)) == 5);
  CHECK(DrainAll(*ring).size() == 5);
  // Head at 5 of 8: six go in as two pieces (3 + 3), then two more find no room.
  CHECK(ring->TryPushBulk(std::span<const Event>(in.data() + 5, 6)) == 6);
  CHECK(ring->TryPushBulk(std::span<const Event>(in.data() + 11, 4)) == 2);
  CHECK(ring->dropped() == 2);
  CHECK(ring->published() == 13);
  const std::vector<Event> out = DrainAll(*ring);
  REQUIRE(out.size() == 8);
  for (uint32_t i = 0; i < 8; ++i) CHECK(out[i].corr == 5 + i);
  CHECK(ring->TryPushBulk({}) == 0);
  CHECK(ring->dropped() == 2);
}

TEST_CASE("ring: concurrent producer and consumer lose, duplicate and reorder nothing") {
  constexpr uint32_t kEvents = 2'000'000;
  auto ring = SpscRing::Create(1024);
  REQUIRE(ring != nullptr);
  std::atomic<bool> done{false};
  uint64_t drained = 0;
  int64_t last = -1;
  bool ordered = true;
  std::thread consumer([&] {
    auto drain = [&] {
      ring->Drain([&](std::span<Event> s) {
        for (const Event& e : s) {
          if (static_cast<int64_t>(e.corr) <= last) ordered = false;
          last = e.corr;
        }
        drained += s.size();
      });
    };
    while (!done.load(std::memory_order_acquire)) drain();
    drain();
  });
  uint64_t accepted = 0;
  for (uint32_t i = 0; i < kEvents; ++i) accepted += ring->TryPush(test::Seq(i, i, 1)) ? 1 : 0;
  done.store(true, std::memory_order_release);
  consumer.join();
  CHECK(ordered);
  CHECK(drained == accepted);
  CHECK(accepted + ring->dropped() == kEvents);
  CHECK(ring->published() == accepted);
}

}  // namespace liveprof::spsc_ring_test
