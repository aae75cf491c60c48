// The memory store's Refund and Reset and its memory: a counter refunded to full is dropped, a
// refunded sliding log gives its memory back, a reset key its entry. That refunds and resets
// decide as the bare algorithm (with counters swept and dropped meanwhile) is the store suite's:
// tests/store/store_suite.h.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sluice/memory_store.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int64_t kStart = 1'700'000'000'000'000'000;

std::unique_ptr<MemoryLimiter> MustMake(const LimitSpec& spec, MemoryStoreOptions options = {}) {
  auto l = MakeMemoryLimiter(spec, options);
  EXPECT_TRUE(l.has_value()) << (l ? "" : l.error().message);
  return l ? std::move(*l) : nullptr;
}

TEST(MemoryStoreRefund, ACounterRefundedToFullIsDropped) {
  for (Algorithm a : kAllAlgorithms) {
    auto limiter = MustMake({a, 10, hours(1), HasBurst(a) ? 10 : 0, false});
    const Timestamp t = FromNanos(kStart);
    ASSERT_TRUE(limiter->Decide("k", t, 3).allowed);
    ASSERT_TRUE(limiter->Decide("k", t, 2).allowed);
    limiter->Refund("k", t, t, 2);
    EXPECT_EQ(limiter->Stats().keys, 1u) << AlgorithmName(a);
    limiter->Refund("k", t, t, 3);
    const StoreStats s = limiter->Stats();
    EXPECT_EQ(s.keys, 0u) << AlgorithmName(a) << ": a full counter is a fresh one";
    EXPECT_EQ(s.expirations, 1u) << AlgorithmName(a);
    EXPECT_EQ(limiter->Decide("k", t, 0).remaining, 10) << AlgorithmName(a);
  }
}

TEST(MemoryStoreRefund, SlidingLogRefundsGiveTheirMemoryBack) {
  MemoryStoreOptions options;
  options.shards = 1;
  auto limiter = MustMake({Algorithm::kSlidingWindowLog, 100, seconds(1), 0, false}, options);
  const Timestamp t = FromNanos(kStart);
  ASSERT_TRUE(limiter->Decide("keep", t, 1).allowed);
  const uint64_t one_key = limiter->Stats().bytes;
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(limiter->Decide("log", t + milliseconds(i), 1).allowed);
  EXPECT_GT(limiter->Stats().bytes, one_key);
  for (int i = 0; i < 50; ++i) limiter->Refund("log", t + milliseconds(i), t + milliseconds(50), 1);
  EXPECT_EQ(limiter->Stats().keys, 1u);
  EXPECT_EQ(limiter->Stats().bytes, one_key) << "the ring and the counter were released";
}

TEST(MemoryStoreReset, ForgetsTheKeyAndItsMemory) {
  for (Algorithm a : kAllAlgorithms) {
    MemoryStoreOptions options;
    options.shards = 1;
    auto limiter = MustMake({a, 5, hours(1), HasBurst(a) ? 5 : 0, false}, options);
    const Timestamp t = FromNanos(kStart);
    const std::string long_key(100, 'x');  // held on the heap, not inline
    ASSERT_TRUE(limiter->Decide("other", t, 1).allowed);
    const uint64_t baseline = limiter->Stats().bytes;
    ASSERT_TRUE(limiter->Decide(long_key, t, 5).allowed);
    ASSERT_FALSE(limiter->Decide(long_key, t, 1).allowed);
    limiter->Reset(long_key);
    const StoreStats s = limiter->Stats();
    EXPECT_EQ(s.keys, 1u) << AlgorithmName(a);
    EXPECT_EQ(s.bytes, baseline) << AlgorithmName(a);
    EXPECT_EQ(s.expirations + s.evictions, 0u) << AlgorithmName(a) << ": neither of those";
    EXPECT_TRUE(limiter->Decide(long_key, t, 5).allowed) << AlgorithmName(a) << ": fresh again";
    EXPECT_EQ(limiter->Decide("other", t, 0).remaining, 4) << AlgorithmName(a) << ": untouched";
  }
}

}  // namespace
}  // namespace sluice
