// An HTTP/1.1 server for the HTTP API (Boost.Asio sockets, kept inside http_server.cc so that
// this header stays cheap to include; requests parsed by http_request_parser.h, responses written
// by http_response.h, each in one buffer per connection).
//
//   auto server = HttpServer::Start({.address = "127.0.0.1:8080", .threads = 2},
//                                   [&api](const HttpRequestView& r) { return api.Handle(r); });
//   ... (*server)->Stop();    // graceful: stop accepting, finish in-flight, close
//
// Behaviour an operator can rely on:
// - One io_context per thread, each run by one thread; a connection lives on one of them
//   (round robin), so its requests are handled in order without locks. Keep-alive, and
//   pipelined requests are answered one at a time, in order.
// - A client has `request_timeout` to send each whole request (headers and body), counted from
//   the connection or the previous response: slow and idle clients are closed. Writing a
//   response has the same timeout.
// - A body over `max_body_bytes` is answered 413, headers over `max_header_bytes` 431, and
//   a malformed request 400; each then closes the connection.
// - A response to HEAD has the headers the same GET would have, Content-Length included, and no
//   body (RFC 9110 9.3.2), so the connection stays usable: closing it instead would cost every
//   HEAD a connection, and a body would be read as the start of the next response.
// - A handler that throws a std::exception is logged and answered 500 {"error":"internal
//   error"}, and its connection closed; the other connections carry on.
// - "Expect: 100-continue" is not answered with 100: the body is read anyway, and a client that
//   waits for the 100 sends it after its own timeout (curl: 1 s). Bodies are at most
//   max_body_bytes (1 MiB), so refusing one before it is sent would save little.
// - At most `max_connections` are open at once. One more takes the slot of the connection doing
//   least (the one that has waited longest for a complete request, idle or sending); only when
//   every connection is busy with a request is it answered 503, then read from for up to a
//   second before closing, so the 503 arrives instead of a reset.
// - A client has `request_timeout` to read each response too; deadlines are checked every
//   tenth of the timeout (5-250 ms), so they are that much late at most.
// - The handler runs on the I/O thread: it must not block for long (the memory store does
//   not). A handler that waits for a remote store defers its reply (HttpRequestView::deferral):
//   the connection reads nothing more until the reply comes, from any thread, and is sent.
// - A reply with a future HttpReply::send_at is held until then on a timer of the connection's
//   thread (no thread waits; no request deadline runs). A connection holds one reply at most
//   (its next request, even pipelined, is read after the reply is sent), so the server holds at
//   most max_connections; a holding connection is busy, never shed for a new client. A client
//   that closes (or half-closes) while its reply is held is closed at once. Stop() sends held
//   replies at once (with Connection: close): their requests were admitted.
// - TLS (options.tls): each connection takes the context current when it is accepted (a
//   reload changes only later ones) and has the context's handshake_timeout to finish its
//   handshake, or it is closed. A handshake in progress holds a connection slot; at the bound
//   it is the first to give it up (before any connection that has finished its handshake), so
//   a handshake flood competes with itself, not with clients already in. A client that sends
//   no TLS (plaintext HTTP) is closed without a reply, and so is a client refused at the
//   bound (a plaintext 503 would be no TLS either). A failed handshake is reported to
//   on_tls_failure with its reason. A connection closed after its last response sends
//   close_notify and waits for the client's (at most the linger second), on the I/O thread.
//   While a reply is held the watch is on the TCP socket: a close_notify from the client is
//   taken for its next request, and the close is seen when that is read.
// - With a client CA (options.client_cert != kNone) a request from a client without a
//   verified certificate is answered 403 {"error":"... client certificate is required"},
//   except, with kExceptProbes, GET/HEAD /healthz, /readyz and /metrics (kubelet probes and
//   Prometheus scrapes come without one). The handler sees the verified SANs
//   (HttpRequestView::peer_sans).
#ifndef SLUICE_HTTP_HTTP_SERVER_H_
#define SLUICE_HTTP_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "http/http_message.h"
#include "sluice/status.h"
#include "tls/handshake_failure.h"
#include "tls/server_tls_context.h"

namespace sluice::server {

struct HttpServerOptions {
  // "host:port" or "[v6]:port", with an IP address or "localhost"; port 0 picks a free port
  // (see port()).
  std::string address = "127.0.0.1:8080";
  int threads = 2;
  size_t max_connections = 1024;
  size_t max_body_bytes = size_t{1} << 20;
  size_t max_header_bytes = size_t{16} << 10;
  std::chrono::milliseconds request_timeout{10'000};
  // Stop() waits this long for requests in flight before closing everything.
  std::chrono::milliseconds shutdown_grace{10'000};
  // TLS on this listener (null: plaintext). Shared: sluiced reloads it, the server reads it.
  std::shared_ptr<tls::ServerTlsContext> tls = nullptr;
  // Which requests need a verified client certificate (meaningful with a client CA).
  enum class ClientCert { kNone, kExceptProbes, kEverywhere };
  ClientCert client_cert = ClientCert::kNone;
  // Called on an I/O thread for each failed handshake (the metric); may be empty.
  std::function<void(tls::HandshakeFailure)> on_tls_failure = {};
};

// Called on an I/O thread for every complete request; must be thread-safe.
using HttpHandler = std::function<HttpReply(const HttpRequestView&)>;

class HttpServer {
 public:
  // Binds and starts serving; an address that cannot be parsed or bound is an error.
  static Result<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  std::string address() const;  // the bound address, "127.0.0.1:8080"

  // Stops accepting, lets every request already received finish and its response be written
  // (up to shutdown_grace), closes idle connections, then stops the threads. Idempotent;
  // blocks until done.
  void Stop();

  size_t connections() const;  // open now

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server

#endif  // SLUICE_HTTP_HTTP_SERVER_H_
