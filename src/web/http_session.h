// HttpSession: one HTTP connection (keep-alive): the dashboard's static
// files, the REST views (rest.h), /metrics, and the hand-over of an upgrade
// on /ws to a WebsocketSession after its token and Origin are checked.
// Web thread.
#ifndef LIVEPROF_WEB_HTTP_SESSION_H_
#define LIVEPROF_WEB_HTTP_SESSION_H_

#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "web/shared_state.h"

namespace liveprof {

// Serves `socket`, admitted for `address` (the session releases it).
void RunHttpSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<SharedState> state, std::string address);

}  // namespace liveprof

#endif  // LIVEPROF_WEB_HTTP_SESSION_H_
