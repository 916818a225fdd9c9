// What the ingest server tests share: frames built by hand, a blocking
// client socket that reads the server's frames (and answers its pings when
// asked), and a server on a temporary unix socket.
#ifndef LIVEPROF_TESTS_INGEST_INGEST_TEST_CLIENT_H_
#define LIVEPROF_TESTS_INGEST_INGEST_TEST_CLIENT_H_

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ingest/ingest_frames.h"
#include "ingest/ingest_server.h"
#include "stream/clock.h"
#include "stream/drain_loop.h"
#include "stream/liveprof_generated.h"
#include "stream/stream.h"
#include "wait_for.h"

namespace liveprof {
namespace ingest_test {

using flatbuffers::FlatBufferBuilder;

inline std::string Framed(FlatBufferBuilder& fbb, wire::Body type, flatbuffers::Offset<void> body) {
  fbb.Finish(wire::CreateFrame(fbb, 1, type, body), wire::FrameIdentifier());
  const auto size = static_cast<uint32_t>(fbb.GetSize());
  std::string out(4, '\0');
  std::memcpy(out.data(), &size, 4);
  return out + std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), size);
}

inline std::string Hello(int32_t rank, uint64_t clock_ns, const char* host = "node1") {
  FlatBufferBuilder fbb;
  return Framed(fbb, wire::Body::IngestHello,
                wire::CreateIngestHelloDirect(fbb, kIngestProtocol, host, 99, rank, "train.py", clock_ns).Union());
}

// 100 input spans; the one at `bad_event` (if any) on track 0, never defined;
// `stopping`: the sender's last (IngestBatch.stopping).
inline std::string Batch(uint64_t seq, uint64_t ts, bool define, uint64_t progress_ns = 0, int bad_event = -1,
                         bool stopping = false) {
  FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<wire::NameDef>> names;
  std::vector<flatbuffers::Offset<wire::TrackDef>> tracks;
  if (define) {
    names.push_back(wire::CreateNameDefDirect(fbb, 1, "loader"));
    names.push_back(wire::CreateNameDefDirect(fbb, 2, "next_batch"));
    tracks.push_back(wire::CreateTrackDef(fbb, 1, 1, 0, 555));
  }
  std::vector<wire::Event> events;
  for (uint64_t i = 0; i < 100; ++i) {
    const uint32_t track = static_cast<int>(i) == bad_event ? 0 : 1;
    events.emplace_back(ts + i * 1000, 500, 2, track, 0, static_cast<uint8_t>(EventKind::kInputSpan), 0, 0, 0, 0, 0);
  }
  return Framed(fbb, wire::Body::IngestBatch,
                wire::CreateIngestBatchDirect(fbb, seq, &names, &tracks, &events, 0, progress_ns, 0, stopping).Union());
}

// A blocking client socket.
class Client {
 public:
  explicit Client(const IngestEndpoint& e) {
    fd_ = ::socket(e.tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
    if (e.tcp) {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(e.port);
      inet_pton(AF_INET, e.host.c_str(), &a.sin_addr);
      ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    } else {
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path, e.path.data(), e.path.size());
      ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Client() { Close(); }
  bool ok() const { return ok_; }
  void Send(const std::string& bytes) {
    CHECK(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
  // For a connection the server may already have refused and closed: the
  // bytes may or may not go (EPIPE / ECONNRESET), the test asserts elsewhere.
  void TrySend(const std::string& bytes) { (void)::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // The next frame from the server (nullopt: closed or 5 s of nothing).
  std::optional<std::string> Next() {
    while (true) {
      if (auto f = splitter_.Next()) return std::string(*f);
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return std::nullopt;
      splitter_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  // Reads frames until one of `type`, answering pings on the way when asked.
  std::optional<std::string> Until(wire::Body type, bool answer_pings, int64_t clock_skew = 0) {
    while (auto f = Next()) {
      std::vector<uint64_t> aligned((f->size() + 7) / 8);
      std::memcpy(aligned.data(), f->data(), f->size());
      const wire::Frame* frame = wire::GetFrame(aligned.data());
      if (frame->body_type() == wire::Body::IngestPing && answer_pings) {
        const wire::IngestPing* p = frame->body_as_IngestPing();
        FlatBufferBuilder fbb;
        Send(Framed(fbb, wire::Body::IngestPong,
                    wire::CreateIngestPong(fbb, p->id(), p->server_ns(), HostNowNs() + clock_skew).Union()));
      }
      if (frame->body_type() == type) return f;
    }
    return std::nullopt;
  }
  static uint64_t AckSeq(const std::string& f) { return Ack(f).seq; }
  struct AckFields {
    uint64_t seq = 0, refused = 0, refused_seq = 0;
    std::string reason, message;
  };
  static AckFields Ack(const std::string& f) {
    std::vector<uint64_t> aligned((f.size() + 7) / 8);
    std::memcpy(aligned.data(), f.data(), f.size());
    const wire::IngestAck* a = wire::GetFrame(aligned.data())->body_as_IngestAck();
    return {a->seq(), a->refused(), a->refused_seq(), a->refused_reason() ? a->refused_reason()->str() : "",
            a->refused_message() ? a->refused_message()->str() : ""};
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  FrameSplitter splitter_;
};

using test::WaitFor;

// The server's pipeline, as `liveprof serve` runs one (a DrainLoop thread,
// its reorder window 20 ms), keeping what it is handed: the server
// acknowledges a batch once its events are handed over (Ring::Handled).
class TestPipeline {
 public:
  explicit TestPipeline(Stream& stream)
      : loop_(stream, Options(), [this](const liveprof::Batch& b) {
          std::lock_guard<std::mutex> lock(mu_);
          events_.insert(events_.end(), b.events.begin(), b.events.end());
          events_.insert(events_.end(), b.late.begin(), b.late.end());
        }) {
    loop_.Start();
  }
  ~TestPipeline() { loop_.Stop(); }
  // What it was handed since the last Take, once that is at least `n`
  // events (or 5 s went by).
  std::vector<Event> Take(size_t n = 0) {
    std::vector<Event> out;
    WaitFor([&] {
      std::lock_guard<std::mutex> lock(mu_);
      return events_.size() >= n;
    });
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(events_);
    return out;
  }

 private:
  static DrainLoop::Options Options() {
    DrainLoop::Options o;
    o.reorder.window_ns = 20'000'000;
    return o;
  }
  std::mutex mu_;
  std::vector<Event> events_;
  DrainLoop loop_;
};

// Every event in the stream's rings now, taken from them (a test with no
// pipeline: nothing is acknowledged).
inline std::vector<Event> Drain(Stream& stream) {
  std::vector<std::shared_ptr<Ring>> rings;
  stream.CopyRings(&rings);
  std::vector<Event> out;
  for (const auto& r : rings) r->queue->Drain([&](std::span<Event> s) { out.insert(out.end(), s.begin(), s.end()); });
  return out;
}

inline std::string TempSocket() { return "/tmp/liveprof-ingest-test-" + std::to_string(::getpid()) + ".sock"; }

// Options of a server on the unix socket TempSocket().
inline IngestServer::Options AtTempSocket() {
  IngestServer::Options o;
  IngestEndpoint e;
  std::string error;
  REQUIRE_MESSAGE(ParseIngestEndpoint("unix:" + TempSocket(), &e, &error), error);
  o.endpoints = {e};
  return o;
}

}  // namespace ingest_test
}  // namespace liveprof

#endif  // LIVEPROF_TESTS_INGEST_INGEST_TEST_CLIENT_H_
