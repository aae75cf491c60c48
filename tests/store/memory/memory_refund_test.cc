// The memory store's Refund and Reset, against the bare algorithm with states that are never
// dropped: the store may drop a counter a refund replenishes and ignore refunds for keys it no
// longer holds, and neither may change a decision.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/memory_store.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"

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

// Random keys and times with idle gaps (so counters replenish and are dropped); a third of the
// admitted requests are refunded, at once or a few requests later; keys are now and then reset
// (the reference forgets its state too).
template <typename Alg>
void ExpectRefundsMatchTheBareAlgorithm(const LimitSpec& spec, uint64_t seed) {
  auto alg = Alg::Create(spec);
  ASSERT_TRUE(alg.has_value());
  auto limiter = MustMake(spec);
  std::map<std::string, typename Alg::State> kept;
  std::mt19937_64 rng(seed);
  const int64_t D = spec.period.count();
  struct Due {
    std::string key;
    int64_t at_ns;
    int64_t cost;
    int after;  // requests to go
  };
  std::vector<Due> due;
  int64_t t = kStart;
  int refunds = 0;
  const std::string_view name = AlgorithmName(spec.algorithm);
  for (int i = 0; i < 20'000; ++i) {
    t += static_cast<int64_t>(rng() % static_cast<uint64_t>(D / 8)) / 1000 * 1000;
    if (rng() % 40 == 0) t += 3 * D;
    const Timestamp now = FromNanos(t);
    for (auto it = due.begin(); it != due.end();) {
      if (--it->after > 0) {
        ++it;
        continue;
      }
      limiter->Refund(it->key, FromNanos(it->at_ns), now, it->cost);
      if (auto s = kept.find(it->key); s != kept.end()) {
        alg->Refund(s->second, FromNanos(it->at_ns), now, it->cost);
      }
      ++refunds;
      it = due.erase(it);
    }
    if (i % 100 == 0) limiter->Sweep(now);
    const std::string key = "key-" + std::to_string(rng() % 20);
    if (rng() % 500 == 0) {
      limiter->Reset(key);
      kept.erase(key);
    }
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 3);
    const Decision got = limiter->Decide(key, now, cost);
    auto it = kept.find(key);
    if (it == kept.end()) it = kept.emplace(key, alg->Initial(now)).first;
    const Decision want = alg->Decide(it->second, now, cost);
    ASSERT_EQ(got.allowed, want.allowed) << name << " request " << i;
    ASSERT_EQ(got.remaining, want.remaining) << name << " request " << i;
    ASSERT_EQ(got.retry_after, want.retry_after) << name << " request " << i;
    ASSERT_EQ(got.reset_after, want.reset_after) << name << " request " << i;
    ASSERT_EQ(got.delay, want.delay) << name << " request " << i;
    if (got.allowed && rng() % 3 == 0) {
      due.push_back({key, t, cost, static_cast<int>(rng() % 4)});
    }
  }
  EXPECT_GT(refunds, 3000) << name;
}

TEST(MemoryStoreRefund, MatchesTheBareAlgorithmForEveryAlgorithm) {
  const auto spec = [](Algorithm a) {
    return LimitSpec{a, 5, milliseconds(200), HasBurst(a) ? 8 : 0, a == Algorithm::kLeakyBucket};
  };
  ExpectRefundsMatchTheBareAlgorithm<TokenBucket>(spec(Algorithm::kTokenBucket), 1);
  ExpectRefundsMatchTheBareAlgorithm<Gcra>(spec(Algorithm::kGcra), 2);
  ExpectRefundsMatchTheBareAlgorithm<LeakyBucket>(spec(Algorithm::kLeakyBucket), 3);
  ExpectRefundsMatchTheBareAlgorithm<FixedWindow>(spec(Algorithm::kFixedWindow), 4);
  ExpectRefundsMatchTheBareAlgorithm<SlidingWindowLog>(spec(Algorithm::kSlidingWindowLog), 5);
  ExpectRefundsMatchTheBareAlgorithm<SlidingWindowCounter>(spec(Algorithm::kSlidingWindowCounter),
                                                           6);
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

TEST(MemoryStoreRefund, UnknownKeysAndInvalidArgumentsChangeNothing) {
  MemoryStoreOptions options;
  options.max_key_bytes = 8;
  auto limiter = MustMake({Algorithm::kTokenBucket, 10, hours(1), 10, false}, options);
  const Timestamp t = FromNanos(kStart);
  limiter->Refund("nobody", t, t, 1);
  limiter->Refund("way-too-long-key", t, t, 1);
  limiter->Reset("nobody");
  limiter->Reset("way-too-long-key");
  EXPECT_EQ(limiter->Stats().keys, 0u);
  ASSERT_TRUE(limiter->Decide("k", t, 4).allowed);
  limiter->Refund("k", t, t, 0);
  limiter->Refund("k", t, t, -2);
  limiter->Refund("k", t, t, 11);
  EXPECT_EQ(limiter->Decide("k", t, 0).remaining, 6);
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
