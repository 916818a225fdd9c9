// JsonWriter and the CSV helpers: what they write parses back to what went in.
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "aggregators/json_writer.h"
#include "doctest/doctest.h"

namespace liveprof {
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
  CHECK(w.str() ==
        R"({"s":"plain","i":-42,"u":18446744073709551615,"d":0.1,"b":true,"n":null,"a":[1,{},[],2.67]})");
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
}  // namespace liveprof
