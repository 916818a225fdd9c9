// Socket ingest's frames (liveprof.fbs: IngestHello, IngestBatch):
// what another process sends to `liveprof serve --ingest ...`, checked and
// turned into events of this server's stream.
//
//   FrameSplitter   cuts a connection's byte stream into frames, each a u32
//                   little-endian size then that many bytes (a Frame).
//   IngestDecoder   checks each frame (the FlatBuffers verifier, the file
//                   identifier, the protocol, the order: one hello, then
//                   batches) and turns a batch's events into the stream's
//                   ids: the sender's name and track ids are its own,
//                   defined once per connection; its tracks get rows of
//                   their own, labelled with the sender (rank, host, pid).
//
// Both are pure (no sockets, no threads), so the unit tests and the fuzzer
// drive them with bytes. A broken frame (verifier, framing, protocol, order,
// definitions that contradict, caps) is refused whole and says what and where
// ("frame 3 (bytes 120..4216): a second hello"); the connection is then
// closed by its owner, the others go on. A malformed event (a name or track
// never defined, a kind that is not an event's, ts + dur past 2^64) is
// refused alone and counted by reason (IngestRefusal): the rest of its batch
// is taken. Times stay on the sender's clock plus clock_offset_ns(), which
// the owner sets from its pings.
#ifndef LIVEPROF_INGEST_INGEST_FRAMES_H_
#define LIVEPROF_INGEST_INGEST_FRAMES_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/self_cost.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace liveprof {
namespace wire {
struct IngestCost;  // stream/liveprof_generated.h
}  // namespace wire

inline constexpr uint32_t kIngestProtocol = 1;
inline constexpr uint32_t kMaxIngestFrameBytes = 16u << 20;
// Per connection (a server-wide budget across connections is still to come).
inline constexpr uint32_t kMaxIngestNames = 1u << 20;
inline constexpr uint32_t kMaxIngestTracks = 4096;
inline constexpr uint32_t kMaxIngestLabelBytes = 256;    // a hello's host, program.
inline constexpr uint32_t kMaxIngestCostThreads = 1024;  // an IngestCost's threads.

class FrameSplitter {
 public:
  FrameSplitter();
  // Appends bytes as they were received.
  void Feed(std::string_view bytes);
  // Or in two steps, to receive straight into the buffer: room for `n` more
  // bytes (valid until the next call of a non-const method), then how many
  // were written there.
  char* Reserve(size_t n);
  void Commit(size_t n);
  // The next whole frame (valid until the next Feed, Reserve or Next), or
  // nullopt: more bytes are needed, or the stream is broken (error() says
  // how: a size of 0 or over kMaxIngestFrameBytes; nothing after it is read).
  // A frame is 8-byte aligned when the frames before it were whole multiples
  // of 8 bytes (as FlatBuffers makes them), so a decoder reads it in place.
  std::optional<std::string_view> Next();
  const std::string& error() const { return error_; }
  // A whole frame is held (Next would return it).
  bool has_frame() const;
  uint64_t frames() const { return frames_; }
  // Where the last frame Next returned began and ended, in the stream.
  uint64_t frame_begin() const { return frame_begin_; }
  uint64_t frame_end() const { return frame_end_; }
  // Bytes held: of a frame not whole yet (a sender gone now lost them:
  // nothing of that frame was taken), and of whole frames not taken yet
  // (Next not called: the server waits for room in the source's ring).
  size_t pending_bytes() const { return size_ - pos_; }
  size_t capacity() const { return capacity_; }
  // Gives the buffer back (its bytes are dropped): a closed connection's,
  // while no read writes into it.
  void Release();

 private:
  // The bytes held, in 8-byte words: a frame's body, 4 bytes after its
  // size, is aligned when its size prefix sits 4 bytes past a word
  // (kLead: where the first prefix goes, and where a compaction moves the
  // next one).
  static constexpr size_t kLead = 4;
  std::unique_ptr<uint64_t[]> words_;
  size_t capacity_ = 0;      // bytes.
  size_t size_ = kLead;      // bytes held (the first kLead are padding).
  size_t pos_ = kLead;       // the next frame's size prefix.
  uint64_t stream_pos_ = 0;  // the stream offset of pos_.
  uint64_t frames_ = 0;
  uint64_t frame_begin_ = 0, frame_end_ = 0;
  std::string error_;
};

// Events of one source refused for one reason (a short stable key:
// "undefined_track", "undefined_name", "undefined_kernel_name", "bad_kind",
// "time_overflow"), with the first one's message as an example ("frame 25
// (bytes 8520..56912): event 579: track 0 was never defined").
struct IngestRefusal {
  std::string reason;
  uint64_t events = 0;
  std::string example;
};

