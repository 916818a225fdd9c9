// Protocol: the WebSocket feed's messages, encoded and decoded without any
// I/O, so that every rule is tested without a socket (docs/protocol.md).
//
//   client -> server  JSON text: subscribe / unsubscribe, with filters for the
//                     events topic, and trace (a trace-viewer tile)
//                     (DecodeControlMessage).
//   server -> client  JSON text: hello, subscribed, error (Encode*), and the
//                     view topics' snapshots, which the pipeline renders;
//                     binary: the events topic's FlatBuffers frames
//                     (EventFeed; schema src/stream/liveprof.fbs) and the
//                     tiles (trace_tile.h).
//
// Decoding never throws and never trusts its input: every limit below is
// checked, and a refusal is a DecodeError whose message names what is wrong
// and where ("topics[2]: unknown topic 'foo' (known: ...)").
//
// Threads: the free functions are pure and may be called from any thread.
// NameDirectory and EventFeed are not thread-safe: the web thread owns them.
// (protocol.cc holds the control messages; event_feed.cc the binary feed.)
#ifndef LIVEPROF_WEB_PROTOCOL_H_
#define LIVEPROF_WEB_PROTOCOL_H_

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "aggregators/analyses.h"
#include "stream/event.h"

namespace liveprof {

// "v" of every JSON message, the same as the view models'.
inline constexpr int kProtocolVersion = kViewProtocolVersion;
// Frame.version of the binary frames (src/stream/liveprof.fbs).
inline constexpr uint32_t kFrameVersion = 1;
// The file identifier every binary frame carries (bytes 4..7).
inline constexpr std::string_view kFrameFileIdentifier = "LPF1";

// Limits on what a client sends.
inline constexpr size_t kMaxControlMessageBytes = 64 * 1024;
inline constexpr size_t kMaxTopicEntries = 16;
inline constexpr size_t kMaxFilterKinds = 64;
inline constexpr size_t kMaxFilterTracks = 1024;
inline constexpr size_t kMaxNamePrefixBytes = 256;
// The events topic's rate cap, per connection.
inline constexpr uint32_t kDefaultMaxEventsPerSecond = 100'000;
inline constexpr uint32_t kMaxEventsPerSecondCap = 1'000'000;
// A `trace` request: its width in pixels, 1..kMaxTraceWidthPx (the trace
// store's TraceStore::kMaxWidthPx), and its tracks.
inline constexpr uint32_t kDefaultTraceWidthPx = 1000;
inline constexpr uint32_t kMaxTraceWidthPx = 1 << 16;
inline constexpr size_t kMaxTraceTracks = 1024;

// ---- Topics ----

// What a connection can subscribe to: the view models of the table
// (aggregators/views.h: JSON, newest snapshot only) then the raw events
// (binary frames). A view's topic has its `View` value; values index TopicSet.
enum class Topic : uint8_t {
#define LIVEPROF_TOPIC_ENUMERATOR(name, id, ...) id,
  LIVEPROF_VIEWS(LIVEPROF_TOPIC_ENUMERATOR)
#undef LIVEPROF_TOPIC_ENUMERATOR
      kEvents,
};
inline constexpr size_t kTopicCount = kViewCount + 1;
using TopicSet = std::bitset<kTopicCount>;

constexpr Topic TopicOf(View view) { return static_cast<Topic>(view); }
constexpr View ViewOf(Topic topic) { return static_cast<View>(topic); }
// A view model published on each tick (a view of the table on the feed);
// false for events and for the views rendered on request only.
constexpr bool IsViewTopic(Topic topic) {
  return static_cast<size_t>(topic) < kViewCount && GetViewInfo(ViewOf(topic)).feed();
}
// A topic a client may subscribe to: the feed's views and events.
constexpr bool IsSubscribable(Topic topic) { return topic == Topic::kEvents || IsViewTopic(topic); }

// The topic's wire name: its view's name, or "events". Any thread.
std::string_view TopicName(Topic topic);
// The subscribable topic named `name` (exact, case-sensitive), or nullopt.
// Any thread.
std::optional<Topic> ParseTopic(std::string_view name);
// The JSON of view topic `topic` in a rendered set ("" for events).
const std::string& ViewJson(const RenderedViews& views, Topic topic);

// ---- Event kinds on the feed ----

// True for the kinds the events topic carries: every named kind except
// kInvalid, kNameDef and kTrackDef (names and tracks travel as the frame's
// NameDef / TrackDef tables, never as events). Any thread.
bool IsStreamedKind(EventKind kind);
// The set of streamed kinds, indexed by EventKind value. Any thread.
std::bitset<kEventKindCount> StreamedKinds();

// ---- Names and tracks ----

// The strings of the name ids and the tracks seen so far on the stream, for
// the events topic's name filter and its NameDef / TrackDef tables. Fed from
// each chunk's kNameDef / kTrackDef events. Web thread only.
class NameDirectory {
 public:
  struct TrackEntry {
    NameId name = 0;  // its display name.
    TrackType type = TrackType::kHostThread;
    uint64_t os_tid = 0;  // OS thread id (host thread) or stream id (GPU stream).
  };

