// sluice recommend's numbers against independent computations: peaks by brute force, percentiles
// of a population built with a known distribution, and what-if rejections that follow from the
// traffic's construction (an isolated burst of k against a limit L loses max(0, k - L)).
#include "cli/recommend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

namespace sluice::cli {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kMinute = 60 * kSecond;

// The most hits in any (t - w, t]: every window ending at a hit, counted from scratch.
int64_t BrutePeak(const std::vector<Hit>& hits, int64_t w) {
  int64_t best = 0;
  for (const Hit& end : hits) {
    int64_t sum = 0;
    for (const Hit& h : hits) {
      if (h.t_ns > end.t_ns - w && h.t_ns <= end.t_ns) sum += h.cost;
    }
    best = std::max(best, sum);
  }
  return best;
}

TEST(PeakHits, EqualsTheBruteForceCountOnRandomTraffic) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<Hit> hits;
    int64_t t = 0;
    const int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      t += static_cast<int64_t>(rng() % 3) * kSecond / 2;  // repeats, and exact window edges
      hits.push_back({t, static_cast<int64_t>(1 + rng() % 4)});
    }
    for (int64_t w : {kSecond, 2 * kSecond, 5 * kSecond}) {
      EXPECT_EQ(PeakHits(hits, Duration(w)), BrutePeak(hits, w)) << "round " << round;
    }
  }
}

TEST(PeakHits, AHitExactlyOneWindowLaterStartsANewWindow) {
  const std::vector<Hit> hits = {{0, 1}, {kSecond, 1}, {2 * kSecond - 1, 1}};
  EXPECT_EQ(PeakHits(hits, std::chrono::seconds(1)), 2);  // (1s - 1ns .. 2s - 1ns]
}

// Identity i (1..200) sends i requests at one instant, three times, 3 minutes apart (a bucket
// of any algorithm is full again): every window of a minute holds at most one burst.
TrafficByIdentity BurstsOfOneToTwoHundred() {
  TrafficByIdentity traffic;
  for (int i = 1; i <= 200; ++i) {
    auto& hits = traffic["id" + std::to_string(i)];
    for (int burst = 0; burst < 3; ++burst) {
      for (int k = 0; k < i; ++k) hits.push_back({(1 + 3 * burst) * kMinute + i * kSecond, 1});
    }
  }
  return traffic;
}

TEST(Recommend, PercentilesOfAKnownPopulationAreItsNearestRanks) {
  RecommendOptions o;  // per 1m, p99, headroom 1.2
  o.candidates = {50, 100, 150, 200};
  auto r = Recommend(BurstsOfOneToTwoHundred(), o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->identities, 200u);
  // Peaks are 1..200: the p-th percentile is the ceil(p% of 200)-th of them.
  EXPECT_EQ(r->distribution.p50, 100);
  EXPECT_EQ(r->distribution.p90, 180);
  EXPECT_EQ(r->distribution.p95, 190);
  EXPECT_EQ(r->distribution.p99, 198);
  EXPECT_EQ(r->distribution.max, 200);
  EXPECT_EQ(r->limit, 238);  // 198 x 1.2 = 237.6, rounded up
  EXPECT_EQ(r->burst, 238);  // the bursts are instants: as large over 6s as over 1m
}

TEST(Recommend, WhatIfRejectsWhatEachBurstHasBeyondTheLimit) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kSlidingWindowLog,
                      Algorithm::kFixedWindow, Algorithm::kGcra}) {
    RecommendOptions o;
    o.algorithm = a;
    o.candidates = {50, 100, 150, 200};
    auto r = Recommend(BurstsOfOneToTwoHundred(), o);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->what_if.size(), 4u);
    for (const WhatIfRow& row : r->what_if) {
      uint64_t ids = 0, requests = 0;
      for (int64_t i = row.limit + 1; i <= 200; ++i) {
        ++ids;
        requests += 3 * static_cast<uint64_t>(i - row.limit);
      }
      EXPECT_EQ(row.identities_rejected, ids) << AlgorithmName(a) << " limit " << row.limit;
      EXPECT_EQ(row.requests_rejected, requests) << AlgorithmName(a) << " limit " << row.limit;
    }
  }
}

