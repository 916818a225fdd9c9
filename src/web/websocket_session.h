// WebsocketSession: one /ws connection. Sends the hello, reads control
// messages (subscribe / unsubscribe / trace, protocol.h) and writes what its
// topics publish from a bounded queue:
//   - control replies first (at most 32 pending, else the connection closes),
//     the binary tiles that answer trace requests among them (trace_tile.h);
//   - view frames: one slot per topic, a newer snapshot replaces a pending
//     one (the client sees a gap in seq, never stale data);
//   - event frames: at most 8 pending; a chunk that finds the queue full is
//     counted as dropped and said in the next frame.
// A write pending past ServerOptions::send_deadline closes the connection;
// so do an incoming message over the size cap (close code 1009), too many
// undecodable messages (1008) and silence past the idle timeout (pings are
// sent at half of it). Web thread; a trace request's tile is queried on the
// server's query pool, one request of a session at a time, and posted back.
#ifndef LIVEPROF_WEB_WEBSOCKET_SESSION_H_
#define LIVEPROF_WEB_WEBSOCKET_SESSION_H_

#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "web/shared_state.h"

namespace liveprof {

// Accepts the (already checked) upgrade `request` on `socket`, answering
// with `subprotocol` when not empty, and runs the session. The session
// releases `address`'s connection count when it ends.
void RunWebsocketSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<SharedState> state, std::string address,
                         boost::beast::http::request<boost::beast::http::string_body> request, std::string subprotocol);

}  // namespace liveprof

#endif  // LIVEPROF_WEB_WEBSOCKET_SESSION_H_
