// A Redis store under test wrapped as sluiced opens it (OpenStore): the leased store, the
// batched store, then the over-limit cache. The store suite's limits are exact, so the leased
// and batched layers pass them on; the cache answers sure refusals. Every decision must still be
// the pure algorithm's.
#ifndef SLUICE_TESTS_STORE_REDIS_LAYERED_STORE_H_
#define SLUICE_TESTS_STORE_REDIS_LAYERED_STORE_H_

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "sluice/batched_store.h"
#include "sluice/leased_store.h"
#include "sluice/over_limit_cache.h"
#include "store/store_suite.h"

namespace sluice::testing {

inline StoreUnderTest LayeredAsSluiced(StoreUnderTest store, std::string name) {
  store.name = std::move(name);
  const auto layered = [](std::function<std::shared_ptr<Store>()> open) {
    return [open]() -> std::shared_ptr<Store> {
      std::shared_ptr<Store> inner = open();
      if (inner == nullptr) return nullptr;
      auto leased = OpenLeasedStore(inner, {});
      EXPECT_TRUE(leased.has_value()) << (leased ? "" : leased.error().message);
      if (!leased) return nullptr;
      auto batched = OpenBatchedStore(*leased, {});
      EXPECT_TRUE(batched.has_value()) << (batched ? "" : batched.error().message);
      if (!batched) return nullptr;
      auto cached = OpenOverLimitCache(*batched, {});
      EXPECT_TRUE(cached.has_value()) << (cached ? "" : cached.error().message);
      return cached ? *cached : nullptr;
    };
  };
  store.open = layered(store.open);
  store.open_unavailable = layered(store.open_unavailable);
  store.check_all_or_nothing = {};  // the inner store's counters are not reachable through it
  // The parity runs must have been answered partly from memory, or they would not test it.
  store.check_parity = [](Store& s) {
    const StoreStats stats = s.Stats();
    std::printf("over-limit cache: %llu decisions from memory, %llu from Redis\n",
                static_cast<unsigned long long>(stats.cached_decisions),
                static_cast<unsigned long long>(stats.forwarded_decisions));
    EXPECT_TRUE(stats.over_limit_cache);
    EXPECT_GT(stats.cached_decisions, stats.forwarded_decisions / 50)
        << "the cache answered too few of the suite's refusals";
  };
  return store;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_STORE_REDIS_LAYERED_STORE_H_
