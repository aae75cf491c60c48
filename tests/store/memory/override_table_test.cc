// The memory store's override counters (transient limiters): one table keyed by (rate, key) in
// the overrides' part of the bound. A rate's counters survive its limiter being dropped and any
// number of other rates coming and going; only the table's memory bound evicts, replenished
// counters first, and each eviction is counted by its reason.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sluice/memory_store.h"
#include "support/heap_in_use.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Timestamp kNow = FromNanos(int64_t{1'700'000'000'000'000'000});
constexpr Duration kDay = hours(24);

LimiterOptions Transient() {
  LimiterOptions o;
  o.transient = true;
  return o;
}

std::shared_ptr<Store> MustOpen(size_t max_bytes) {
  auto store = OpenMemoryStore({.max_bytes = max_bytes});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? *store : nullptr;
}

std::unique_ptr<Limiter> MustMake(Store& store, const LimitSpec& spec, LimiterOptions o) {
  auto made = store.MakeLimiter(spec, o);
  EXPECT_TRUE(made.has_value()) << made.error().message;
  return made ? std::move(*made) : nullptr;
}

LimitSpec PerDay(int64_t rate, Algorithm alg = Algorithm::kTokenBucket) {
  return LimitSpec{alg, rate, kDay, 0, false};
}

TEST(OverrideTable, ACounterOutlivesItsLimiter) {
  auto store = MustOpen(size_t{64} << 20);
  {
    auto five = MustMake(*store, PerDay(5), Transient());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(five->Decide("tenant", kNow, 1).allowed) << i;
    ASSERT_FALSE(five->Decide("tenant", kNow, 1).allowed);
  }
  // The service dropped the limiter (its least recently used rate); the rate comes back.
  auto again = MustMake(*store, PerDay(5), Transient());
  const Decision d = again->Decide("tenant", kNow + seconds(1), 1);
  EXPECT_FALSE(d.allowed) << "the 5/day counter is kept in the store, not in the limiter";
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(store->Stats().keys, 1u);
}

// (rate, key): the same key under two rates, or two algorithms of one rate, is two counters.
TEST(OverrideTable, EachRateHasItsOwnCounterForAKey) {
  auto store = MustOpen(size_t{64} << 20);
  auto five = MustMake(*store, PerDay(5), Transient());
  auto six = MustMake(*store, PerDay(6), Transient());
  auto gcra_five = MustMake(*store, PerDay(5, Algorithm::kGcra), Transient());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(five->Decide("k", kNow, 1).allowed);
  EXPECT_FALSE(five->Decide("k", kNow, 1).allowed);
  EXPECT_EQ(six->Decide("k", kNow, 1).remaining, 5) << "6/day: a fresh counter";
  EXPECT_EQ(gcra_five->Decide("k", kNow, 1).remaining, 4) << "gcra 5/day: a fresh counter";
  EXPECT_EQ(store->Stats().keys, 3u);
}

// Thousands of rates in turn, each through a limiter made and dropped as the service's LRU does,
// while one key under 5/day has spent its quota: it stays refused.
void KeyStaysRefusedWhileOtherRatesAreUsed(size_t bound, int other_rates) {
  auto store = MustOpen(bound);
  {
    auto five = MustMake(*store, PerDay(5), Transient());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(five->Decide("tenant", kNow, 1).allowed);
  }
  for (int rate = 100; rate < 100 + other_rates; ++rate) {
    auto limiter = MustMake(*store, PerDay(rate), Transient());
    ASSERT_TRUE(limiter->Decide("caller-" + std::to_string(rate), kNow, 1).allowed);
  }
  auto five = MustMake(*store, PerDay(5), Transient());
  EXPECT_FALSE(five->Decide("tenant", kNow + seconds(10), 1).allowed)
      << "after " << other_rates << " other rates";
  EXPECT_EQ(store->Stats().evictions, 0u) << "nothing live needed evicting";
}

TEST(OverrideTable, AKeyStaysRefusedWhileTenThousandOtherRatesAreUsed) {
  KeyStaysRefusedWhileOtherRatesAreUsed(MemoryStoreOptions{}.max_bytes, 10'000);
  KeyStaysRefusedWhileOtherRatesAreUsed(size_t{64} << 20, 10'000);
}

// Every algorithm decides in the table as a configured limiter of the same spec does.
TEST(OverrideTable, DecidesAsAConfiguredLimiterForEveryAlgorithm) {
  for (Algorithm alg :
       {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kFixedWindow,
        Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter, Algorithm::kGcra}) {
    auto store = MustOpen(size_t{64} << 20);
    const LimitSpec spec{alg, 20, seconds(10), 0, false};
    auto configured = MustMake(*store, spec, {});
    auto transient = MustMake(*store, spec, Transient());
    std::mt19937_64 rng(static_cast<uint64_t>(alg) + 1);
    Timestamp t = kNow;
    for (int i = 0; i < 5000; ++i) {
      t += milliseconds(rng() % 400);
      const std::string key = "k" + std::to_string(rng() % 8);
      const int64_t cost = static_cast<int64_t>(rng() % 4);
      const Decision want = configured->Decide(key, t, cost);
      const Decision got = transient->Decide(key, t, cost);
      ASSERT_EQ(got.allowed, want.allowed) << AlgorithmName(alg) << " decision " << i;
      ASSERT_EQ(got.remaining, want.remaining) << AlgorithmName(alg) << " decision " << i;
      ASSERT_EQ(got.retry_after, want.retry_after) << AlgorithmName(alg) << " decision " << i;
      ASSERT_EQ(got.reset_after, want.reset_after) << AlgorithmName(alg) << " decision " << i;
      if (want.allowed && cost > 0 && rng() % 5 == 0) {
        configured->Refund(key, t, t, cost);
        transient->Refund(key, t, t, cost);
      }
    }
  }
}

// A flood of a million override keys over many rates: the store's accounting and the heap stay
// within the bound; the table evicts, replenished counters (1/s rates, idle a second) and live
// ones (5/day rates) both, and counts each by its reason.
TEST(OverrideTable, AMillionKeyFloodStaysWithinTheBoundAndCountsEvictionsByReason) {
  constexpr size_t kBound = size_t{8} << 20;
  const size_t heap_before = testing::HeapInUse();
  auto store = MustOpen(kBound);
  std::vector<std::unique_ptr<Limiter>> limiters;
  for (int r = 0; r < 64; ++r) {
    const LimitSpec spec =
        r % 2 == 0 ? LimitSpec{Algorithm::kTokenBucket, 1, seconds(1), 0, false} : PerDay(5 + r);
    limiters.push_back(MustMake(*store, spec, Transient()));
  }
  Timestamp t = kNow;
  for (int n = 0; n < 1'000'000; ++n) {
    t += milliseconds(1);  // 1,000 keys a second: a 1/s counter replenishes within the table
    limiters[n % limiters.size()]->Decide("flood-key-" + std::to_string(n), t, 1);
    if (n % 100'000 == 99'999) {
      const StoreStats s = store->Stats();
      ASSERT_LE(s.bytes, kBound) << n;
      ASSERT_LE(s.max_bytes, kBound) << n;
      const size_t grown = testing::HeapInUse() - heap_before;
      ASSERT_LE(grown, kBound + kBound / 16) << "heap grew by " << grown << " after " << n;
    }
  }
  const StoreStats s = store->Stats();
  EXPECT_GT(s.evictions, 100'000u) << "live counters made room";
  EXPECT_GT(s.evicted_replenished, 0u) << "replenished counters made room too";
  EXPECT_GT(s.keys, 10'000u) << "while the table kept many counters";
}

}  // namespace
}  // namespace sluice
