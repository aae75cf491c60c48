// The memory store's bound covers every limiter it makes: configured limits and the transient
// ones any client can create (Envoy's per-request overrides). Checked against the heap itself
// (support/heap_in_use.h), not only against the store's own accounting.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "sluice/memory_store.h"
#include "support/heap_in_use.h"

namespace sluice {
namespace {

using std::chrono::hours;
using testing::HeapInUse;

constexpr Timestamp kNow = FromNanos(int64_t{1'700'000'000'000'000'000});

LimiterOptions Transient() {
  LimiterOptions o;
  o.transient = true;
  return o;
}

// A flood as a client can make it: 2048 distinct override rates, each a new transient limiter
// (the oldest dropped when the store has no room for another, as the service's LRU does), each
// fed unique long keys; the two configured limits get unique keys too. Neither the store's
// accounting nor the heap may grow past the bound.
TEST(MemoryStoreBound, HoldsForConfiguredAndTransientLimitersUnderAFlood) {
  constexpr size_t kBound = size_t{8} << 20;
  const size_t heap_before = HeapInUse();
  auto store = OpenMemoryStore({.max_bytes = kBound});
  ASSERT_TRUE(store.has_value()) << store.error().message;
  LimiterOptions configured;
  configured.limits_sharing_memory = 2;
  auto bucket =
      (*store)->MakeLimiter({Algorithm::kTokenBucket, 10, hours(1), 10, false}, configured);
  auto log =
      (*store)->MakeLimiter({Algorithm::kSlidingWindowLog, 50, hours(1), 0, false}, configured);
  ASSERT_TRUE(bucket.has_value() && log.has_value());

  std::deque<std::unique_ptr<Limiter>> overrides;
  size_t refused = 0;
  char key[64];
  int next_key = 0;
  for (int rate = 1; rate <= 2048; ++rate) {
    const LimitSpec spec{Algorithm::kTokenBucket, rate, hours(24), 0, false};
    auto made = (*store)->MakeLimiter(spec, Transient());
    while (!made && !overrides.empty()) {
      ++refused;
      overrides.pop_front();
      made = (*store)->MakeLimiter(spec, Transient());
    }
    ASSERT_TRUE(made.has_value()) << made.error().message;
    overrides.push_back(std::move(*made));
    for (int i = 0; i < 300; ++i, ++next_key) {
      const int n = std::snprintf(key, sizeof key, "client-with-a-long-key-%d", next_key);
      const std::string_view k(key, n);
      overrides.back()->Decide(k, kNow, 1);
      (*bucket)->Decide(k, kNow, 1);
      (*log)->Decide(k, kNow, 1);
    }
    if (rate % 64 == 0) {
      const StoreStats s = (*store)->Stats();
      ASSERT_LE(s.bytes, kBound) << "rate " << rate;
      ASSERT_LE(s.max_bytes, kBound) << "rate " << rate;
      const size_t grown = HeapInUse() - heap_before;
      // The deque and its pointers are the test's own: a few KiB.
      ASSERT_LE(grown, kBound + kBound / 16) << "heap grew by " << grown << " at rate " << rate;
    }
  }
  const StoreStats s = (*store)->Stats();
  EXPECT_GT(refused, 900u) << "the store refused transient limiters beyond its number";
  EXPECT_GT(s.evictions, 0u) << "the flood pressed the bound";
  EXPECT_GT(s.keys, 10'000u) << "while keeping many counters";
}

TEST(MemoryStoreBound, TransientLimitersBeyondTheirNumberWaitForOneToGo) {
  auto store = OpenMemoryStore({.max_bytes = size_t{64} << 20});
  ASSERT_TRUE(store.has_value());
  const size_t max = (*store)->MaxTransientLimiters();
  ASSERT_GT(max, 0u);
  ASSERT_LT(max, 100'000u);
  const LimitSpec spec{Algorithm::kGcra, 5, hours(1), 0, false};
  std::vector<std::unique_ptr<Limiter>> held;
  for (size_t i = 0; i < max; ++i) {
    auto made = (*store)->MakeLimiter(spec, Transient());
    ASSERT_TRUE(made.has_value()) << i << ": " << made.error().message;
    held.push_back(std::move(*made));
  }
  auto refused = (*store)->MakeLimiter(spec, Transient());
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("drop one"), std::string::npos) << refused.error().message;
  // The configured limits' part is not theirs: a configured limit is still made.
  EXPECT_TRUE((*store)->MakeLimiter(spec, {}).has_value());
  held.pop_back();
  EXPECT_TRUE((*store)->MakeLimiter(spec, Transient()).has_value());
}

TEST(MemoryStoreBound, TransientLimitersCountInTheStoreStats) {
  auto store = OpenMemoryStore({.max_bytes = size_t{64} << 20});
  ASSERT_TRUE(store.has_value());
  auto made = (*store)->MakeLimiter({Algorithm::kTokenBucket, 5, hours(1), 0, false}, Transient());
  ASSERT_TRUE(made.has_value());
  for (const char* k : {"a", "b", "c"}) (*made)->Decide(k, kNow, 1);
  EXPECT_EQ((*store)->Stats().keys, 3u);
  EXPECT_GT((*store)->Stats().bytes, 0u);
}

// A bound too small for the configured limits is an error naming the bound, never a limiter
// that silently keeps nothing.
TEST(MemoryStoreBound, ABoundTooSmallForTheLimitsIsRefusedClearly) {
  auto store = OpenMemoryStore({.max_bytes = size_t{256} << 10});
  ASSERT_TRUE(store.has_value());
  LimiterOptions many;
  many.limits_sharing_memory = 1000;
  auto made = (*store)->MakeLimiter({Algorithm::kTokenBucket, 5, hours(1), 0, false}, many);
  ASSERT_FALSE(made.has_value());
  EXPECT_NE(made.error().message.find("memory bound"), std::string::npos) << made.error().message;
  // Fewer limits share it: each gets fewer shards rather than none.
  many.limits_sharing_memory = 10;
  EXPECT_TRUE(
      (*store)->MakeLimiter({Algorithm::kTokenBucket, 5, hours(1), 0, false}, many).has_value());
}

}  // namespace
}  // namespace sluice
