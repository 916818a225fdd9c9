// Exact decimal parsing of trace timestamps. Chrome trace JSON gives `ts` and
// `dur` in microseconds, often with a fraction ("1623143089861234.567"); read
// as a double, a timestamp of 1.7e15 µs is off by up to 0.25 µs, so the text
// itself is converted to integer nanoseconds.
#ifndef LIVEPROF_IMPORT_DECIMAL_H_
#define LIVEPROF_IMPORT_DECIMAL_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace liveprof {

// `text` is a JSON number (-?digits[.digits][(e|E)[+-]digits]) counting
// microseconds; returns it in nanoseconds, rounded half away from zero past
// the nanosecond (digits beyond the 19th significant one are dropped).
// nullopt when `text` is not such a number or the result leaves int64.
std::optional<int64_t> MicrosTextToNs(std::string_view text);

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_DECIMAL_H_
