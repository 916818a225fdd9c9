#include "web/websocket_session.h"

#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "stream/clock.h"
#include "web/protocol.h"
#include "web/trace_tile.h"

namespace liveprof {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kMaxControlQueue = 32;
constexpr size_t kMaxEventFrames = 8;

class WebsocketSession : public FeedSession, public std::enable_shared_from_this<WebsocketSession> {
 public:
  WebsocketSession(tcp::socket&& socket, std::shared_ptr<SharedState> state, std::string address)
      : ws_(std::move(socket)), state_(std::move(state)), address_(std::move(address)) {}

  ~WebsocketSession() override {
    if (joined_) state_->Leave(this);
    state_->Release(address_);
  }

  void Run(http::request<http::string_body> request, std::string subprotocol) {
    const ServerOptions& o = state_->options();
    websocket::stream_base::timeout timeout{};
    timeout.handshake_timeout = std::chrono::seconds(10);
    timeout.idle_timeout = o.ws_idle_timeout;
    timeout.keep_alive_pings = true;  // a ping at half the idle time: half-open peers go.
    ws_.set_option(timeout);
    ws_.read_message_max(kMaxControlMessageBytes);
    // One frame per message: Beast's default cuts messages into 4 KiB
    // frames, a write (and a syscall) each; a view is 3-50 KB.
    ws_.auto_fragment(false);
    ws_.set_option(websocket::stream_base::decorator(
        [server = "liveprof/" + o.version, subprotocol](websocket::response_type& res) {
          res.set(http::field::server, server);
          if (!subprotocol.empty()) res.set(http::field::sec_websocket_protocol, subprotocol);
        }));
    request_ = std::move(request);
    ws_.async_accept(request_, [self = shared_from_this()](beast::error_code ec) { self->OnAccept(ec); });
  }

  // ---- FeedSession ----

  const TopicSet& topics() const override { return topics_; }

  void SendView(const ViewFrame& frame) override {
    if (!frame.json || closing_) return;
    std::optional<ViewFrame>& slot = views_[static_cast<size_t>(frame.topic)];
    if (slot) {
      state_->counters().view_frames_replaced.fetch_add(1, std::memory_order_relaxed);
    } else {
      view_order_.push_back(frame.topic);
    }
    slot = frame;
    MaybeWrite();
  }

  void SendEvents(const EventChunk& chunk, const NameDirectory& names, uint64_t now_ns) override {
    if (!feed_ || closing_) return;
    // Left out of the chunk by the pipeline's cap: whether they would have
    // passed the filter is unknown, so all of them count.
    feed_->AddDropped(chunk.dropped);
    if (event_frames_.size() >= kMaxEventFrames) {
      feed_->DropMatching(chunk.events, names);
      return;
    }
    std::string frame = feed_->Encode(chunk.events, names, chunk.seq, chunk.watermark_ns, now_ns);
    if (frame.empty()) return;
    event_frames_.push_back(std::move(frame));
    MaybeWrite();
  }

  void CheckDeadline(uint64_t now_ns) override {
    const uint64_t deadline_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(state_->options().send_deadline).count());
    if (writing_ && now_ns > write_started_ns_ + deadline_ns && !closing_) {
      state_->counters().sessions_closed_blocked.fetch_add(1, std::memory_order_relaxed);
      HardClose();
    }
  }

  void Close() override { HardClose(); }

 private:
  void OnAccept(beast::error_code ec) {
    if (ec) return;  // a failed handshake: the session ends.
    state_->Join(this);
    joined_ = true;
    const ServerOptions& o = state_->options();
    QueueControl(EncodeHello(o.version, kDefaultMaxEventsPerSecond, o.frame_hz));
    DoRead();
  }

