// One connection to Redis, plaintext or TLS on the same code path: sluice's own non-blocking
// connect (bounded by the connect timeout, TLS handshake included), writes and reads bounded by
// the command timeout with poll() (a silent peer costs a timeout, never a thread), and hiredis'
// reader (redisReader) for parsing replies. Used by the pipelined connections and RedisClient;
// docs/redis.md says why sluice does not use hiredis' own redisContext any more (Debian 12's
// hiredis 0.14 has no TLS). Not thread-safe: one thread at a time.
#ifndef SLUICE_STORE_REDIS_REDIS_CONNECTION_H_
#define SLUICE_STORE_REDIS_REDIS_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "sluice/status.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_endpoint.h"

struct redisReader;
struct redisReply;

namespace sluice::internal {

class TlsSession;

struct FreeRedisReply {
  void operator()(redisReply* r) const;
};
using RedisReplyPtr = std::unique_ptr<redisReply, FreeRedisReply>;

class RedisConnection {
 public:
  // Why a connect failed: `message` (no prefix), and whether it failed at once (the server's
  // host refused the connection) rather than after a wait.
  struct ConnectFailure {
    std::string message;
    bool refused = false;
  };

  // TCP to endpoint.host:port (each address it resolves to, in turn), then the TLS handshake
  // when endpoint.tls is set, all within endpoint.connect_timeout. No AUTH or SELECT: see
  // RedisClient::Connect and the pipeline.
  static std::expected<std::unique_ptr<RedisConnection>, ConnectFailure> Open(
      const RedisEndpoint& endpoint);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Writes all of `data` within the command timeout. On failure, `sent_nothing` says whether no
  // byte of it reached the kernel (so none can have reached Redis).
  bool Write(std::string_view data, bool& sent_nothing);

  // The next reply, waiting up to the command timeout; null on an I/O error, a timeout, EOF or a
  // protocol error (error() says which; the connection is then unusable).
  RedisReplyPtr ReadReply();

  // One command and its reply. A Redis error reply is an Error with Redis's message; an I/O
  // failure is an Error "redis: <why>" with `io_failed` set.
  Result<RedisReply> Command(std::span<const std::string> args, bool* io_failed = nullptr);

  // With nothing outstanding, whether the server has not closed the connection: Redis sends
  // nothing unasked, so anything readable means it closed or is closing it -- except, over TLS,
  // records that carry no application data (TLS 1.3 session tickets after the handshake), which
  // are read through and do not count. No waiting.
  bool StillOpen();

  // For a subscription, once poll() says the socket is readable: reads everything that has
  // arrived (through TLS: records without application data are read through too) without
  // waiting for more. False when the connection failed or the server closed it (error() says
  // why). The complete replies are then taken with BufferedReply.
  bool ReadArrived();
  // A complete reply ReadArrived read, or null when there is none (yet); `failed` is set (and
  // error()) on a protocol error.
  RedisReplyPtr BufferedReply(bool& failed);

  const std::string& error() const { return error_; }
  int fd() const { return fd_; }  // tests: to wait for the socket to be readable

 private:
  RedisConnection(int fd, std::chrono::milliseconds command_timeout);
  // poll() for `events` until `deadline`; false (error_ set) on a timeout or a poll error.
  bool Wait(short events, std::chrono::steady_clock::time_point deadline);
  bool Handshake(std::chrono::steady_clock::time_point deadline);
  // One read of what has arrived, into the reader, without waiting: kWantRead when nothing
  // has (or a TLS record held no data), kWantWrite when TLS must send first, kFailed with
  // error_ set. Fill and ReadArrived differ only in what they do on kFed and kWantRead.
  enum class ReadStep { kFed, kWantRead, kWantWrite, kFailed };
  ReadStep ReadOnce();
  // Reads what is there (waiting up to `deadline` for something) into the reader.
  bool Fill(std::chrono::steady_clock::time_point deadline);

  int fd_;
  const std::chrono::milliseconds command_timeout_;
  std::unique_ptr<TlsSession> tls_;
  redisReader* reader_;
  std::string error_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_CONNECTION_H_
