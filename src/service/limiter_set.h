// The store-side limiters of one config: one Limiter per configured limit (by id), made in the
// service's store, plus the limiters of Envoy's per-request `limit` overrides, made on first
// use as transient limiters (LimiterOptions::transient). Installing a new config reuses the
// limiter (and so the counters) of every limit whose id, spec and failure mode are unchanged,
// and keeps the override limiters. A limit whose id is kept but whose spec (or failure mode)
// changed gets a new limiter that takes over the old one's counters, their usage converted
// (Limiter::TakeOver; docs/quotas.md, "Changing a limit mid-period").
//
// Any client can send any override rate, so the override limiters are kept least recently used
// first, at most min(kMaxOverrides, Store::MaxTransientLimiters()) of them: a new rate beyond
// that drops the least recently used one. Dropping a limiter drops no counter: the memory store
// keeps every override rate's counters in one table keyed by (rate, key) (memory_store.h), and
// Redis keeps them under keys that name the rate, so a rate that comes back finds its counters
// (docs/server.md, "Memory"). Internal to the service.
//
// A limit with `concurrency` also gets a PermitPool (Store::MakePermitPool), named by its pool id
// (PoolStoreId: the limit id with a suffix no rate limit id can have, so the permits of a
// descriptor never share a store key with its rate limit's counter). A reload keeps the pool of
// every limit whose concurrency is unchanged; a changed one gets a new pool under the same id,
// which holds the permits held under the old one: every store keeps permits by pool id (Redis
// in its keys, the memory store by handing the old pool's permits to the new one). A permit names
// its pools by pool id (service/permit_token.h), so a release reaching any node finds its pool.
#ifndef SLUICE_SERVICE_LIMITER_SET_H_
#define SLUICE_SERVICE_LIMITER_SET_H_

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "config/config.h"
#include "sluice/permits.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice::server {

class LimiterSet {
 public:
  // Every limited limit of `config` gets a limiter; those of `previous` (may be null) are reused
  // where id, spec and failure mode match, and taken over as of `now` where only the id does.
  static Result<std::shared_ptr<const LimiterSet>> Install(std::shared_ptr<const Config> config,
                                                           const LimiterSet* previous, Store& store,
                                                           Timestamp now);

  // A limiter found by For(). `hold` keeps an override limiter alive while a check uses it
  // (For() may drop it from the set meanwhile); null for a configured limit, which the set
  // keeps alive, so the hot path takes no reference count.
  struct Found {
    Limiter* limiter = nullptr;
    std::shared_ptr<Limiter> hold;
  };

  // The limiter of a configured limit, or of an override limit (made on first use, dropping
  // the least recently used override limiter when there are as many as the set keeps).
  Result<Found> For(const Limit& limit) const;

  // The limiter of a configured limit, by its id; null if it has none (not limited).
  const Limiter* Configured(std::string_view id) const {
    const auto it = limiters_.find(id);
    return it == limiters_.end() ? nullptr : it->second.limiter.get();
  }

  // A configured limit's concurrency pool.
  struct Pool {
    const Limit* limit = nullptr;  // in config()
    std::string store_id;          // PoolStoreId(limit->id)
    std::shared_ptr<PermitPool> pool;
  };
  // By limit id, or by pool id (what a permit names); null if none.
  const Pool* PoolFor(std::string_view limit_id) const {
    const auto it = pools_.find(limit_id);
    return it == pools_.end() ? nullptr : &it->second;
  }
  const Pool* PoolByStoreId(std::string_view store_id) const {
    const auto it = pools_by_store_id_.find(store_id);
    return it == pools_by_store_id_.end() ? nullptr : it->second;
  }
  // The store id of a limit's permits: its limit id + "|@concurrency" ('@' is escaped in every
  // configured name, key_escape.h), made to fit a store as a limiter's id is. At most 200 bytes.
  static std::string PoolStoreId(std::string_view limit_id);

  // How many override limiters the set holds now (for tests and diagnostics).
  size_t OverrideCount() const;

  const std::shared_ptr<const Config>& config() const { return config_; }

  static constexpr size_t kMaxOverrides = 1024;

 private:
  struct Entry {
    LimitSpec spec;
    FailureMode failure_mode;
    QuotaSync sync;
    RegionScope regions;
    std::shared_ptr<Limiter> limiter;
  };
  struct Override {
    std::string id;
    std::shared_ptr<Limiter> limiter;
  };
  using OverrideList = std::list<Override>;  // most recently used first

  // A limiter for `limit` in the store, which shares its memory among `limits` limits, its
  // spec installed at `installed` (LimiterOptions::spec_generation).
  static Result<std::shared_ptr<Limiter>> Make(Store& store, const Limit& limit, size_t limits,
                                               bool transient, Timestamp installed);
  // Makes an override limiter, dropping least recently used ones for room. Under overrides_mu_.
  Result<std::shared_ptr<Limiter>> MakeOverride(const Limit& limit) const;
  void DropLeastRecentlyUsed() const;  // under overrides_mu_

  // The pools of `config`, reusing `previous`'s where the concurrency is unchanged.
  Result<void> InstallPools(const LimiterSet* previous, Store& store);

  std::shared_ptr<const Config> config_;
  Store* store_ = nullptr;
  std::map<std::string, Pool, std::less<>> pools_;  // by limit id; immutable once installed
  std::map<std::string, const Pool*, std::less<>> pools_by_store_id_;
  std::map<std::string, Entry, std::less<>> limiters_;  // by limit id; immutable once installed
  size_t max_overrides_ = kMaxOverrides;
  mutable std::mutex overrides_mu_;
  // Guarded by overrides_mu_: the override limiters in use order, and an index by limit id.
  mutable OverrideList overrides_;
  mutable std::map<std::string, OverrideList::iterator, std::less<>> override_index_;
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_LIMITER_SET_H_
