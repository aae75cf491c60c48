#include "sluice/open_store.h"

#include <utility>

#include "sluice/leased_store.h"
#include "sluice/over_limit_cache.h"
#include "sluice/redis_store.h"

namespace sluice {

Result<std::shared_ptr<Store>> OpenStore(std::string_view address,
                                         const OpenStoreOptions& options) {
  if (address == "memory") {
    MemoryStoreOptions memory = options.memory;
    memory.max_key_bytes = options.max_key_bytes;
    return OpenMemoryStore(memory);
  }
  auto redis = ParseRedisAddress(address);
  if (!redis) return std::unexpected(redis.error());
  redis->connections = options.redis_connections;
  redis->connect_timeout = options.redis_connect_timeout;
  redis->command_timeout = options.redis_command_timeout;
  redis->breaker_failures = options.redis_breaker_failures;
  redis->breaker_open_for = options.redis_breaker_open_for;
  redis->max_key_bytes = options.max_key_bytes;
  redis->on_event = options.redis_events;
  if (!options.redis_monitor) redis->monitor_interval = std::chrono::milliseconds(0);
  auto redis_store = OpenRedisStore(*redis);
  if (!redis_store) return std::unexpected(redis_store.error());
  // Layers, each passing on the limits it does not serve: leased limits, then the over-limit
  // cache (which keeps no facts for limits that do not ask Redis every time).
  auto leased = OpenLeasedStore(std::move(*redis_store),
                                {.max_bytes = options.lease_bytes, .clock = options.clock});
  if (!leased) return std::unexpected(leased.error());
  std::shared_ptr<Store> store = std::move(*leased);
  if (options.local_cache_bytes == 0) return store;
  return OpenOverLimitCache(std::move(store), {.max_bytes = options.local_cache_bytes});
}

}  // namespace sluice
