#include "import/json_splitter.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace liveprof::json_splitter_test {
namespace {

using nlohmann::json;

// What a splitter handed over.
struct Split {
  json events = json::array();
  std::vector<std::pair<std::string, json>> members;
  size_t batches = 0;
  bool padded = true;
  bool fed = true;
  bool finished = false;
  std::string error;
};

// Feeds `text` cut at the given points (ascending).
Split Run(std::string_view text, std::vector<size_t> cuts, size_t batch_bytes = 1 << 20,
          size_t max_event_bytes = size_t{64} << 20) {
  Split s;
  TraceJsonSplitter sp(
      [&](std::string_view batch, size_t count) {
        ++s.batches;
        for (size_t i = 0; i < TraceJsonSplitter::kPadding; ++i)
          s.padded = s.padded && batch.data()[batch.size() + i] == ' ';
        const json parsed = json::parse(batch);
        CHECK(parsed.size() == count);
        for (const json& e : parsed) s.events.push_back(e);
        return true;
      },
      [&](std::string_view key, std::string_view value) {
        s.members.emplace_back(std::string(key), json::parse(value));
        return true;
      },
      TraceJsonSplitter::Options{.batch_bytes = batch_bytes, .max_event_bytes = max_event_bytes});
  size_t at = 0;
  cuts.push_back(text.size());
  for (const size_t cut : cuts) {
    s.fed = s.fed && sp.Feed(text.substr(at, cut - at));
    at = cut;
  }
  s.finished = s.fed && sp.Finish();
  s.error = sp.error();
  return s;
}

// Strings that hold every character the scan must not be fooled by.
const std::string kTrace = R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "A100 {\"x\"]"}],
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::add {]}\\", "pid": 1, "tid": 2, "ts": 1623143089861234.567, "dur": 5.5,
     "args": {"Input Dims": [[1, 2], []], "note": "quote \" and , and ]", "path": "C:\\dir\\\"x\"\\\\", "e": "\\"}},
    {"ph": "i", "name": "[memory]", "ts": 10, "s": "t", "args": {"Bytes": -512}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}
  ],
  "baseTimeNanoseconds": 1700000000000000000, "distributedInfo": {"rank": 0, "world_size": 8}
})";

TEST_CASE("import: the splitter hands over whole events and the other members") {
  const Split s = Run(kTrace, {});
  REQUIRE(s.finished);
  CHECK(s.error.empty());
  CHECK(s.padded);
  const json whole = json::parse(kTrace);
  CHECK(s.events == whole["traceEvents"]);
  REQUIRE(s.members.size() == 4);
  CHECK(s.members[0].first == "schemaVersion");
  CHECK(s.members[0].second == 1);
  CHECK(s.members[1].second == whole["deviceProperties"]);
  CHECK(s.members[2].first == "baseTimeNanoseconds");
  CHECK(s.members[2].second == whole["baseTimeNanoseconds"]);
  CHECK(s.members[3].second == whole["distributedInfo"]);
}

TEST_CASE("import: the splitter gives the same wherever the chunks are cut") {
  const Split once = Run(kTrace, {});
  for (size_t cut = 1; cut < kTrace.size(); ++cut) {
    CAPTURE(cut);
    const Split s = Run(kTrace, {cut});
    REQUIRE(s.finished);
    CHECK(s.events == once.events);
    CHECK(s.members == once.members);
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < kTrace.size(); ++i) every.push_back(i);
  const Split bytewise = Run(kTrace, every);
  CHECK(bytewise.finished);
  CHECK(bytewise.events == once.events);
}

TEST_CASE("import: strings dense with escapes, quotes and brackets, cut anywhere, split as a JSON parser reads them") {
  // The scan looks at 16 bytes at a time and at single bytes near a chunk's
  // end: random strings of backslash runs, escaped quotes and brackets, and
  // random cuts, put both (and the escape carried over a cut) to the test.
  std::mt19937 rng(7);
  const char* const kPieces[] = {"\\\\", "\\\"", "{", "}", "[", "]", "|", ",", ":", "a", " ", "\\n", "\\u0041"};
  for (int round = 0; round < 200; ++round) {
    json events = json::array();
    std::string text = "{\"traceEvents\": [";
    for (int e = 0; e < 6; ++e) {
      std::string raw;
      const int pieces = static_cast<int>(rng() % 40);
      for (int k = 0; k < pieces; ++k) raw += kPieces[rng() % std::size(kPieces)];
      const std::string event = R"({"ph":"i","name":")" + raw + R"(","args":{"k":[")" + raw +
                                R"(", {"x": [1, {}]}]},"ts":)" + std::to_string(e) + "}";
      events.push_back(json::parse(event));
      text += (e ? ", " : "") + event;
    }
    text += "]}";
    std::vector<size_t> cuts;
    for (size_t at = rng() % 23 + 1; at < text.size(); at += rng() % 23 + 1) cuts.push_back(at);
    CAPTURE(text);
    const Split s = Run(text, cuts);
    REQUIRE(s.finished);
    CHECK(s.events == events);
  }
}