struct IngestSource {
  uint32_t protocol = 0;
  std::string host;
  uint64_t pid = 0;
  int32_t rank = -1;
  std::string program;
  uint64_t clock_ns = 0;  // the sender's clock in its hello.
  uint64_t session = 0;   // random per process start (with host and pid: who reconnects).
  std::string label;      // how its rows are named: "rank 3" or "host:pid".
};

// A sender's ids to the stream's: a vector for the dense ids a sender
// normally uses (below 2^20), a hash map for any others.
class IdMap {
 public:
  const uint32_t* find(uint32_t id) const {
    if (id < dense_.size()) return dense_[id] != kAbsent ? &dense_[id] : nullptr;
    const auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  bool contains(uint32_t id) const { return find(id) != nullptr; }
  uint32_t at(uint32_t id) const { return *find(id); }  // (known to be there)
  void set(uint32_t id, uint32_t value) {
    if (id < kDenseIds) {
      if (id >= dense_.size()) dense_.resize(std::max<size_t>(size_t{id} + 1, dense_.size() * 2), kAbsent);
      size_ += dense_[id] == kAbsent ? 1 : 0;
      dense_[id] = value;
    } else {
      size_ += sparse_.insert_or_assign(id, value).second ? 1 : 0;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint32_t kDenseIds = 1u << 20;
  static constexpr uint32_t kAbsent = UINT32_MAX;
  std::vector<uint32_t> dense_;
  std::unordered_map<uint32_t, uint32_t> sparse_;
  size_t size_ = 0;
};

class IngestDecoder {
 public:
  explicit IngestDecoder(Stream& stream) : stream_(stream) {}

  // One frame (FrameSplitter::Next). Appends a batch's events to `out`, in
  // the stream's name and track ids, times plus clock_offset_ns() (held in
  // [0, 2^64 - dur]), kFlagLate cleared (the server's to set). A malformed
  // event is left out and counted (refusals(), batch_refused()); the batch
  // is taken. False, with error(), for a frame that is refused: checked
  // whole first, it leaves nothing behind (no event, name or track). A name
  // id is one string for the connection (defined again as another:
  // refused); a track restated keeps its first definition.
  // `where` names the frame in the error ("frame 3 (bytes 120..4216)").
  bool Decode(std::string_view frame, const std::string& where, std::vector<Event>* out);

  // A pong the last Decode took (IngestPong: no events), for the owner's
  // clock estimate; cleared by the next Decode.
  struct Pong {
    uint32_t id = 0;
    uint64_t server_ns = 0, sender_ns = 0;
  };
  const std::optional<Pong>& pong() const { return pong_; }
  // What the sender records now (its latest IngestState), if it said.
  struct State {
    uint32_t control_id = 0;
    uint8_t host_level = 0;
    bool python_scopes = false, gpu = false, gpu_available = false;
    uint64_t until_ns = 0;  // the sender's clock.
    uint8_t gpu_level = 0;  // 1 default, 2 full; 0: no GPU producer, or an older sender.
  };
  const std::optional<State>& state() const { return state_; }
  // The worker this connection's tracks belong to (TrackInfo::process) and,
  // if not null, the worker's rows by (sender track id, name): a sender
  // that reconnects gets its rows back instead of new ones. Before the
  // first batch; `rows` must outlive the decoder.
  void set_worker(uint32_t process, std::unordered_map<std::string, TrackId>* rows) {
    process_ = process;
    rows_ = rows;
  }
  // Batches up to `seq` were taken on an earlier connection of this sender:
  // sent again after a reconnect, their events are skipped (counted in
  // duplicate_batches), their definitions taken.
  void set_resume_seq(uint64_t seq) {
    resume_seq_ = seq;
    last_seq_ = std::max(last_seq_, seq);
  }
  uint64_t duplicate_batches() const { return duplicate_batches_; }

  bool has_hello() const { return has_hello_; }
  const IngestSource& source() const { return source_; }
  const std::string& error() const { return error_; }

  // The offset for the sender's times from `from_sender_ns` on; earlier
  // times keep the offset they had (a time always maps the same way, as the
  // clock map's readings do: a step marker and its first child, sent in
  // different batches, still begin together). Without `from`: for all times,
  // replacing what was set.
  void set_clock_offset_ns(int64_t offset) { offsets_.assign(1, {0, offset}); }
  void set_clock_offset_ns(int64_t offset, uint64_t from_sender_ns) {
    while (!offsets_.empty() && offsets_.back().from >= from_sender_ns && offsets_.size() > 1) offsets_.pop_back();
    if (offsets_.empty() || offsets_.back().from < from_sender_ns) {
      offsets_.push_back({from_sender_ns, offset});
    } else {
      offsets_.back().offset = offset;
    }
    if (offsets_.size() > 1024) offsets_.erase(offsets_.begin());  // the oldest times take the next.
  }
  int64_t clock_offset_ns() const { return offsets_.back().offset; }  // the newest.
  // The offset a sender time `ts` takes.
  int64_t OffsetAt(uint64_t ts) const {
    if (ts >= offsets_.back().from) return offsets_.back().offset;
    const auto it =
        std::upper_bound(offsets_.begin(), offsets_.end(), ts, [](uint64_t t, const Offset& o) { return t < o.from; });
    return it == offsets_.begin() ? offsets_.front().offset : (it - 1)->offset;
  }

  // The last Decode's IngestBatch.progress_ns (the sender's clock: every
  // event of the sender ending at or before it has come); 0 for another
  // frame, or a sender that could not say.
  uint64_t batch_progress_ns() const { return batch_progress_ns_; }
  // The last Decode's IngestBatch.stopping: the sender stops after it (every
  // event it recorded so far has come).
  bool batch_stopping() const { return batch_stopping_; }
  // The last Decode's IngestBatch.cost (liveprof's own cost in the sender's
  // process, its clock), or nullopt: another frame, a batch without one (an
  // older sender, or none due), or one that is not well formed (over
  // kMaxIngestCostThreads threads, a name over kMaxIngestLabelBytes or with
  // control characters: the cost is left out, the batch taken).
  const std::optional<SelfCostSample>& batch_cost() const { return batch_cost_; }
  // A sender time on the server's clock (held in [0, 2^64)), by the least
  // offset any time from it on maps with now: a bound for where the events
  // after it land (a later offset, from a better round trip, may be smaller).
  uint64_t EarliestServerNs(uint64_t sender_ns) const {
    int64_t least = OffsetAt(sender_ns);
    for (auto it = offsets_.rbegin(); it != offsets_.rend() && it->from > sender_ns; ++it) {
      least = std::min(least, it->offset);
    }
    const __int128 t = static_cast<__int128>(sender_ns) + least;
    return t < 0 ? 0 : t > static_cast<__int128>(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(t);
  }

  // Events refused so far, by reason in the order each reason first came.
  const std::vector<IngestRefusal>& refusals() const { return refusals_; }
  uint64_t refused_events() const { return refused_events_; }
  // The last Decode's batch: how many of its events were refused, and the
  // first one's reason and message without the frame ("event 579: track 0
  // was never defined": what the sender is told, IngestAck). 0 for another
  // frame, a batch taken before (duplicate) or one refused whole.
  struct BatchRefused {
    uint64_t events = 0;
    std::string reason, message;
  };
  const BatchRefused& batch_refused() const { return batch_refused_; }

  uint64_t last_seq() const { return last_seq_; }  // the newest batch's seq (0: none yet).
  uint64_t batches() const { return batches_; }
  uint64_t events() const { return events_; }
  uint64_t lost_batches() const { return lost_batches_; }      // gaps in IngestBatch.seq.
  uint64_t sender_dropped() const { return sender_dropped_; }  // IngestBatch.dropped, summed.

 private:
  bool Fail(const std::string& where, const std::string& what);
  // Counts event `i` of the batch being decoded, refused for `reason`.
  void Refuse(const std::string& where, std::string_view reason, uint32_t i, const Event& e);
  void TakeCost(const wire::IngestCost* c);  // into batch_cost_, if well formed.

  Stream& stream_;
  bool has_hello_ = false;
  IngestSource source_;
  std::optional<Pong> pong_;
  std::optional<State> state_;
  uint32_t process_ = 0;
  std::unordered_map<std::string, TrackId>* rows_ = nullptr;
  uint64_t resume_seq_ = 0;
  uint64_t duplicate_batches_ = 0;
  IdMap names_;   // the sender's id -> the stream's.
  IdMap tracks_;  // the sender's id -> the stream's.
  struct Offset {
    uint64_t from;  // the sender's time from which it applies.
    int64_t offset;
  };
  std::vector<Offset> offsets_{{0, 0}};  // by `from`, never empty.
  uint64_t last_seq_ = 0;
  uint64_t batch_progress_ns_ = 0;
  bool batch_stopping_ = false;
  std::optional<SelfCostSample> batch_cost_;
  uint64_t batches_ = 0, events_ = 0, lost_batches_ = 0, sender_dropped_ = 0;
  std::vector<IngestRefusal> refusals_;
  uint64_t refused_events_ = 0;
  BatchRefused batch_refused_;
  std::string error_;
  std::vector<uint64_t> aligned_;  // a frame copied to 8-byte alignment.
};

}  // namespace liveprof

#endif  // LIVEPROF_INGEST_INGEST_FRAMES_H_
