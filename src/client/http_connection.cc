#include "client/http_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "util/ascii.h"

namespace sluice::client {
namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxBodyBytes = 16 * 1024 * 1024;

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The value of header `name` in a header block ("Name: value\r\n" lines), or nullopt.
std::optional<std::string_view> HeaderValue(std::string_view block, std::string_view name) {
  size_t at = 0;
  while (at < block.size()) {
    size_t end = block.find("\r\n", at);
    if (end == std::string_view::npos) end = block.size();
    const std::string_view line = block.substr(at, end - at);
    at = end + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (!util::EqualsIgnoreAsciiCase(line.substr(0, colon), name)) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    return value;
  }
  return std::nullopt;
}

}  // namespace

Result<SocketAddress> ParseSocketAddress(const std::string& host, int port) {
  if (port < 1 || port > 65535)
    return MakeError("port must be 1..65535, not " + std::to_string(port));
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    a.length = sizeof(sockaddr_in);
    return a;
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    a.length = sizeof(sockaddr_in6);
    return a;
  }
  return MakeError("host must be an IPv4 or IPv6 address, not '" + host + "'");
}

HttpConnection::HttpConnection(HttpConnection&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
HttpConnection& HttpConnection::operator=(HttpConnection&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}
HttpConnection::~HttpConnection() {
  if (fd_ >= 0) close(fd_);
}

Result<bool> HttpConnection::Wait(short events, Timestamp deadline, const Clock& clock) const {
  const Duration left = deadline - clock.Now();
  if (left <= Duration{0}) return MakeError("deadline exceeded");
  // Rounded up to a millisecond, so a wait shorter than one is not a busy loop.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  pollfd p{fd_, events, 0};
  int n;
  do {
    n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, INT32_MAX)));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return MakeError(Errno("poll"));
  if (n == 0) return MakeError("deadline exceeded");
  return true;
}

Result<HttpConnection> HttpConnection::Connect(const SocketAddress& address, Timestamp deadline,
                                               const Clock& clock) {
  const int fd = socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return MakeError(Errno("socket"));
  HttpConnection c(fd);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    if (errno != EINPROGRESS) return MakeError(Errno("connect"));
    auto ready = c.Wait(POLLOUT, deadline, clock);
    if (!ready) return MakeError("connect: " + ready.error().message);
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return MakeError(std::string("connect: ") + std::strerror(err));
  }
  return c;
}

Result<HttpResponse> HttpConnection::RoundTrip(std::string_view request, Timestamp deadline,
                                               const Clock& clock, bool* silent) {
  *silent = false;
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      auto ready = Wait(POLLOUT, deadline, clock);
      if (!ready) return std::unexpected(ready.error());
      continue;
    }
    *silent = true;  // nothing was answered: the peer had closed
    return MakeError(Errno("send"));
  }

  std::string in;
  size_t header_end = std::string::npos;
  size_t content_length = 0;
  HttpResponse response;
  char buf[16 * 1024];
  while (true) {
    if (header_end != std::string::npos && in.size() >= header_end + 4 + content_length) break;
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      *silent = in.empty();
      return MakeError(n == 0 ? std::string("sluiced closed the connection") : Errno("recv"));
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      auto ready = Wait(POLLIN, deadline, clock);
      if (!ready) return std::unexpected(ready.error());
      continue;
    }
    in.append(buf, static_cast<size_t>(n));
    if (header_end != std::string::npos) continue;
    header_end = in.find("\r\n\r\n");
    if (header_end == std::string::npos) {
      if (in.size() > kMaxHeaderBytes) return MakeError("answer headers too long");
      continue;
    }
    // "HTTP/1.1 200 OK"
    const std::string_view head(in.data(), header_end);
    if (head.substr(0, 7) != "HTTP/1." || head.size() < 12) return MakeError("not an HTTP answer");
    const auto status = std::from_chars(head.data() + 9, head.data() + 12, response.status);
    if (status.ec != std::errc{}) return MakeError("not an HTTP answer");
    const size_t line_end = head.find("\r\n");
    const std::string_view headers =
        line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 2);
    const auto length = HeaderValue(headers, "Content-Length");
    if (!length) return MakeError("answer without Content-Length");
    const auto parsed =
        std::from_chars(length->data(), length->data() + length->size(), content_length);
    if (parsed.ec != std::errc{} || parsed.ptr != length->data() + length->size() ||
        content_length > kMaxBodyBytes) {
      return MakeError("bad Content-Length in the answer");
    }
    const auto connection = HeaderValue(headers, "Connection");
    response.keep_alive = !(connection && util::EqualsIgnoreAsciiCase(*connection, "close")) &&
                          head.substr(0, 8) == "HTTP/1.1";
  }
  response.body = in.substr(header_end + 4, content_length);
  if (in.size() > header_end + 4 + content_length) response.keep_alive = false;  // not ours
  return response;
}

}  // namespace sluice::client
