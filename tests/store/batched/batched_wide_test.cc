// The batched layer's local views of specs past 64-bit arithmetic (NeedsWideArithmetic): over the
// memory store, a view seeded from the store's answer admits exactly the capacity, refuses the
// next hit, and after a sync reads the store's state back without losing a token or inventing
// one (within the nanosecond the answer is rounded to), with no over-admission counted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "sluice/batched_store.h"
#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/scheduler.h"

namespace sluice {
namespace {

constexpr Timestamp kT0 = FromNanos(int64_t{1'780'000'000} * 1'000'000'000);

TEST(BatchedWide, ViewsOfWideSpecsAdmitTheCapacityAndReadTheStoreBackExactly) {
  using std::chrono::hours;
  // 7 a day with burst 100000 (d = 8.64e13: 2^62.9 scaled) and the largest prime below 2^32 a year
  // with burst 2^32-1 (2^87 scaled).
  const LimitSpec specs[] = {
      {Algorithm::kTokenBucket, 7, hours(24), 100'000, false},
      {Algorithm::kGcra, 7, hours(24), 100'000, false},
      {Algorithm::kLeakyBucket, 7, hours(24), 100'000, false},
      {Algorithm::kTokenBucket, 4294967291, hours(24 * 365), 4294967295, false},
      {Algorithm::kGcra, 4294967291, hours(24 * 365), 4294967295, false},
      {Algorithm::kLeakyBucket, 4294967291, hours(24 * 365), 4294967295, false},
  };
  for (const LimitSpec& spec : specs) {
    SCOPED_TRACE(DescribeLimitSpec(spec));
    ASSERT_TRUE(NeedsWideArithmetic(spec));
    ManualClock clock{kT0};
    auto scheduler = std::make_shared<ManualScheduler>(clock);
    std::shared_ptr<Store> inner = *OpenMemoryStore();
    auto store = *OpenBatchedStore(inner, {.max_bytes = 1 << 20, .scheduler = scheduler});
    LimiterOptions o{.id = "wide"};
    o.sync = {.mode = SyncMode::kBatched, .interval = std::chrono::seconds(1)};
    auto limiter = store->MakeLimiter(spec, o);
    ASSERT_TRUE(limiter.has_value()) << limiter.error().message;
    Limiter& l = **limiter;
    const int64_t capacity = spec.Capacity();
    // The first request is the store's, whose answer seeds the view: read back on the strict
    // side, by less than what one nanosecond refills (reset_after is rounded up to the ns).
    EXPECT_TRUE(l.Decide("k", kT0, 1).allowed);
    const uint64_t local = store->Stats().local_decisions;
    EXPECT_TRUE(l.Decide("k", kT0, capacity - 2).allowed);
    EXPECT_FALSE(l.Decide("k", kT0, 1).allowed);  // 1 - (less than 1 ns of refill) is left
    const Timestamp t1 = kT0 + Duration(1);
    EXPECT_TRUE(l.Decide("k", t1, 1).allowed);
    EXPECT_FALSE(l.Decide("k", t1, 1).allowed);
    EXPECT_EQ(store->Stats().local_decisions, local + 4);
    store->Flush(t1);
    // The store took the whole capacity by t1: one hit refills in period/limit, and the view
    // read back from the sync's answer agrees to the nanosecond.
    const int64_t one = spec.period.count() / spec.limit;
    EXPECT_FALSE(l.Decide("k", t1 + Duration(one - 1), 1).allowed);
    EXPECT_TRUE(l.Decide("k", t1 + Duration(one + 2), 1).allowed);
    EXPECT_FALSE(l.Decide("k", t1 + Duration(one + 2), 1).allowed);
    store->Flush(t1 + Duration(one + 2));
    EXPECT_EQ(store->Stats().batched_over_admitted_hits, 0u);
  }
}

}  // namespace
}  // namespace sluice
