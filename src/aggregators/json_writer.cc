#include "aggregators/json_writer.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace liveprof {

namespace {

void AppendShortest(std::string* out, double v) {
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
    if (has_element_.back()) out_.push_back(',');
    has_element_.back() = true;
  }
}

void JsonWriter::Open(char c) {
  BeforeValue();
  out_.push_back(c);
  has_element_.push_back(false);
}

void JsonWriter::Close(char c) {
  assert(!has_element_.empty() && !after_key_);
  has_element_.pop_back();
  out_.push_back(c);
}

void JsonWriter::Key(std::string_view key) {
  assert(!after_key_);
  String(key);
  out_.push_back(':');
  after_key_ = true;
}

void JsonWriter::String(std::string_view s) {
  BeforeValue();
  out_.push_back('"');
  // Runs that need no escape are appended whole; names rarely need any.
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out_.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        out_ += "\\u00";
        out_.push_back(kHex[c >> 4]);
        out_.push_back(kHex[c & 15]);
      }
    }
  }
  out_.append(s.data() + run, s.size() - run);  // UTF-8 passes through as it is.
  out_.push_back('"');
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
  if (!std::isfinite(v)) {
    out_ += "null";
    return;
  }
  AppendShortest(&out_, v);
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
