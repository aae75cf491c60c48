// A Redis connection with automatic pipelining. Callers on any number of threads submit
// commands; one I/O thread per connection takes everything queued since its last round trip,
// writes it in one go (one syscall for many commands) and hands each caller its own reply. The
// batching window is exactly one round trip: nothing waits for a timer, and a batch holds at
// most kMaxBatch requests.
//
// Failures are bounded: the socket has the command timeout, so a silent or slow server fails the
// batch within it; the connection is then dropped and re-made on the next request, and after a
// failed connect, requests fail at once until a backoff (doubling up to max_backoff, with
// jitter) has passed. Every submitted request is answered.
//
// The socket is sluice's own (RedisConnection: plaintext or TLS, one code path), connected with
// the connect timeout (TLS handshake included) and written and read with the command timeout.
//
// Stale connections: before a write on a connection idle for kFreshFor or more, the socket is
// polled (no wait): a connection that Redis closed (restart, CLIENT KILL, timeout) reads EOF or
// an error, and is re-made before the batch is sent, so nothing is lost. Over TLS a readable
// socket is not enough to call it closed: a TLS 1.3 server sends session tickets after the
// handshake, so the readable records are read through the session (SSL_peek, no wait), and only
// application data, a close_notify, EOF or an error mean closed. (Under load batches follow each
// other closer than that, and skip the poll: a system call per batch.)
//
// A batch whose first write fails reached Redis not at all, and is sent once more on a fresh
// connection. "Not at all" is counted, not assumed: the write loop knows how many bytes the
// kernel accepted -- plaintext, from send(); over TLS, from the session's own socket BIO, which
// counts every byte of every record (and of anything the session sent first, such as a key
// update) that send() took. A write that fails with that count unchanged put no record on the
// wire, so Redis cannot have decrypted, let alone run, any command of the batch. Once any byte of
// a batch may have reached Redis, a failure fails the batch: a script might have run, and running
// it again would count twice.
//
// Background calls (the store's monitor: PING, INFO, CONFIG GET) are left out of the request
// and batch counts, and a batch holding one tries to connect even during the backoff (the
// monitor's own cadence bounds those tries, and a failed one does not lengthen the backoff).
#ifndef SLUICE_STORE_REDIS_REDIS_PIPELINE_H_
#define SLUICE_STORE_REDIS_REDIS_PIPELINE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sluice/status.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_endpoint.h"

namespace sluice::internal {

class RedisConnection;

// Appends one command in the Redis protocol (RESP) to `out`.
void AppendCommand(std::string& out, std::span<const std::string_view> args);

// An error that is about the connection (I/O, timeout, unreachable), not a Redis error reply.
// Its message starts with this prefix.
inline constexpr std::string_view kConnectionErrorPrefix = "redis connection: ";
inline bool IsConnectionError(const Error& e) {
  return e.message.starts_with(kConnectionErrorPrefix);
}

// In a connection error's message: the failure cost no time, so retrying it costs nothing either:
// Redis refused the connection (it is down but its host answers), refused the credentials, or a
// reconnect is waiting out its short pace. The circuit breaker, which exists to stop callers
// paying timeouts, does not count these; otherwise it stays open after Redis is back and the
// first requests then are degraded for nothing.
inline constexpr std::string_view kRefusedAtOnceText = "refused at once: ";
inline bool IsRefusedAtOnce(const Error& e) {
  return IsConnectionError(e) && e.message.find(kRefusedAtOnceText) != std::string::npos;
}

// In a connection error's message: Redis refused the credentials when connecting.
inline constexpr std::string_view kAuthFailedText = "authentication failed: ";
inline bool IsAuthFailure(const Error& e) {
  return e.message.starts_with("NOAUTH") || e.message.starts_with("WRONGPASS") ||
         (IsConnectionError(e) && e.message.find(kAuthFailedText) != std::string::npos);
}

class PipelinedConnection {
 public:
  static constexpr size_t kMaxBatch = 512;
  static constexpr std::chrono::milliseconds kFreshFor{1};

  explicit PipelinedConnection(RedisEndpoint endpoint);
  // Answers whatever is queued with an error, then joins the thread: never to be run on that
  // thread (the Redis store's deleter sees to it).
  ~PipelinedConnection();
  PipelinedConnection(const PipelinedConnection&) = delete;
  PipelinedConnection& operator=(const PipelinedConnection&) = delete;

  using Callback = std::function<void(Result<RedisReply>)>;

  // Sends `commands` (RESP, `count` commands back to back: nothing else is interleaved on this
  // connection, as ASKING + EVALSHA needs) and returns the reply to the last one. A Redis error
  // reply to any of them comes back as an Error with Redis's message.
  Result<RedisReply> Call(std::string commands, int count = 1, bool background = false);

  // The same without waiting: `done` gets the reply on the connection's I/O thread (or at once,
  // on the caller's thread, when the connection is shutting down). `done` must not block: it
  // may queue more calls (CallAsync), never wait for one (Call), since the thread it runs on is
  // the one that would answer. It is destroyed as soon as it has returned, on the same thread.
  void CallAsync(std::string commands, int count, Callback done, bool background = false);

  const RedisEndpoint& endpoint() const { return endpoint_; }

  // Whether the calling thread is this connection's I/O thread (where callbacks run).
  bool OnItsThread() const { return std::this_thread::get_id() == io_.get_id(); }

  // Requests written and round trips made, for benchmarks (commands per write).
  uint64_t requests_sent() const { return requests_sent_.load(std::memory_order_relaxed); }
  uint64_t batches_sent() const { return batches_sent_.load(std::memory_order_relaxed); }
  // Calls answered by Redis (error replies included): the monitor PINGs a connection only when
  // this did not move since its last round.
  uint64_t answers() const { return answers_.load(std::memory_order_relaxed); }

 private:
  struct Op {
    std::string commands;
    int count = 1;
    Callback done;
    bool background = false;
  };

  void Run();
  // Connected, and not closed by Redis meanwhile. ignore_backoff: a monitor's call, or a
  // resend after a failed first write.
  bool EnsureConnected(std::string& why, bool ignore_backoff,
                       std::chrono::steady_clock::time_point now);
  // Appends the batch and writes it. False when the write failed; `sent_nothing` then says
  // whether no byte of it can have reached Redis.
  bool Write(const std::vector<Op>& batch, bool& sent_nothing);
  void Disconnect();
  void Answer(Op& op, Result<RedisReply> result);

  const RedisEndpoint endpoint_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Op> queue_;   // guarded by mu_
  bool stopping_ = false;  // guarded by mu_

  // Owned by the I/O thread.
  std::unique_ptr<RedisConnection> conn_;
  std::string out_;  // the batch being written
  std::chrono::steady_clock::time_point next_connect_{};
  std::chrono::milliseconds backoff_{0};
  bool fast_failure_ = false;  // the last connect was refused at once (see IsRefusedAtOnce)
  // When the last batch that was answered in full was sent.
  std::chrono::steady_clock::time_point last_answered_{};
  uint64_t jitter_state_;

  std::atomic<uint64_t> requests_sent_{0};
  std::atomic<uint64_t> batches_sent_{0};
  std::atomic<uint64_t> answers_{0};
  std::thread io_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_PIPELINE_H_
