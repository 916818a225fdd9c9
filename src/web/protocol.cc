#include "web/protocol.h"

#include <algorithm>
#include <array>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "base/json_writer.h"

namespace liveprof {

namespace {

using nlohmann::json;

TopicSet SubscribableTopics() {
  TopicSet set;
  for (size_t t = 0; t < kTopicCount; ++t) set.set(t, IsSubscribable(static_cast<Topic>(t)));
  return set;
}

// The subscribable topics' names, in Topic order.
std::vector<std::string_view> SubscribableTopicNames() {
  std::vector<std::string_view> names;
  for (size_t t = 0; t < kTopicCount; ++t) {
    if (IsSubscribable(static_cast<Topic>(t))) names.push_back(TopicName(static_cast<Topic>(t)));
  }
  return names;
}

// A quoted value inside an error message is cut at this many bytes.
constexpr size_t kMaxQuotedBytes = 64;
// An error message on the wire is cut at this many bytes.
constexpr size_t kMaxErrorMessageBytes = 1024;

// ---- UTF-8 ----

// The length of the valid UTF-8 sequence at s[i], or 0 when it is not one
// (overlong forms, surrogates and values above U+10FFFF are not).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte.
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

// `s` as valid UTF-8 (an invalid byte becomes U+FFFD), cut at a character
// boundary to fit in `max_bytes` (>= 3), "..." marking the cut.
std::string SanitizeUtf8(std::string_view s, size_t max_bytes) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  if (out.size() <= max_bytes) return out;
  size_t cut = max_bytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  out += "...";
  return out;
}

// 'value' for an error message: cut, valid UTF-8.
std::string Quote(std::string_view value) { return "'" + SanitizeUtf8(value, kMaxQuotedBytes) + "'"; }

// "a, b, c".
template <typename Range>
std::string JoinNames(const Range& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

const std::string& KnownTopics() {
  static const std::string known = JoinNames(SubscribableTopicNames());
  return known;
}

const std::string& KnownKinds() {
  static const std::string known = [] {
    std::vector<std::string_view> names;
    for (size_t k = 0; k < kEventKindCount; ++k) {
      if (IsStreamedKind(static_cast<EventKind>(k))) {
        names.push_back(EventKindName(static_cast<EventKind>(k)));
      }
    }
    return JoinNames(names);
  }();
  return known;
}

DecodeError Error(std::string code, std::string message) { return DecodeError{std::move(code), std::move(message)}; }

std::string TypeName(const json& j) {
  if (j.is_number()) return "number";
  return j.type_name();
}

// A JSON value for an error message: numbers as written, others by type.
std::string Describe(const json& j) {
  if (j.is_number()) return j.dump();
  if (j.is_string()) return "the string " + Quote(j.get_ref<const std::string&>());
  return TypeName(j);
}

// nlohmann's what() without its "[json.exception.x.n] " prefix and, for a
// parse error, without "parse error at line L, column C: " (we say the byte).
std::string ParseErrorDetail(const char* what) {
  std::string_view s = what;
  if (s.starts_with("[json.exception.")) {
    const size_t close = s.find("] ");
    if (close != std::string_view::npos) s.remove_prefix(close + 2);
  }
  if (s.starts_with("parse error")) {
    const size_t column = s.find("column ");
    const size_t colon = column == std::string_view::npos ? s.find(": ") : s.find(": ", column);
    if (colon != std::string_view::npos) s.remove_prefix(colon + 2);
  }
  return SanitizeUtf8(s, 256);
}

// Unknown keys of `object` (any key not in `known`) are an error naming the
// first one; `where` names the object.
std::optional<DecodeError> CheckKeys(const json& object, std::string_view where,
                                     std::span<const std::string_view> known) {
  for (const auto& item : object.items()) {
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      return Error("bad_message",
                   std::string(where) + ": unknown key " + Quote(item.key()) + " (known: " + JoinNames(known) + ")");
    }
  }
  return std::nullopt;
}

std::optional<DecodeError> ExpectArray(const json& j, const std::string& where, size_t max_entries) {
  if (!j.is_array()) return Error("bad_message", where + ": expected an array, got " + TypeName(j));
  if (j.size() > max_entries) {
    return Error("too_large", where + ": " + std::to_string(j.size()) + " entries, over the limit of " +
                                  std::to_string(max_entries));
  }
  return std::nullopt;
}

std::optional<DecodeError> DecodeTopics(const json& j, TopicSet* topics) {
  if (auto e = ExpectArray(j, "topics", kMaxTopicEntries)) return e;
  if (j.empty()) {
    return Error("bad_message", "topics: empty: name at least one topic (known: " + KnownTopics() + ")");
  }
  for (size_t i = 0; i < j.size(); ++i) {
    const json& t = j[i];
    const std::string where = "topics[" + std::to_string(i) + "]";
    if (!t.is_string()) {
      return Error("bad_message", where + ": expected a topic name (a string), got " + TypeName(t));
    }
    const std::string& name = t.get_ref<const std::string&>();
    const std::optional<Topic> topic = ParseTopic(name);
    if (!topic) {
      return Error("unknown_topic", where + ": unknown topic " + Quote(name) + " (known: " + KnownTopics() + ")");
    }
    topics->set(static_cast<size_t>(*topic));
  }
  return std::nullopt;
}

std::optional<DecodeError> DecodeKinds(const json& j, EventFilter* filter) {
  if (auto e = ExpectArray(j, "filters.kinds", kMaxFilterKinds)) return e;
  if (j.empty()) return Error("bad_message", "filters.kinds: empty: leave the key out for every kind");
  filter->kinds.reset();
  for (size_t i = 0; i < j.size(); ++i) {
    const json& k = j[i];
    const std::string where = "filters.kinds[" + std::to_string(i) + "]";
    if (!k.is_string()) {
      return Error("bad_message", where + ": expected a kind name (a string), got " + TypeName(k));
    }
    const std::string& name = k.get_ref<const std::string&>();
    const std::optional<EventKind> kind = ParseEventKindName(name);
    if (!kind) {
      return Error("unknown_kind", where + ": unknown kind " + Quote(name) + " (known: " + KnownKinds() + ")");
    }
    if (!IsStreamedKind(*kind)) {
      return Error("unknown_kind", where + ": kind " + Quote(name) +
                                       " is not streamed as events (names and tracks travel in each "
                                       "frame's names and tracks; known: " +
                                       KnownKinds() + ")");
    }
    filter->kinds.set(static_cast<size_t>(*kind));
  }
  return std::nullopt;
}

// An array of track ids (at most `max_entries`) at `where`, in its order.
std::optional<DecodeError> DecodeTrackIds(const json& j, const std::string& where, size_t max_entries,
                                          std::vector<TrackId>* tracks) {
  if (auto e = ExpectArray(j, where, max_entries)) return e;
  tracks->clear();
  tracks->reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const json& t = j[i];
    if (!t.is_number_unsigned() || t.get<uint64_t>() > std::numeric_limits<TrackId>::max()) {
      return Error("bad_message", where + "[" + std::to_string(i) +
                                      "]: expected a track id (an integer 0..4294967295), got " + Describe(t));
    }
    tracks->push_back(static_cast<TrackId>(t.get<uint64_t>()));
  }
  return std::nullopt;
}