TEST_CASE("import: batches of about batch_bytes, each a JSON array of whole events") {
  std::string text = "[";
  for (int i = 0; i < 1000; ++i) {
    text += (i ? ",\n" : "") + std::string(R"({"ph":"X","name":"k)") + std::to_string(i) + R"(","ts":)" +
            std::to_string(i) + R"(,"dur":1})";
  }
  text += "]";
  const Split s = Run(text, {777, 5000}, 4096);
  REQUIRE(s.finished);
  CHECK(s.events.size() == 1000);
  CHECK(s.events[999]["name"] == "k999");
  CHECK(s.batches >= text.size() / 4096);
  CHECK(s.batches <= text.size() / 4096 + 2);
}

TEST_CASE("import: the JSON Array Format may leave out its closing bracket") {
  const Split s = Run(R"([{"ph":"B","name":"a","ts":1},{"ph":"E","ts":2},)", {});
  CHECK(s.finished);
  CHECK(s.events.size() == 2);
}

TEST_CASE("import: a cut file keeps the whole events and says where it ends") {
  const std::string cut = kTrace.substr(0, kTrace.find("\"M\""));
  const Split s = Run(cut, {100});
  CHECK(!s.finished);
  CHECK(s.events.size() == 2);
  CHECK(s.error ==
        "the text ends at byte " + std::to_string(cut.size()) + " inside trace event #3 (truncated? 2 events kept)");

  const Split no_bracket = Run(R"({"traceEvents":[{"ph":"i","ts":1}, )", {});
  CHECK(!no_bracket.finished);
  CHECK(no_bracket.events.size() == 1);
  CHECK(no_bracket.error.find("inside traceEvents") != std::string::npos);
}

TEST_CASE("import: an unclosed string stops at the event's size cap, not at the end of the file") {
  // 1 MiB cap; the second event's string never closes and the text goes on.
  std::string text = R"({"traceEvents": [{"ph":"i","ts":1}, {"ph":"i","name":"open)";
  const size_t second = text.find(R"({"ph":"i","name")");
  text += std::string(3u << 20, 'x');
  const Split s = Run(text, {1000, 1u << 20, 2u << 20}, 1 << 20, 1u << 20);
  CHECK(!s.fed);
  CHECK(s.events.size() == 1);  // the event before it is kept.
  CHECK(s.error == "trace event #2 beginning at byte " + std::to_string(second) +
                       " is over 1 MiB: an unclosed string or bracket?");
}

TEST_CASE("import: past 2 GiB, counts and byte positions stay exact (64-bit offsets)") {
  // 2.2 GB of trace events in 1 MiB chunks, then one bad byte: the error
  // names its byte and every event before it came through.
  std::string chunk;
  size_t per_chunk = 0;
  while (chunk.size() < (1u << 20) - 100) {
    chunk += R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":12.5,"dur":3},)";
    ++per_chunk;
  }
  constexpr size_t kChunks = 2100;
  uint64_t events = 0;
  TraceJsonSplitter sp([&](std::string_view, size_t count) { return events += count, true; },
                       [](std::string_view, std::string_view) { return true; });
  REQUIRE(sp.Feed(R"({"traceEvents":[)"));
  uint64_t offset = 16;
  for (size_t i = 0; i < kChunks; ++i) {
    REQUIRE(sp.Feed(chunk));
    offset += chunk.size();
  }
  CHECK(offset > (uint64_t{1} << 31));
  CHECK(!sp.Feed("}"));
  CHECK(sp.error() == "invalid JSON at byte " + std::to_string(offset) + ": '}' where a trace event should begin");
  CHECK(events == per_chunk * kChunks);
  CHECK(sp.bytes() == offset);
}

TEST_CASE("import: what is not a Chrome trace is refused with where") {
  Split s = Run("hello", {});
  CHECK(!s.fed);
  CHECK(s.error == "not a Chrome trace: expected '{' or '[' at byte 0, found 'h'");
  s = Run(R"({"traceEvents":[]} x)", {});
  CHECK(s.error == "invalid JSON at byte 19: text after the end of the trace ('x')");
  s = Run(R"({"other": 1})", {});
  CHECK(!s.finished);
  CHECK(s.error == "no \"traceEvents\" member: not a Chrome trace");
  s = Run(R"({"traceEvents" [])", {});
  CHECK(s.error == "invalid JSON at byte 15: expected ':' after \"traceEvents\", found '['");
  s = Run("", {});
  CHECK(s.error == "empty: no JSON text");
  // Found by the fuzzer: a '}' where an event should begin looped forever.
  s = Run(R"({"traceEvents":[{"ph":"i"},}]})", {});
  CHECK(!s.fed);
  CHECK(s.error == "invalid JSON at byte 27: '}' where a trace event should begin");
  s = Run("\xEF\xBB\xBF[]", {});  // a byte order mark is fine.
  CHECK(s.finished);
}

}  // namespace
}  // namespace liveprof::json_splitter_test
