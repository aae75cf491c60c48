// One HTTP/1.1 connection to sluiced over a plain TCP socket, non-blocking, every wait bounded by
// a deadline on the client's clock. Just what the check API needs: one request at a time, an
// answer with Content-Length (what sluiced sends), keep-alive.
#ifndef SLUICE_CLIENT_HTTP_CONNECTION_H_
#define SLUICE_CLIENT_HTTP_CONNECTION_H_

#include <sys/socket.h>

#include <optional>
#include <string>
#include <string_view>

#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::client {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// An IPv4 or IPv6 literal and a port; an error for anything else.
Result<SocketAddress> ParseSocketAddress(const std::string& host, int port);

struct HttpResponse {
  int status = 0;
  std::string body;
  bool keep_alive = true;
};

class HttpConnection {
 public:
  static Result<HttpConnection> Connect(const SocketAddress& address, Timestamp deadline,
                                        const Clock& clock);
  HttpConnection(HttpConnection&& other) noexcept;
  HttpConnection& operator=(HttpConnection&& other) noexcept;
  ~HttpConnection();

  // Sends `request` (a whole HTTP request) and reads the answer. On failure, `*silent` says
  // whether the peer closed before sending any byte of an answer (a kept-alive connection the
  // server had already closed: the request can go again on a new one).
  Result<HttpResponse> RoundTrip(std::string_view request, Timestamp deadline, const Clock& clock,
                                 bool* silent);

 private:
  explicit HttpConnection(int fd) : fd_(fd) {}
  // Waits until fd_ is ready for `events`, at most until `deadline`.
  Result<bool> Wait(short events, Timestamp deadline, const Clock& clock) const;

  int fd_ = -1;
};

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_HTTP_CONNECTION_H_
