// The region layer: a store in front of a region's own store for limits of scope global with
// regions mode leased (docs/regions.md). Such a limit is decided by a limiter of the inner store
// whose limit is the region's current part of the whole; background work (the scheduler's)
// renews that part from the global store every `refresh` and replaces the limiter when the part
// changes. No request waits for the global store. Every other limit passes through to `inner`
// unchanged (a static region's part is already its spec).
//
//   auto store = OpenRegionStore(regional, {.region = "us", .global_store = "redis://g:6379"});
//
// When the global store cannot be reached a node keeps its last part until its grant expires
// (2 x refresh after it asked for a part above its static share, 5 x refresh for one at or
// below it: the regions above give theirs up first), then decides on its static share.
// Thread-safe.
#ifndef SLUICE_REGION_STORE_H_
#define SLUICE_REGION_STORE_H_

#include <chrono>
#include <memory>
#include <string>

#include "sluice/clock.h"
#include "sluice/redis_store.h"
#include "sluice/scheduler.h"
#include "sluice/status.h"
#include "sluice/store.h"
#include "sluice/time.h"

namespace sluice {

struct RegionStoreOptions {
  std::string region;  // this node's region
  // "redis://[user:password@]host:port[/db]", "redis+sentinel://host:port[,...]/MASTER[/db]",
  // or either over TLS ("rediss://...", "rediss+sentinel://...").
  std::string global_store;
  // The global store's TLS files and name checks when its address is rediss:// (`enabled` comes
  // from the address).
  RedisTlsOptions tls = {};
  // This node's name among its region's nodes in the global store; empty: a random one.
  std::string node = {};
  // Bounds each exchange with the global store (connect, and the script); a slower answer is a
  // failed refresh.
  std::chrono::milliseconds global_timeout{1000};
  // The clock parts expire by; null: the scheduler's, or (no scheduler either) a MonotonicClock
  // of the store's own. Must outlive it.
  const Clock* clock = nullptr;
  // Where the parts are renewed (RefreshDue, looked at every 10 ms: each limit's own refresh
  // decides when its part is due); null: a ThreadScheduler of the store's own on its clock.
  // Tests pass a ManualScheduler and advance it, or never do, for no refresh at all.
  std::shared_ptr<Scheduler> scheduler = nullptr;
  // Told, for a log, when the global store is first reached (kConnected), when it cannot be
  // (kConnectionLost: at start, the limits decide on their static shares), when a limit's grant
  // expires while it cannot be (kConnectionLost again, naming the limit) and when it can be again
  // (kConnectionRestored). Once per change, from the refresh (the scheduler's work); must be quick.
  RedisEventHook on_event = {};
};

class RegionStore : public Store {
 public:
  // Renews, on the caller's thread, the part of every leased limit whose refresh is due at
  // `now` (all of them with force), and falls back to the static share where a grant expired.
  virtual void RefreshDue(Timestamp now, bool force = false) = 0;
};

Result<std::shared_ptr<RegionStore>> OpenRegionStore(std::shared_ptr<Store> inner,
                                                     RegionStoreOptions options);

}  // namespace sluice

#endif  // SLUICE_REGION_STORE_H_
