#include "aggregators/pytorch/interval_ranges.h"

#include <algorithm>
#include <utility>

namespace liveprof::ranges {

Ranges MergeSortedRanges(Ranges src) {
  Ranges merged;
  if (src.empty()) return merged;
  merged.reserve(src.size() / 2 + 1);
  merged.push_back(src[0]);
  for (size_t i = 1; i < src.size(); ++i) {
    const Range& r = src[i];
    if (r.second > merged.back().second) {
      if (r.first <= merged.back().second) {
        merged.back().second = r.second;
      } else {
        merged.push_back(r);
      }
    }
  }
  return merged;
}

Ranges MergeRanges(Ranges src) {
  std::stable_sort(src.begin(), src.end(), [](const Range& a, const Range& b) { return a.first < b.first; });
  return MergeSortedRanges(std::move(src));
}

Ranges SubtractRanges(const Ranges& l1, const Ranges& l2) {
  Ranges dst;
  if (l1.empty()) return dst;
  if (l2.empty()) return l1;
  Range r1 = l1[0];
  Range r2 = l2[0];
  size_t i1 = 0, i2 = 0;
  auto pop1 = [&] {
    if (++i1 < l1.size()) r1 = l1[i1];
  };
  auto pop2 = [&] {
    if (++i2 < l2.size()) r2 = l2[i2];
  };
  while (i1 < l1.size()) {
    if (i2 == l2.size()) {
      dst.push_back(r1);
      pop1();
    } else if (r2.second <= r1.first) {
      pop2();
    } else if (r2.first <= r1.first && r2.second < r1.second) {
      r1 = {r2.second, r1.second};
      pop2();
    } else if (r2.first <= r1.first) {
      r2 = {r1.second, r2.second};
      pop1();
    } else if (r2.first < r1.second) {
      dst.push_back({r1.first, r2.first});
      r1 = {r2.first, r1.second};
    } else {
      dst.push_back(r1);
      pop1();
    }
  }
  return dst;
}

Ranges IntersectRanges(const Ranges& l1, const Ranges& l2) {
  Ranges dst;
  if (l1.empty() || l2.empty()) return dst;
  Range r1 = l1[0];
  Range r2 = l2[0];
  size_t i1 = 0, i2 = 0;
  auto pop1 = [&] {
    if (++i1 < l1.size()) r1 = l1[i1];
  };
  auto pop2 = [&] {
    if (++i2 < l2.size()) r2 = l2[i2];
  };
  while (i1 < l1.size()) {
    if (i2 == l2.size()) {
      break;
    } else if (r2.second <= r1.first) {
      pop2();
    } else if (r2.first <= r1.first && r2.second < r1.second) {
      dst.push_back({r1.first, r2.second});
      r1 = {r2.second, r1.second};
      pop2();
    } else if (r2.first <= r1.first) {
      dst.push_back(r1);
      r2 = {r1.second, r2.second};
      pop1();
    } else if (r2.second < r1.second) {
      dst.push_back(r2);
      r1 = {r2.second, r1.second};
      pop2();
    } else if (r2.first < r1.second) {
      dst.push_back({r2.first, r1.second});
      r2 = {r1.second, r2.second};
      pop1();
    } else {
      pop1();
    }
  }
  return dst;
}

int64_t OverlapLength(const Ranges& v, int64_t s, int64_t e) {
  auto it = std::partition_point(v.begin(), v.end(), [s](const Range& r) { return r.second <= s; });
  int64_t sum = 0;
  for (; it != v.end() && it->first < e; ++it) {
    sum += std::min(e, it->second) - std::max(s, it->first);
  }
  return sum;
}

}  // namespace liveprof::ranges
