#include "ingest/ingest_frames.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "ingest/ingest_wire.h"
#include "stream/liveprof_generated.h"
#include "stream/wire_event.h"

namespace liveprof {

FrameSplitter::FrameSplitter() : words_(new uint64_t[8]), capacity_(64) {}

char* FrameSplitter::Reserve(size_t n) {
  char* bytes = reinterpret_cast<char*>(words_.get());
  const size_t held = size_ - pos_;
  if (pos_ > kLead && (pos_ - kLead) * 2 >= size_) {
    // Mostly taken: what is left moves to the front (kLead: its next size
    // prefix 4 bytes into a word).
    std::memmove(bytes + kLead, bytes + pos_, held);
    pos_ = kLead;
    size_ = kLead + held;
  }
  // A big frame's room is not kept for a connection of small ones.
  constexpr size_t kSmall = size_t{256} << 10;
  const bool shrink = capacity_ > (size_t{1} << 20) && size_ + n <= kSmall;
  if (size_ + n > capacity_ || shrink) {
    const size_t cap = shrink ? kSmall : std::max(capacity_ * 2, size_ + n);
    auto words = std::make_unique_for_overwrite<uint64_t[]>((cap + 7) / 8);
    std::memcpy(words.get(), bytes, size_);
    words_ = std::move(words);
    capacity_ = (cap + 7) / 8 * 8;
  }
  return reinterpret_cast<char*>(words_.get()) + size_;
}

void FrameSplitter::Commit(size_t n) { size_ += n; }

void FrameSplitter::Release() {
  words_.reset(new uint64_t[8]);
  capacity_ = 64;
  size_ = pos_ = kLead;
}

void FrameSplitter::Feed(std::string_view bytes) {
  if (!error_.empty()) return;  // broken: nothing more is read.
  std::memcpy(Reserve(bytes.size()), bytes.data(), bytes.size());
  Commit(bytes.size());
}

bool FrameSplitter::has_frame() const {
  if (!error_.empty() || size_ - pos_ < 4) return false;
  uint32_t size;
  std::memcpy(&size, reinterpret_cast<const char*>(words_.get()) + pos_, 4);
  return size - 1 < kMaxIngestFrameBytes && size_ - pos_ - 4 >= size;  // (a bad size: Next says so)
}

std::optional<std::string_view> FrameSplitter::Next() {
  if (!error_.empty() || size_ - pos_ < 4) return std::nullopt;
  const char* bytes = reinterpret_cast<const char*>(words_.get());
  uint32_t size;
  std::memcpy(&size, bytes + pos_, 4);  // little-endian machines only (as the schema's readers).
  const uint64_t at = stream_pos_;
  if (size == 0 || size > kMaxIngestFrameBytes) {
    error_ = "frame " + std::to_string(frames_ + 1) + " (byte " + std::to_string(at) + "): a size of " +
             std::to_string(size) + " bytes (1.." + std::to_string(kMaxIngestFrameBytes) + ")";
    return std::nullopt;
  }
  if (size_ - pos_ - 4 < size) return std::nullopt;  // not whole yet.
  const std::string_view frame(bytes + pos_ + 4, size);
  frame_begin_ = at;
  frame_end_ = at + 4 + size;
  pos_ += 4 + size;
  stream_pos_ += 4 + size;
  ++frames_;
  return frame;
}

namespace {

bool KnownEventKind(uint8_t kind) {
  static const std::array<bool, 256> known = [] {
    std::array<bool, 256> k{};
    for (unsigned i = 0; i < kEventKindCount; ++i) k[i] = EventKindName(static_cast<EventKind>(i)) != "unknown";
    return k;
  }();
  return known[kind];
}

// A hello's host or program: shown in tables and logs, so short and free of
// control bytes (UTF-8 above 0x7f passes as it is).
bool PlainLabel(const flatbuffers::String* s) {
  if (s == nullptr) return true;
  if (s->size() > kMaxIngestLabelBytes) return false;
  return std::none_of(s->begin(), s->end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// The reasons an event alone is refused (IngestRefusal::reason).
constexpr std::string_view kBadKind = "bad_kind";
constexpr std::string_view kTimeOverflow = "time_overflow";
constexpr std::string_view kUndefinedName = "undefined_name";
constexpr std::string_view kUndefinedKernelName = "undefined_kernel_name";
constexpr std::string_view kUndefinedTrack = "undefined_track";

// An allocation whose corr is a name (event.h, kFlagAllocAnnotation).
bool AnnotatedAlloc(const Event& e) { return e.kind == EventKind::kAlloc && (e.flags & kFlagAllocAnnotation) != 0; }

// What was wrong with event `i` of a batch, refused for `reason`.
std::string RefusalMessage(std::string_view reason, uint32_t i, const Event& e) {
  std::string what = "event " + std::to_string(i) + ": ";
  if (reason == kBadKind) {
    return what + "kind " + std::to_string(static_cast<uint8_t>(e.kind)) +
           " (names and tracks travel as NameDef / TrackDef)";
  }
  if (reason == kTimeOverflow) return what + "ts + dur past 2^64 ns";
  if (reason == kUndefinedName && AnnotatedAlloc(e) && e.name != 0) {
    return what + "name id " + std::to_string(e.name) + " or the allocation's annotation, name id " +
           std::to_string(e.corr) + ", was never defined";
  }
  if (reason == kUndefinedName) return what + "name id " + std::to_string(e.name) + " was never defined";
  if (reason == kUndefinedKernelName) return what + "a kernel's details or op name id was never defined";
  return what + "track " + std::to_string(e.track) + " was never defined";
}

}  // namespace

bool IngestDecoder::Fail(const std::string& where, const std::string& what) {
  error_ = where + ": " + what;
  return false;
}

void IngestDecoder::TakeCost(const wire::IngestCost* c) {
  if (c == nullptr || c->at_ns() == 0) return;
  SelfCostSample s;
  s.at_ns = c->at_ns();
  s.rss_bytes = c->rss_bytes();
  s.hook_ns = c->hook_ns();  // (0 from an older sender)
  s.hook_calls = c->hook_calls();
  s.steps = c->steps();
  s.cupti_overhead_ns = c->cupti_overhead_ns();
  if (c->threads() != nullptr) {
    if (c->threads()->size() > kMaxIngestCostThreads) return;
    s.threads.reserve(c->threads()->size());
    for (const wire::IngestThreadCpu* t : *c->threads()) {
      if (!PlainLabel(t->name())) return;
      s.threads.push_back({t->tid(), t->name() ? t->name()->str() : std::string(), t->cpu_ns()});
    }
  }
  batch_cost_ = std::move(s);
}

void IngestDecoder::Refuse(const std::string& where, std::string_view reason, uint32_t i, const Event& e) {
  ++refused_events_;
  // Messages are made for the first of a batch and of a reason only: a
  // batch of 65,536 bad events costs no more than counting them.
  if (batch_refused_.events++ == 0) {
    batch_refused_.reason = reason;
    batch_refused_.message = RefusalMessage(reason, i, e);
  }
  auto it =
      std::find_if(refusals_.begin(), refusals_.end(), [&](const IngestRefusal& r) { return r.reason == reason; });
  if (it == refusals_.end()) {
    refusals_.push_back({std::string(reason), 0, where + ": " + RefusalMessage(reason, i, e)});
    it = refusals_.end() - 1;
  }
  ++it->events;
}

bool IngestDecoder::Decode(std::string_view frame, const std::string& where, std::vector<Event>* out) {
  // FlatBuffers reads its structs in place: 8-byte aligned (a frame after a
  // 4-byte size prefix is not, mostly). Copied when it is not.
  if (reinterpret_cast<uintptr_t>(frame.data()) % 8 != 0) {
    aligned_.resize((frame.size() + 7) / 8);
    std::memcpy(aligned_.data(), frame.data(), frame.size());
    frame = std::string_view(reinterpret_cast<const char*>(aligned_.data()), frame.size());
  }
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(frame.data()), frame.size());
  if (!wire::VerifyFrameBuffer(verifier)) {
    return Fail(where, "not a liveprof frame (the FlatBuffers verifier refused it, or no \"LPF1\")");
  }
  const wire::Frame* f = wire::GetFrame(frame.data());
  pong_.reset();
  batch_progress_ns_ = 0;
  batch_stopping_ = false;
  batch_cost_.reset();
  batch_refused_ = BatchRefused{};
  if (f->body() == nullptr) return Fail(where, "a frame without a body");
  if (f->version() != kIngestFrameVersion) {
    return Fail(where, "frame version " + std::to_string(f->version()) + "; this server reads version " +
                           std::to_string(kIngestFrameVersion));
  }
  if (f->body_type() == wire::Body::IngestPong) {
    if (!has_hello_) return Fail(where, "a pong before the hello");
    const wire::IngestPong& p = *f->body_as_IngestPong();
    pong_ = Pong{p.id(), p.server_ns(), p.sender_ns()};
    return true;
  }
  if (f->body_type() == wire::Body::IngestState) {
    if (!has_hello_) return Fail(where, "a state before the hello");
    const wire::IngestState& st = *f->body_as_IngestState();
    state_ = State{st.control_id(),    st.host_level(), st.python_scopes(), st.gpu(),
                   st.gpu_available(), st.until_ns(),   st.gpu_level()};
    return true;
  }
  if (f->body_type() == wire::Body::IngestHello) {
    if (has_hello_) return Fail(where, "a second hello");
    const wire::IngestHello& h = *f->body_as_IngestHello();
    if (h.protocol() != kIngestProtocol) {
      return Fail(where, "ingest protocol " + std::to_string(h.protocol()) + "; this server speaks " +
                             std::to_string(kIngestProtocol));
    }
    if (!PlainLabel(h.host()) || !PlainLabel(h.program()) || !PlainLabel(h.helper())) {
      return Fail(where, "a hello's host, program or helper over " + std::to_string(kMaxIngestLabelBytes) +
                             " bytes or with control characters");
    }
    source_.session = h.session();
    source_.protocol = h.protocol();
    source_.host = h.host() ? h.host()->str() : "";
    source_.pid = h.pid();
    source_.rank = h.rank();
    source_.program = h.program() ? h.program()->str() : "";
    source_.clock_ns = h.clock_ns();
    // A helper (a DataLoader worker) is named after the process it serves:
    // "rank 0 · loader 1", "host:1234 · loader 1" (the same rows for each
    // epoch's new workers).
    const uint64_t pid =
        h.helper() != nullptr && h.helper()->size() > 0 && h.helper_of() != 0 ? h.helper_of() : h.pid();
    source_.label = h.rank() >= 0          ? "rank " + std::to_string(h.rank())
                    : source_.host.empty() ? "pid " + std::to_string(pid)
                                           : source_.host + ":" + std::to_string(pid);
    if (h.helper() != nullptr && h.helper()->size() > 0) {
      source_.label += std::string(kHelperLabelSeparator) + h.helper()->str();
    }
    has_hello_ = true;
    return true;
  }
  if (f->body_type() != wire::Body::IngestBatch) {
    return Fail(where, "a frame of body type " + std::to_string(static_cast<int>(f->body_type())) +
                           " (an ingest connection sends IngestHello, then IngestBatch, IngestPong and IngestState)");
  }
  if (!has_hello_) return Fail(where, "a batch before the hello");
  const wire::IngestBatch& b = *f->body_as_IngestBatch();
  // seq 0: definitions only (a sender restating its names on a new
  // connection). A seq at or below resume_seq_: a batch this server took on
  // an earlier connection of the same sender, sent again: its definitions
  // are taken, its events were already.
  const bool definitions_only = b.seq() == 0;
  const bool duplicate = !definitions_only && b.seq() <= resume_seq_;
  if (definitions_only && b.events() != nullptr && b.events()->size() != 0) {
    return Fail(where, "a batch of seq 0 (definitions only) with events");
  }
  if (!definitions_only && !duplicate && b.seq() <= last_seq_) {
    return Fail(where, "batch seq " + std::to_string(b.seq()) + " after " + std::to_string(last_seq_));
  }
  // Checked whole first; only then does the stream learn its names and
  // tracks: a refused frame leaves nothing behind.
  std::unordered_map<uint32_t, std::string_view> new_names;  // the sender's ids first defined here.
  if (b.names()) {
    for (const wire::NameDef* n : *b.names()) {
      if (!n->name()) return Fail(where, "name id " + std::to_string(n->id()) + " without its string");
      const std::string_view text(n->name()->data(), n->name()->size());
      const uint32_t* known = names_.find(n->id());
      const auto here = new_names.find(n->id());
      if ((known != nullptr && stream_.names().Get(*known) != text) ||
          (here != new_names.end() && here->second != text)) {
        return Fail(where, "name id " + std::to_string(n->id()) + " defined again as another string");
      }
      if (known == nullptr) new_names.emplace(n->id(), text);
    }
  }
  if (names_.size() + new_names.size() > kMaxIngestNames) {
    return Fail(where, "more than " + std::to_string(kMaxIngestNames) + " names on one connection");
  }
  auto defined = [&](uint32_t id) {
    return id == 0 || names_.contains(id) || (!new_names.empty() && new_names.count(id));
  };
  std::vector<const wire::TrackDef*> new_tracks;
  std::unordered_set<uint32_t> new_track_ids;
  if (b.tracks()) {
    for (const wire::TrackDef* t : *b.tracks()) {
      if (!defined(t->name())) {
        return Fail(where, "track " + std::to_string(t->id()) + ": name id " + std::to_string(t->name()) +
                               " was never defined");
      }
      if (t->type() > static_cast<uint8_t>(TrackType::kProcess)) {
        return Fail(where, "track " + std::to_string(t->id()) + ": type " + std::to_string(t->type()));
      }
      const bool seen = tracks_.contains(t->id()) || new_track_ids.count(t->id());
      if (!seen) {  // (restated: the first definition stands)
        new_tracks.push_back(t);
        new_track_ids.insert(t->id());
        if (tracks_.size() + new_tracks.size() > kMaxIngestTracks) break;  // refused just below.
      }
    }
  }
  if (tracks_.size() + new_tracks.size() > kMaxIngestTracks) {
    return Fail(where, "more than " + std::to_string(kMaxIngestTracks) + " tracks on one connection");
  }
  auto track_defined = [&](uint32_t id) {
    return tracks_.contains(id) || (!new_track_ids.empty() && new_track_ids.count(id));
  };
  // The events, checked as they are copied into `out` (the wire's Event is
  // liveprof::Event byte for byte, as the sender writes them: wire_event.h;
  // a crafted frame may place its vector off its alignment, so bytes, not
  // structs). A malformed one is refused alone, counted by reason; the
  // others are taken. (A batch taken before: its events are skipped, and
  // their refusals were counted then.)
  const uint32_t count = b.events() != nullptr && !duplicate ? b.events()->size() : 0;
  const size_t first = out->size();
  out->reserve(first + count);
  const uint8_t* wire_events = count > 0 ? b.events()->Data() : nullptr;
  for (uint32_t i = 0; i < count; ++i) {
    Event e;
    std::memcpy(static_cast<void*>(&e), wire_events + size_t{i} * sizeof(Event), sizeof e);
    std::string_view refused;
    if (!KnownEventKind(static_cast<uint8_t>(e.kind)) || e.kind == EventKind::kInvalid ||
        e.kind == EventKind::kNameDef || e.kind == EventKind::kTrackDef) {
      refused = kBadKind;
    } else if (e.ts + e.dur < e.ts) {
      refused = kTimeOverflow;
    } else if (!defined(e.name) || (AnnotatedAlloc(e) && !defined(e.corr))) {
      refused = kUndefinedName;
    } else if (e.kind == EventKind::kKernel && (!defined(e.payload.kernel.details) || !defined(e.payload.kernel.op))) {
      refused = kUndefinedKernelName;
    } else if (e.kind != EventKind::kDeviceInfo && !track_defined(e.track)) {
      refused = kUndefinedTrack;
    }
    if (refused.empty()) {
      out->push_back(e);
    } else {
      Refuse(where, refused, i, e);
    }
  }
  // Taken: names, then tracks (rows named for the sender: "rank 3 · loader"), then events.
  for (const auto& [id, text] : new_names) names_.set(id, stream_.names().Intern(text));
  auto ours = [&](uint32_t id) -> NameId { return id == 0 ? 0 : names_.at(id); };
  for (const wire::TrackDef* t : new_tracks) {
    const std::string label = source_.label + " · " + std::string(stream_.names().Get(ours(t->name())));
    const TrackInfo info{stream_.names().Intern(label), static_cast<TrackType>(t->type()), t->os_tid(), 0, process_};
    if (rows_ == nullptr) {
      tracks_.set(t->id(), stream_.AddTrack(info));
      continue;
    }
    // The worker's rows outlive its connections: a sender that reconnects
    // writes to the rows it had (same id, same name).
    const std::string key = std::to_string(t->id()) + '\0' + label;
    auto [it, fresh] = rows_->try_emplace(key, 0);
    if (fresh) it->second = stream_.AddTrack(info);
    tracks_.set(t->id(), it->second);
  }
  if (definitions_only || duplicate) {
    if (duplicate) ++duplicate_batches_;
    out->resize(first);
    return true;
  }
  // In place: the stream's ids; the server's clock, the sender's plus the
  // measured offset, each end by its own time (a span across an offset
  // change ends where the next one, begun at that instant, begins: a step's
  // end and the next step's input), never ending before it begins, and held
  // inside [0, 2^64 - dur] (computed wide: no overflow either way).
  for (Event& e : std::span<Event>(out->data() + first, out->size() - first)) {
    e.name = ours(e.name);
    if (AnnotatedAlloc(e)) e.corr = ours(e.corr);
    if (e.kind == EventKind::kKernel) {
      e.payload.kernel.details = ours(e.payload.kernel.details);
      e.payload.kernel.op = ours(e.payload.kernel.op);
    }
    e.track = e.kind == EventKind::kDeviceInfo ? 0 : tracks_.at(e.track);  // (a description: on no row)
    e.flags &= static_cast<uint8_t>(~kFlagLate);                           // the server's to say.
    using Wide = __int128;
    const Wide begin_s = static_cast<Wide>(e.ts) + OffsetAt(e.ts);
    const Wide end = static_cast<Wide>(e.ts) + e.dur;
    const uint64_t end_clamped = end > static_cast<Wide>(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(end);
    const Wide dur = std::min<Wide>(std::max<Wide>(end + OffsetAt(end_clamped) - begin_s, 0), UINT64_MAX);
    const Wide last = static_cast<Wide>(UINT64_MAX) - dur;
    e.ts = static_cast<uint64_t>(begin_s < 0 ? 0 : begin_s > last ? last : begin_s);
    e.dur = static_cast<uint64_t>(dur);
  }
  batch_progress_ns_ = b.progress_ns();
  batch_stopping_ = b.stopping();
  TakeCost(b.cost());
  lost_batches_ += b.seq() - last_seq_ - 1;  // (seq from 1: a first batch of 3 lost two)
  last_seq_ = b.seq();
  ++batches_;
  events_ += out->size() - first;
  sender_dropped_ += b.dropped();
  return true;
}

}  // namespace liveprof
