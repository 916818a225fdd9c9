// TraceJsonSplitter: cuts a Chrome trace JSON text, arriving in chunks, into
// batches of whole trace events, never holding the file. Both forms of the
// format (Trace Event Format, "JSON Object Format" and "JSON Array Format"):
//
//   {"traceEvents": [ {...}, {...} ], "deviceProperties": [...], ...}
//   [ {...}, {...} ]          (the closing bracket may be missing)
//
// Each batch is a JSON array text "[e,e,...]" of about Options::batch_bytes,
// followed by kPadding readable bytes (what simdjson's parsers need), handed to
// a callback as soon as it is full; the other members of the top-level object
// (deviceProperties, baseTimeNanoseconds, ... wherever they appear, before or
// after traceEvents) go to a second callback as raw JSON text. The scan only
// tracks strings, escapes and nesting; the events themselves are parsed by the
// caller. Memory: one batch and one member (at most max_member_bytes).
#ifndef LIVEPROF_IMPORT_JSON_SPLITTER_H_
#define LIVEPROF_IMPORT_JSON_SPLITTER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace liveprof {

class TraceJsonSplitter {
 public:
  static constexpr size_t kPadding = 64;
  struct Options {
    size_t batch_bytes = size_t{1} << 20;
    size_t max_member_bytes = size_t{16} << 20;
    // One trace event is a few hundred bytes; one this long is an unclosed
    // string or bracket, which would otherwise hold the rest of the file.
    size_t max_event_bytes = size_t{64} << 20;
  };
  // json: "[e,...]"; `count` elements; json.data()[json.size() .. +kPadding) is
  // readable. Return false to stop the import.
  using EventsFn = std::function<bool(std::string_view json, size_t count)>;
  // A top-level member other than traceEvents: its key (as written, escapes
  // and all) and its value's JSON text.
  using MemberFn = std::function<bool(std::string_view key, std::string_view value)>;

  TraceJsonSplitter(EventsFn on_events, MemberFn on_member, Options options);
  TraceJsonSplitter(EventsFn on_events, MemberFn on_member)
      : TraceJsonSplitter(std::move(on_events), std::move(on_member), Options{}) {}

  // The next bytes of the text. false on a syntax error the scan can see
  // (error() says what, at which byte) or when a callback said stop.
  bool Feed(std::string_view chunk);
  // The end of the text: hands over the last batch. false if the text ended
  // inside the top-level object or an event (a truncated file).
  bool Finish();

  const std::string& error() const { return error_; }
  uint64_t bytes() const { return offset_; }   // bytes scanned.
  uint64_t events() const { return events_; }  // elements handed over.
  bool saw_trace_events() const { return saw_events_; }

 private:
  enum class State : uint8_t {
    kBegin,
    kKey,
    kKeyString,
    kColon,
    kValue,
    kMember,
    kEvents,
    kEvent,
    kDone,
    kFailed,
  };
  bool Fail(std::string what);
  bool FlushBatch();
  // A value (a member's or an event) begins with `first`: scan it in `scanning`.
  void BeginValue(char first, State scanning);
  // Scans a value from data[i]; returns the index just past what it consumed.
  // Sets *ended when the value ended (at data[return - 1]).
  size_t ScanValue(std::string_view data, size_t i, bool* ended);
  bool EndMember();

  EventsFn on_events_;
  MemberFn on_member_;
  Options options_;
  State state_ = State::kBegin;
  bool bare_array_ = false;
  bool saw_events_ = false;
  // The value being scanned: nesting depth, inside a string, after a backslash,
  // a scalar (number, true, false, null) without brackets.
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  bool scalar_ = false;
  std::string key_;
  std::string member_;
  std::string batch_;
  size_t batch_count_ = 0;
  size_t batch_mark_ = 0;     // batch_'s size before the event being scanned.
  uint64_t event_begin_ = 0;  // the byte where the event being scanned begins.
  uint64_t offset_ = 0;
  uint64_t events_ = 0;
  std::string error_;
};

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_JSON_SPLITTER_H_
