// Half-open interval lists as the PyTorch profiler plugin's range_utils.py
// handles them, ported literally: the plugin's carving quirk (docs/semantics-
// pytorch.md §3) depends on whether a list is empty, zero-length pieces
// included, so these keep every piece the Python keeps.
#ifndef LIVEPROF_AGGREGATORS_PYTORCH_INTERVAL_RANGES_H_
#define LIVEPROF_AGGREGATORS_PYTORCH_INTERVAL_RANGES_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace liveprof::ranges {

using Range = std::pair<int64_t, int64_t>;  // [first, second)
using Ranges = std::vector<Range>;

// merge_ranges: sort by start (stable), unite ranges that start at or before
// the current end.
Ranges MergeRanges(Ranges src);
// The same for a list already sorted by start (the role lists are built in ts order).
Ranges MergeSortedRanges(Ranges src);
// subtract_ranges_lists: the parts of l1 not in l2 (both merged lists).
Ranges SubtractRanges(const Ranges& l1, const Ranges& l2);
// intersection_ranges_lists: the parts in both (both merged lists).
Ranges IntersectRanges(const Ranges& l1, const Ranges& l2);
// get_ranges_sum(intersection_ranges_lists([(s, e)], v)) for a sorted list of
// disjoint ranges: the overlap length of [s, e) with v.
int64_t OverlapLength(const Ranges& v, int64_t s, int64_t e);

}  // namespace liveprof::ranges

#endif  // LIVEPROF_AGGREGATORS_PYTORCH_INTERVAL_RANGES_H_
