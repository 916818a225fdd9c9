// JsonWriter and the CSV helpers: what they write parses back to what went in.
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/json_writer.h"
#include "doctest/doctest.h"

namespace liveprof::json_writer_test {
namespace {

TEST_CASE("json writer: nesting, commas and every value kind parse back") {
  JsonWriter w;
  w.BeginObject();
  w.KV("s", "plain");
  w.KV("i", int64_t{-42});
  w.KV("u", ~uint64_t{0});
  w.KV("d", 0.1);
  w.KV("b", true);
  w.Key("n");
  w.Null();
  w.Key("a");
  w.BeginArray();
  w.Int(1);
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.Fixed(2.675, 2);
  w.EndArray();
  w.EndObject();
  CHECK(w.str() == R"({"s":"plain","i":-42,"u":18446744073709551615,"d":0.1,"b":true,"n":null,"a":[1,{},[],2.67]})");
  const auto j = nlohmann::json::parse(w.str());
  CHECK(j["u"].get<uint64_t>() == ~uint64_t{0});
  CHECK(j["d"].get<double>() == 0.1);  // shortest text, exact value.
}

TEST_CASE("json writer: strings are escaped, runs between escapes kept whole") {
  const std::string nasty = std::string("a\"b\\c\nd\re\tf") + '\x01' + "g/é" + '\x1f';
  JsonWriter w;
  w.String(nasty);
  CHECK(w.str() == "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001g/é\\u001f\"");
  CHECK(nlohmann::json::parse(w.str()).get<std::string>() == nasty);
  JsonWriter empty;
  empty.String("");
  CHECK(empty.str() == "\"\"");
}

TEST_CASE("json writer: an escape anywhere in an 8-byte word is found") {
  // The scan tests 8 bytes at a time: put each kind of escape at every
  // offset of a long string, next to bytes >= 0x80 (UTF-8), and parse back.
  for (const char special : {'"', '\\', '\n', '\x01', '\x1f'}) {
    for (size_t at = 0; at < 24; ++at) {
      std::string s(24, 'x');
      s[at] = special;
      if (at + 2 < s.size()) {  // "é", whole.
        s[at + 1] = '\xc3';
        s[at + 2] = '\xa9';
      }
      JsonWriter w;
      w.String(s);
      INFO("special=" << int(special) << " at=" << at);
      CHECK(nlohmann::json::parse(w.str()).get<std::string>() == s);
    }
  }
  JsonWriter w;
  w.String(std::string(40, ' ') + "\x7f\x80\xff");  // none of these needs an escape.
  CHECK(w.str() == "\"" + std::string(40, ' ') + "\x7f\x80\xff\"");
}

TEST_CASE("json writer: doubles print exactly as std::to_chars's shortest form") {
  // Most printed values are integer ns / 1000 and take a fast path; it must
  // agree with the general algorithm, byte for byte, at every magnitude and
  // at the fixed / scientific switch (1e6 prints as 1e+06).
  auto expected = [](double v) {
    char buf[64];
    return std::string(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
  };
  auto written = [](double v) {
    JsonWriter w;
    w.Double(v);
    return w.str();
  };
  std::vector<double> values = {
      0.001,   0.01, 0.1,   0.5, 1,       10,         100,        1000,   1e4,
      1e5,     1e6,  1.2e6, 1e7, 1.5e8,   123456.789, 999999.999, 1e9,    1e11,
      9.99e11, 1e12, 1e15,  0.3, 1.0 / 3, 2.675,      1e-4,       5e-324, 1.7976931348623157e308};
  for (uint64_t ns = 0; ns < 20'000; ns += 7) values.push_back(static_cast<double>(ns) / 1e3);
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 200'000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint64_t ns = x >> (x % 60);  // every magnitude.
    values.push_back(static_cast<double>(ns) / 1e3);
    values.push_back(static_cast<double>(ns % 1'000'000) * 1000.0);  // round numbers.
    values.push_back(-static_cast<double>(ns) / 1e3);
  }
  size_t mismatches = 0;
  for (const double v : values) {
    if (written(v) != expected(v)) {
      if (++mismatches < 5) FAIL_CHECK("v=" << expected(v) << " written=" << written(v));
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("json writer: NaN and infinities become null") {
  JsonWriter w;
  w.BeginArray();
  w.Double(std::numeric_limits<double>::quiet_NaN());
  w.Double(std::numeric_limits<double>::infinity());
  w.Fixed(-std::numeric_limits<double>::infinity(), 1);
  w.EndArray();
  CHECK(w.str() == "[null,null,null]");
}

TEST_CASE("csv: fields are quoted only when they must be") {
  std::string out;
  AppendCsvField(&out, "plain");
  out += ',';
  AppendCsvField(&out, "a,b");
  out += ',';
  AppendCsvField(&out, "say \"hi\"");
  out += ',';
  AppendCsvNumber(&out, 1.5);
  out += ',';
  AppendCsvNumber(&out, std::nan(""));
  CHECK(out == "plain,\"a,b\",\"say \"\"hi\"\"\",1.5,");
}

}  // namespace
}  // namespace liveprof::json_writer_test
