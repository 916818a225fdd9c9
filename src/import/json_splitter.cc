#include "import/json_splitter.h"

#include <cstring>

namespace liveprof {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// A UTF-8 byte order mark's bytes, tolerated before the text.
bool IsBomByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == 0xEF || u == 0xBB || u == 0xBF;
}

std::string Shown(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  static const char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 15];
}

}  // namespace

TraceJsonSplitter::TraceJsonSplitter(EventsFn on_events, MemberFn on_member, Options options)
    : on_events_(std::move(on_events)), on_member_(std::move(on_member)), options_(options) {}

bool TraceJsonSplitter::Fail(std::string what) {
  if (state_ != State::kFailed) error_ = std::move(what);
  state_ = State::kFailed;
  return false;
}

void TraceJsonSplitter::BeginValue(char first, State scanning) {
  depth_ = 0;
  in_string_ = escape_ = false;
  scalar_ = first != '{' && first != '[' && first != '"';
  state_ = scanning;
}

size_t TraceJsonSplitter::ScanValue(std::string_view data, size_t i, bool* ended) {
  *ended = false;
  const size_t n = data.size();
  while (i < n) {
    if (in_string_) {
      // Most of a trace is string bytes: jump from quote to quote (memchr),
      // and look back at the backslashes before one to see if it is escaped.
      const size_t j = StringEnd(data, i);
      if (j == n) return n;
      in_string_ = false;
      i = j + 1;
      if (depth_ == 0) {
        *ended = true;
        return i;
      }
      continue;
    }
    const char c = data[i];
    if (scalar_) {
      if (c == ',' || c == '}' || c == ']' || IsSpace(c)) {
        *ended = true;
        return i;  // the delimiter belongs to the container.
      }
      ++i;
      continue;
    }
    ++i;
    switch (c) {
      case '"': in_string_ = true; break;
      case '{':
      case '[': ++depth_; break;
      case '}':
      case ']':
        if (--depth_ <= 0) {
          *ended = true;
          return i;
        }
        break;
      default: break;
    }
  }
  return i;
}

size_t TraceJsonSplitter::StringEnd(std::string_view data, size_t i) {
  const size_t n = data.size();
  bool carry = escape_;  // data[i] is escaped by a backslash of the previous chunk.
  escape_ = false;
  for (size_t from = i;;) {
    const void* q = from < n ? std::memchr(data.data() + from, '"', n - from) : nullptr;
    const size_t end = q ? static_cast<size_t>(static_cast<const char*>(q) - data.data()) : n;
    // The run of backslashes just before `end` (within this string's bytes).
    size_t run = 0;
    while (end - run > from && data[end - run - 1] == '\\') ++run;
    const bool reaches = end - run == from;
    const bool escaped = ((run + (reaches && carry ? 1 : 0)) & 1) != 0;
    if (!q) {
      escape_ = escaped;  // the next chunk's first byte is escaped.
      return n;
    }
    if (!escaped) return end;
    from = end + 1;  // an escaped quote: the string goes on.
    carry = false;
  }
}

bool TraceJsonSplitter::FlushBatch() {
  if (batch_count_ == 0) return true;
  batch_ += ']';
  const size_t size = batch_.size();
  batch_.append(kPadding, ' ');
  const size_t count = batch_count_;
  batch_count_ = 0;
  const bool go_on = on_events_(std::string_view(batch_.data(), size), count);
  batch_.clear();
  if (!go_on) return Fail("stopped by the importer");
  return true;
}

bool TraceJsonSplitter::EndMember() {
  if (!on_member_(key_, member_)) return Fail("stopped by the importer");
  member_.clear();
  return true;
}

