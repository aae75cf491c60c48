// Space-Saving: the textbook replacement rule on small streams, then its guarantees on a skewed
// (Zipf-like) stream whose true counts are known.
#include "metrics/top_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace sluice::server {
namespace {

TEST(SpaceSaving, CountsExactlyWhileNotFull) {
  SpaceSaving s(3);
  s.Add("a", 1, 0);
  s.Add("b", 0, 1);
  s.Add("a", 1, 1);
  s.Add("c", 0, 0);  // weight 0: nothing
  auto top = s.Top(10);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].identity, "a");
  EXPECT_EQ(top[0].count, 3u);
  EXPECT_EQ(top[0].rejected, 2u);
  EXPECT_EQ(top[0].near_limit, 1u);
  EXPECT_EQ(top[0].error, 0u);
  EXPECT_EQ(top[1].identity, "b");
  EXPECT_EQ(top[1].count, 1u);
  EXPECT_EQ(s.total(), 4u);
}

TEST(SpaceSaving, NewIdentityTakesOverTheSmallestCounter) {
  SpaceSaving s(2);
  s.Add("a", 1, 0);
  s.Add("a", 1, 0);
  s.Add("b", 1, 0);
  s.Add("c", 0, 1);  // replaces b (count 1): count 2, error 1
  auto top = s.Top(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].identity, "a");  // count 2, ties broken by identity
  EXPECT_EQ(top[1].identity, "c");
  EXPECT_EQ(top[1].count, 2u);
  EXPECT_EQ(top[1].error, 1u);
  EXPECT_EQ(top[1].rejected, 0u);
  EXPECT_EQ(top[1].near_limit, 1u);
  s.Add("b", 1, 0);  // b is back, over the smallest (a or c, both 2)
  EXPECT_EQ(s.size(), 2u);
  top = s.Top(2);
  EXPECT_EQ(top[0].identity, "b");
  EXPECT_EQ(top[0].count, 3u);
  EXPECT_EQ(top[0].error, 2u);
}

TEST(SpaceSaving, TopReturnsAtMostN) {
  SpaceSaving s(10);
  for (int i = 0; i < 10; ++i) {
    for (int k = 0; k <= i; ++k) s.Add("id" + std::to_string(i), 1, 0);
  }
  auto top = s.Top(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].identity, "id9");
  EXPECT_EQ(top[1].identity, "id8");
  EXPECT_EQ(top[2].identity, "id7");
  EXPECT_TRUE(s.Top(0).empty());
}

TEST(SpaceSaving, ZeroCapacityTracksNothing) {
  SpaceSaving s(0);
  s.Add("a", 1, 1);
  EXPECT_TRUE(s.Top(5).empty());
}

// Many distinct identities, then the heavy ones keep their counters.
TEST(SpaceSaving, MemoryStaysAtCapacityUnderChurn) {
  SpaceSaving s(16);
  for (int i = 0; i < 100'000; ++i) {
    s.Add("once-" + std::to_string(i), 1, 0);
    if (i % 4 == 0) s.Add("heavy", 1, 0);
  }
  EXPECT_EQ(s.size(), 16u);
  auto top = s.Top(1);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].identity, "heavy");
}

// Zipf(s = 1.1) over 10,000 identities, 200,000 events, k = 100: the documented guarantees
// hold for every tracked identity, and everything heavier than N/k is tracked.
TEST(SpaceSaving, ZipfStreamKeepsTheHeavyHittersWithinTheErrorBound) {
  constexpr int kUniverse = 10'000;
  constexpr int kEvents = 200'000;
  constexpr size_t kCapacity = 100;
  std::vector<double> weights(kUniverse);
  for (int i = 0; i < kUniverse; ++i) weights[i] = 1.0 / std::pow(i + 1, 1.1);
  std::mt19937_64 rng(42);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());

  SpaceSaving s(kCapacity);
  std::map<std::string, uint64_t> truth;
  for (int e = 0; e < kEvents; ++e) {
    const std::string id = "client-" + std::to_string(zipf(rng));
    // Mixed weights: every 3rd event is both rejected and near the limit.
    const bool both = e % 3 == 0;
    s.Add(id, 1, both ? 1 : 0);
    truth[id] += both ? 2 : 1;
  }
  const uint64_t n = s.total();
  const uint64_t bound = n / kCapacity;

  const auto top = s.Top(kCapacity);
  ASSERT_EQ(top.size(), kCapacity);
  std::set<std::string> tracked;
  for (const auto& item : top) {
    tracked.insert(item.identity);
    const uint64_t t = truth[item.identity];
    EXPECT_EQ(item.count, item.rejected + item.near_limit + item.error);
    EXPECT_LE(item.rejected + item.near_limit, t) << item.identity;
    EXPECT_GE(item.count, t) << item.identity;
    EXPECT_LE(item.error, bound) << item.identity;
  }
  int heavy = 0;
  for (const auto& [id, t] : truth) {
    if (t > bound) {
      ++heavy;
      EXPECT_TRUE(tracked.contains(id)) << id << " with " << t << " > N/k = " << bound;
    }
  }
  EXPECT_GE(heavy, 10);  // the test means something only if there are heavy hitters

  // The clearly separated head comes out in its true order.
  std::vector<std::pair<uint64_t, std::string>> by_truth;
  for (const auto& [id, t] : truth) by_truth.emplace_back(t, id);
  std::sort(by_truth.rbegin(), by_truth.rend());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(top[i].identity, by_truth[i].second) << "rank " << i;
}

}  // namespace
}  // namespace sluice::server
