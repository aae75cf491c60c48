// The store suite (store_suite.h), costs beyond a limit's capacity: up to INT64_MAX, including
// 2^53-1, the largest count a Lua number (a double) holds exactly, which Envoy's 64-bit
// descriptor hits_addend can reach. Every algorithm on every store must answer such a cost
// "never" (kCostExceedsCapacity) without overflow and without touching the counter, singly,
// asynchronously and inside DecideAll, and a refund of one must change nothing. The oracle is
// written here: a fresh key's full capacity, by hand.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "store/store_suite.h"

namespace sluice::testing {
namespace {

using std::chrono::seconds;

constexpr int64_t kCapacity = 8;
const std::vector<int64_t> kHugeCosts = {kCapacity + 1, (int64_t{1} << 53) - 1,
                                         std::numeric_limits<int64_t>::max()};

LimitSpec CostSpec(Algorithm a) {
  // A window's capacity is its limit; a bucket's is its burst.
  const bool burst = HasBurst(a);
  return LimitSpec{a, burst ? 5 : kCapacity, seconds(1), burst ? kCapacity : 0, false};
}

void ExpectNever(const Decision& d, const std::string& where) {
  EXPECT_FALSE(d.allowed) << where;
  EXPECT_EQ(d.reason, DecisionReason::kCostExceedsCapacity) << where;
  EXPECT_EQ(d.retry_after, kNever) << where;
  EXPECT_EQ(d.limit, kCapacity) << where;
}

}  // namespace

TEST_P(StoreSuite, CostsBeyondTheCapacityUpToInt64MaxAreNeverAdmittedAndTouchNothing) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const Timestamp now = FromNanos(int64_t{1'700'000'000} * 1'000'000'000);
  for (Algorithm a : kAllAlgorithms) {
    if (!Serves(CostSpec(a))) continue;
    auto limiter = Make(*store, CostSpec(a), UniqueName("huge-" + std::string(AlgorithmName(a))));
    ASSERT_NE(limiter, nullptr);
    for (const int64_t cost : kHugeCosts) {
      for (const bool async : {false, true}) {
        const std::string where = std::string(AlgorithmName(a)) + " cost " + std::to_string(cost) +
                                  (async ? " (async)" : "");
        ExpectNever(Decide(*limiter, "k", now, cost, async), where);
        limiter->Refund("k", now, now, cost);
        // Untouched: the whole capacity still passes, once.
        EXPECT_EQ(Decide(*limiter, "k", now, 0, async).remaining, kCapacity) << where;
      }
    }
    // Inside DecideAll: the request is rejected as a whole, and its other check keeps its quota.
    auto other = Make(*store, CostSpec(a), UniqueName("other-" + std::string(AlgorithmName(a))));
    ASSERT_NE(other, nullptr);
    for (const bool async : {false, true}) {
      const std::string where =
          std::string(AlgorithmName(a)) + " DecideAll" + (async ? " (async)" : "");
      const std::vector<LimitCheck> checks = {{other.get(), "k", 1},
                                              {limiter.get(), "k", (int64_t{1} << 53) - 1}};
      const std::vector<Decision> out = DecideAll(*store, checks, now, async);
      ASSERT_EQ(out.size(), 2u) << where;
      // Its own verdict stays "allowed", but it is given back: the request as a whole fails.
      EXPECT_EQ(out[0].remaining, kCapacity) << where << ": as after the give-back";
      ExpectNever(out[1], where);
      EXPECT_EQ(Decide(*other, "k", now, 0).remaining, kCapacity) << where;
      EXPECT_EQ(Decide(*limiter, "k", now, 0).remaining, kCapacity) << where;
    }
    // A cost of exactly the capacity still passes: the bound is the capacity, not a constant.
    const Decision full = Decide(*limiter, "k", now, kCapacity);
    EXPECT_TRUE(full.allowed) << AlgorithmName(a);
    EXPECT_EQ(full.remaining, 0) << AlgorithmName(a);
  }
}

// A charge (work already done) of such a cost goes into debt, capped: it leaves the key as a
// charge of twice the capacity does (every algorithm's debt cap, docs/algorithms.md), on a key
// of its own at the same time; no overflow, no rounding in Lua's doubles.
TEST_P(StoreSuite, ChargesUpToInt64MaxAreCappedLikeTwiceTheCapacity) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const Timestamp now = FromNanos(int64_t{1'700'000'000} * 1'000'000'000);
  for (Algorithm a : kAllAlgorithms) {
    if (!Serves(CostSpec(a))) continue;
    auto limiter = Make(*store, CostSpec(a), UniqueName("charge-" + std::string(AlgorithmName(a))));
    ASSERT_NE(limiter, nullptr);
    for (const int64_t cost : kHugeCosts) {
      if (cost <= 2 * kCapacity) continue;
      const std::string where = std::string(AlgorithmName(a)) + " charge " + std::to_string(cost);
      const std::string key = "k" + std::to_string(cost);
      const std::string twice = "t" + std::to_string(cost);
      const Decision got = limiter->Charge(key, now, cost);
      const Decision want = limiter->Charge(twice, now, 2 * kCapacity);
      EXPECT_FALSE(got.allowed) << where;
      EXPECT_EQ(got.reason, DecisionReason::kCostExceedsCapacity) << where;
      EXPECT_EQ(got.retry_after, kNever) << where;
      EXPECT_EQ(got.remaining, want.remaining) << where;
      EXPECT_EQ(got.reset_after, want.reset_after) << where;
      const Timestamp later = now + seconds(1);
      const Decision got_later = Decide(*limiter, key, later, 0);
      const Decision want_later = Decide(*limiter, twice, later, 0);
      EXPECT_TRUE(Same(got_later, want_later)) << where << ", a second later";
    }
  }
}

}  // namespace sluice::testing
