// A small synchronous Redis client over a RedisConnection (plaintext or TLS): bounded connect and
// command timeouts, replies copied into plain values (hiredis stays out of every other header),
// and Lua scripts run with EVALSHA, loading the script on NOSCRIPT and retrying once. Not
// thread-safe: one per thread, or a pool. This is the first slice of the Redis store (issue 3).
#ifndef SLUICE_STORE_REDIS_REDIS_CLIENT_H_
#define SLUICE_STORE_REDIS_REDIS_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/status.h"

struct redisReply;

namespace sluice::internal {

class RedisConnection;
struct RedisEndpoint;

struct RedisReply {
  enum class Type { kNil, kInteger, kString, kStatus, kArray };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;  // kString and kStatus
  std::vector<RedisReply> elements;
};

// Copies a hiredis reply into a RedisReply (error replies become kStatus-like strings; callers
// check the type first).
RedisReply CopyReply(const redisReply* r);

struct LuaScript {
  std::string source;
};

class RedisClient {
 public:
  static Result<std::unique_ptr<RedisClient>> Connect(const std::string& host, int port,
                                                      std::chrono::milliseconds connect_timeout,
                                                      std::chrono::milliseconds command_timeout);
  // To `endpoint` (TLS when it says so), then AUTH and SELECT as it says.
  static Result<std::unique_ptr<RedisClient>> Connect(const RedisEndpoint& endpoint);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // One command; a Redis error reply (-ERR ...) comes back as an Error, as do I/O failures and
  // timeouts (after which the connection is unusable: reconnect).
  Result<RedisReply> Command(const std::vector<std::string>& args);

  // EVALSHA, loading `script` on first use and again if the server lost it (NOSCRIPT).
  Result<RedisReply> Eval(const LuaScript& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args);

 private:
  explicit RedisClient(std::unique_ptr<RedisConnection> connection);
  Result<std::string> Load(const LuaScript& script);

  std::unique_ptr<RedisConnection> connection_;
  std::unordered_map<const LuaScript*, std::string> sha_;  // scripts loaded on this connection
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_CLIENT_H_