std::optional<DecodeError> DecodeTracks(const json& j, EventFilter* filter) {
  if (auto e = DecodeTrackIds(j, "filters.tracks", kMaxFilterTracks, &filter->tracks)) return e;
  std::sort(filter->tracks.begin(), filter->tracks.end());
  filter->tracks.erase(std::unique(filter->tracks.begin(), filter->tracks.end()), filter->tracks.end());
  return std::nullopt;
}

std::optional<DecodeError> DecodeFilter(const json& j, EventFilter* filter) {
  if (!j.is_object()) return Error("bad_message", "filters: expected an object, got " + TypeName(j));
  static constexpr std::array<std::string_view, 4> kKeys = {"kinds", "tracks", "name_prefix", "max_events_per_second"};
  if (auto e = CheckKeys(j, "filters", kKeys)) return e;
  if (auto it = j.find("kinds"); it != j.end()) {
    if (auto e = DecodeKinds(*it, filter)) return e;
  }
  if (auto it = j.find("tracks"); it != j.end()) {
    if (auto e = DecodeTracks(*it, filter)) return e;
  }
  if (auto it = j.find("name_prefix"); it != j.end()) {
    if (!it->is_string()) {
      return Error("bad_message", "filters.name_prefix: expected a string, got " + TypeName(*it));
    }
    const std::string& prefix = it->get_ref<const std::string&>();
    if (prefix.size() > kMaxNamePrefixBytes) {
      return Error("too_large", "filters.name_prefix: " + std::to_string(prefix.size()) + " bytes, over the limit of " +
                                    std::to_string(kMaxNamePrefixBytes));
    }
    filter->name_prefix = prefix;
  }
  if (auto it = j.find("max_events_per_second"); it != j.end()) {
    const std::string range = "1.." + std::to_string(kMaxEventsPerSecondCap);
    if (!it->is_number_integer()) {
      return Error("bad_message",
                   "filters.max_events_per_second: expected an integer " + range + ", got " + Describe(*it));
    }
    const bool in_range =
        it->is_number_unsigned() && it->get<uint64_t>() >= 1 && it->get<uint64_t>() <= kMaxEventsPerSecondCap;
    if (!in_range) {
      return Error("bad_message", "filters.max_events_per_second: " + it->dump() + " is out of range " + range);
    }
    filter->max_events_per_second = static_cast<uint32_t>(it->get<uint64_t>());
  }
  return std::nullopt;
}

