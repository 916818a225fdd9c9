// The trace store's mipmap (trace_mipmap.h) against its definition: at a
// grid of 2^k ns, bucket i folds the events that start in [i 2^k, (i+1) 2^k)
// and are shorter than 2^k. And its storage, the store's deque of large
// blocks (block_deque.h), against std::deque.
#include "store/trace_mipmap.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "store/block_deque.h"

namespace liveprof::trace_mipmap_test {
namespace {

struct Sample {
  uint64_t ts, dur;
  NameId name;
  double value;
};

std::map<uint64_t, MipBucket> Folded(const TraceMipmap& mip, int k, uint64_t lo, uint64_t hi) {
  std::map<uint64_t, MipBucket> got;
  mip.ForEach(k, lo, hi, [&](uint64_t i, const MipBucket& b) {
    CHECK(i >= lo);
    CHECK(i < hi);
    got[i].Add(b);
  });
  return got;
}

std::map<uint64_t, MipBucket> Definition(const std::vector<Sample>& all, int k, uint64_t lo, uint64_t hi,
                                         uint64_t valid_from) {
  std::map<uint64_t, MipBucket> want;
  for (uint64_t seq = 0; seq < all.size(); ++seq) {
    const Sample& s = all[seq];
    const uint64_t i = s.ts >> k;
    if ((s.dur >> k) != 0 || i < lo || i >= hi || (i << k) < valid_from) continue;
    want[i].Add(MipBucket::Of(s.dur, s.name, s.value, seq));
  }
  return want;
}

void ExpectSame(const std::map<uint64_t, MipBucket>& got, const std::map<uint64_t, MipBucket>& want,
                uint64_t valid_from, int k) {
  size_t compared = 0;
  for (const auto& entry : want) {
    const auto& i = entry.first;
    const auto& w = entry.second;
    CAPTURE(i);
    const auto g = got.find(i);
    REQUIRE(g != got.end());
    CHECK(g->second.count == w.count);
    CHECK(g->second.sum_dur == w.sum_dur);
    CHECK(g->second.longest_dur == w.longest_dur);
    CHECK(g->second.longest == w.longest);
    CHECK(g->second.max_value == w.max_value);
    CHECK(g->second.last_value == w.last_value);
    ++compared;
  }
  // Nothing more, but for buckets the store does not answer for (before
  // valid_from: they may still hold some of what was dropped).
  for (const auto& [i, g] : got) {
    if ((i << k) >= valid_from) CHECK(want.count(i) == 1);
  }
  CHECK(compared == want.size());
}

TEST_CASE("trace mipmap: every level's buckets equal their definition, fed event by event or whole") {
  std::mt19937_64 rng(5);
  std::vector<Sample> all;
  TraceMipmap mip;
  mip.Choose(20'000);  // the first chunk's span: finest level 2^16.
  CHECK(mip.min_level() == 16);
  uint64_t at = 1'000'000'000;
  while (all.size() < 200'000) {
    // A run of events in one finest bucket, folded whole as a chunk is;
    // or events one by one, some late (completion order) and some long.
    const bool whole = rng() % 3 == 0;
    MipBucket run;
    uint64_t lo = UINT64_MAX, hi = 0, longest = 0;
    const size_t n = 1 + rng() % 64;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t late = rng() % 8 == 0 ? rng() % 200'000 : 0;
      Sample s{at - std::min(at, late), rng() % 16 == 0 ? rng() % 50'000'000 : rng() % 3'000,
               static_cast<NameId>(rng() % 30), static_cast<double>(rng() % 1000) / 4};
      at += rng() % 2'000;
      const uint64_t seq = all.size();
      all.push_back(s);
      if (whole) {
        run.Add(MipBucket::Of(s.dur, s.name, s.value, seq));
        lo = std::min(lo, s.ts), hi = std::max(hi, s.ts), longest = std::max(longest, s.dur);
      } else {
        mip.Add(mip.LevelOf(s.dur), s.ts >> mip.LevelOf(s.dur), MipBucket::Of(s.dur, s.name, s.value, seq));
      }
    }
    if (whole && !mip.AddWhole(lo, hi, longest, run)) {  // not in one bucket: one by one.
      for (size_t seq = all.size() - n; seq < all.size(); ++seq) {
        const Sample& s = all[seq];
        mip.Add(mip.LevelOf(s.dur), s.ts >> mip.LevelOf(s.dur), MipBucket::Of(s.dur, s.name, s.value, seq));
      }
    }
  }
  for (int k = mip.min_level(); k < 40; k += 3) {
    CAPTURE(k);
    const uint64_t first = (all.front().ts >> k), last = (at >> k) + 1;
    ExpectSame(Folded(mip, k, first, last), Definition(all, k, first, last, 0), 0, k);
    const uint64_t mid = first + (last - first) / 3;  // a part of the range only.
    ExpectSame(Folded(mip, k, mid, mid + 7), Definition(all, k, mid, mid + 7, 0), 0, k);
  }
  CHECK(mip.bytes() < all.size() * 4);  // ~2 buckets per 64 events at most.

  // The oldest third dropped: the buckets after it still exact.
  const uint64_t cut = all[all.size() / 3].ts;
  mip.DropBefore(cut);
  CHECK(mip.valid_from() == cut);
  for (int k = mip.min_level(); k < 36; k += 5) {
    CAPTURE(k);
    const uint64_t from = ((cut - 1) >> k) + 1;  // the first bucket wholly after the cut.
    std::vector<Sample> kept;
    for (const Sample& s : all) kept.push_back(s.ts >= cut ? s : Sample{0, UINT64_MAX, 0, 0});  // (keeps seq)
    ExpectSame(Folded(mip, k, from, (at >> k) + 1), Definition(kept, k, from, (at >> k) + 1, cut), cut, k);
  }
}

TEST_CASE("trace mipmap: a track sparser than its first chunk gives up its finest levels") {
  TraceMipmap mip;
  mip.Choose(1'000);  // a dense first chunk: 2^11 ns buckets.
  REQUIRE(mip.min_level() == 11);
  std::vector<Sample> all;
  for (uint64_t i = 0; i < 20'000; ++i) {  // then one event per 100 us.
    Sample s{i * 100'000, 10, static_cast<NameId>(i % 7), 0};
    all.push_back(s);
    mip.Add(mip.LevelOf(s.dur), s.ts >> mip.LevelOf(s.dur), MipBucket::Of(s.dur, s.name, s.value, i));
  }
  // 64 events a bucket at least: 2^23 ns (8.4 ms, 84 events) is the finest kept.
  CHECK(mip.min_level() == 23);
  CHECK(mip.bytes() < 20'000 * 4);
  for (int k = mip.min_level(); k < 32; ++k) {
    const uint64_t last = (all.back().ts >> k) + 1;
    ExpectSame(Folded(mip, k, 0, last), Definition(all, k, 0, last, 0), 0, k);
  }
  // A finer grid is not its to answer.
  CHECK(Folded(mip, 20, 0, 100).empty());
}

// 4 KiB elements: blocks of 16, the first ones of 1, 1, 2, 4 and 8.
struct Page {
  uint64_t value = 0;
  char pad[4088] = {};
};

TEST_CASE("block deque: pushes, pops and inserts as std::deque does, its elements kept in place") {
  using Pages = BlockDeque<Page>;
  static_assert(Pages::kBlock == 16 && Pages::kFirst == 1);
  static_assert(BlockDeque<uint64_t>::kBlock == 8192 && BlockDeque<uint64_t>::kFirst == 32);
  std::mt19937_64 rng(7);
  Pages got;
  std::deque<uint64_t> want;
  std::vector<std::pair<const Page*, uint64_t>> held;  // an element's address, and its value then.
  uint64_t next = 0;
  for (int step = 0; step < 20'000; ++step) {
    const uint64_t op = rng() % 16;
    if (op < 9 || want.empty()) {  // grows more than it shrinks.
      got.push_back(Page{next});
      want.push_back(next++);
      if (rng() % 8 == 0) held.emplace_back(&got.back(), got.back().value);
    } else if (op < 15) {
      got.pop_front();
      want.pop_front();
    } else {  // near the back, as a late mipmap bucket.
      const size_t at = want.size() - std::min<size_t>(want.size(), rng() % 4);
      got.insert(at, Page{next});
      want.insert(want.begin() + static_cast<std::ptrdiff_t>(at), next++);
      held.clear();  // (an insert moves the elements after it)
    }
    REQUIRE(got.size() == want.size());
    REQUIRE(got.empty() == want.empty());
    if (!want.empty()) {
      CHECK(got.front().value == want.front());
      CHECK(got.back().value == want.back());
    }
    // What was pushed and not popped since is where it was.
    std::erase_if(held, [&](const auto& h) { return want.empty() || h.second < want.front(); });
    for (const auto& [page, value] : held) CHECK(page->value == value);
  }
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i].value == want[i]);
  // Popping frees whole blocks: a few elements left, a block or two held.
  while (got.size() > 3) got.pop_front();
  CHECK(got.bytes() <= 2 * Pages::kBlock * sizeof(Page) + 4096);
}

TEST_CASE("block deque: a short one takes little room, a popped element is destroyed") {
  BlockDeque<uint64_t> empty;
  CHECK(empty.bytes() == 0);  // no block before the first push.
  BlockDeque<uint64_t> few;
  for (uint64_t i = 0; i < 5; ++i) few.push_back(i);
  CHECK(few.bytes() < 1024);  // 256-byte blocks to begin with, not 64 KiB.
  BlockDeque<uint64_t> even;  // 0, 2, 4, ...: past the small blocks, less the first 1,000.
  for (uint64_t i = 0; i < 20'000; ++i) even.push_back(2 * i);
  for (int i = 0; i < 1'000; ++i) even.pop_front();
  for (const uint64_t key : {uint64_t{0}, uint64_t{1'999}, uint64_t{2'000}, uint64_t{2'001}, uint64_t{17'000},
                             uint64_t{39'998}, uint64_t{39'999}}) {
    CAPTURE(key);
    const size_t at = even.PartitionPoint([&](uint64_t v) { return v < key; });
    CHECK(at == (key <= 2'000 ? 0 : (key - 2'000 + 1) / 2));
  }
  BlockDeque<std::shared_ptr<int>> owners;
  auto one = std::make_shared<int>(1);
  owners.push_back(one);
  owners.push_back(std::make_shared<int>(2));
  CHECK(one.use_count() == 2);
  owners.pop_front();
  CHECK(one.use_count() == 1);
  CHECK(*owners.front() == 2);
}

}  // namespace
}  // namespace liveprof::trace_mipmap_test
