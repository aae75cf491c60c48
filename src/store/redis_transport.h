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
#ifndef SLUICE_STORE_REDIS_TRANSPORT_H_
#define SLUICE_STORE_REDIS_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/status.h"
#include "store/redis_client.h"
#include "store/redis_pipeline.h"

namespace sluice::internal {

struct TransportStats {
  uint64_t requests = 0;       // commands written (ASKING included)
  uint64_t batches = 0;        // writes: requests / batches is the pipelining factor
  uint64_t redirects = 0;      // MOVED and ASK followed
  uint64_t retries = 0;        // TRYAGAIN / CLUSTERDOWN / connection errors retried
  uint64_t map_refreshes = 0;  // CLUSTER SLOTS reads
};

class RedisTransport {
 public:
  virtual ~RedisTransport() = default;

  // Runs `script` where keys[0] lives (every key of one call must share its hash slot).
  virtual Result<RedisReply> Eval(const LuaScript& script, std::span<const std::string> keys,
                                  std::span<const std::string> args) = 0;

  // Any command, to the node serving `key` (admin and tests).
  virtual Result<RedisReply> Command(std::string_view key,
                                     std::span<const std::string_view> args) = 0;

  virtual TransportStats Stats() const = 0;
};

// `connections` pipelined connections to one server. Nothing is connected until first use.
std::unique_ptr<RedisTransport> MakeStandaloneTransport(const RedisEndpoint& endpoint,
                                                        int connections);

// A Redis Cluster reached through any of `seeds` (their timeouts and credentials are used for
// every node). The slot map is read on first use.
std::unique_ptr<RedisTransport> MakeClusterTransport(std::vector<RedisEndpoint> seeds,
                                                     int connections);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_TRANSPORT_H_
