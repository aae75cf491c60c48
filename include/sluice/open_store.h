// OpenStore: a store from its address, as sluiced's --store and embedders name one.
//
//   auto store = OpenStore("redis://127.0.0.1:6379/0");
//
// "memory" is the embedded memory store; "redis://[user:password@]host:port[/db]" one Redis
// server; "redis+cluster://[user:password@]host:port[,host:port...]" a Redis Cluster. A Redis
// store is opened behind the leased layer (leased_store.h), the batched layer (batched_store.h:
// it decides the limits made with `sync: batched` locally), each passing every other limit
// through, and, unless local_cache_bytes is 0, an over-limit cache (over_limit_cache.h). With a
// global_store, either store is opened behind the region layer (region_store.h), which serves
// the limits of scope global whose regions lease their parts.
#ifndef SLUICE_OPEN_STORE_H_
#define SLUICE_OPEN_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "sluice/batched_store.h"
#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/over_limit_cache.h"
#include "sluice/redis_store.h"
#include "sluice/scheduler.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice {

struct OpenStoreOptions {
  MemoryStoreOptions memory;  // "memory"; max_bytes is shared by the store's limits
  // Redis: set over what the address says.
  int redis_connections = 4;
  // TLS files and name checks for a rediss:// store or global store (whether TLS is on comes
  // from each address's scheme).
  RedisTlsOptions redis_tls;
  std::chrono::milliseconds redis_connect_timeout{200};
  std::chrono::milliseconds redis_command_timeout{50};
  int redis_breaker_failures = 5;
  std::chrono::milliseconds redis_breaker_open_for{1000};
  // redis+sentinel://: the sentinels' own password (RedisStoreOptions::sentinel_password).
  std::string redis_sentinel_password;
  RedisEventHook redis_events;  // the Redis store's state changes, rate-limited (for logs)
  // false: Redis decides at the `now` passed in, not its own TIME (replays, the store suite).
  bool redis_server_time = true;
  std::string redis_key_prefix = "sluice";  // RedisStoreOptions::key_prefix
  size_t max_key_bytes = 65535;             // longest identity either store accepts
  // Redis: the over-limit cache's memory bound (OverLimitCacheOptions::max_bytes); 0: no cache,
  // every decision asks Redis.
  size_t local_cache_bytes = size_t{64} << 20;
  // Redis: the leases of `sync: leased` limits (LeasedStoreOptions::max_bytes).
  size_t lease_bytes = size_t{16} << 20;
  // The clock leases expire by, batched limits sync by and region parts expire by; null: the
  // scheduler's, or (no scheduler either) a MonotonicClock of the store's own. Must outlive it.
  const Clock* clock = nullptr;
  // Where every layer's background work runs (the Redis monitor, leases given back, batched
  // syncs, region parts renewed); null: a ThreadScheduler of the store's own on its clock. A
  // ManualScheduler never advanced runs none of it (--check-config: nothing connects until
  // first use, and the global store is not written to).
  std::shared_ptr<Scheduler> scheduler = nullptr;
  // Redis: the memory the batched layer's views may take (BatchedStoreOptions::max_bytes).
  size_t batched_bytes = size_t{16} << 20;
  // docs/regions.md: this node's region, and the global store's address ("redis://..."); empty
  // global_store: no region layer (limits of regions mode leased are then refused by the config).
  std::string region;
  std::string global_store;
};

Result<std::shared_ptr<Store>> OpenStore(std::string_view address, const OpenStoreOptions& options);
// The same with every option left to its default. (Out of line rather than a `{}` argument:
// GCC 12 at -O3 takes the strings of such a temporary for uninitialized.)
Result<std::shared_ptr<Store>> OpenStore(std::string_view address);

}  // namespace sluice

#endif  // SLUICE_OPEN_STORE_H_