// The unsigned integer at `key` of `root`, within [lo, hi]; nullopt when the
// key is absent. `what` says what the value is, for the error.
std::variant<std::optional<uint64_t>, DecodeError> OptionalUnsigned(const json& root, const std::string& key,
                                                                    uint64_t lo, uint64_t hi, std::string_view what) {
  const auto it = root.find(key);
  if (it == root.end()) return std::optional<uint64_t>();
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (!it->is_number_integer()) {
    return Error("bad_message",
                 key + ": expected " + std::string(what) + " (an integer " + range + "), got " + Describe(*it));
  }
  if (!it->is_number_unsigned() || it->get<uint64_t>() < lo || it->get<uint64_t>() > hi) {
    return Error("bad_message", key + ": " + it->dump() + " is out of range " + range);
  }
  return std::optional<uint64_t>(it->get<uint64_t>());
}

// {"type":"trace","id":..,"t0":..,"t1":..,"width":..,"tracks":[..]}: every
// key but type and id optional, as /api/trace's parameters.
std::variant<ControlMessage, DecodeError> DecodeTrace(const json& root) {
  ControlMessage m;
  m.type = ControlMessage::Type::kTrace;
  TraceRequest& r = m.trace;
  // The id first: every later error carries it, so the client can tell
  // which of its requests failed.
  auto id = OptionalUnsigned(root, "id", 0, std::numeric_limits<uint32_t>::max(), "a request id");
  if (DecodeError* e = std::get_if<DecodeError>(&id)) return *e;
  if (!std::get<0>(id)) {
    return Error("bad_message", "id: missing (an integer 0..4294967295 that the reply carries)");
  }
  r.id = static_cast<uint32_t>(*std::get<0>(id));
  const auto fail = [&](DecodeError e) {
    e.id = r.id;
    return e;
  };
  static constexpr std::array<std::string_view, 6> kKeys = {"type", "id", "t0", "t1", "width", "tracks"};
  if (auto e = CheckKeys(root, "the message", kKeys)) return fail(*e);
  constexpr uint64_t kMaxNs = std::numeric_limits<uint64_t>::max();
  auto t0 = OptionalUnsigned(root, "t0", 0, kMaxNs, "a time in ns");
  if (DecodeError* e = std::get_if<DecodeError>(&t0)) return fail(*e);
  r.t0 = std::get<0>(t0);
  auto t1 = OptionalUnsigned(root, "t1", 0, kMaxNs, "a time in ns");
  if (DecodeError* e = std::get_if<DecodeError>(&t1)) return fail(*e);
  r.t1 = std::get<0>(t1);
  if (r.t0 && r.t1 && *r.t1 <= *r.t0) {
    return fail(
        Error("bad_message", "t1: " + std::to_string(*r.t1) + " is not after t0 (" + std::to_string(*r.t0) + ")"));
  }
  auto width = OptionalUnsigned(root, "width", 1, kMaxTraceWidthPx, "a width in pixels");
  if (DecodeError* e = std::get_if<DecodeError>(&width)) return fail(*e);
  r.width_px = static_cast<uint32_t>(std::get<0>(width).value_or(kDefaultTraceWidthPx));
  if (const auto tracks = root.find("tracks"); tracks != root.end()) {
    if (auto e = DecodeTrackIds(*tracks, "tracks", kMaxTraceTracks, &r.tracks)) return fail(*e);
  }
  return m;
}