bool TraceJsonSplitter::Feed(std::string_view data) {
  size_t i = 0;
  auto at = [&](size_t k) { return "at byte " + std::to_string(offset_ + k); };
  while (i < data.size()) {
    const char c = data[i];
    switch (state_) {
      case State::kFailed:
        return false;
      case State::kBegin:
        if (IsSpace(c) || (offset_ + i < 3 && IsBomByte(c))) {
          ++i;
        } else if (c == '{') {
          state_ = State::kKey;
          ++i;
        } else if (c == '[') {
          bare_array_ = saw_events_ = true;
          state_ = State::kEvents;
          ++i;
        } else {
          return Fail("not a Chrome trace: expected '{' or '[' " + at(i) + ", found " + Shown(c));
        }
        break;
      case State::kKey:
        if (IsSpace(c) || c == ',') {
          ++i;
        } else if (c == '}') {
          state_ = State::kDone;
          ++i;
        } else if (c == '"') {
          key_.clear();
          escape_ = false;
          state_ = State::kKeyString;
          ++i;
        } else {
          return Fail("invalid JSON " + at(i) + ": expected a member name, found " + Shown(c));
        }
        break;
      case State::kKeyString:
        ++i;
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          state_ = State::kColon;
          break;
        }
        if (key_.size() < 256) key_ += c;
        break;
      case State::kColon:
        if (IsSpace(c)) {
          ++i;
        } else if (c == ':') {
          state_ = State::kValue;
          ++i;
        } else {
          return Fail("invalid JSON " + at(i) + ": expected ':' after \"" + key_ + "\", found " + Shown(c));
        }
        break;
      case State::kValue:
        if (IsSpace(c)) {
          ++i;
        } else if (key_ == "traceEvents" && c == '[') {
          saw_events_ = true;
          state_ = State::kEvents;
          ++i;
        } else if (c == ',' || c == '}' || c == ']') {
          return Fail("invalid JSON " + at(i) + ": the value of \"" + key_ + "\" is missing");
        } else {
          member_.clear();
          BeginValue(c, State::kMember);
        }
        break;
      case State::kMember: {
        bool ended = false;
        const size_t j = ScanValue(data, i, &ended);
        if (member_.size() + (j - i) > options_.max_member_bytes) {
          return Fail("the member \"" + key_ + "\" is over " + std::to_string(options_.max_member_bytes >> 20) +
                      " MiB (" + at(j) + ")");
        }
        member_.append(data.substr(i, j - i));
        i = j;
        if (ended) {
          if (!EndMember()) return false;
          state_ = State::kKey;
        }
        break;
      }
      case State::kEvents:
        if (IsSpace(c) || c == ',') {
          ++i;
        } else if (c == ']') {
          if (!FlushBatch()) return false;
          state_ = bare_array_ ? State::kDone : State::kKey;
          ++i;
        } else if (c == '}' || c == ':') {
          return Fail("invalid JSON " + at(i) + ": " + Shown(c) + " where a trace event should begin");
        } else {
          if (batch_count_ == 0) {
            batch_.assign(1, '[');
          } else {
            batch_ += ',';
          }
          batch_mark_ = batch_.size() - 1;
          event_begin_ = offset_ + i;
          BeginValue(c, State::kEvent);
        }
        break;
      case State::kEvent: {
        bool ended = false;
        const size_t j = ScanValue(data, i, &ended);
        if (batch_.size() - batch_mark_ + (j - i) > options_.max_event_bytes) {
          batch_.resize(batch_mark_);  // the events before it are kept.
          if (!FlushBatch()) return false;
          return Fail("trace event #" + std::to_string(events_ + 1) + " beginning at byte " +
                      std::to_string(event_begin_) + " is over " + std::to_string(options_.max_event_bytes >> 20) +
                      " MiB: an unclosed string or bracket?");
        }
        batch_.append(data.substr(i, j - i));
        i = j;
        if (ended) {
          ++batch_count_;
          ++events_;
          state_ = State::kEvents;
          if (batch_.size() >= options_.batch_bytes && !FlushBatch()) return false;
        }
        break;
      }
      case State::kDone:
        if (!IsSpace(c)) {
          return Fail("invalid JSON " + at(i) + ": text after the end of the trace (" + Shown(c) + ")");
        }
        ++i;
        break;
    }
  }
  offset_ += data.size();
  return state_ != State::kFailed;
}

bool TraceJsonSplitter::Finish() {
  const std::string where = "the text ends at byte " + std::to_string(offset_);
  switch (state_) {
    case State::kFailed:
      return false;
    case State::kDone:
      break;
    case State::kBegin:
      return Fail("empty: no JSON text");
    case State::kEvents:
      if (!FlushBatch()) return false;
      if (bare_array_) break;  // the JSON Array Format may leave out its ']'.
      return Fail(where + " inside traceEvents (truncated? " + std::to_string(events_) + " events kept)");
    case State::kEvent:
      batch_.resize(batch_mark_);  // the cut event is not kept.
      if (!FlushBatch()) return false;
      return Fail(where + " inside trace event #" + std::to_string(events_ + 1) + " (truncated? " +
                  std::to_string(events_) + " events kept)");
    default:
      return Fail(where + " inside the top-level object (truncated? " + std::to_string(events_) +
                  " events kept)");
  }
  if (!saw_events_) return Fail("no \"traceEvents\" member: not a Chrome trace");
  return true;
}

}  // namespace liveprof
