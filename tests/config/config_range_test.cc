// The whole range of rates loads: every unit envoyproxy/ratelimit accepts, times a set of
// requests_per_unit values chosen for their factors (1, a small prime, 30001, 999999, 2^31-1,
// 2^32-1), times every algorithm that may take any of them, from YAML and as descriptor `limit`
// overrides, and each loaded limit decides on the memory store. Issue 25, "The whole range".
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/descriptor.h"
#include "config/limit_unit.h"
#include "sluice/memory_store.h"
#include "support/server_test_util.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

constexpr int64_t kRates[] = {1, 7, 30001, 999999, 2147483647, 4294967295};
constexpr Algorithm kAlgorithms[] = {Algorithm::kTokenBucket, Algorithm::kGcra,
                                     Algorithm::kLeakyBucket, Algorithm::kFixedWindow,
                                     Algorithm::kSlidingWindowCounter};

std::string ValueFor(Algorithm a, Unit u, int64_t rate) {
  return std::string(AlgorithmName(a)) + "_" + std::string(UnitName(u)) + "_" +
         std::to_string(rate);
}

// One descriptor per (algorithm, unit, rate), buckets with burst 2^32-1 where it fills within
// the 100 years the core allows (docs/algorithms.md, "The exact range").
std::string RangeYaml() {
  std::string yaml = "domain: range\ndescriptors:\n";
  for (Algorithm a : kAlgorithms) {
    for (Unit u : kAllUnits) {
      for (int64_t rate : kRates) {
        yaml += "  - key: k\n    value: " + ValueFor(a, u, rate) +
                "\n    rate_limit: {unit: " + std::string(UnitName(u)) +
                ", requests_per_unit: " + std::to_string(rate) +
                ", algorithm: " + std::string(AlgorithmName(a)) + "}\n";
      }
    }
  }
  return yaml;
}

// The limit decides: a request of the whole capacity is admitted, one more hit is refused.
void ExpectDecides(const LimitSpec& spec, const std::string& what) {
  auto limiter = MakeMemoryLimiter(spec);
  ASSERT_TRUE(limiter.has_value()) << what << ": " << limiter.error().message;
  const Timestamp now = FromNanos(int64_t{1'780'000'000} * 1'000'000'000);
  const int64_t capacity = spec.Capacity();
  EXPECT_TRUE((*limiter)->Decide("k", now, capacity).allowed) << what;
  const Decision refused = (*limiter)->Decide("k", now, 1);
  EXPECT_FALSE(refused.allowed) << what;
  EXPECT_EQ(refused.remaining, 0) << what;
}

TEST(ConfigRange, EveryUnitTimesEveryRateTimesFiveAlgorithmsLoadsAndDecides) {
  test::TempConfigDir dir("range");
  auto config = test::MustLoad(dir.Write("range.yaml", RangeYaml()).string());
  ASSERT_NE(config, nullptr);
  for (Algorithm a : kAlgorithms) {
    for (Unit u : kAllUnits) {
      for (int64_t rate : kRates) {
        const std::string value = ValueFor(a, u, rate);
        const MatchResult m = test::MustMatch(*config, "range", {{"k", value}});
        ASSERT_NE(m.limit, nullptr) << value;
        EXPECT_EQ(m.limit->spec.algorithm, a) << value;
        EXPECT_EQ(m.limit->spec.limit, rate) << value;
        EXPECT_EQ(m.limit->spec.period, UnitDuration(u)) << value;
        ExpectDecides(m.limit->spec, value);
      }
    }
  }
}

TEST(ConfigRange, BurstUpTo2To32Minus1LoadsWhereTheBucketFillsWithin100Years) {
  test::TempConfigDir dir("burst");
  std::string yaml = "domain: burst\ndescriptors:\n";
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kLeakyBucket}) {
    // A capacity of 2^32-1 refills within 100 years at 42949673 a year or more; other units
    // take the largest prime below 2^32.
    for (Unit u : kAllUnits) {
      const int64_t rate = u == Unit::kYear ? 42949673 : 4294967291;  // the largest prime < 2^32
      yaml += "  - key: k\n    value: " + ValueFor(a, u, rate) +
              "\n    rate_limit: {unit: " + std::string(UnitName(u)) +
              ", requests_per_unit: " + std::to_string(rate) +
              ", algorithm: " + std::string(AlgorithmName(a)) + ", burst: 4294967295}\n";
    }
  }
  auto config = test::MustLoad(dir.Write("burst.yaml", yaml).string());
  ASSERT_NE(config, nullptr);
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kLeakyBucket}) {
    for (Unit u : kAllUnits) {
      const int64_t rate = u == Unit::kYear ? 42949673 : 4294967291;
      const MatchResult m = test::MustMatch(*config, "burst", {{"k", ValueFor(a, u, rate)}});
      ASSERT_NE(m.limit, nullptr);
      EXPECT_EQ(m.limit->spec.Capacity(), 4294967295);
      ExpectDecides(m.limit->spec, ValueFor(a, u, rate));
    }
  }
  // One that would take longer is refused, and says why.
  const std::string slow =
      "domain: slow\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: "
      "1, burst: 101}\n";
  const std::string error = test::LoadError(dir.Write("slow.yaml", slow).string());
  EXPECT_NE(error.find("100 years"), std::string::npos) << error;
}

TEST(ConfigRange, TheSameRatesAreServedAsDescriptorOverrides) {
  test::TempConfigDir dir("override");
  auto config = test::MustLoad(
      dir.Write("o.yaml",
                "domain: o\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                "requests_per_unit: 1}\n")
          .string());
  ASSERT_NE(config, nullptr);
  for (Unit u : kAllUnits) {
    for (int64_t rate : kRates) {
      const LimitOverride o{rate, LimitPeriod::Of(u)};
      const MatchResult m = test::MustMatch(*config, "o", {{"k", "v"}}, &o);
      ASSERT_NE(m.limit, nullptr);
      EXPECT_EQ(m.limit->spec.limit, rate);
      EXPECT_EQ(m.limit->spec.period, UnitDuration(u));
      ExpectDecides(m.limit->spec,
                    "override " + std::to_string(rate) + "/" + std::string(UnitName(u)));
    }
  }
}

}  // namespace
}  // namespace sluice::server
