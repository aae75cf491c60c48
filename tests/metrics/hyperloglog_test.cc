// The HyperLogLog sketch against exact counts: generated populations of known size, each
// identity added several times, must come out within 3 standard errors (3 x 2.3%) of the
// exact count; unions of sketches are the sketch of the union.
#include "metrics/hyperloglog.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <unordered_set>

namespace sluice::server {
namespace {

uint64_t HashOf(const std::string& s) { return MixHash(std::hash<std::string>{}(s)); }

TEST(HyperLogLog, EmptyIsZero) {
  HyperLogLog h;
  HyperLogLog::Registers r{};
  h.MergeInto(r);
  EXPECT_EQ(HyperLogLog::Estimate(r), 0.0);
}

TEST(HyperLogLog, RankCountsLeadingZerosAfterTheIndex) {
  EXPECT_EQ(HyperLogLog::RankOf(~uint64_t{0}), 1);
  EXPECT_EQ(HyperLogLog::RankOf(uint64_t{1} << (63 - HyperLogLog::kPrecision)), 1);
  EXPECT_EQ(HyperLogLog::RankOf(uint64_t{1} << (62 - HyperLogLog::kPrecision)), 2);
  EXPECT_EQ(HyperLogLog::RankOf(0), 64 - HyperLogLog::kPrecision + 1);
}

TEST(HyperLogLog, EstimatesPopulationsWithinThreeStandardErrors) {
  std::mt19937_64 rng(16);
  for (const int n : {1, 10, 100, 1000, 3000, 5000, 10'000, 50'000}) {
    for (int trial = 0; trial < 2; ++trial) {
      HyperLogLog h;
      std::unordered_set<std::string> exact;
      const std::string prefix = "key-" + std::to_string(rng()) + "-";
      // Each identity several times, in a shuffled order: repeats must not count.
      for (int i = 0; i < n; ++i) {
        const std::string id = prefix + std::to_string(i);
        exact.insert(id);
        h.Add(HashOf(id));
        if (i % 3 == 0) h.Add(HashOf(id));
      }
      for (int i = 0; i < n; i += 7) h.Add(HashOf(prefix + std::to_string(i)));
      HyperLogLog::Registers r{};
      h.MergeInto(r);
      const double estimate = HyperLogLog::Estimate(r);
      const double truth = static_cast<double>(exact.size());
      EXPECT_LE(std::abs(estimate - truth), 3 * HyperLogLog::kRelativeError * truth + 0.5)
          << "n=" << n << " trial=" << trial << " estimate=" << estimate;
    }
  }
}

TEST(HyperLogLog, UnionOfSketchesCountsTheUnion) {
  HyperLogLog a, b;
  // 0..59999 in a, 40000..99999 in b: 100000 distinct together.
  for (int i = 0; i < 60'000; ++i) a.Add(HashOf("u" + std::to_string(i)));
  for (int i = 40'000; i < 100'000; ++i) b.Add(HashOf("u" + std::to_string(i)));
  HyperLogLog::Registers r{};
  a.MergeInto(r);
  b.MergeInto(r);
  EXPECT_NEAR(HyperLogLog::Estimate(r), 100'000, 3 * HyperLogLog::kRelativeError * 100'000);
}

TEST(HyperLogLog, ClearForgets) {
  HyperLogLog h;
  for (int i = 0; i < 1000; ++i) h.Add(HashOf(std::to_string(i)));
  h.Clear();
  h.Add(HashOf("one"));
  HyperLogLog::Registers r{};
  h.MergeInto(r);
  EXPECT_NEAR(HyperLogLog::Estimate(r), 1.0, 0.01);
}

}  // namespace
}  // namespace sluice::server