std::variant<ControlMessage, DecodeError> DecodeParsed(const json& root) {
  if (!root.is_object()) {
    return Error("bad_message", "the message: expected a JSON object, got " + TypeName(root));
  }
  if (const auto type = root.find("type"); type != root.end() && *type == "trace") return DecodeTrace(root);
  static constexpr std::array<std::string_view, 3> kKeys = {"type", "topics", "filters"};
  if (auto e = CheckKeys(root, "the message", kKeys)) return *e;

  ControlMessage m;
  const auto type = root.find("type");
  if (type == root.end()) {
    return Error("bad_message", "type: missing (\"subscribe\", \"unsubscribe\" or \"trace\")");
  }
  if (!type->is_string()) return Error("bad_message", "type: expected a string, got " + TypeName(*type));
  const std::string& type_name = type->get_ref<const std::string&>();
  if (type_name == "subscribe") {
    m.type = ControlMessage::Type::kSubscribe;
  } else if (type_name == "unsubscribe") {
    m.type = ControlMessage::Type::kUnsubscribe;
  } else {
    return Error("bad_message",
                 "type: unknown message type " + Quote(type_name) + " (known: subscribe, unsubscribe, trace)");
  }

  const auto topics = root.find("topics");
  if (topics == root.end()) {
    return Error("bad_message", "topics: missing (an array of: " + KnownTopics() + ")");
  }
  if (auto e = DecodeTopics(*topics, &m.topics)) return *e;

  if (const auto filters = root.find("filters"); filters != root.end()) {
    if (m.type != ControlMessage::Type::kSubscribe) {
      return Error("bad_message", "filters: only a subscribe takes filters");
    }
    EventFilter filter;
    if (auto e = DecodeFilter(*filters, &filter)) return *e;
    m.filter = std::move(filter);
  }
  return m;
}

void WriteFilter(JsonWriter& w, const EventFilter& f) {
  w.BeginObject();
  w.Key("kinds");
  w.BeginArray();
  for (size_t k = 0; k < kEventKindCount; ++k) {
    const auto kind = static_cast<EventKind>(k);
    if (f.kinds.test(k) && IsStreamedKind(kind)) w.String(EventKindName(kind));
  }
  w.EndArray();
  w.Key("tracks");
  w.BeginArray();
  for (TrackId t : f.tracks) w.UInt(t);
  w.EndArray();
  w.KV("name_prefix", SanitizeUtf8(f.name_prefix, kMaxNamePrefixBytes + 3));
  w.KV("max_events_per_second", f.max_events_per_second);
  w.EndObject();
}

