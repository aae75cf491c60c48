#include "store/redis/redis_connection.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "store/redis/redis_pipeline.h"
#include "store/redis/redis_reply.h"
#include "store/redis/redis_tls.h"

namespace sluice::internal {
namespace {

using Clock = std::chrono::steady_clock;

// Connects `fd` (non-blocking) to `address` by `deadline`: 0, or the errno of the failure
// (ETIMEDOUT when the deadline passed first).
int ConnectBy(int fd, const addrinfo& address, Clock::time_point deadline) {
  if (connect(fd, address.ai_addr, address.ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return ETIMEDOUT;
    pollfd p{fd, POLLOUT, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) return errno;
    if (r > 0) break;
  }
  int error = 0;
  socklen_t len = sizeof error;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
  return error;
}

// A connected non-blocking Unix socket to `path` by `deadline`, or the errno of the failure.
std::expected<int, int> ConnectUnix(const std::string& path, Clock::time_point deadline) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  if (path.size() >= sizeof un.sun_path) return std::unexpected(ENAMETOOLONG);
  std::memcpy(un.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(errno);
  addrinfo address{};
  address.ai_addr = reinterpret_cast<sockaddr*>(&un);
  address.ai_addrlen = sizeof un;
  if (const int error = ConnectBy(fd, address, deadline); error != 0) {
    close(fd);
    return std::unexpected(error);
  }
  return fd;
}

}  // namespace

void FreeRedisReply::operator()(redisReply* r) const { freeReplyObject(r); }

RedisConnection::RedisConnection(int fd, std::chrono::milliseconds command_timeout)
    : fd_(fd), command_timeout_(command_timeout), reader_(redisReaderCreate()) {
  BoundReplies(reader_);
}

RedisConnection::~RedisConnection() {
  tls_.reset();
  redisReaderFree(reader_);
  close(fd_);
}

auto RedisConnection::Open(const RedisEndpoint& endpoint)
    -> std::expected<std::unique_ptr<RedisConnection>, ConnectFailure> {
  const auto deadline = Clock::now() + endpoint.connect_timeout;
  if (!endpoint.unix_path.empty()) {  // redis+unix://: never TLS (no rediss+unix scheme)
    const auto fd = ConnectUnix(endpoint.unix_path, deadline);
    if (!fd) {
      // A socket that is not there (Redis down, its file removed) fails at once, as refused.
      return std::unexpected(
          ConnectFailure{fd.error() == ETIMEDOUT ? "connect timed out" : std::strerror(fd.error()),
                         fd.error() == ECONNREFUSED || fd.error() == ENOENT});
    }
    return std::unique_ptr<RedisConnection>(new RedisConnection(*fd, endpoint.command_timeout));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (const int rc = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &addresses);
      rc != 0) {
    return std::unexpected(
        ConnectFailure{"cannot resolve " + endpoint.host + ": " + gai_strerror(rc), false});
  }
  ConnectFailure failure{"no address", true};
  std::unique_ptr<RedisConnection> connection;
  for (const addrinfo* a = addresses; a != nullptr && connection == nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    const int error = fd < 0 ? errno : ConnectBy(fd, *a, deadline);
    if (error != 0) {
      if (fd >= 0) close(fd);
      // Refused at once only if every address refused.
      failure = ConnectFailure{error == ETIMEDOUT ? "connect timed out" : std::strerror(error),
                               failure.refused && error == ECONNREFUSED};
      if (error == ETIMEDOUT) break;
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    connection.reset(new RedisConnection(fd, endpoint.command_timeout));
  }
  freeaddrinfo(addresses);
  if (connection == nullptr) return std::unexpected(failure);
  if (endpoint.tls == nullptr) return connection;
  const std::string& name = endpoint.tls_name.empty() ? endpoint.host : endpoint.tls_name;
  auto session = TlsSession::Make(*endpoint.tls, connection->fd_, name);
  if (!session) return std::unexpected(ConnectFailure{session.error().message, false});
  connection->tls_ = std::move(*session);
  if (!connection->Handshake(deadline)) {
    return std::unexpected(ConnectFailure{"TLS handshake: " + connection->error_, false});
  }
  return connection;
}

bool RedisConnection::Wait(short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      error_ = "timed out";
      return false;
    }
    pollfd p{fd_, events, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return true;  // an error or hang-up too: the next read or write says which
    if (r < 0 && errno != EINTR) {
      error_ = std::strerror(errno);
      return false;
    }
  }
}

bool RedisConnection::Handshake(Clock::time_point deadline) {
  for (;;) {
    switch (tls_->Handshake()) {
      case TlsIo::kDone:
        return true;
      case TlsIo::kWantRead:
        if (!Wait(POLLIN, deadline)) return false;
        break;
      case TlsIo::kWantWrite:
        if (!Wait(POLLOUT, deadline)) return false;
        break;
      default:
        error_ = tls_->error();
        return false;
    }
  }
}

bool RedisConnection::Write(std::string_view data, bool& sent_nothing) {
  const auto deadline = Clock::now() + command_timeout_;
  const uint64_t tls_before = tls_ != nullptr ? tls_->bytes_written() : 0;
  size_t done = 0;
  bool ok = true;
  while (ok && done < data.size()) {
    if (tls_ != nullptr) {
      size_t n = 0;
      switch (tls_->Write(data.data() + done, data.size() - done, n)) {
        case TlsIo::kDone:
          done += n;
          break;
        case TlsIo::kWantWrite:
          ok = Wait(POLLOUT, deadline);
          break;
        case TlsIo::kWantRead:
          ok = Wait(POLLIN, deadline);
          break;
        default:
          error_ = tls_->error();
          ok = false;
      }
      continue;
    }
    const ssize_t n = send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n >= 0) {
      done += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ok = Wait(POLLOUT, deadline);
    } else if (errno != EINTR) {
      error_ = std::strerror(errno);
      ok = false;
    }
  }
  // Over TLS, the session's BIO counts what the kernel took: records of this data, or anything
  // the session had to send first, make it "something sent".
  sent_nothing = !ok && (tls_ != nullptr ? tls_->bytes_written() == tls_before : done == 0);
  return ok;
}

RedisConnection::ReadStep RedisConnection::ReadOnce() {
  char buf[16 * 1024];
  if (tls_ != nullptr) {
    size_t n = 0;
    switch (tls_->Read(buf, sizeof buf, n)) {
      case TlsIo::kDone:
        redisReaderFeed(reader_, buf, n);
        return ReadStep::kFed;
      case TlsIo::kWantRead:
        return ReadStep::kWantRead;
      case TlsIo::kWantWrite:
        return ReadStep::kWantWrite;
      default:
        error_ = tls_->error();
        return ReadStep::kFailed;
    }
  }
  for (;;) {
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      redisReaderFeed(reader_, buf, static_cast<size_t>(n));
      return ReadStep::kFed;
    }
    if (n == 0) {
      error_ = "Server closed the connection";
      return ReadStep::kFailed;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadStep::kWantRead;
    if (errno != EINTR) {
      error_ = std::strerror(errno);
      return ReadStep::kFailed;
    }
  }
}

bool RedisConnection::Fill(Clock::time_point deadline) {
  for (;;) {
    // Plaintext waits first: a reply is seldom there the moment a request has been written.
    // (A TLS session may hold decrypted bytes the socket no longer shows.)
    if (tls_ == nullptr && !Wait(POLLIN, deadline)) return false;
    switch (ReadOnce()) {
      case ReadStep::kFed:
        return true;
      case ReadStep::kWantRead:
        if (tls_ != nullptr && !Wait(POLLIN, deadline)) return false;
        continue;
      case ReadStep::kWantWrite:
        if (!Wait(POLLOUT, deadline)) return false;
        continue;
      case ReadStep::kFailed:
        return false;
    }
  }
}

RedisReplyPtr RedisConnection::ReadReply() {
  const auto deadline = Clock::now() + command_timeout_;
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      error_ = std::string("protocol error: ") + reader_->errstr;
      return nullptr;
    }
    if (reply != nullptr) return RedisReplyPtr(static_cast<redisReply*>(reply));
    if (!Fill(deadline)) return nullptr;
  }
}

