// KeepTopN: the first `n` elements of a range in `before` order, sorted, the
// rest dropped. nth_element and a sort of the n kept: O(size + n log n),
// where partial_sort's heap costs O(size log n). The tables (TF stats 500 rows
// a side, kernel stats 1000) rank ten thousand candidates on every render.
#ifndef LIVEPROF_BASE_TOP_N_H_
#define LIVEPROF_BASE_TOP_N_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace liveprof {

template <typename T, typename Before>
void KeepTopN(std::vector<T>* v, size_t n, Before before) {
  if (v->size() > n) {
    std::nth_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(n), v->end(), before);
    v->resize(n);
  }
  std::sort(v->begin(), v->end(), before);
}

}  // namespace liveprof

#endif  // LIVEPROF_BASE_TOP_N_H_
