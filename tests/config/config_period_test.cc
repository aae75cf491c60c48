// `period` (issue 27, "Any period"): a rule's window of any length from 1 s to 366 d instead of
// one of ratelimit's units, on every algorithm; the errors name the line. Decisions are checked
// against counts worked out by hand for each rule's window, not against the code's formula.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "config/limit_unit.h"
#include "sluice/memory_store.h"
#include "support/server_test_util.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A time on a multiple of every window below (300 s, 90 s, 1.5 s): fixed windows start there.
const Timestamp kT0 = FromNanos(int64_t{1'800'000'000} * 1'000'000'000);

class ConfigPeriodTest : public ::testing::Test {
 protected:
  std::string LoadError(const std::string& yaml) {
    return test::LoadError(dir_.Write("p.yaml", yaml).string());
  }
  std::shared_ptr<const Config> Load(const std::string& yaml) {
    return test::MustLoad(dir_.Write("p.yaml", yaml).string());
  }
  // The one limit of a one-rule config "domain: d, key: k".
  const Limit* Only(const std::string& rate_limit) {
    config_ = Load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + rate_limit + "\n");
    if (config_ == nullptr) return nullptr;
    return test::MustMatch(*config_, "d", {{"k", "v"}}).limit;
  }

  test::TempConfigDir dir_{"period"};
  std::shared_ptr<const Config> config_;
};

TEST_F(ConfigPeriodTest, APeriodIsTheWindow) {
  const Limit* l = Only("{period: 5m, requests_per_unit: 600}");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->spec.period, std::chrono::minutes(5));
  EXPECT_EQ(l->period.length, std::chrono::minutes(5));
  EXPECT_FALSE(l->period.unit.has_value());
  EXPECT_EQ(PeriodName(l->period), "5m");
  EXPECT_EQ(l->requests_per_unit, 600);

  const Limit* odd = Only("{period: 1500ms, requests_per_unit: 3}");
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(odd->spec.period, milliseconds(1500));
  const Limit* longest = Only("{period: 366d, requests_per_unit: 1}");
  ASSERT_NE(longest, nullptr);
  EXPECT_EQ(longest->spec.period, std::chrono::hours(24 * 366));
  const Limit* shortest = Only("{period: 1s, requests_per_unit: 1}");
  ASSERT_NE(shortest, nullptr);
  EXPECT_EQ(shortest->spec.period, seconds(1));

  // A unit keeps its name; its length is ratelimit's.
  const Limit* unit = Only("{unit: month, requests_per_unit: 1}");
  ASSERT_NE(unit, nullptr);
  EXPECT_EQ(unit->period.unit, Unit::kMonth);
  EXPECT_EQ(unit->spec.period, std::chrono::hours(24 * 30));
}

TEST_F(ConfigPeriodTest, ErrorsNameTheLine) {
  const std::string head = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n";
  const auto error = [&](const std::string& fields) { return LoadError(head + fields); };
  std::string e = error("      unit: minute\n      period: 5m\n      requests_per_unit: 1\n");
  EXPECT_NE(e.find("p.yaml:6:"), std::string::npos) << e;
  EXPECT_NE(e.find("'unit' or 'period', not both"), std::string::npos) << e;

  e = error("      period: 999ms\n      requests_per_unit: 1\n");
  EXPECT_NE(e.find("p.yaml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("period must be from 1s to 366d (got 999ms)"), std::string::npos) << e;
  e = error("      period: 367d\n      requests_per_unit: 1\n");
  EXPECT_NE(e.find("(got 367d)"), std::string::npos) << e;
  e = error("      period: 1000000500ns\n      requests_per_unit: 1\n");
  EXPECT_NE(e.find("whole number of microseconds"), std::string::npos) << e;
  e = error("      period: 300\n      requests_per_unit: 1\n");
  EXPECT_NE(e.find("p.yaml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("missing unit"), std::string::npos) << e;
  e = error("      requests_per_unit: 1\n");
  EXPECT_NE(e.find("needs a 'unit' or a 'period'"), std::string::npos) << e;
  e = error("      unlimited: true\n      period: 5m\n");
  EXPECT_NE(e.find("p.yaml:6:"), std::string::npos) << e;
  EXPECT_NE(e.find("an unlimited rate_limit takes no 'period'"), std::string::npos) << e;
}

// Every algorithm takes a period. Counts by hand: 3 per 90 s lets 3 through at once; a fixed
// window opens again at the next multiple of 90 s, a bucket after 30 s (one unit's refill).
TEST_F(ConfigPeriodTest, EveryAlgorithmDecidesOnItsPeriod) {
  for (const char* algorithm : {"fixed_window", "token_bucket", "gcra", "leaky_bucket",
                                "sliding_window_counter", "sliding_window_log"}) {
    SCOPED_TRACE(algorithm);
    const Limit* l =
        Only(std::string("{period: 90s, requests_per_unit: 3, algorithm: ") + algorithm + "}");
    ASSERT_NE(l, nullptr);
    auto limiter = MakeMemoryLimiter(l->spec);
    ASSERT_TRUE(limiter.has_value());
    for (int i = 0; i < 3; ++i) EXPECT_TRUE((*limiter)->Decide("x", kT0, 1).allowed) << i;
    EXPECT_FALSE((*limiter)->Decide("x", kT0 + seconds(29), 1).allowed);
    const std::string name = algorithm;
    if (name == "fixed_window") {
      EXPECT_FALSE((*limiter)->Decide("x", kT0 + seconds(89), 1).allowed);
      EXPECT_TRUE((*limiter)->Decide("x", kT0 + seconds(90), 1).allowed);
    } else if (name.starts_with("sliding")) {
      // The whole window must pass before the first hits leave it.
      EXPECT_FALSE((*limiter)->Decide("x", kT0 + seconds(60), 1).allowed);
      EXPECT_TRUE((*limiter)->Decide("x", kT0 + seconds(181), 1).allowed);
    } else {
      EXPECT_TRUE((*limiter)->Decide("x", kT0 + seconds(30), 1).allowed);
      EXPECT_FALSE((*limiter)->Decide("x", kT0 + seconds(30), 1).allowed);
    }
  }
}

TEST(LimitPeriod, NamesAndUnitsOfLength) {
  EXPECT_EQ(PeriodName(LimitPeriod::Of(Unit::kMinute)), "minute");
  EXPECT_EQ(PeriodName(*ParsePeriod("300s")), "5m");
  EXPECT_EQ(PeriodName(*ParsePeriod("1500ms")), "1500ms");
  EXPECT_EQ(UnitOfLength(seconds(60)), Unit::kMinute);
  EXPECT_EQ(UnitOfLength(std::chrono::hours(24 * 7)), Unit::kWeek);
  EXPECT_EQ(UnitOfLength(seconds(300)), std::nullopt);
  // `{Unit::kMinute}` alone must not make a second-long window (LimitPeriod's member order).
  EXPECT_EQ(LimitPeriod::Of(Unit::kMinute).length, seconds(60));
}

}  // namespace
}  // namespace sluice::server