Result<RedisReply> RedisConnection::Command(std::span<const std::string> args, bool* io_failed) {
  std::vector<std::string_view> views(args.begin(), args.end());
  std::string resp;
  AppendCommand(resp, views);
  bool sent_nothing = false;
  RedisReplyPtr r = Write(resp, sent_nothing) ? ReadReply() : nullptr;
  if (io_failed != nullptr) *io_failed = r == nullptr;
  if (r == nullptr) return MakeError("redis: " + error_);
  if (r->type == REDIS_REPLY_ERROR) return MakeError(std::string(r->str, r->len));
  return CopyReply(r.get());
}

bool RedisConnection::StillOpen() {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) == 0) return true;
  // Over TLS, readable bytes may be records without application data: read them through.
  return tls_ != nullptr && tls_->PeekIdle() == TlsIo::kWantRead;
}

bool RedisConnection::ReadArrived() {
  for (;;) {
    switch (ReadOnce()) {
      case ReadStep::kFed:
        continue;
      case ReadStep::kWantRead:
        return true;  // nothing more has arrived
      case ReadStep::kWantWrite:
        if (!Wait(POLLOUT, Clock::now() + command_timeout_)) return false;
        continue;
      case ReadStep::kFailed:
        return false;
    }
  }
}

RedisReplyPtr RedisConnection::BufferedReply(bool& failed) {
  void* reply = nullptr;
  failed = redisReaderGetReply(reader_, &reply) != REDIS_OK;
  if (failed) error_ = std::string("protocol error: ") + reader_->errstr;
  return RedisReplyPtr(static_cast<redisReply*>(reply));
}

}  // namespace sluice::internal
