// libFuzzer target: the WebSocket control-message decoder (web/protocol.h).
//
// For any input, DecodeControlMessage must return (never throw, never crash
// under ASan+UBSan), and:
//   - a refusal has a known code, and its error reply (EncodeError) is JSON
//     that nlohmann parses back (so valid UTF-8) with the same code and id;
//   - a decoded subscribe or unsubscribe re-encodes (EncodeSubscribed,
//     turned back into a request) to text that decodes to the same type,
//     topics and filter; a decoded trace request, written again, decodes to
//     the same request.
// Any disagreement aborts, which libFuzzer reports as a crash.
//
// Built and run by fuzz/build_and_run.sh (clang 14, not part of CMake).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "web/protocol.h"

namespace {

using liveprof::ControlMessage;
using liveprof::DecodeError;
using nlohmann::json;

[[noreturn]] void Fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "control_message_fuzz: %s: %.*s\n", what, static_cast<int>(detail.size()), detail.data());
  std::abort();
}

bool KnownCode(const std::string& code) {
  return code == "bad_json" || code == "bad_message" || code == "unknown_topic" || code == "unknown_kind" ||
         code == "too_large" || code == "no_trace_store";
}

void CheckRefusal(const DecodeError& e) {
  if (!KnownCode(e.code)) Fail("unknown error code", e.code);
  if (e.message.empty()) Fail("empty error message", e.code);
  const std::string reply = liveprof::EncodeError(e);
  const json j = json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) Fail("error reply is not JSON", reply);
  if (j.value("type", "") != "error" || j.value("code", "") != e.code) Fail("error reply fields", reply);
  if (j.contains("id") != e.id.has_value() || (e.id && j["id"] != *e.id)) Fail("error reply id", reply);
}

// A trace request written out again (every key) decodes to the same request.
void CheckTraceRoundTrip(const liveprof::TraceRequest& t) {
  json j = {{"type", "trace"}, {"id", t.id}, {"width", t.width_px}, {"tracks", t.tracks}};
  if (t.t0) j["t0"] = *t.t0;
  if (t.t1) j["t1"] = *t.t1;
  const std::string again = j.dump();
  const auto r = liveprof::DecodeControlMessage(again);
  if (const auto* e = std::get_if<DecodeError>(&r)) Fail("re-encoded trace request refused", e->message);
  const liveprof::TraceRequest& t2 = std::get<ControlMessage>(r).trace;
  if (t2.id != t.id || t2.t0 != t.t0 || t2.t1 != t.t1 || t2.width_px != t.width_px || t2.tracks != t.tracks) {
    Fail("trace request disagrees", again);
  }
}

void CheckRoundTrip(const ControlMessage& m) {
  if (m.type == ControlMessage::Type::kTrace) return CheckTraceRoundTrip(m.trace);
  if (m.topics.none()) Fail("decoded a message without topics", "");
  const std::string subscribed = liveprof::EncodeSubscribed(m.topics, m.filter ? &*m.filter : nullptr);
  json j = json::parse(subscribed, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) Fail("subscribed is not JSON", subscribed);
  if (j.value("type", "") != "subscribed") Fail("subscribed type", subscribed);
  // The same request again: a subscribe or unsubscribe, without "v".
  j["type"] = m.type == ControlMessage::Type::kSubscribe ? "subscribe" : "unsubscribe";
  j.erase("v");
  const std::string again = j.dump();
  const auto r = liveprof::DecodeControlMessage(again);
  if (const auto* e = std::get_if<DecodeError>(&r)) Fail("re-encoded message refused", e->message);
  const ControlMessage& m2 = std::get<ControlMessage>(r);
  if (m2.type != m.type) Fail("type disagrees", again);
  if (m2.topics != m.topics) Fail("topics disagree", again);
  if (m2.filter != m.filter) Fail("filter disagrees", again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto r = liveprof::DecodeControlMessage(text);
  if (const auto* e = std::get_if<DecodeError>(&r)) {
    CheckRefusal(*e);
  } else {
    CheckRoundTrip(std::get<ControlMessage>(r));
  }
  return 0;
}
