// The Redis store (first slice of issue 3): a Limiter whose counters live in one Redis server,
// every read-decide-write one atomic Lua script, so any number of sluice nodes share one exact
// count per key.
//
//   RedisStoreOptions options;  options.port = 6379;
//   auto limiter = MakeRedisLimiter(spec, options);
//
// This slice supports every algorithm but sliding_window_log on a standalone server, with a
// circuit breaker; the log, Redis Cluster and pipelining come next.
// Time is Redis's own clock (TIME, microseconds) unless use_server_time is false, when the
// `now` passed to Decide is used (replays and parity tests). Keys:
// <prefix>:{<limit id>:<escaped identity>}, every one with a TTL no longer than the time it
// takes its counter to replenish. Thread-safe (a pool of connections).
#ifndef SLUICE_REDIS_STORE_H_
#define SLUICE_REDIS_STORE_H_

#include <chrono>
#include <memory>
#include <string>

#include "sluice/clock.h"
#include "sluice/limiter.h"
#include "sluice/status.h"

namespace sluice {

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;  // ACL user (AUTH user password); empty: AUTH password, or no AUTH
  std::string password;
  int db = 0;
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds command_timeout{50};
  bool use_server_time = true;
  bool fail_open = true;  // when Redis cannot answer: admit (true) or reject (false)
  std::string key_prefix = "sluice";
  std::string limit_id = "default";  // namespaces this limit's keys
  size_t max_key_bytes = 1024;       // identities longer than this get kInvalidRequest
  // Circuit breaker: after this many consecutive failures, refuse at once for breaker_open_for,
  // then let one probe through.
  int breaker_failures = 5;
  std::chrono::milliseconds breaker_open_for{1000};
  const Clock* clock = nullptr;  // for the breaker; nullptr: a MonotonicClock of the limiter's own
};

// Parses "redis://[user:password@]host:port[/db]" into options (other fields left default).
Result<RedisStoreOptions> ParseRedisAddress(std::string_view address);

Result<std::unique_ptr<Limiter>> MakeRedisLimiter(const LimitSpec& spec,
                                                  const RedisStoreOptions& options);

// "<prefix>:{<limit id>:<identity>}" with '{', '}', '%', ':' and bytes outside printable ASCII
// written as %XX, so no identity can leave its hash tag or its namespace.
std::string RedisKeyFor(const RedisStoreOptions& options, std::string_view identity);

}  // namespace sluice

#endif  // SLUICE_REDIS_STORE_H_
