// RawClient: a minimal blocking HTTP/1.1 and WebSocket (RFC 6455) client on
// POSIX sockets, for the server's tests and the web feed bench. No Beast: it
// sends exactly the bytes it is told to (a request target is never
// normalized, a frame can be malformed on purpose with SendRaw), so that it
// can play a hostile peer.
//
//   RawClient c(port);                      // 127.0.0.1:port, 10 s receive timeout
//   HttpReply r = c.Handshake("/ws");       // 101 expected
//   c.SendText(R"({"type":"subscribe","topics":["overview"]})");
//   WsFrame f = c.ReadFrame();              // {opcode, payload, ok}
//
// FrameScanner parses a byte stream of server frames incrementally without
// keeping payloads (the bench's non-blocking client, through fd()).
//
// Header-only. A RawClient is used by one thread at a time.
#ifndef LIVEPROF_TESTS_WEB_WS_RAW_CLIENT_H_
#define LIVEPROF_TESTS_WEB_WS_RAW_CLIENT_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace liveprof::test {

using Headers = std::vector<std::pair<std::string, std::string>>;

// WebSocket opcodes (RFC 6455 §5.2).
inline constexpr uint8_t kOpContinuation = 0x0;
inline constexpr uint8_t kOpText = 0x1;
inline constexpr uint8_t kOpBinary = 0x2;
inline constexpr uint8_t kOpClose = 0x8;
inline constexpr uint8_t kOpPing = 0x9;
inline constexpr uint8_t kOpPong = 0xA;

// How a read ended when it did not return what was asked.
enum class ReadEnd {
  kNone,     // it did.
  kTimeout,  // nothing within the receive timeout.
  kEof,      // the peer closed (FIN).
  kReset,    // ECONNRESET / EPIPE.
  kError,    // another socket error, or a protocol error (see `error`).
};

inline const char* ReadEndName(ReadEnd e) {
  switch (e) {
    case ReadEnd::kNone: return "none";
    case ReadEnd::kTimeout: return "timeout";
    case ReadEnd::kEof: return "eof";
    case ReadEnd::kReset: return "reset";
    case ReadEnd::kError: return "error";
  }
  return "?";
}

inline std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

struct HttpReply {
  bool ok = false;  // a status line and headers were read (and the body, if any).
  int status = 0;
  std::string status_line;
  Headers headers;
  std::string body;     // a chunked body: its chunks joined.
  uint64_t chunks = 0;  // Transfer-Encoding: chunked: the data chunks read.
  ReadEnd end = ReadEnd::kNone;
  std::string error;

  // The first header named `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const {
    const std::string want = ToLower(name);
    for (const auto& [k, v] : headers) {
      if (ToLower(k) == want) return v;
    }
    return "";
  }
};

struct WsFrame {
  bool ok = false;  // a whole frame was read.
  bool fin = true;
  uint8_t opcode = 0;
  std::string payload;
  // kOpClose: the close code (0 when the frame carried none) and reason.
  uint16_t close_code = 0;
  std::string close_reason;
  ReadEnd end = ReadEnd::kNone;
  std::string error;
};

// The bytes of one client (masked) or server (unmasked) frame.
inline std::string EncodeFrame(uint8_t opcode, std::string_view payload, bool fin = true, bool mask = true,
                               uint32_t mask_key = 0x37fa213d) {
  std::string out;
  out.push_back(static_cast<char>((fin ? 0x80 : 0x00) | (opcode & 0x0f)));
  const uint8_t mask_bit = mask ? 0x80 : 0x00;
  const uint64_t n = payload.size();
  if (n < 126) {
    out.push_back(static_cast<char>(mask_bit | n));
  } else if (n <= 0xffff) {
    out.push_back(static_cast<char>(mask_bit | 126));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xff));
  } else {
    out.push_back(static_cast<char>(mask_bit | 127));
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  }
  if (!mask) {
    out.append(payload);
    return out;
  }
  const uint8_t key[4] = {static_cast<uint8_t>(mask_key >> 24), static_cast<uint8_t>(mask_key >> 16),
                          static_cast<uint8_t>(mask_key >> 8), static_cast<uint8_t>(mask_key)};
  out.append(reinterpret_cast<const char*>(key), 4);
  const size_t start = out.size();
  out.append(payload);
  for (size_t i = 0; i < payload.size(); ++i) out[start + i] = static_cast<char>(out[start + i] ^ key[i % 4]);
  return out;
}

// A close frame's payload: the code (big-endian) and the reason.
inline std::string ClosePayload(uint16_t code, std::string_view reason = {}) {
  std::string p;
  p.push_back(static_cast<char>(code >> 8));
  p.push_back(static_cast<char>(code & 0xff));
  p.append(reason);
  return p;
}

