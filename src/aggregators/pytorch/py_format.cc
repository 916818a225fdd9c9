#include "aggregators/pytorch/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace liveprof {

double PyRound(double x) {
  // CPython float.__round__ without ndigits: round half away from zero, then
  // fix exact halves to the even neighbour.
  if (!std::isfinite(x)) return x;
  double r = std::round(x);
  if (std::fabs(x - r) == 0.5) r = 2.0 * std::round(x / 2.0);
  return r;
}

double PyRound(double x, int ndigits) {
  // CPython rounds through a correctly rounded decimal string of the exact
  // binary value (ties to even) and reads it back; std::to_chars with a
  // precision is exact in the same way.
  if (!std::isfinite(x) || ndigits < 0 || ndigits > 300) return ndigits < 0 ? PyRound(x) : x;
  char buf[400];
  const auto r = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed, ndigits);
  if (r.ec != std::errc()) return x;
  double out = x;
  std::from_chars(buf, r.ptr, out);
  return out;
}

std::string PyRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, in scientific form: "-d.ddde+XX".
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  const std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
  std::string out;
  size_t pos = 0;
  if (text[0] == '-') {
    out.push_back('-');
    pos = 1;
  }
  const size_t e_pos = text.find('e');
  std::string digits;
  for (size_t i = pos; i < e_pos; ++i) {
    if (text[i] != '.') digits.push_back(text[i]);
  }
  int exp10 = 0;
  std::from_chars(text.data() + e_pos + 1 + (text[e_pos + 1] == '+' ? 1 : 0), text.data() + text.size(), exp10);
  // CPython (format_float_short, repr): decpt = exponent + 1; scientific when
  // decpt <= -4 or decpt > 16, fixed otherwise, always with a '.' or an 'e'.
  const int decpt = exp10 + 1;
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (n > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    out.push_back('e');
    const int e = decpt - 1;
    out.push_back(e < 0 ? '-' : '+');
    const int a = e < 0 ? -e : e;
    if (a < 10) out.push_back('0');
    out += std::to_string(a);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= n) {
    out += digits;
    out.append(static_cast<size_t>(decpt - n), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out.push_back('.');
    out.append(digits, static_cast<size_t>(decpt), std::string::npos);
  }
  return out;
}

std::string PyFormatFixed(double x, int decimals) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[400];
  const auto r = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed, std::clamp(decimals, 0, 300));
  return std::string(buf, r.ptr);
}

}  // namespace liveprof
