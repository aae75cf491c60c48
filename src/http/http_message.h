// An HTTP request and reply as the API sees them, without any networking type: the server
// (http_server.h) fills an HttpRequestView from the wire and writes the HttpReply back, and the
// API (http_api.h) maps one to the other. Keeping Asio out of here keeps the API unit-testable
// and the compile of everything that includes it fast.
#ifndef SLUICE_HTTP_HTTP_MESSAGE_H_
#define SLUICE_HTTP_HTTP_MESSAGE_H_

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::server {

struct HttpReply {
  int status = 200;
  std::string_view content_type = "application/json";        // a string that outlives the reply
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type/-Length
  std::string body;
  // The handler answers later, through HttpDeferral::Defer's callback; the rest is unused.
  bool deferred = false;
  // Send no sooner than this: a reply that must be held (a shaper's delay, for a proxy that
  // forwards the request when the answer comes) is handed over at once and the server sends it
  // at this time from a timer on the connection's event loop -- no thread waits, whether the
  // reply is returned or deferred. The connection reads nothing more meanwhile; a client that
  // closes meanwhile is dropped with its reply; a server that stops sends it at once. Default
  // (or any time not in the future): now.
  std::chrono::steady_clock::time_point send_at{};
};

// Sends a deferred reply; call it exactly once, from any thread.
using HttpReplyCallback = std::function<void(HttpReply)>;

// Lets a handler answer after it returns (when the answer waits for a remote store): take the
// callback with Defer(), return DeferredReply(), and call the callback when the reply is ready.
// The connection waits for it (reading no further request) and then carries on as usual.
class HttpDeferral {
 public:
  virtual HttpReplyCallback Defer() = 0;

 protected:
  ~HttpDeferral() = default;
};

// Views into the server's buffers: valid only during the call that receives them.
struct HttpRequestView {
  std::string_view method;         // "GET", "POST", ...
  std::string_view target;         // "/v1/state?domain=api&api_key=k1"
  std::string_view authorization;  // the Authorization header, empty when absent
  std::string_view body;
  HttpDeferral* deferral = nullptr;  // null: the reply must be returned at once
  // Every header line, each ending in CRLF, as the parser checked them (http_headers.h reads
  // them); the HTTP API needs none but Authorization, the forward-auth endpoint several.
  std::string_view header_lines = {};
  // The connection's peer address, "127.0.0.1" or "::1" (IPv4-mapped IPv6 shown as IPv4);
  // empty when not known (unit tests).
  std::string_view peer = {};
  // The connection is TLS (a listener with --tls-cert).
  bool tls = false;
  // The client sent a certificate that verified against --tls-client-ca (and matched
  // --tls-client-san), and its DNS and URI SANs (tls/peer_sans.h); false and empty otherwise.
  bool peer_verified = false;
  std::span<const std::string> peer_sans = {};
};

// A reply {"error":"<message>"} with `status`.
HttpReply ErrorReply(int status, std::string_view message);

// What a handler that called Defer() returns.
inline HttpReply DeferredReply() {
  HttpReply reply;
  reply.deferred = true;
  return reply;
}

}  // namespace sluice::server

#endif  // SLUICE_HTTP_HTTP_MESSAGE_H_
