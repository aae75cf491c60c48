// Regions' parts of a limit: the static part (RegionPart) and the leased allocation
// (AllocateRegions), against values worked by hand and properties checked over random inputs.
#include "sluice/region_scope.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

namespace sluice {
namespace {

using std::chrono::seconds;

TEST(RegionPart, ScalesLimitAndBurstRoundingDown) {
  const LimitSpec global{
      .algorithm = Algorithm::kTokenBucket, .limit = 1000, .period = seconds(1), .burst = 1500};
  auto part = RegionPart(global, SharedUnits(1000, 333'333));  // 333.333 -> 333
  ASSERT_TRUE(part.has_value()) << part.error().message;
  EXPECT_EQ(part->limit, 333);
  EXPECT_EQ(part->burst, 499);  // 1500 x 333 / 1000 = 499.5
  EXPECT_EQ(part->period, seconds(1));
  EXPECT_FALSE(RegionPart(global, 0).has_value());
  EXPECT_EQ(SharedUnits(4'294'967'295, kWholeShare), 4'294'967'295);
}

// Worked by hand. Limit 1000, shares us 0.5, eu 0.3, ap 0.2.
TEST(AllocateRegions, DemandThatFitsIsMetAndSpareGoesByShare) {
  const std::vector<int64_t> ppm = {500'000, 300'000, 200'000};
  // Demands 101, 51, 11 fit: each gets it (1 + want), the spare 837 goes 50/30/20:
  // 418 + 251 + 167 (floors).
  EXPECT_EQ(AllocateRegions(1000, ppm, std::vector<int64_t>{101, 51, 11}),
            (std::vector<int64_t>{101 + 418, 51 + 251, 11 + 167}));
}

TEST(AllocateRegions, BusyRegionTakesWhatTheQuietOnesLeave) {
  const std::vector<int64_t> ppm = {340'000, 330'000, 330'000};
  // 90/5/5: us wants 2000, eu and ap 50 each. eu and ap are under their fair part (1000 x .33),
  // so they get 50; us gets the other 900.
  EXPECT_EQ(AllocateRegions(1000, ppm, std::vector<int64_t>{2000, 50, 50}),
            (std::vector<int64_t>{900, 50, 50}));
}

TEST(AllocateRegions, AbsentRegionKeepsItsStaticPart) {
  const std::vector<int64_t> ppm = {500'000, 300'000, 200'000};
  // ap absent (cut off, may be deciding on its 200); us and eu both want everything: the 800
  // left split 5:3 after their one unit each: 1 + floor(798 x 5/8) = 499, 1 + floor(798 x 3/8) =
  // 300.
  EXPECT_EQ(AllocateRegions(1000, ppm, std::vector<int64_t>{5000, 5000, -1}),
            (std::vector<int64_t>{499, 300, 200}));
}

// Over random inputs: never more than the limit, every present region at least one unit, an
// absent one exactly its static part, and a present region that gets less than it wants got at
// least its weighted part of what the absent regions left (max-min fairness).
TEST(AllocateRegions, PropertiesHoldOverRandomInputs) {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 2000; ++round) {
    const int n = 1 + static_cast<int>(rng() % 5);
    std::vector<int64_t> ppm(n);
    int64_t left = kWholeShare;
    for (int i = 0; i < n; ++i) {
      ppm[i] = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(left / (n - i)));
      left -= ppm[i];
    }
    const int64_t limit = 1000 + static_cast<int64_t>(rng() % 100'000);
    std::vector<int64_t> demand(n);
    for (int i = 0; i < n; ++i) {
      demand[i] = rng() % 4 == 0 ? -1 : static_cast<int64_t>(rng() % (2 * limit));
    }
    const auto alloc = AllocateRegions(limit, ppm, demand);
    ASSERT_EQ(alloc.size(), static_cast<size_t>(n));
    EXPECT_LE(std::accumulate(alloc.begin(), alloc.end(), int64_t{0}), limit);
    int64_t absent = 0, present_weight = 0;
    for (int i = 0; i < n; ++i) {
      if (demand[i] < 0) {
        EXPECT_EQ(alloc[i], SharedUnits(limit, ppm[i]));
        absent += alloc[i];
      } else {
        EXPECT_GE(alloc[i], 1);
        present_weight += ppm[i];
      }
    }
    for (int i = 0; i < n; ++i) {
      if (demand[i] < 0 || alloc[i] >= demand[i]) continue;
      const int64_t fair = (limit - absent) * ppm[i] / present_weight;
      EXPECT_GE(alloc[i] + n, fair) << "round " << round << " region " << i;
    }
  }
}

}  // namespace
}  // namespace sluice