  // Defines (or redefines) name `id`.
  void Define(NameId id, std::string_view name);
  // Defines (or redefines) track `id`.
  void DefineTrack(TrackId id, NameId name, TrackType type, uint64_t os_tid);
  // Takes the kNameDef and kTrackDef events of `definitions` (their
  // payload.name_def strings are copied); other kinds are ignored.
  void Consume(std::span<const Event> definitions);

  // The string of `id`; "" when unknown. Valid until the next Define of id.
  std::string_view Name(NameId id) const;
  bool HasName(NameId id) const { return names_.count(id) != 0; }
  // The track `id`, or null when unknown.
  const TrackEntry* Track(TrackId id) const;
  size_t name_count() const { return names_.size(); }
  size_t track_count() const { return tracks_.size(); }

 private:
  std::unordered_map<NameId, std::string> names_;
  std::unordered_map<TrackId, TrackEntry> tracks_;
};

// ---- Filters of the events topic ----

struct EventFilter {
  // Kinds to send, indexed by EventKind value; StreamedKinds() = every kind.
  std::bitset<kEventKindCount> kinds = StreamedKinds();
  std::vector<TrackId> tracks;  // sorted, unique; empty = every track.
  std::string name_prefix;      // the event's name starts with it; "" = any.
  uint32_t max_events_per_second = kDefaultMaxEventsPerSecond;

