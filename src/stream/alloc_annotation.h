// What the framework said of one allocation, carried by a kAlloc event
// (event.h): TensorFlow's allocator TraceMes (XPlane's MemoryAllocation
// events) name the op that allocated, the region ("output", "temp",
// "persist"...), the data type, the tensor shape and the requested size
// (docs/semantics-tf.md §8.1). They travel as one interned name in the
// event's `corr`, flagged kFlagAllocAnnotation: the five fields joined by the unit separator (0x1F), the
// requested size in decimal ("" when not said). Allocations with the same
// annotation and size are one row of the memory breakdown, as xprof merges
// rows with equal fields (§8.4).
#ifndef LIVEPROF_STREAM_ALLOC_ANNOTATION_H_
#define LIVEPROF_STREAM_ALLOC_ANNOTATION_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace liveprof {

struct AllocAnnotation {
  std::string_view op;
  std::string_view region;
  std::string_view data_type;
  std::string_view shape;
  uint64_t requested_bytes = 0;  // 0: not said.

  bool empty() const {
    return op.empty() && region.empty() && data_type.empty() && shape.empty() && requested_bytes == 0;
  }
};

inline constexpr char kAllocAnnotationSeparator = '\x1f';

// The name to intern; "" for an empty annotation (then there is none).
inline std::string FormatAllocAnnotation(const AllocAnnotation& a) {
  if (a.empty()) return {};
  std::string s;
  s.reserve(a.op.size() + a.region.size() + a.data_type.size() + a.shape.size() + 24);
  for (std::string_view f : {a.op, a.region, a.data_type, a.shape}) {
    s.append(f);
    s.push_back(kAllocAnnotationSeparator);
  }
  if (a.requested_bytes != 0) s.append(std::to_string(a.requested_bytes));
  return s;
}

// The fields of `text` (views into it). A name without separators (from a
// producer that put a plain op name there) is the op alone; missing fields
// are empty, an unreadable requested size 0.
inline AllocAnnotation ParseAllocAnnotation(std::string_view text) {
  AllocAnnotation a;
  std::string_view* fields[] = {&a.op, &a.region, &a.data_type, &a.shape};
  for (std::string_view* f : fields) {
    const size_t sep = text.find(kAllocAnnotationSeparator);
    *f = text.substr(0, sep);
    if (sep == std::string_view::npos) return a;
    text.remove_prefix(sep + 1);
  }
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec == std::errc() && end == text.data() + text.size()) a.requested_bytes = n;
  return a;
}

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_ALLOC_ANNOTATION_H_