TEST(Recommend, OnRandomTrafficTheLogRejectsExactlyTheIdentitiesWhosePeakIsOverTheLimit) {
  // Heavy-tailed rates (Pareto), Poisson arrivals: peaks by brute force are the oracle. The exact
  // log rejects an identity iff some window of its unit-cost traffic holds more than the limit;
  // a token bucket of capacity L refilling L per minute never rejects traffic whose every
  // minute holds at most L, so it rejects no identity the log does not.
  std::mt19937_64 rng(11);
  std::exponential_distribution<double> gap(1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  TrafficByIdentity traffic;
  std::vector<int64_t> peaks;
  for (int id = 0; id < 300; ++id) {
    const double per_minute = 2.0 / std::pow(1.0 - u(rng), 1.0 / 1.5);  // Pareto, alpha 1.5
    std::vector<Hit> hits;
    double t = 0;
    while ((t += gap(rng) / per_minute * 60.0) < 600.0) {
      hits.push_back({static_cast<int64_t>(t * 1e3) * 1'000'000, 1});
    }
    if (hits.empty()) continue;
    peaks.push_back(BrutePeak(hits, kMinute));
    traffic.emplace("id" + std::to_string(id), std::move(hits));
  }
  std::sort(peaks.begin(), peaks.end());
  const auto rank = [&](double p) {
    return peaks[static_cast<size_t>(std::ceil(p / 100.0 * peaks.size())) - 1];
  };
  RecommendOptions o;
  o.algorithm = Algorithm::kSlidingWindowLog;
  o.percentile = 90;
  o.headroom = 1.5;
  o.candidates = {rank(50), rank(90), rank(99), peaks.back()};
  auto r = Recommend(traffic, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->identities, peaks.size());
  EXPECT_EQ(r->distribution.p50, rank(50));
  EXPECT_EQ(r->distribution.p95, rank(95));
  EXPECT_EQ(r->distribution.p99, rank(99));
  EXPECT_EQ(r->distribution.max, peaks.back());
  EXPECT_EQ(r->limit, static_cast<int64_t>(std::ceil(rank(90) * 1.5 - 1e-9)));
  for (const WhatIfRow& row : r->what_if) {
    const auto over =
        std::count_if(peaks.begin(), peaks.end(), [&](int64_t p) { return p > row.limit; });
    EXPECT_EQ(row.identities_rejected, static_cast<uint64_t>(over)) << "limit " << row.limit;
    o.algorithm = Algorithm::kTokenBucket;
    auto bucket = ReplayWhatIf(traffic, o, row.limit);
    ASSERT_TRUE(bucket);
    EXPECT_LE(bucket->identities_rejected, row.identities_rejected) << "limit " << row.limit;
  }
  EXPECT_EQ(r->what_if.back().identities_rejected, 0u);  // at the max, nobody
}

TEST(Recommend, HeadroomRoundsUpWithoutFloatingPointNoise) {
  EXPECT_EQ(ScaleByHeadroom(100, 1.2), 120);
  EXPECT_EQ(ScaleByHeadroom(100, 1.201), 121);
  EXPECT_EQ(ScaleByHeadroom(0, 1.2), 1);
  EXPECT_EQ(ScaleByHeadroom(7, 1.0), 7);
}

TEST(Recommend, RefusesBadOptionsNamingTheFlag) {
  TrafficByIdentity traffic = {{"a", {{0, 1}}}};
  RecommendOptions o;
  o.percentile = 0;
  EXPECT_NE(Recommend(traffic, o).error().message.find("--percentile"), std::string::npos);
  o = {};
  o.percentile = 101;
  EXPECT_NE(Recommend(traffic, o).error().message.find("--percentile"), std::string::npos);
  o = {};
  o.headroom = -1;
  EXPECT_NE(Recommend(traffic, o).error().message.find("--headroom"), std::string::npos);
  o = {};
  o.headroom = std::nan("");
  EXPECT_NE(Recommend(traffic, o).error().message.find("--headroom"), std::string::npos);
  EXPECT_FALSE(Recommend(TrafficByIdentity{}, RecommendOptions{}));
}

TEST(Recommend, JsonHasTheIssuesFieldsInItsOrder) {
  auto r = Recommend(BurstsOfOneToTwoHundred(), RecommendOptions{});
  ASSERT_TRUE(r);
  const auto j = RecommendationJson(*r);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"per_s", "percentile", "headroom", "identities",
                                            "distribution", "suggested", "what_if"}));
  EXPECT_EQ(j["per_s"], 60.0);
  EXPECT_EQ(j["suggested"]["limit"], 238);
  EXPECT_EQ(j["distribution"]["p99"], 198);
  ASSERT_FALSE(j["what_if"].empty());
  EXPECT_TRUE(j["what_if"][0].contains("identities_rejected"));
  EXPECT_TRUE(j["what_if"][0].contains("requests_rejected"));
}

}  // namespace
}  // namespace sluice::cli
