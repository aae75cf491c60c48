// The leased store: a store in front of a shared one (Redis) for limits whose LimiterOptions::sync
// is leased. A node takes units of a key's quota from the shared store in one atomic step
// (Limiter::TakeAsync), admits up to that many requests from memory, takes the next units before
// it runs out, and gives back what it did not spend when the lease expires, when the limiter is
// destroyed (shutdown, or a reload that changes the limit) or when the store is.
//
//   auto redis = OpenRedisStore(*ParseRedisAddress("redis://127.0.0.1:6379"));
//   auto store = OpenLeasedStore(*redis, {});
//   auto limiter = (*store)->MakeLimiter(spec, {.id = "api", .sync = {.mode = SyncMode::kLeased}});
//
// Every admission spends a unit the shared quota gave up, so the nodes together never admit
// beyond the limit. A lease is sized from the node's own rate on the key and the number of nodes
// drawing on it: a quiet key takes no units ahead and each decision is the shared store's; a hot
// key costs the shared store one script per many decisions. When the shared quota refuses, the
// node refuses the key locally until the retry time it was told. docs/redis.md ("Leased") has the
// reasoning and the bounds. Limiters with another sync mode pass through to `inner` unchanged.
// Thread-safe.
#ifndef SLUICE_LEASED_STORE_H_
#define SLUICE_LEASED_STORE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "sluice/clock.h"
#include "sluice/scheduler.h"
#include "sluice/status.h"
#include "sluice/store.h"
#include "sluice/time.h"

namespace sluice {

struct LeasedStoreOptions {
  // This node's name among the nodes sharing the store, for counting the nodes that draw on a
  // key. Empty: a random one (each process is its own node).
  std::string holder = {};
  // The memory every key's lease may take together (entries and their keys). A key that does
  // not fit is decided by the shared store, exactly, until room frees up.
  size_t max_bytes = size_t{16} << 20;
  // The clock leases expire by; null: the scheduler's, or (no scheduler either) a
  // MonotonicClock of the store's own. It must outlive the store.
  const Clock* clock = nullptr;
  // Where expired leases are looked for, every 20 ms (ReturnExpired); null: a ThreadScheduler
  // of the store's own on its clock. Tests pass a ManualScheduler and advance it.
  std::shared_ptr<Scheduler> scheduler = nullptr;
};

class LeasedStore : public Store {
 public:
  // Gives back the unspent units of every lease that has expired at `now`, and forgets keys
  // idle long enough. The scheduler runs it every 20 ms.
  virtual void ReturnExpired(Timestamp now) = 0;
};

Result<std::shared_ptr<LeasedStore>> OpenLeasedStore(std::shared_ptr<Store> inner,
                                                     LeasedStoreOptions options = {});

}  // namespace sluice

#endif  // SLUICE_LEASED_STORE_H_
