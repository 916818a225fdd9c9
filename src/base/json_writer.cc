#include "base/json_writer.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace liveprof {

namespace {

unsigned DecimalDigits(uint64_t v) {
  unsigned n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

// The shortest form of `v` when v = m / 1000 exactly for an integer m (µs
// from ns, most of what the views print), written without the general
// algorithm; false when that does not hold or when std::to_chars would pick
// the scientific form. The output is byte for byte std::to_chars's: below
// 1e12 no other decimal of as few digits lies within half an ulp of v, and
// the fixed form is chosen unless the scientific one is strictly shorter.
bool AppendMilli(std::string* out, double v) {
  if (!(v > 0 && v < 1e12)) return false;
  const uint64_t m = static_cast<uint64_t>(v * 1000 + 0.5);
  if (static_cast<double>(m) / 1000 != v) return false;
  const uint64_t int_part = m / 1000;
  uint64_t frac = m % 1000;
  unsigned frac_digits = 3;
  while (frac_digits > 0 && frac % 10 == 0) {
    frac /= 10;
    --frac_digits;
  }
  const unsigned fixed_len = DecimalDigits(int_part) + (frac_digits > 0 ? 1 + frac_digits : 0);
  uint64_t sig = m;
  while (sig % 10 == 0) sig /= 10;
  const unsigned sig_digits = DecimalDigits(sig);
  const int exponent = static_cast<int>(DecimalDigits(m)) - 4;
  const unsigned exp_digits = std::max(2u, DecimalDigits(static_cast<uint64_t>(std::abs(exponent))));
  const unsigned sci_len = sig_digits + (sig_digits > 1 ? 1 : 0) + 2 + exp_digits;
  if (sci_len < fixed_len) return false;
  char buf[32];
  char* p = std::to_chars(buf, buf + sizeof(buf), int_part).ptr;
  if (frac_digits > 0) {
    *p++ = '.';
    char* end = p + frac_digits;
    for (char* q = end; q != p;) {
      *--q = static_cast<char>('0' + frac % 10);
      frac /= 10;
    }
    p = end;
  }
  out->append(buf, p);
  return true;
}

void AppendShortest(std::string* out, double v) {
  if (AppendMilli(out, v)) return;
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

}  // namespace

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    char& has = has_element_.back();
    if (has) out_.push_back(',');
    has = 1;
  }
}

void JsonWriter::Open(char c) {
  BeforeValue();
  out_.push_back(c);
  has_element_.push_back(0);
}

void JsonWriter::Close(char c) {
  assert(!has_element_.empty() && !after_key_);
  has_element_.pop_back();
  out_.push_back(c);
}

namespace {

// True if any of the 8 bytes of `v` is < 0x20, '"' or '\\' (bit hacks:
// "determine if a word has a byte less than n / equal to n").
bool AnyNeedsEscape(uint64_t v) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  auto has_zero = [](uint64_t x) { return ((x - kOnes) & ~x & kHigh) != 0; };
  const bool control = ((v - kOnes * 0x20) & ~v & kHigh) != 0;
  return control || has_zero(v ^ (kOnes * '"')) || has_zero(v ^ (kOnes * '\\'));
}

// Length of the longest prefix of `s` that needs no escape.
size_t PlainPrefix(std::string_view s) {
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, s.data() + i, 8);
    if (AnyNeedsEscape(v)) break;
  }
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == '"' || c == '\\') break;
  }
  return i;
}

}  // namespace

void JsonWriter::Key(std::string_view key) {
  assert(!after_key_);
  assert(PlainPrefix(key) == key.size());  // keys are our own identifiers.
  BeforeValue();
  out_.push_back('"');
  out_.append(key);
  out_.append("\":", 2);
  after_key_ = true;
}

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  // Runs that need no escape are appended whole; names rarely need any.
  while (true) {
    const size_t run = PlainPrefix(s);
    out->append(s.data(), run);  // UTF-8 passes through as it is.
    if (run == s.size()) break;
    const auto c = static_cast<unsigned char>(s[run]);
    s.remove_prefix(run + 1);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        *out += "\\u00";
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
      }
    }
  }
  out->push_back('"');
}

void AppendJsonDouble(std::string* out, double v) {
  if (!std::isfinite(v)) {
    *out += "null";
    return;
  }
  AppendShortest(out, v);
}

void JsonWriter::String(std::string_view s) {
  BeforeValue();
  AppendJsonString(&out_, s);
}

void JsonWriter::Int(int64_t v) {
  BeforeValue();
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out_.append(buf, r.ptr);
}

void JsonWriter::UInt(uint64_t v) {
  BeforeValue();
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out_.append(buf, r.ptr);
}

void JsonWriter::Double(double v) {
  BeforeValue();
  AppendJsonDouble(&out_, v);
}

void JsonWriter::Fixed(double v, int decimals) {
  BeforeValue();
  if (!std::isfinite(v)) {
    out_ += "null";
    return;
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, decimals);
  out_.append(buf, r.ptr);
}

void JsonWriter::Bool(bool v) {
  BeforeValue();
  out_ += v ? "true" : "false";
}

void JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
}

void AppendCsvField(std::string* out, std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
    out->append(s);
    return;
  }
  out->push_back('"');
  for (const char c : s) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

void AppendCsvNumber(std::string* out, double v) {
  if (!std::isfinite(v)) return;  // an empty field.
  AppendShortest(out, v);
}

}  // namespace liveprof