// Incremental parser of server frames: Feed() it whatever recv() returned;
// it counts frames and payload bytes, keeps nothing but the payloads of
// control frames (for pongs and close codes), and reports each frame
// through `on_frame(opcode, fin, payload_size, control_payload)`.
class FrameScanner {
 public:
  // False on a frame no server may send (a masked one).
  template <typename OnFrame>
  bool Feed(const char* data, size_t size, OnFrame&& on_frame) {
    size_t i = 0;
    while (i < size) {
      if (remaining_ > 0) {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, size - i));
        if (IsControl(opcode_)) control_.append(data + i, take);
        remaining_ -= take;
        i += take;
        if (remaining_ == 0) Finish(on_frame);
        continue;
      }
      header_.push_back(static_cast<uint8_t>(data[i++]));
      if (header_.size() < 2) continue;
      if ((header_[1] & 0x80) != 0) return false;  // a server never masks.
      const uint8_t len7 = header_[1] & 0x7f;
      const size_t need = len7 < 126 ? 2 : len7 == 126 ? 4 : 10;
      if (header_.size() < need) continue;
      uint64_t len = len7;
      if (len7 == 126) len = (uint64_t{header_[2]} << 8) | header_[3];
      if (len7 == 127) {
        len = 0;
        for (int b = 2; b < 10; ++b) len = (len << 8) | header_[b];
      }
      fin_ = (header_[0] & 0x80) != 0;
      opcode_ = header_[0] & 0x0f;
      remaining_ = len;
      payload_size_ = len;
      header_.clear();
      control_.clear();
      if (remaining_ == 0) Finish(on_frame);
    }
    return true;
  }

  uint64_t frames() const { return frames_; }
  uint64_t payload_bytes() const { return payload_bytes_; }

 private:
  static bool IsControl(uint8_t opcode) { return (opcode & 0x08) != 0; }
  template <typename OnFrame>
  void Finish(OnFrame& on_frame) {
    ++frames_;
    payload_bytes_ += payload_size_;
    on_frame(opcode_, fin_, payload_size_, std::string_view(control_));
  }

  std::vector<uint8_t> header_;
  uint64_t remaining_ = 0;
  uint64_t payload_size_ = 0;
  uint8_t opcode_ = 0;
  bool fin_ = true;
  std::string control_;
  uint64_t frames_ = 0;
  uint64_t payload_bytes_ = 0;
};

class RawClient {
 public:
  // Connects to 127.0.0.1:`port`. `rcvbuf` > 0 sets SO_RCVBUF before the
  // connect (so that the window is small from the start); `source` (an IPv4
  // address, host order; 0: the system's choice) is the client's own
  // address, e.g. another loopback one (127.0.0.0/8 is all loopback).
  explicit RawClient(uint16_t port, std::chrono::milliseconds receive_timeout = std::chrono::seconds(10),
                     int rcvbuf = 0, uint32_t source = 0)
      : port_(port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      error_ = std::string("socket: ") + std::strerror(errno);
      return;
    }
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    SetReceiveTimeout(receive_timeout);
    if (source != 0) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      from.sin_addr.s_addr = htonl(source);
      if (::bind(fd_, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0) {
        error_ = std::string("bind: ") + std::strerror(errno);
        ::close(fd_);
        fd_ = -1;
        return;
      }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      error_ = std::string("connect: ") + std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  // The socket, for poll()/epoll and non-blocking use (then read it
  // yourself: bytes already buffered here are in buffered()).
  int fd() const { return fd_; }
  const std::string& buffered() const { return in_; }
  uint16_t port() const { return port_; }
  // "127.0.0.1:<port>", what Host says.
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }

  void SetReceiveTimeout(std::chrono::milliseconds timeout) {
    if (fd_ < 0) return;
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  bool SetNonBlocking() {
    if (fd_ < 0) return false;
    const int flags = ::fcntl(fd_, F_GETFL, 0);
    return flags >= 0 && ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK) == 0;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Closes with SO_LINGER 0: the peer sees a reset.
  void Abort() {
    if (fd_ < 0) return;
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    Close();
  }
  void ShutdownWrite() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
  }

  // ---- Sending ----

  // Writes every byte (blocking); false when the connection failed.
  bool SendRaw(std::string_view bytes) {
    if (fd_ < 0) return false;
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          // Non-blocking socket: wait a little for room.
          timeval tv{0, 1000};
          ::select(0, nullptr, nullptr, nullptr, &tv);
          continue;
        }
        return false;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  bool SendFrame(uint8_t opcode, std::string_view payload, bool fin = true) {
    return SendRaw(EncodeFrame(opcode, payload, fin, /*mask=*/true, NextMask()));
  }
  bool SendText(std::string_view payload) { return SendFrame(kOpText, payload); }
  bool SendBinary(std::string_view payload) { return SendFrame(kOpBinary, payload); }
  bool SendPong(std::string_view payload = {}) { return SendFrame(kOpPong, payload); }
  bool SendClose(uint16_t code, std::string_view reason = {}) {
    return SendFrame(kOpClose, ClosePayload(code, reason));
  }

