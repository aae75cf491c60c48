// The over-limit cache: a store in front of another (a Redis store) that remembers the refusals
// the inner store gave and answers later requests for the same key from memory while they are
// sure to be refused again, so a key hammered while over its limit costs the inner store nothing.
//
//   auto redis = OpenRedisStore(*ParseRedisAddress("redis://127.0.0.1:6379"));
//   auto store = OpenOverLimitCache(*redis, {.max_bytes = 64 << 20});
//   auto limiter = store->MakeLimiter(spec, {.id = "api_per_key"});   // wraps Redis's limiter
//
// It never admits anything itself: every request it cannot surely refuse, every admission,
// every charge (LimitCheck::charge, Limiter::Charge) goes to the inner store. Per key it keeps
// facts "a request of cost c is refused until T_c", learnt from the inner store's own refusals
// (larger costs can never pass sooner; refused charges and cost-0 refusals in debt count too),
// and answers a request of cost c from them only where its every field is the one the inner
// store would give without other traffic: the same cost as a remembered refusal, and a
// remaining of c - 1 (0 for cost 0), which cannot change before T_c; for a fixed window, any
// cost from c up to the limit until the window ends. docs/redis.md ("The over-limit cache")
// states what it guarantees with several nodes and what it costs. Thread-safe.
#ifndef SLUICE_OVER_LIMIT_CACHE_H_
#define SLUICE_OVER_LIMIT_CACHE_H_

#include <cstddef>
#include <memory>

#include "sluice/status.h"
#include "sluice/store.h"
#include "sluice/time.h"

namespace sluice {

struct OverLimitCacheOptions {
  // The accounted memory every key's facts may take together (entries, their keys, the index);
  // beyond it the least recently used of a few sampled entries is dropped. At least 4096.
  size_t max_bytes = size_t{64} << 20;
  // How long a refusal is answered from memory at most before the inner store is asked again
  // (and the refusal learnt anew if it still holds): the bound on how long quota given back on
  // another node -- an admin credit or reset there (POST/DELETE /v1/state) -- stays refused
  // here. A hot refused key then costs the inner store one call per this time per node. At
  // least 1 ms; Duration::max(): until the refusal's own retry time.
  Duration refusal_trust = std::chrono::seconds(1);
};

// A store whose limiters wrap `inner`'s and answer its sure refusals from memory. `inner` must
// not be used directly for the same limits while this lives: a refund or reset made there is
// not seen here (see docs/redis.md for the bound that follows).
Result<std::shared_ptr<Store>> OpenOverLimitCache(std::shared_ptr<Store> inner,
                                                  const OverLimitCacheOptions& options = {});

}  // namespace sluice

#endif  // SLUICE_OVER_LIMIT_CACHE_H_
