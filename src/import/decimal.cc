#include "import/decimal.h"

#include <limits>

namespace liveprof {

std::optional<int64_t> MicrosTextToNs(std::string_view text) {
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  // The significant digits as one integer, and the power of ten it is off by.
  uint64_t mantissa = 0;
  int digits = 0;       // significant digits kept (at most 19).
  int exponent = 0;     // value = mantissa * 10^exponent µs.
  int round_digit = 0;  // the first digit dropped past the 19th.
  bool any = false;
  bool dropped = false;
  auto digit = [&](char c, bool fraction) {
    any = true;
    const int d = c - '0';
    if (digits == 0 && d == 0) {  // leading zeros: no significance.
      if (fraction) --exponent;
      return;
    }
    if (digits < 19) {
      mantissa = mantissa * 10 + static_cast<uint64_t>(d);
      ++digits;
      if (fraction) --exponent;
    } else {
      if (!dropped) round_digit = d;
      dropped = true;
      if (!fraction) ++exponent;
    }
  };
  if (i >= text.size() || text[i] < '0' || text[i] > '9') return std::nullopt;
  if (text[i] == '0' && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9') return std::nullopt;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') digit(text[i++], false);
  if (i < text.size() && text[i] == '.') {
    ++i;
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') digit(text[i++], true);
    if (i == start) return std::nullopt;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) exp_negative = text[i++] == '-';
    const size_t start = i;
    int e = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (e < 100000) e = e * 10 + (text[i] - '0');
      ++i;
    }
    if (i == start) return std::nullopt;
    exponent += exp_negative ? -e : e;
  }
  if (i != text.size() || !any) return std::nullopt;
  if (mantissa == 0) return 0;

  // To nanoseconds: times 10^(exponent + 3).
  int shift = exponent + 3;
  uint64_t value = mantissa;
  if (shift >= 0) {
    for (; shift > 0; --shift) {
      if (value > std::numeric_limits<uint64_t>::max() / 10) return std::nullopt;
      value *= 10;
    }
    if (dropped && round_digit >= 5 && exponent + 3 == 0) ++value;
  } else {
    int last = round_digit;  // the most significant digit divided away.
    bool divided = false;
    for (; shift < 0; ++shift) {
      if (value == 0) {
        last = 0;
        break;
      }
      last = static_cast<int>(value % 10);
      value /= 10;
      divided = true;
    }
    if (divided && last >= 5) ++value;
  }
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (value > limit) return std::nullopt;
  const int64_t v = static_cast<int64_t>(value);
  return negative ? -v : v;
}

}  // namespace liveprof