  // ---- HTTP ----

  // The opening handshake of a WebSocket on `path`; the reply's status is
  // 101 when the server upgraded. Any bytes after the reply's headers stay
  // buffered for ReadFrame. `extra_headers` go after the standard ones.
  HttpReply Handshake(std::string_view path, const Headers& extra_headers = {}) {
    std::string req = "GET " + std::string(path) + " HTTP/1.1\r\nHost: " + host() +
                      "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
    for (const auto& [k, v] : extra_headers) req += k + ": " + v + "\r\n";
    req += "\r\n";
    if (!SendRaw(req)) return Failed("send failed");
    // A 101 has no body; an error reply has one.
    return ReadHttpReply(/*expect_body_unless_101=*/true);
  }

  // A request with `method` on `target` (sent as is), keep-alive; reads the
  // reply (a Content-Length body).
  HttpReply Request(std::string_view method, std::string_view target, const Headers& headers = {},
                    std::string_view body = {}) {
    std::string req = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: " + host() + "\r\n";
    for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    if (!body.empty() || method == "POST" || method == "PUT") {
      req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    req += "\r\n";
    req.append(body);
    if (!SendRaw(req)) return Failed("send failed");
    return ReadHttpReply(method != "HEAD");
  }
  HttpReply HttpGet(std::string_view target, const Headers& headers = {}) { return Request("GET", target, headers); }

  // Reads one HTTP reply: status line, headers and a Content-Length body
  // (none for 101, 204, 304, or when `with_body` is false).
  HttpReply ReadHttpReply(bool with_body = true) {
    HttpReply r;
    size_t header_end = std::string::npos;
    while ((header_end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (in_.size() > 64 * 1024) return Failed("reply headers over 64 KiB");
      const ReadEnd e = Fill();
      if (e != ReadEnd::kNone) {
        r.end = e;
        r.error = std::string("reading the reply headers: ") + ReadEndName(e) +
                  (in_.empty() ? "" : " after " + std::to_string(in_.size()) + " bytes");
        return r;
      }
    }
    const std::string head = in_.substr(0, header_end);
    in_.erase(0, header_end + 4);
    size_t line_end = head.find("\r\n");
    r.status_line = head.substr(0, line_end);
    // "HTTP/1.1 101 Switching Protocols"
    if (!r.status_line.starts_with("HTTP/1.") || r.status_line.size() < 12 || r.status_line[8] != ' ') {
      r.error = "bad status line: " + r.status_line;
      return r;
    }
    r.status = 0;
    for (size_t i = 9; i < 12; ++i) {
      const char c = r.status_line[i];
      if (c < '0' || c > '9') {
        r.error = "bad status code: " + r.status_line;
        return r;
      }
      r.status = r.status * 10 + (c - '0');
    }
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
      r.headers.emplace_back(line.substr(0, colon), std::move(value));
    }
    const bool bodiless =
        !with_body || r.status == 101 || r.status == 204 || r.status == 304 || (r.status >= 100 && r.status < 200);
    const std::string length = r.Header("Content-Length");
    if (!bodiless && !length.empty()) {
      size_t n = 0;
      for (char c : length) {
        if (c < '0' || c > '9') {
          r.error = "bad Content-Length: " + length;
          return r;
        }
        n = n * 10 + static_cast<size_t>(c - '0');
      }
      while (in_.size() < n) {
        const ReadEnd e = Fill();
        if (e != ReadEnd::kNone) {
          r.end = e;
          r.error = std::string("reading the body: ") + ReadEndName(e);
          return r;
        }
      }
      r.body = in_.substr(0, n);
      in_.erase(0, n);
    } else if (!bodiless && r.Header("Transfer-Encoding") == "chunked") {
      // Chunks (hex size, CRLF, data, CRLF) up to the last (size 0), then
      // the (empty) trailer. r.chunks counts the data chunks.
      for (;;) {
        size_t eol;
        while ((eol = in_.find("\r\n")) == std::string::npos) {
          if (const ReadEnd e = Fill(); e != ReadEnd::kNone) {
            r.end = e;
            r.error = std::string("reading a chunk size: ") + ReadEndName(e);
            return r;
          }
        }
        const size_t size = std::strtoull(in_.substr(0, eol).c_str(), nullptr, 16);
        while (in_.size() < eol + 2 + size + 2) {
          if (const ReadEnd e = Fill(); e != ReadEnd::kNone) {
            r.end = e;
            r.error = std::string("reading a chunk: ") + ReadEndName(e);
            return r;
          }
        }
        if (in_.compare(eol + 2 + size, 2, "\r\n") != 0) return Failed("a chunk not followed by CRLF");
        r.body.append(in_, eol + 2, size);
        in_.erase(0, eol + 2 + size + 2);
        if (size == 0) break;
        ++r.chunks;
      }
    }
    r.ok = true;
    return r;
  }

  // ---- WebSocket frames ----

  // One frame as it came (pings included): opcode, fin, the payload
  // (unmasked; a server must not mask), and for a close its code.
  WsFrame ReadFrame() {
    WsFrame f;
    auto need = [&](size_t n) -> bool {
      while (in_.size() < n) {
        const ReadEnd e = Fill();
        if (e != ReadEnd::kNone) {
          f.end = e;
          f.error = std::string("reading a frame: ") + ReadEndName(e);
          return false;
        }
      }
      return true;
    };
    if (!need(2)) return f;
    const uint8_t b0 = static_cast<uint8_t>(in_[0]);
    const uint8_t b1 = static_cast<uint8_t>(in_[1]);
    f.fin = (b0 & 0x80) != 0;
    f.opcode = b0 & 0x0f;
    const bool masked = (b1 & 0x80) != 0;
    const uint8_t len7 = b1 & 0x7f;
    const size_t header = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (masked ? 4 : 0);
    if (!need(header)) return f;
    uint64_t len = len7;
    if (len7 == 126) {
      len = (uint64_t{static_cast<uint8_t>(in_[2])} << 8) | static_cast<uint8_t>(in_[3]);
    } else if (len7 == 127) {
      len = 0;
      for (int i = 2; i < 10; ++i) len = (len << 8) | static_cast<uint8_t>(in_[i]);
    }
    if (len > (uint64_t{1} << 31)) {
      f.end = ReadEnd::kError;
      f.error = "frame length " + std::to_string(len) + " is absurd";
      return f;
    }
    if (!need(header + static_cast<size_t>(len))) return f;
    f.payload = in_.substr(header, static_cast<size_t>(len));
    if (masked) {
      const std::string key = in_.substr(header - 4, 4);
      for (size_t i = 0; i < f.payload.size(); ++i) f.payload[i] = static_cast<char>(f.payload[i] ^ key[i % 4]);
      f.error = "the server masked a frame (RFC 6455 §5.1 forbids it)";
    }
    in_.erase(0, header + static_cast<size_t>(len));
    if (f.opcode == kOpClose && f.payload.size() >= 2) {
      f.close_code =
          static_cast<uint16_t>((static_cast<uint8_t>(f.payload[0]) << 8) | static_cast<uint8_t>(f.payload[1]));
      f.close_reason = f.payload.substr(2);
    }
    f.ok = true;
    return f;
  }

  // The next data or close frame; pings are answered with pongs on the way
  // (when `answer_pings`) and pongs skipped.
  WsFrame ReadMessage(bool answer_pings = true) {
    for (;;) {
      WsFrame f = ReadFrame();
      if (!f.ok) return f;
      if (f.opcode == kOpPing) {
        if (answer_pings) SendPong(f.payload);
        continue;
      }
      if (f.opcode == kOpPong) continue;
      return f;
    }
  }

  // Reads and discards until the peer closes or resets (true), or until
  // `limit` passes or another error (false). *how says which.
  bool WaitClosed(std::chrono::milliseconds limit, ReadEnd* how = nullptr) {
    in_.clear();
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      const ReadEnd e = Fill();
      in_.clear();
      if (e == ReadEnd::kEof || e == ReadEnd::kReset) {
        if (how) *how = e;
        return true;
      }
      if (e == ReadEnd::kError) {
        if (how) *how = e;
        return false;
      }
    }
    if (how) *how = ReadEnd::kTimeout;
    return false;
  }

  // One recv() into the buffer. kNone when bytes came.
  ReadEnd Fill() {
    if (fd_ < 0) return ReadEnd::kError;
    char buf[64 * 1024];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        in_.append(buf, static_cast<size_t>(n));
        return ReadEnd::kNone;
      }
      if (n == 0) return ReadEnd::kEof;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadEnd::kTimeout;
      if (errno == ECONNRESET || errno == EPIPE) return ReadEnd::kReset;
      return ReadEnd::kError;
    }
  }

 private:
  HttpReply Failed(std::string why) {
    HttpReply r;
    r.end = ReadEnd::kError;
    r.error = std::move(why);
    return r;
  }
  uint32_t NextMask() {
    mask_state_ = mask_state_ * 1664525u + 1013904223u;
    return mask_state_;
  }

  uint16_t port_ = 0;
  int fd_ = -1;
  std::string error_;
  std::string in_;  // received, not yet consumed.
  uint32_t mask_state_ = 0x9e3779b9u;
};

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_WEB_WS_RAW_CLIENT_H_
