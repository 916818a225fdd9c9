// Prometheus' text exposition format (version 0.0.4): a writer of families
// and samples, with its escaping. Used by the server's /metrics
// (web/metrics.cc) and the fleet's (fleet/fleet_metrics.cc).
#ifndef LIVEPROF_BASE_PROMETHEUS_TEXT_H_
#define LIVEPROF_BASE_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace liveprof {

// The media type a /metrics response carries.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// A label value escaped for the text format: backslash, double quote and
// newline become \\, \" and \n.
std::string EscapeLabelValue(std::string_view value);

// A sample value as Prometheus reads it: the shortest text that parses back
// to the same double; NaN, +Inf, -Inf for the special values.
std::string FormatSampleValue(double value);

// Appends the exposition text, family by family: Family() (its HELP and
// TYPE), then that family's samples.
class PrometheusText {
 public:
  using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

  explicit PrometheusText(std::string* out) : out_(out) {}

  void Family(std::string_view name, std::string_view type, std::string_view help);
  // name{k1="v1",k2="v2"} value
  void Sample(std::string_view name, Labels labels, std::string_view value);
  void Sample(std::string_view name, Labels labels, uint64_t value) {
    Sample(name, labels, std::string_view(std::to_string(value)));
  }
  void Sample(std::string_view name, Labels labels, double value) {
    Sample(name, labels, std::string_view(FormatSampleValue(value)));
  }
  // A family with one unlabelled sample.
  void Counter(std::string_view name, std::string_view help, uint64_t value) {
    Family(name, "counter", help);
    Sample(name, {}, value);
  }
  void Gauge(std::string_view name, std::string_view help, double value) {
    Family(name, "gauge", help);
    Sample(name, {}, value);
  }

 private:
  std::string* out_;
};

}  // namespace liveprof

#endif  // LIVEPROF_BASE_PROMETHEUS_TEXT_H_
