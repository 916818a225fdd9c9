#include "base/prometheus_text.h"

#include <charconv>
#include <cmath>

namespace liveprof {
namespace {

// HELP text escaping: backslash and newline (quotes stay as they are).
std::string EscapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, r.ptr);
}

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  *out_ += "# HELP ";
  *out_ += name;
  *out_ += ' ';
  *out_ += EscapeHelp(help);
  *out_ += "\n# TYPE ";
  *out_ += name;
  *out_ += ' ';
  *out_ += type;
  *out_ += '\n';
}

void PrometheusText::Sample(std::string_view name, Labels labels, std::string_view value) {
  *out_ += name;
  if (labels.size() != 0) {
    *out_ += '{';
    bool first = true;
    for (const auto& [key, v] : labels) {
      if (!first) *out_ += ',';
      first = false;
      *out_ += key;
      *out_ += "=\"";
      *out_ += EscapeLabelValue(v);
      *out_ += '"';
    }
    *out_ += '}';
  }
  *out_ += ' ';
  *out_ += value;
  *out_ += '\n';
}

}  // namespace liveprof
