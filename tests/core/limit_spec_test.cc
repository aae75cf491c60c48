#include "sluice/limit_spec.h"

#include <gtest/gtest.h>

#include "sluice/duration.h"
#include "sluice/token_bucket.h"

namespace sluice {
namespace {

using std::chrono::seconds;

std::string ErrorOf(const LimitSpec& spec) {
  auto r = ValidateLimitSpec(spec);
  return r ? "" : r.error().message;
}

TEST(LimitSpec, RejectsNonPositiveLimitsAndPeriods) {
  EXPECT_NE(ErrorOf({Algorithm::kTokenBucket, 0, seconds(1), 0, false}).find("limit"),
            std::string::npos);
  EXPECT_NE(ErrorOf({Algorithm::kTokenBucket, -5, seconds(1), 0, false}).find("-5"),
            std::string::npos);
  EXPECT_NE(ErrorOf({Algorithm::kFixedWindow, 5, seconds(0), 0, false}).find("period"),
            std::string::npos);
  EXPECT_NE(ErrorOf({Algorithm::kGcra, 5, seconds(1), -1, false}).find("burst"), std::string::npos);
}

TEST(LimitSpec, PeriodsAreCappedAtTenYears) {
  EXPECT_NE(
      ErrorOf({Algorithm::kFixedWindow, 5, std::chrono::hours(24 * 3651), 0, false}).find("3650d"),
      std::string::npos);
  EXPECT_EQ(ErrorOf({Algorithm::kFixedWindow, 5, std::chrono::hours(24 * 3650), 0, false}), "");
}

TEST(LimitSpec, BurstAndShaperOnlyWhereTheyMeanSomething) {
  EXPECT_NE(ErrorOf({Algorithm::kFixedWindow, 5, seconds(1), 10, false}).find("burst"),
            std::string::npos);
  EXPECT_NE(ErrorOf({Algorithm::kTokenBucket, 5, seconds(1), 0, true}).find("shaper"),
            std::string::npos);
  EXPECT_EQ(ErrorOf({Algorithm::kLeakyBucket, 5, seconds(1), 10, true}), "");
}

TEST(LimitSpec, MaxDelayOnlyOnAShaperAndWithinWhatAFullQueueImposes) {
  auto with_max_delay = [](bool shaper, Duration max_delay) {
    LimitSpec spec{Algorithm::kLeakyBucket, 10, seconds(1), 20, shaper};
    spec.max_delay = max_delay;
    return ErrorOf(spec);
  };
  using std::chrono::milliseconds;
  EXPECT_NE(with_max_delay(false, seconds(1)).find("shaper"), std::string::npos);
  EXPECT_NE(with_max_delay(true, milliseconds(-1)).find("max_delay"), std::string::npos);
  // 20 queued at 10/s: a full queue drains in 2s.
  EXPECT_NE(with_max_delay(true, milliseconds(2001)).find("2s"), std::string::npos);
  EXPECT_EQ(with_max_delay(true, seconds(2)), "");
  EXPECT_EQ(with_max_delay(true, seconds(0)), "");
  LimitSpec token{Algorithm::kTokenBucket, 10, seconds(1), 20, false};
  token.max_delay = seconds(1);
  EXPECT_NE(ErrorOf(token).find("max_delay"), std::string::npos);
}

TEST(LimitSpec, TheWholeRangeIsAcceptedAndOnlyTheStatedBoundsRefuse) {
  using std::chrono::hours;
  const auto year = hours(24 * 365);
  // 7 per day does not divide the day: d = 86400e9 ns, so a capacity of 10^5 is past 64 bits
  // (2^61): accepted, and kept in 128 bits.
  const LimitSpec seven_a_day{Algorithm::kTokenBucket, 7, hours(24), 100'000, false};
  EXPECT_EQ(ErrorOf(seven_a_day), "");
  EXPECT_TRUE(NeedsWideArithmetic(seven_a_day));
  EXPECT_EQ(ErrorOf({Algorithm::kSlidingWindowCounter, 4'294'967'295, year, 0, false}), "");
  EXPECT_EQ(ErrorOf({Algorithm::kGcra, 4'294'967'295, year, 4'294'967'295, false}), "");
  // A bucket filling in 100 years (of 365 days) is accepted; one more request of capacity is not.
  EXPECT_EQ(ErrorOf({Algorithm::kLeakyBucket, 1, year, 100, false}), "");
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kLeakyBucket}) {
    EXPECT_NE(ErrorOf({a, 1, year, 101, false}).find("100 years"), std::string::npos);
  }
  EXPECT_NE(
      ErrorOf({Algorithm::kSlidingWindowLog, 100'000'000, seconds(1), 0, false}).find("4-byte"),
      std::string::npos);
  // Reasonable big limits keep the 64-bit arithmetic.
  EXPECT_FALSE(NeedsWideArithmetic({Algorithm::kTokenBucket, 1'000'000, seconds(1), 10'000'000}));
  EXPECT_FALSE(NeedsWideArithmetic({Algorithm::kGcra, 1000, hours(24), 5000, false}));
  EXPECT_FALSE(NeedsWideArithmetic({Algorithm::kSlidingWindowCounter, 1000, hours(24), 0}));
}

TEST(LimitSpec, CreateRefusesTheWrongAlgorithm) {
  auto tb = TokenBucket::Create({Algorithm::kGcra, 5, seconds(1), 0, false});
  ASSERT_FALSE(tb.has_value());
  EXPECT_EQ(tb.error().message, "spec is for gcra, not token_bucket");
}

TEST(Duration, ParsesTheDocumentedUnits) {
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("1s"), seconds(1));
  EXPECT_EQ(*ParseDuration("1m"), std::chrono::minutes(1));
  EXPECT_EQ(*ParseDuration("1h"), std::chrono::hours(1));
  EXPECT_EQ(*ParseDuration("1d"), std::chrono::hours(24));
  EXPECT_FALSE(ParseDuration("10").has_value());
  EXPECT_FALSE(ParseDuration("s").has_value());
  EXPECT_FALSE(ParseDuration("-1s").has_value());
  EXPECT_FALSE(ParseDuration("1x").has_value());
  EXPECT_FALSE(ParseDuration("99999999999999999999s").has_value());
  EXPECT_FALSE(ParseDuration("9999999999d").has_value());
  EXPECT_EQ(FormatDuration(seconds(60)), "1m");
  EXPECT_EQ(FormatDuration(std::chrono::milliseconds(1500)), "1500ms");
}

}  // namespace
}  // namespace sluice
