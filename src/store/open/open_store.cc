#include "sluice/open_store.h"

#include <utility>

#include "sluice/batched_store.h"
#include "sluice/clock.h"
#include "sluice/leased_store.h"
#include "sluice/over_limit_cache.h"
#include "sluice/redis_store.h"
#include "sluice/region_store.h"
#include "sluice/scheduler.h"

namespace sluice {
namespace {

// `store` becomes `layer`, the store that wraps it, if it could be opened.
template <typename T>
Result<void> Wrap(std::shared_ptr<Store>& store, Result<std::shared_ptr<T>> layer) {
  if (!layer) return std::unexpected(layer.error());
  store = std::move(*layer);
  return {};
}

// The caller's clock, for the batched layer: not owned (it must outlive the store); null stays
// null (the scheduler's clock).
std::shared_ptr<const Clock> Unowned(const Clock* clock) {
  if (clock == nullptr) return nullptr;
  return std::shared_ptr<const Clock>(std::shared_ptr<void>(), clock);
}

// The region's own store: memory, or Redis behind its layers.
Result<std::shared_ptr<Store>> OpenRegionalStore(std::string_view address,
                                                 const OpenStoreOptions& options,
                                                 const std::shared_ptr<Scheduler>& scheduler) {
  if (address == "memory") {
    MemoryStoreOptions memory = options.memory;
    memory.max_key_bytes = options.max_key_bytes;
    return OpenMemoryStore(memory);
  }
  auto redis = ParseRedisAddress(address);
  if (!redis) return std::unexpected(redis.error());
  redis->connections = options.redis_connections;
  const bool tls = redis->tls.enabled;
  redis->tls = options.redis_tls;
  redis->tls.enabled = tls;
  redis->connect_timeout = options.redis_connect_timeout;
  redis->command_timeout = options.redis_command_timeout;
  redis->breaker_failures = options.redis_breaker_failures;
  redis->breaker_open_for = options.redis_breaker_open_for;
  redis->sentinel_password = options.redis_sentinel_password;
  redis->max_key_bytes = options.max_key_bytes;
  redis->on_event = options.redis_events;
  redis->use_server_time = options.redis_server_time;
  redis->key_prefix = options.redis_key_prefix;
  redis->clock = options.clock;
  redis->scheduler = scheduler;
  auto redis_store = OpenRedisStore(*redis);
  if (!redis_store) return std::unexpected(redis_store.error());
  // Layers, innermost first, each passing on the limits it does not serve: leased limits,
  // batched limits, then the over-limit cache (which keeps no facts for limits that do not ask
  // Redis every time).
  std::shared_ptr<Store> store = std::move(*redis_store);
  if (auto ok = Wrap(store, OpenLeasedStore(store, {.max_bytes = options.lease_bytes,
                                                    .clock = options.clock,
                                                    .scheduler = scheduler}));
      !ok) {
    return std::unexpected(ok.error());
  }
  if (auto ok = Wrap(store, OpenBatchedStore(store, {.max_bytes = options.batched_bytes,
                                                     .clock = Unowned(options.clock),
                                                     .scheduler = scheduler}));
      !ok) {
    return std::unexpected(ok.error());
  }
  if (options.local_cache_bytes == 0) return store;
  return OpenOverLimitCache(std::move(store), {.max_bytes = options.local_cache_bytes});
}

// A ThreadScheduler on `clock`, or on a MonotonicClock it owns.
std::shared_ptr<Scheduler> OwnScheduler(const Clock* clock) {
  if (clock != nullptr) return std::make_shared<ThreadScheduler>(*clock);
  struct Owning {
    MonotonicClock clock;
    ThreadScheduler scheduler{clock};
  };
  auto owning = std::make_shared<Owning>();
  return std::shared_ptr<Scheduler>(owning, &owning->scheduler);
}

}  // namespace

// The region's own store, behind the region layer when regions lease from a global store.
Result<std::shared_ptr<Store>> OpenStore(std::string_view address) {
  const OpenStoreOptions defaults;
  return OpenStore(address, defaults);
}

Result<std::shared_ptr<Store>> OpenStore(std::string_view address,
                                         const OpenStoreOptions& options) {
  // One scheduler for every layer's background work: the options', or one on the caller's clock
  // (or a MonotonicClock the scheduler owns).
  std::shared_ptr<Scheduler> scheduler = options.scheduler;
  if (scheduler == nullptr) scheduler = OwnScheduler(options.clock);
  auto store = OpenRegionalStore(address, options, scheduler);
  if (!store || options.global_store.empty()) return store;
  auto region = OpenRegionStore(std::move(*store), {.region = options.region,
                                                    .global_store = options.global_store,
                                                    .tls = options.redis_tls,
                                                    .clock = options.clock,
                                                    .scheduler = scheduler,
                                                    .on_event = options.redis_events});
  if (!region) return std::unexpected(region.error());
  return std::shared_ptr<Store>(std::move(*region));
}

}  // namespace sluice
