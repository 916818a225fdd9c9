#include "import/json_splitter.h"

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

// The bytes that matter to the scan: quotes, backslashes and brackets. OR-ing
// 0x20 maps '[' ']' '\\' onto '{' '}' '|', so three compares cover five of
// them ('|' itself is a false hit that the scan ignores).
#if defined(__SSE2__)
uint32_t StructuralMask16(const char* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i folded = _mm_or_si128(b, _mm_set1_epi8(0x20));
  const __m128i hits = _mm_or_si128(
      _mm_or_si128(_mm_cmpeq_epi8(b, _mm_set1_epi8('"')), _mm_cmpeq_epi8(folded, _mm_set1_epi8('{'))),
      _mm_or_si128(_mm_cmpeq_epi8(folded, _mm_set1_epi8('|')), _mm_cmpeq_epi8(folded, _mm_set1_epi8('}'))));
  return static_cast<uint32_t>(_mm_movemask_epi8(hits));
}
#endif

bool MaybeStructural(char c) {
  const char f = static_cast<char>(c | 0x20);
  return c == '"' || f == '{' || f == '|' || f == '}';
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
  if (scalar_) {  // a number or literal: it ends at a delimiter.
    for (; i < n; ++i) {
      const char c = data[i];
      if (c == ',' || c == '}' || c == ']' || IsSpace(c)) {
        *ended = true;
        return i;  // the delimiter belongs to the container.
      }
    }
    return n;
  }
  // Only quotes, backslashes and brackets change the state; the scan visits
  // those bytes alone (16 at a time where SSE2 is there). `skip` is the byte
  // after a backslash in a string: the escaped byte, whatever it is.
  int depth = depth_;
  bool in_string = in_string_;
  size_t skip = escape_ ? i : SIZE_MAX;
  escape_ = false;
  // One byte that may matter, at k; true when the value ends with it.
  auto visit = [&](size_t k) {
    if (k == skip) return false;
    const char c = data[k];
    if (in_string) {
      if (c == '\\') {
        skip = k + 1;
      } else if (c == '"') {
        in_string = false;
        return depth == 0;  // a string value: it ends here.
      }
      return false;
    }
    switch (c) {
      case '"': in_string = true; return false;
      case '{':
      case '[': ++depth; return false;
      case '}':
      case ']': return --depth <= 0;
      default: return false;  // '\\' or '|' outside a string: simdjson will say.
    }
  };
  auto finish = [&](size_t end, bool done) {
    depth_ = depth;
    in_string_ = in_string;
    escape_ = !done && skip == n;  // the next chunk's first byte is escaped.
    *ended = done;
    return end;
  };
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    for (uint32_t m = StructuralMask16(data.data() + i); m != 0; m &= m - 1) {
      const size_t k = i + static_cast<size_t>(__builtin_ctz(m));
      if (visit(k)) return finish(k + 1, true);
    }
  }
#endif
  for (; i < n; ++i) {
    if (MaybeStructural(data[i]) && visit(i)) return finish(i + 1, true);
  }
  return finish(n, false);
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
      case State::kFailed: return false;
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
          if (!FlushBatch()) return false;  // the whole events before it are kept.
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
    case State::kFailed: return false;
    case State::kDone: break;
    case State::kBegin: return Fail("empty: no JSON text");
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
      return Fail(where + " inside the top-level object (truncated? " + std::to_string(events_) + " events kept)");
  }
  if (!saw_events_) return Fail("no \"traceEvents\" member: not a Chrome trace");
  return true;
}

}  // namespace liveprof
