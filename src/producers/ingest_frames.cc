#include "producers/ingest_frames.h"

#include <cstring>

#include "stream/liveprof_generated.h"
#include "stream/wire_event.h"

namespace liveprof {

void FrameSplitter::Feed(std::string_view bytes) {
  if (!error_.empty()) return;  // broken: nothing more is read.
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {  // mostly taken: drop what was.
    buf_.erase(0, pos_);
    consumed_ += pos_;
    pos_ = 0;
  }
  buf_.append(bytes);
}

std::optional<std::string_view> FrameSplitter::Next() {
  if (!error_.empty() || buf_.size() - pos_ < 4) return std::nullopt;
  uint32_t size;
  std::memcpy(&size, buf_.data() + pos_, 4);  // little-endian machines only (as the schema's readers).
  const uint64_t at = consumed_ + pos_;
  if (size == 0 || size > kMaxIngestFrameBytes) {
    error_ = "frame " + std::to_string(frames_ + 1) + " (byte " + std::to_string(at) + "): a size of " +
             std::to_string(size) + " bytes (1.." + std::to_string(kMaxIngestFrameBytes) + ")";
    return std::nullopt;
  }
  if (buf_.size() - pos_ - 4 < size) return std::nullopt;  // not whole yet.
  const std::string_view frame(buf_.data() + pos_ + 4, size);
  frame_begin_ = at;
  frame_end_ = at + 4 + size;
  pos_ += 4 + size;
  ++frames_;
  return frame;
}

namespace {

bool KnownEventKind(uint8_t kind) {
  return kind < kEventKindCount && EventKindName(static_cast<EventKind>(kind)) != "unknown";
}

}  // namespace

bool IngestDecoder::Fail(const std::string& where, const std::string& what) {
  error_ = where + ": " + what;
  return false;
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
  if (f->body() == nullptr) return Fail(where, "a frame without a body");
  if (f->body_type() == wire::Body::IngestPong) {
    if (!has_hello_) return Fail(where, "a pong before the hello");
    const wire::IngestPong& p = *f->body_as_IngestPong();
    pong_ = Pong{p.id(), p.server_ns(), p.sender_ns()};
    return true;
  }
  if (f->body_type() == wire::Body::IngestHello) {
    if (has_hello_) return Fail(where, "a second hello");
    const wire::IngestHello& h = *f->body_as_IngestHello();
    if (h.protocol() != kIngestProtocol) {
      return Fail(where, "ingest protocol " + std::to_string(h.protocol()) + "; this server speaks " +
                             std::to_string(kIngestProtocol));
    }
    source_.protocol = h.protocol();
    source_.host = h.host() ? h.host()->str() : "";
    source_.pid = h.pid();
    source_.rank = h.rank();
    source_.program = h.program() ? h.program()->str() : "";
    source_.clock_ns = h.clock_ns();
    source_.label = h.rank() >= 0 ? "rank " + std::to_string(h.rank())
                                  : (source_.host.empty() ? "pid" : source_.host + ":") + std::to_string(h.pid());
    has_hello_ = true;
    return true;
  }
  if (f->body_type() != wire::Body::IngestBatch) {
    return Fail(where, "a frame of body type " + std::to_string(static_cast<int>(f->body_type())) +
                           " (an ingest connection sends IngestHello, then IngestBatch and IngestPong)");
  }
  if (!has_hello_) return Fail(where, "a batch before the hello");
  const wire::IngestBatch& b = *f->body_as_IngestBatch();
  if (b.seq() <= last_seq_) {
    return Fail(where, "batch seq " + std::to_string(b.seq()) + " after " + std::to_string(last_seq_));
  }
  // The definitions first, checked whole before the stream learns any (a
  // refused frame leaves nothing behind but the names it interned).
  std::vector<std::pair<uint32_t, std::string_view>> names;
  if (b.names()) {
    for (const wire::NameDef* n : *b.names()) {
      if (!n->name()) return Fail(where, "name id " + std::to_string(n->id()) + " without its string");
      names.emplace_back(n->id(), std::string_view(n->name()->data(), n->name()->size()));
    }
  }
  for (const auto& [id, text] : names) {
    if (names_.size() >= kMaxIngestNames && !names_.count(id)) {
      return Fail(where, "more than " + std::to_string(kMaxIngestNames) + " names on one connection");
    }
  }
  for (const auto& [id, text] : names) names_[id] = stream_.names().Intern(text);
  auto name = [&](uint32_t id, NameId* ours) {
    if (id == 0) return *ours = 0, true;  // the empty name, always.
    const auto it = names_.find(id);
    if (it == names_.end()) return false;
    *ours = it->second;
    return true;
  };
  if (b.tracks()) {
    for (const wire::TrackDef* t : *b.tracks()) {
      NameId track_name;
      if (!name(t->name(), &track_name)) {
        return Fail(where, "track " + std::to_string(t->id()) + ": name id " + std::to_string(t->name()) +
                               " was never defined");
      }
      if (t->type() > static_cast<uint8_t>(TrackType::kProcess)) {
        return Fail(where, "track " + std::to_string(t->id()) + ": type " + std::to_string(t->type()));
      }
      if (tracks_.count(t->id())) continue;  // restated: the first stands.
      if (tracks_.size() >= kMaxIngestTracks) {
        return Fail(where, "more than " + std::to_string(kMaxIngestTracks) + " tracks on one connection");
      }
      // Its own row, named for the sender: "rank 3 · dataloader".
      const std::string label = source_.label + " · " + std::string(stream_.names().Get(track_name));
      tracks_[t->id()] = stream_.AddTrack(
          TrackInfo{stream_.names().Intern(label), static_cast<TrackType>(t->type()), t->os_tid(), 0});
    }
  }
  const size_t first = out->size();
  if (b.events()) {
    out->reserve(first + b.events()->size());
    uint32_t i = 0;
    for (const wire::Event* w : *b.events()) {
      auto refuse = [&](const std::string& what) {
        out->resize(first);
        return Fail(where, "event " + std::to_string(i) + ": " + what);
      };
      Event e = FromWire(*w);  // (its name and track: the sender's ids, mapped below)
      if (!KnownEventKind(w->kind()) || e.kind == EventKind::kInvalid || e.kind == EventKind::kNameDef ||
          e.kind == EventKind::kTrackDef) {
        return refuse("kind " + std::to_string(w->kind()) + " (names and tracks travel as NameDef / TrackDef)");
      }
      if (e.ts + e.dur < e.ts) return refuse("ts + dur past 2^64 ns");
      if (!name(w->name(), &e.name)) return refuse("name id " + std::to_string(w->name()) + " was never defined");
      if (e.kind == EventKind::kKernel &&
          (!name(e.payload.kernel.details, &e.payload.kernel.details) || !name(e.payload.kernel.op, &e.payload.kernel.op))) {
        return refuse("a kernel's details or op name id was never defined");
      }
      if (e.kind == EventKind::kDeviceInfo) {
        e.track = 0;  // a description: on no row.
      } else {
        const auto t = tracks_.find(w->track());
        if (t == tracks_.end()) return refuse("track " + std::to_string(w->track()) + " was never defined");
        e.track = t->second;
      }
      // The server's clock: the sender's plus the measured offset (clamped at the ends).
      const int64_t off = clock_offset_ns_;
      if (off < 0) {
        e.ts = e.ts >= static_cast<uint64_t>(-off) ? e.ts - static_cast<uint64_t>(-off) : 0;
      } else {
        e.ts = e.ts <= UINT64_MAX - e.dur - static_cast<uint64_t>(off) ? e.ts + static_cast<uint64_t>(off)
                                                                       : UINT64_MAX - e.dur;
      }
      out->push_back(e);
      ++i;
    }
  }
  lost_batches_ += b.seq() - last_seq_ - 1;  // (seq from 1: a first batch of 3 lost two)
  last_seq_ = b.seq();
  ++batches_;
  events_ += out->size() - first;
  sender_dropped_ += b.dropped();
  return true;
}

}  // namespace liveprof