void WriteTopics(JsonWriter& w, const TopicSet& topics) {
  w.BeginArray();
  for (size_t t = 0; t < kTopicCount; ++t) {
    if (topics.test(t)) w.String(TopicName(static_cast<Topic>(t)));
  }
  w.EndArray();
}

void WriteHead(JsonWriter& w, std::string_view type) {
  w.BeginObject();
  w.KV("type", type);
  w.KV("v", kProtocolVersion);
}

}  // namespace

// ---- Topics and kinds ----

std::string_view TopicName(Topic topic) {
  if (topic == Topic::kEvents) return "events";
  const auto i = static_cast<size_t>(topic);
  return i < kViewCount ? kViews[i].name : std::string_view("unknown");
}

const std::string& ViewJson(const RenderedViews& v, Topic topic) {
  static const std::string kNone;
  return IsViewTopic(topic) ? v.json(ViewOf(topic)) : kNone;
}

std::optional<Topic> ParseTopic(std::string_view name) {
  for (size_t i = 0; i < kTopicCount; ++i) {
    const auto topic = static_cast<Topic>(i);
    if (IsSubscribable(topic) && TopicName(topic) == name) return topic;
  }
  return std::nullopt;
}

bool IsStreamedKind(EventKind kind) {
  switch (kind) {
    case EventKind::kInvalid:
    case EventKind::kNameDef:
    case EventKind::kTrackDef: return false;
    default: return static_cast<size_t>(kind) < kEventKindCount && EventKindName(kind) != "unknown";
  }
}

std::bitset<kEventKindCount> StreamedKinds() {
  static const std::bitset<kEventKindCount> kinds = [] {
    std::bitset<kEventKindCount> b;
    for (size_t k = 0; k < kEventKindCount; ++k) b.set(k, IsStreamedKind(static_cast<EventKind>(k)));
    return b;
  }();
  return kinds;
}

// ---- NameDirectory ----

void NameDirectory::Define(NameId id, std::string_view name) { names_[id].assign(name); }

void NameDirectory::DefineTrack(TrackId id, NameId name, TrackType type, uint64_t os_tid) {
  tracks_[id] = TrackEntry{.name = name, .type = type, .os_tid = os_tid};
}

void NameDirectory::Consume(std::span<const Event> definitions) {
  for (const Event& e : definitions) {
    if (e.kind == EventKind::kNameDef) {
      const auto& def = e.payload.name_def;
      Define(e.name, def.data == nullptr ? std::string_view() : std::string_view(def.data, def.size));
    } else if (e.kind == EventKind::kTrackDef) {
      DefineTrack(e.track, e.name, e.payload.track_def.type, e.payload.track_def.os_tid);
    }
  }
}

std::string_view NameDirectory::Name(NameId id) const {
  const auto it = names_.find(id);
  return it == names_.end() ? std::string_view() : std::string_view(it->second);
}

const NameDirectory::TrackEntry* NameDirectory::Track(TrackId id) const {
  const auto it = tracks_.find(id);
  return it == tracks_.end() ? nullptr : &it->second;
}

// ---- EventFilter ----

bool EventFilter::Matches(const Event& e, const NameDirectory& names) const {
  const auto kind = static_cast<size_t>(e.kind);
  if (kind >= kEventKindCount || !kinds.test(kind)) return false;
  if (!tracks.empty() && !std::binary_search(tracks.begin(), tracks.end(), e.track)) return false;
  return name_prefix.empty() || names.Name(e.name).starts_with(name_prefix);
}

// ---- Control messages ----