  void DoRead() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    // Closed by the peer, over the size cap (Beast has sent 1009), timed
    // out, or closed by us: the session ends when its last operation does.
    if (ec) return;
    if (!ws_.got_text()) {
      buffer_.consume(buffer_.size());
      return BadMessage(DecodeError{"bad_message",
                                    "binary messages are not accepted: send JSON text "
                                    "control messages (docs/protocol.md)"});
    }
    const std::string text = beast::buffers_to_string(buffer_.data());
    buffer_.consume(buffer_.size());
    std::variant<ControlMessage, DecodeError> decoded = DecodeControlMessage(text);
    if (DecodeError* e = std::get_if<DecodeError>(&decoded)) return BadMessage(std::move(*e));
    Apply(std::get<ControlMessage>(decoded));
    DoRead();
  }

  void BadMessage(DecodeError error) {
    state_->counters().bad_messages.fetch_add(1, std::memory_order_relaxed);
    QueueControl(EncodeError(error));
    if (++bad_messages_ >= state_->options().max_bad_messages) {
      // Say why, then close with "policy violation" after the queue drains.
      close_after_writes_ = true;
      MaybeWrite();
      return;
    }
    DoRead();
  }

  void Apply(const ControlMessage& m) {
    if (m.type == ControlMessage::Type::kTrace) return AnswerTrace(m.trace);
    const TopicSet before = topics_;
    if (m.type == ControlMessage::Type::kSubscribe) {
      // Filters, when given, replace the events filter (also before the
      // events topic is subscribed); without them the current one stays.
      topics_ |= m.topics;
      if (m.filter) {
        filter_ = *m.filter;
        if (feed_) feed_->SetFilter(*m.filter);
      }
      if (topics_.test(static_cast<size_t>(Topic::kEvents)) && !feed_) {
        feed_.emplace(filter_.value_or(EventFilter{}));
      }
    } else {
      topics_ &= ~m.topics;
      if (m.topics.test(static_cast<size_t>(Topic::kEvents))) {
        // Gone from events: its filter, feed and unsent frames go too.
        feed_.reset();
        filter_.reset();
        event_frames_.clear();
      }
    }
    const EventFilter* filter = feed_ ? &feed_->filter() : nullptr;
    QueueControl(EncodeSubscribed(topics_, filter));
    if (before != topics_) state_->SubscriptionsChanged();
    // A new view topic gets the newest snapshot at once, not at the next tick.
    for (size_t t = 0; t < kTopicCount; ++t) {
      const Topic topic = static_cast<Topic>(t);
      if (IsViewTopic(topic) && topics_.test(t) && !before.test(t)) SendView(state_->LatestFrame(topic));
      if (!topics_.test(t)) {
        if (views_[t]) std::erase(view_order_, topic);
        views_[t].reset();
        sent_watermark_[t] = 0;  // a later subscribe starts its timing afresh.
      }
    }
  }

  // A trace request: its tile is queried on the server's query pool (as
  // /api/trace is), one request of this session at a time so the answers
  // keep the requests' order, and goes out as a control reply (binary), or
  // an error says why not. Waiting requests count against the control
  // queue's cap.
  void AnswerTrace(const TraceRequest& request) {
    if (closing_) return;
    if (control_.size() + trace_waiting_.size() + (trace_running_ ? 1 : 0) >= kMaxControlQueue) {
      return HardClose();  // a client that sends faster than it reads its replies.
    }
    trace_waiting_.push_back(request);
    StartTrace();
  }

  void StartTrace() {
    if (trace_running_ || trace_waiting_.empty() || closing_) return;
    trace_running_ = true;
    TraceRequest request = std::move(trace_waiting_.front());
    trace_waiting_.pop_front();
    auto self = shared_from_this();
    auto executor = ws_.get_executor();
    const TraceStore* store = state_->pipeline().trace_store();
    state_->RunQuery([self, executor, request = std::move(request), store]() mutable {
      std::variant<std::string, DecodeError> answer = AnswerTraceRequest(request, store);
      // The session goes back whole to its thread (never the last reference here).
      net::post(executor, [self = std::move(self), answer = std::move(answer)]() mutable {
        self->trace_running_ = false;
        if (DecodeError* e = std::get_if<DecodeError>(&answer)) {
          self->QueueControl(EncodeError(*e));
        } else {
          self->QueueControl(std::move(std::get<std::string>(answer)), /*binary=*/true);
        }
        self->StartTrace();
      });
    });
  }

  void QueueControl(std::string message, bool binary = false) {
    if (closing_) return;
    if (control_.size() >= kMaxControlQueue) {
      // A client that sends faster than it reads its replies.
      return HardClose();
    }
    control_.push_back(ControlReply{std::move(message), binary});
    MaybeWrite();
  }

  // Starts the next write: control replies, then views in the order they
  // became pending, then event frames.
  void MaybeWrite() {
    if (writing_ || closing_) return;
    writing_view_.reset();
    writing_tile_ = false;
    if (!control_.empty()) {
      out_text_ = std::move(control_.front().message);
      writing_tile_ = control_.front().binary;
      control_.pop_front();
      return Write(!writing_tile_, net::buffer(out_text_));
    }
    if (!view_order_.empty()) {
      const Topic t = view_order_.front();
      view_order_.pop_front();
      writing_view_ = std::move(views_[static_cast<size_t>(t)]);
      views_[static_cast<size_t>(t)].reset();
      return Write(true, net::buffer(*writing_view_->json));
    }
    if (!event_frames_.empty()) {
      out_text_ = std::move(event_frames_.front());
      event_frames_.pop_front();
      return Write(false, net::buffer(out_text_));
    }
    if (close_after_writes_) {
      closing_ = true;
      ws_.async_close(websocket::close_reason(websocket::close_code::policy_error, "too many bad messages"),
                      [self = shared_from_this()](beast::error_code) {});
    }
  }

  void Write(bool text, net::const_buffer buffer) {
    writing_ = true;
    write_started_ns_ = HostNowNs();
    ws_.text(text);
    ws_.async_write(buffer, [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(beast::error_code ec) {
    writing_ = false;
    if (ec) return HardClose();
    ServerCounters& c = state_->counters();
    if (writing_view_) {
      c.view_frames_sent.fetch_add(1, std::memory_order_relaxed);
      uint64_t& last = sent_watermark_[static_cast<size_t>(writing_view_->topic)];
      // The first frame of a topic has no "previous": nothing to time.
      if (last != 0) state_->latency().Record(last, writing_view_->watermark_ns, HostNowNs());
      last = writing_view_->watermark_ns;
    } else if (writing_tile_) {
      c.trace_tiles_sent.fetch_add(1, std::memory_order_relaxed);
    } else if (!ws_.text()) {
      c.event_frames_sent.fetch_add(1, std::memory_order_relaxed);
    }
    MaybeWrite();
  }

  // Closes the socket: every pending operation ends, and with the last one
  // the session.
  void HardClose() {
    closing_ = true;
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
  }

  websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer buffer_;
  std::shared_ptr<SharedState> state_;
  std::string address_;
  http::request<http::string_body> request_;
  bool joined_ = false;

  TopicSet topics_;
  std::optional<EventFilter> filter_;  // asked for before the events topic.
  std::optional<EventFeed> feed_;
  uint32_t bad_messages_ = 0;

  // The send queue (see the header). Control replies: JSON text, and the
  // binary tiles that answer trace requests.
  struct ControlReply {
    std::string message;
    bool binary = false;
  };
  std::deque<ControlReply> control_;
  std::deque<TraceRequest> trace_waiting_;  // trace requests not yet on the query pool.
  bool trace_running_ = false;              // one is there.
  std::array<std::optional<ViewFrame>, kTopicCount> views_;
  std::deque<Topic> view_order_;
  std::deque<std::string> event_frames_;
  bool writing_ = false;
  uint64_t write_started_ns_ = 0;
  std::string out_text_;
  std::optional<ViewFrame> writing_view_;
  bool writing_tile_ = false;
  std::array<uint64_t, kTopicCount> sent_watermark_{};
  bool closing_ = false;
  bool close_after_writes_ = false;
};

}  // namespace

void RunWebsocketSession(tcp::socket socket, std::shared_ptr<SharedState> state, std::string address,
                         http::request<http::string_body> request, std::string subprotocol) {
  std::make_shared<WebsocketSession>(std::move(socket), std::move(state), std::move(address))
      ->Run(std::move(request), std::move(subprotocol));
}

}  // namespace liveprof
