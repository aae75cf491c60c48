// The usage views against an oracle computed here from the same generated traffic: the exact
// set of identities of each state and the exact per-identity peaks, whose percentiles are
// taken by nearest rank over the whole population. Time is a ManualClock's.
#include "metrics/usage_views.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "metrics/hyperloglog.h"

namespace sluice::server {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

// Within three standard errors of the sketch (and exact below that).
void ExpectCount(uint64_t estimate, size_t truth, const char* what) {
  EXPECT_LE(std::abs(static_cast<double>(estimate) - static_cast<double>(truth)),
            3 * HyperLogLog::kRelativeError * static_cast<double>(truth) + 0.5)
      << what << ": estimate " << estimate << ", exact " << truth;
}

// The oracle's percentile: nearest rank over every identity's exact peak.
int64_t NearestRank(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

class UsageViewsTest : public ::testing::Test {
 protected:
  UsageViews Make(size_t max_bytes = size_t{8} << 20) {
    return UsageViews(
        {.period = minutes(60), .near_limit_ratio = 0.9, .max_bytes = max_bytes, .clock = &clock_});
  }
  // One identity's decisions that climb to `peak` of `capacity` (a counter filling in a
  // window), then a new window that starts again at 1.
  void Climb(UsageViews& v, const std::string& id, int64_t peak, int64_t capacity = 1000) {
    for (int64_t used = 1; used <= peak; used += std::max<int64_t>(1, peak / 7)) {
      v.Record("api", "per_key", id, clock_.Now(), capacity, used, UsageOutcome::kAllowed);
    }
    v.Record("api", "per_key", id, clock_.Now(), capacity, peak, UsageOutcome::kAllowed);
    v.Record("api", "per_key", id, clock_.Now(), capacity, 1, UsageOutcome::kAllowed);
  }
  ManualClock clock_{FromNanos(int64_t{1'000'000} * 1'000'000'000)};
};

TEST_F(UsageViewsTest, ALimitWithNoDecisionReportsZeros) {
  UsageViews v = Make();
  auto r = v.Report("api", "per_key");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->identities, 0u);
  EXPECT_EQ(r->peaks.max, 0);
  EXPECT_EQ(r->period, minutes(60));
}

// A few hundred identities are all in the sample: the percentiles are the exact ones.
TEST_F(UsageViewsTest, SmallPopulationGivesExactPercentiles) {
  UsageViews v = Make();
  std::vector<int64_t> peaks;
  for (int i = 0; i < 300; ++i) {
    const int64_t peak = (i * 37) % 1000 + 1;
    peaks.push_back(peak);
    Climb(v, "key_" + std::to_string(i), peak);
  }
  auto r = v.Report("api", "per_key");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sampled, 300u);
  ExpectCount(r->identities, 300, "identities");
  EXPECT_EQ(r->peaks.p50, NearestRank(peaks, 0.50));
  EXPECT_EQ(r->peaks.p90, NearestRank(peaks, 0.90));
  EXPECT_EQ(r->peaks.p95, NearestRank(peaks, 0.95));
  EXPECT_EQ(r->peaks.p99, NearestRank(peaks, 0.99));
  EXPECT_EQ(r->peaks.max, *std::max_element(peaks.begin(), peaks.end()));
}

// 30000 identities with a heavy-tailed peak: the sample's percentiles fall within 4 points of
// rank of the exact ones (the sample holds several hundred identities).
TEST_F(UsageViewsTest, LargePopulationPercentilesAreThoseOfAUniformSample) {
  UsageViews v = Make();
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> tail(3.0, 1.0);
  std::vector<int64_t> peaks;
  for (int i = 0; i < 30'000; ++i) {
    const int64_t peak = std::clamp<int64_t>(static_cast<int64_t>(tail(rng)), 1, 1000);
    peaks.push_back(peak);
    Climb(v, "key_" + std::to_string(i), peak);
  }
  auto r = v.Report("api", "per_key");
  ASSERT_TRUE(r.has_value());
  EXPECT_GE(r->sampled, 300u);
  ExpectCount(r->identities, 30'000, "identities");
  for (const auto& [q, got] : std::vector<std::pair<double, int64_t>>{
           {0.50, r->peaks.p50}, {0.90, r->peaks.p90}, {0.95, r->peaks.p95}}) {
    EXPECT_GE(got, NearestRank(peaks, q - 0.04)) << "p" << q * 100;
    EXPECT_LE(got, NearestRank(peaks, q + 0.04)) << "p" << q * 100;
  }
  EXPECT_GE(r->peaks.p99, NearestRank(peaks, 0.97));
  EXPECT_LE(r->peaks.max, *std::max_element(peaks.begin(), peaks.end()));
}

TEST_F(UsageViewsTest, CountsIdentitiesByState) {
  UsageViews v = Make();
  // 400 well below, 120 near (90% and more, allowed), 60 refused, 45 refused by a shadow or
  // soft limit, 15 only seen through a failing store. Some identities are in two states.
  for (int i = 0; i < 400; ++i) {
    v.Record("api", "per_key", "low_" + std::to_string(i), clock_.Now(), 100, 10,
             UsageOutcome::kAllowed);
  }
  for (int i = 0; i < 120; ++i) {
    v.Record("api", "per_key", "near_" + std::to_string(i), clock_.Now(), 100, 90 + i % 11,
             UsageOutcome::kAllowed);
  }
  // 89 of 100 is not near; every refused identity passed 89 first.
  for (int i = 0; i < 60; ++i) {
    v.Record("api", "per_key", "over_" + std::to_string(i), clock_.Now(), 100, 89,
             UsageOutcome::kAllowed);
    v.Record("api", "per_key", "over_" + std::to_string(i), clock_.Now(), 100, 100,
             UsageOutcome::kOver);
  }
  for (int i = 0; i < 45; ++i) {
    v.Record("api", "per_key", "shadow_" + std::to_string(i), clock_.Now(), 100, 100,
             UsageOutcome::kShadowOver);
  }
  for (int i = 0; i < 15; ++i) {
    v.Record("api", "per_key", "failed_" + std::to_string(i), clock_.Now(), 100, 0,
             UsageOutcome::kUnknown);
  }
  const auto all = v.Identities();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].domain, "api");
  EXPECT_EQ(all[0].limit, "per_key");
  ExpectCount(all[0].seen, 640, "seen");
  ExpectCount(all[0].near, 120, "near");
  ExpectCount(all[0].over, 60, "over");
  ExpectCount(all[0].shadow_over, 45, "shadow_over");
}

// The period rolls in sixths: identities seen only more than a period ago are gone, with their
// peaks; those of the last period stay.
TEST_F(UsageViewsTest, ForgetsWhatIsOlderThanThePeriod) {
  UsageViews v = Make();
  for (int i = 0; i < 200; ++i) Climb(v, "old_" + std::to_string(i), 900);
  clock_.Advance(minutes(30));
  for (int i = 0; i < 50; ++i) Climb(v, "new_" + std::to_string(i), 100);
  auto r = v.Report("api", "per_key");
  ASSERT_TRUE(r.has_value());
  ExpectCount(r->identities, 250, "both halves");
  EXPECT_EQ(r->peaks.max, 900);
  clock_.Advance(minutes(50));  // 80 min after the old ones, 50 after the new ones
  r = v.Report("api", "per_key");
  ASSERT_TRUE(r.has_value());
  ExpectCount(r->identities, 50, "the last period");
  EXPECT_EQ(r->peaks.max, 100);
  EXPECT_EQ(r->peaks.p50, 100);
  // A decision timed before the period the views hold now changes nothing.
  v.Record("api", "per_key", "late", clock_.Now() - minutes(65), 1000, 999, UsageOutcome::kAllowed);
  EXPECT_EQ(v.Report("api", "per_key")->peaks.max, 100);
  clock_.Advance(minutes(61));
  r = v.Report("api", "per_key");
  EXPECT_EQ(r->identities, 0u);
  EXPECT_EQ(r->peaks.max, 0);
}

TEST_F(UsageViewsTest, LimitsPastTheMemoryBoundAreNotTrackedAndSaySo) {
  UsageViews v = Make(2 * UsageViews::BytesPerLimit());
  EXPECT_EQ(v.max_limits(), 2u);
  for (const char* limit : {"a", "b", "c"}) {
    v.Record("api", limit, "k", clock_.Now(), 10, 5, UsageOutcome::kAllowed);
  }
  EXPECT_EQ(v.Identities().size(), 2u);
  EXPECT_TRUE(v.Report("api", "a").has_value());
  auto c = v.Report("api", "c");
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message.find("not tracked"), std::string::npos) << c.error().message;
}

TEST_F(UsageViewsTest, ThreadsRecordingAtOnceLoseNothing) {
  UsageViews v = Make();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Each thread its own identities, and all of them one shared hot identity.
      for (int i = 0; i < 5000; ++i) {
        v.Record("api", "per_key", "t" + std::to_string(t) + "_" + std::to_string(i), clock_.Now(),
                 1000, i % 500 + 1, UsageOutcome::kAllowed);
        v.Record("api", "per_key", "hot", clock_.Now(), 1000, i % 1000 + 1, UsageOutcome::kAllowed);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto r = v.Report("api", "per_key");
  ASSERT_TRUE(r.has_value());
  ExpectCount(r->identities, 20'001, "identities");
  EXPECT_LE(r->peaks.max, 1000);
}

}  // namespace
}  // namespace sluice::server