  // True when `e` passes the kind, track and name tests (not the rate cap).
  // Any thread, with a directory no other thread writes.
  bool Matches(const Event& e, const NameDirectory& names) const;
  bool operator==(const EventFilter&) const = default;
};

// ---- Control messages (client -> server) ----

// {"type":"trace","id":7,"t0":..,"t1":..,"width":..,"tracks":[..]}: one
// viewport of the trace store, answered with a binary TraceTile frame that
// carries `id` (the same query as /api/trace?t0=&t1=&width=&tracks=).
struct TraceRequest {
  uint32_t id = 0;
  // Default: the store's first event, its last (when asked; at least t0 + 1).
  std::optional<uint64_t> t0 = std::nullopt, t1 = std::nullopt;
  uint32_t width_px = kDefaultTraceWidthPx;
  std::vector<TrackId> tracks = {};  // as sent; empty = every track.
};

// {"type":"subscribe","topics":[...],"filters":{...}},
// {"type":"unsubscribe","topics":[...]} or a trace request.
struct ControlMessage {
  enum class Type { kSubscribe, kUnsubscribe, kTrace };
  Type type = Type::kSubscribe;
  TopicSet topics;  // never empty for a subscribe or an unsubscribe.
  // A subscribe's filters, when given: they replace the connection's
  // events filter as a whole (a key left out takes its default).
  std::optional<EventFilter> filter;
  TraceRequest trace;  // kTrace only.
};

// Why a control message was refused. `code` is one of "bad_json",
// "bad_message" (wrong shape or type, a value out of range, an unknown key),
// "unknown_topic", "unknown_kind", "too_large" (over a limit above), and for
// a trace request also "no_trace_store"; `message` says what and where, in
// valid UTF-8. `id`: the trace request's, when it had a valid one (so that
// the client knows which request failed).
struct DecodeError {
  std::string code;
  std::string message;
  std::optional<uint32_t> id = std::nullopt;
};

// Decodes one text message. Never throws; any input. Any thread.
std::variant<ControlMessage, DecodeError> DecodeControlMessage(std::string_view text);

// ---- Server -> client JSON ----

// The table of views (aggregators/views.h) as a JSON object, every view
// (each served at /api/<name>) by name: {"delivery": "feed" | "request",
// "csv", "last", "last_s", "include_idle"} (its row: which query options
// apply). In the hello and in GET /api; the dashboard reads its window flags
// and which views to poll from it. Any thread.
void WriteViewTable(JsonWriter& w);

// The first message of every connection: protocol name and version, the
// topics, the table of views, and how the events topic is encoded. Any
// thread.
//   {"type":"hello","v":1,"protocol":"liveprof","server":"0.1.0",
//    "topics":["overview",...,"events"],
//    "views":{"overview":{"delivery":"feed","csv":false,"last":true,...},...},
//    "events":{"encoding":"flatbuffers","schema":"liveprof.fbs",
//              "file_identifier":"LPF1","frame_version":1,
//              "max_events_per_second":100000,
//              "max_events_per_second_cap":1000000,"frame_hz":10},
//    "trace":{"encoding":"flatbuffers","body":"TraceTile","max_width_px":65536},
//    "limits":{"max_control_message_bytes":65536}}
std::string EncodeHello(std::string_view server_version, uint32_t max_events_per_second, uint32_t frame_hz);
// The answer to a subscribe or unsubscribe: the connection's topics now and,
// when `filter` is not null, its events filter (in the form a subscribe
// takes: kinds, tracks, name_prefix, max_events_per_second). Any thread.
std::string EncodeSubscribed(const TopicSet& current, const EventFilter* filter);
// {"type":"error","v":1,"code":"...","message":"..."(,"id":N)}; the text is
// made valid UTF-8 (a bad byte becomes U+FFFD) and cut at 1 KiB. Any thread.
std::string EncodeError(const DecodeError& error);

// ---- The events topic's binary frames ----

// One connection's raw-event feed: the filter, a token-bucket rate cap, the
// names and tracks this connection has been sent, and its drop counts.
// Web thread only.
class EventFeed {
 public:
  // The filter's tracks are sorted and made unique, its rate clamped to
  // 1..kMaxEventsPerSecondCap (a decoded filter already is so).
  explicit EventFeed(EventFilter filter);

  // A new filter (normalized as above). The rate cap's budget keeps what it
  // held, up to one second of the new rate; names already sent are not sent
  // again.
  void SetFilter(EventFilter filter);
  const EventFilter& filter() const { return filter_; }

  // One binary frame (a finished, verifiable liveprof.wire.Frame with an
  // EventFrame body and the file identifier) of the `events` that pass the
  // filter, within the rate cap: the budget refills by max_events_per_second
  // per second of `now_ns` (host clock ns), holds at most one second's
  // worth, and starts full. A passing event over the budget is not sent and
  // counts as dropped. The frame defines every name and track its events
  // use that this connection has not been sent yet (an event's name, its
  // track and the track's name; a kernel's op and launch details too).
  // "" when there is nothing to say: no event passed and nothing was
  // dropped since the last frame.
  std::string Encode(std::span<const Event> events, const NameDirectory& names, uint64_t chunk_seq,
                     uint64_t watermark_ns, uint64_t now_ns);

  // Counts `n` events this connection did not get (the pipeline left them
  // out of its chunk); the next frame reports them.
  void AddDropped(uint64_t n);
  // Counts as dropped the events of `events` that pass the filter (the
  // server could not queue their frame); the next frame reports them.
  void DropMatching(std::span<const Event> events, const NameDirectory& names);
  // Events not sent (rate cap and AddDropped) since the feed began.
  uint64_t dropped_total() const { return dropped_total_; }
  // Events sent since the feed began.
  uint64_t events_sent() const { return events_sent_; }

 private:
  void Refill(uint64_t now_ns);

  EventFilter filter_;
  // The rate cap's budget, in event-nanoseconds: one event costs 1e9.
  uint64_t budget_ = 0;
  uint64_t last_refill_ns_ = 0;
  bool clock_started_ = false;
  uint64_t dropped_since_frame_ = 0;
  uint64_t dropped_total_ = 0;
  uint64_t events_sent_ = 0;
  std::unordered_set<NameId> sent_names_;
  std::unordered_set<TrackId> sent_tracks_;
};

}  // namespace liveprof

#endif  // LIVEPROF_WEB_PROTOCOL_H_