std::variant<ControlMessage, DecodeError> DecodeControlMessage(std::string_view text) {
  if (text.size() > kMaxControlMessageBytes) {
    return Error("too_large", "the message: " + std::to_string(text.size()) + " bytes, over the limit of " +
                                  std::to_string(kMaxControlMessageBytes));
  }
  try {
    const json root = json::parse(text.begin(), text.end());
    return DecodeParsed(root);
  } catch (const json::parse_error& e) {
    return Error("bad_json", "bad JSON at byte " + std::to_string(e.byte) + ": " + ParseErrorDetail(e.what()));
  } catch (const json::exception& e) {
    // A number out of double's range, and whatever else the parser refuses.
    return Error("bad_json", "bad JSON: " + ParseErrorDetail(e.what()));
  } catch (const std::exception& e) {
    return Error("bad_message", std::string("the message could not be decoded: ") + SanitizeUtf8(e.what(), 256));
  }
}

// ---- Server -> client ----

void WriteViewTable(JsonWriter& w) {
  w.BeginObject();
  for (const ViewInfo& v : kViews) {
    w.Key(v.name);
    w.BeginObject();
    w.KV("delivery", v.feed() ? "feed" : "request");
    w.KV("csv", !v.csv.empty());
    w.KV("last", v.steps_window);
    w.KV("last_s", v.time_window);
    w.KV("include_idle", v.idle);
    w.EndObject();
  }
  w.EndObject();
}

std::string EncodeHello(std::string_view server_version, uint32_t max_events_per_second, uint32_t frame_hz) {
  JsonWriter w;
  WriteHead(w, "hello");
  w.KV("protocol", "liveprof");
  w.KV("server", SanitizeUtf8(server_version, 256));
  w.Key("topics");
  WriteTopics(w, SubscribableTopics());
  w.Key("views");
  WriteViewTable(w);
  w.Key("events");
  w.BeginObject();
  w.KV("encoding", "flatbuffers");
  w.KV("schema", "liveprof.fbs");
  // The schema's EventKind names by value: what Event.kind and
  // TileSlice.kind mean (liveprof.fbs declares them; EventKindName).
  w.Key("kinds");
  w.BeginObject();
  for (size_t k = 0; k < kEventKindCount; ++k) {
    const std::string_view name = EventKindName(static_cast<EventKind>(k));
    if (name != "unknown") w.KV(std::to_string(k), name);
  }
  w.EndObject();
  w.KV("file_identifier", kFrameFileIdentifier);
  w.KV("frame_version", kFrameVersion);
  w.KV("max_events_per_second", max_events_per_second);
  w.KV("max_events_per_second_cap", kMaxEventsPerSecondCap);
  w.KV("frame_hz", frame_hz);
  w.EndObject();
  w.Key("trace");  // `trace` requests, answered with TraceTile frames.
  w.BeginObject();
  w.KV("encoding", "flatbuffers");
  w.KV("body", "TraceTile");
  w.KV("max_width_px", kMaxTraceWidthPx);
  w.EndObject();
  w.Key("limits");
  w.BeginObject();
  w.KV("max_control_message_bytes", static_cast<uint64_t>(kMaxControlMessageBytes));
  w.EndObject();
  w.EndObject();
  return w.Take();
}

std::string EncodeSubscribed(const TopicSet& current, const EventFilter* filter) {
  JsonWriter w;
  WriteHead(w, "subscribed");
  w.Key("topics");
  WriteTopics(w, current);
  if (filter != nullptr) {
    w.Key("filters");
    WriteFilter(w, *filter);
  }
  w.EndObject();
  return w.Take();
}

std::string EncodeError(const DecodeError& error) {
  JsonWriter w;
  WriteHead(w, "error");
  w.KV("code", SanitizeUtf8(error.code, 64));
  w.KV("message", SanitizeUtf8(error.message, kMaxErrorMessageBytes));
  if (error.id) w.KV("id", *error.id);
  w.EndObject();
  return w.Take();
}

}  // namespace liveprof
