// How the Redis store reaches Redis: one server, or a Redis Cluster. Either way a caller hands
// over a Lua script, its keys (all in one hash slot) and its arguments, and gets the script's
// reply; scripts run with EVALSHA, loaded on first use and again on NOSCRIPT (a restarted
// server, or a replica promoted after a failover, has an empty script cache).
//
// The cluster transport keeps the slot map from CLUSTER SLOTS and routes each call by the CRC16
// hash slot of its first key. It follows MOVED (and refreshes the map), ASK (ASKING first, on
// the same connection), retries TRYAGAIN and CLUSTERDOWN a bounded number of times with a short
// pause, and after a connection error re-reads the map, so that a master replaced by its replica
// is found again once the cluster has failed over.
//
// Every node has its own circuit breaker: after consecutive connection failures or timeouts the
// node is refused at once (an error that IsShortCircuit) until a probe is let through, so one dead
// master of a cluster costs nothing to the slots the others serve.
#ifndef SLUICE_STORE_REDIS_REDIS_TRANSPORT_H_
#define SLUICE_STORE_REDIS_REDIS_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/clock.h"
#include "sluice/redis_store.h"
#include "sluice/status.h"
#include "store/redis/circuit_breaker.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_pipeline.h"

namespace sluice::internal {

struct TransportStats {
  uint64_t requests = 0;           // commands written (ASKING included)
  uint64_t batches = 0;            // writes: requests / batches is the pipelining factor
  uint64_t redirects = 0;          // MOVED and ASK followed
  uint64_t retries = 0;            // TRYAGAIN / CLUSTERDOWN / connection errors retried
  uint64_t map_refreshes = 0;      // CLUSTER SLOTS reads
  uint64_t short_circuited = 0;    // calls refused by an open breaker
  uint64_t connection_errors = 0;  // calls failed by I/O errors and timeouts
};

// What every server's node is made with.
struct NodeSettings {
  CircuitBreaker::Options breaker;
  const Clock* clock = nullptr;  // must outlive the transport
  // State changes (connection, breaker, auth, eviction) go here; must outlive the transport.
  // Null: none.
  std::function<void(RedisEvent)>* events = nullptr;
};

// What the monitor last read of one server's eviction settings.
struct EvictionState {
  bool watched = false;  // read at least once
  bool unsafe = false;   // maxmemory set and a policy other than noeviction
  uint64_t evicted = 0;  // evicted_keys growth seen since the first reading
};

// The error a call gets when its node's breaker is open: a connection error, without I/O.
inline constexpr std::string_view kCircuitOpenMessage = "redis connection: circuit open";
inline bool IsShortCircuit(const Error& e) { return e.message.starts_with(kCircuitOpenMessage); }

class RedisTransport {
 public:
  virtual ~RedisTransport() = default;

  // Runs `script` where keys[0] lives (every key of one call must share its hash slot).
  virtual Result<RedisReply> Eval(const LuaScript& script, std::span<const std::string> keys,
                                  std::span<const std::string> args) = 0;

  // Eval without waiting: `done` gets the reply, on a connection's I/O thread or on the
  // caller's (see PipelinedConnection::CallAsync; `done` must not block). The standalone
  // transport is fully asynchronous. The cluster transport runs Eval on the caller's thread and
  // then calls `done` there: redirects need the slot map, read synchronously, so never call it
  // from inside a callback.
  virtual void EvalAsync(const LuaScript& script, std::vector<std::string> keys,
                         std::vector<std::string> args, PipelinedConnection::Callback done) {
    done(Eval(script, keys, args));
  }

  // Whether a call for `key` would be refused by its node's open breaker right now. A read only:
  // lets a caller skip building a request that would not be sent.
  virtual bool Refuses(std::string_view key) = 0;

  // Any command, to the node serving `key` (admin and tests).
  virtual Result<RedisReply> Command(std::string_view key,
                                     std::span<const std::string_view> args) = 0;

  virtual TransportStats Stats() const = 0;

  // The monitor's round (RedisStore::MonitorOnce): PINGs, without waiting, every connection
  // that Redis has not answered since the last round; reads each server's eviction policy,
  // maxmemory and evicted_keys (waiting), reporting changes as events.
  virtual void Monitor() = 0;
  // Summed over servers: watched if any is, unsafe if any is.
  virtual EvictionState Eviction() const = 0;

  // Whether the calling thread is one of this transport's connections' I/O threads: one that
  // destroying the transport would join.
  virtual bool OnIoThread() const = 0;
};

// `connections` pipelined connections to one server. Nothing is connected until first use.
std::unique_ptr<RedisTransport> MakeStandaloneTransport(const RedisEndpoint& endpoint,
                                                        int connections, NodeSettings settings);

// A Redis Cluster reached through any of `seeds` (their timeouts and credentials are used for
// every node). The slot map is read on first use.
std::unique_ptr<RedisTransport> MakeClusterTransport(std::vector<RedisEndpoint> seeds,
                                                     int connections, NodeSettings settings);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_TRANSPORT_H_
