// `calendar` (issue 27, "Calendar periods in a time zone"): a fixed window over the calendar
// day, week, month or year of an IANA zone; the errors name the line. Decisions are checked
// against dates worked out by hand (2026's March in Lisbon, DST days), not the code's formula.
#include <gtest/gtest.h>

#include <chrono>
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

using std::chrono::hours;
using std::chrono::seconds;

Timestamp At(int64_t unix_seconds) { return FromNanos(unix_seconds * 1'000'000'000); }

class ConfigCalendarTest : public ::testing::Test {
 protected:
  std::string LoadError(const std::string& yaml, const LoadOptions& options = {}) {
    auto loaded = LoadConfig(dir_.Write("c.yaml", yaml), options);
    return loaded ? std::string() : loaded.error().message;
  }
  const Limit* Only(const std::string& rate_limit, const LoadOptions& options = {}) {
    auto loaded = LoadConfig(
        dir_.Write("c.yaml",
                   "domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + rate_limit + "\n"),
        options);
    EXPECT_TRUE(loaded.has_value()) << loaded.error().message;
    if (!loaded) return nullptr;
    config_ = *loaded;
    return test::MustMatch(*config_, "d", {{"k", "v"}}).limit;
  }

  test::TempConfigDir dir_{"calendar"};
  std::shared_ptr<const Config> config_;
};

TEST_F(ConfigCalendarTest, ACalendarIsAFixedWindowInAZone) {
  const Limit* l = Only("{calendar: month, timezone: Europe/Lisbon, requests_per_unit: 1000}");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->spec.algorithm, Algorithm::kFixedWindow);
  EXPECT_EQ(l->spec.calendar.unit, CalendarUnit::kMonth);
  EXPECT_EQ(l->spec.calendar.timezone, "Europe/Lisbon");
  EXPECT_FALSE(l->spec.calendar.week_starts_sunday);
  // Where one length is reported, the unit's nominal one (ratelimit's month: 30 days).
  EXPECT_EQ(l->period.unit, Unit::kMonth);
  EXPECT_EQ(l->period.length, hours(24 * 30));

  const Limit* utc = Only("{calendar: day, requests_per_unit: 5, algorithm: fixed_window}");
  ASSERT_NE(utc, nullptr);
  EXPECT_EQ(utc->spec.calendar.timezone, "UTC");
  EXPECT_EQ(utc->period.unit, Unit::kDay);

  const Limit* sunday = Only("{calendar: week, week_start: sunday, requests_per_unit: 5}");
  ASSERT_NE(sunday, nullptr);
  EXPECT_TRUE(sunday->spec.calendar.week_starts_sunday);
  EXPECT_EQ(sunday->period.unit, Unit::kWeek);
}

// timezone_from: the key is the domain's request attribute (stripped before matching and
// keying); the rule's timezone stays its default zone.
TEST_F(ConfigCalendarTest, TimezoneFromMakesTheKeyAnAttribute) {
  const Limit* l = Only(
      "{calendar: month, timezone: Asia/Tokyo, timezone_from: tz, "
      "requests_per_unit: 10}");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->timezone_from, "tz");
  EXPECT_EQ(l->spec.calendar.timezone, "Asia/Tokyo");
  const Domain* d = config_->FindDomain("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->attribute_keys, std::vector<std::string>{"tz"});
  const MatchResult m = test::MustMatch(*config_, "d", {{"k", "v"}, {"tz", "Europe/Lisbon"}});
  EXPECT_EQ(m.limit, l);
  EXPECT_EQ(m.counter_key, test::MustMatch(*config_, "d", {{"k", "v"}}).counter_key);
  ASSERT_EQ(m.attributes.size(), 1u);
  EXPECT_EQ(m.attributes[0].value, "Europe/Lisbon");
}

// A plan file gives an identity a zone in the long form; the short form loads as before.
TEST_F(ConfigCalendarTest, APlanFileMayGiveAnIdentityItsZone) {
  dir_.Write("plans.yaml",
             "identities:\n  a: default\n  b: {plan: default, timezone: Asia/Kathmandu}\n");
  const std::string domain =
      "domain: d\nplan_key: k\nplan_source: file:plans.yaml\nplans:\n  default:\n"
      "    - key: k\n      rate_limit: {calendar: day, timezone_from: tz, "
      "requests_per_unit: 1}\n";
  auto loaded = LoadConfig(dir_.Write("c.yaml", domain));
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  const Domain* d = (*loaded)->FindDomain("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->identity_plans.size(), 2u);
  ASSERT_EQ(d->identity_zones.size(), 1u);
  EXPECT_EQ(d->identity_zones.at("b"), "Asia/Kathmandu");

  dir_.Write("plans.yaml", "identities:\n  b: {plan: default, timezone: Asia/Katmandoo}\n");
  const std::string bad_zone = LoadError(domain);
  EXPECT_NE(bad_zone.find("plans.yaml:2:"), std::string::npos) << bad_zone;
  EXPECT_NE(bad_zone.find("Asia/Katmandoo"), std::string::npos) << bad_zone;
  dir_.Write("plans.yaml", "identities:\n  b: {timezone: UTC}\n");
  EXPECT_NE(LoadError(domain).find("identity 'b' has no plan"), std::string::npos);
  dir_.Write("plans.yaml", "identities:\n  b: {plan: default, zone: UTC}\n");
  EXPECT_NE(LoadError(domain).find("zone"), std::string::npos);
}

TEST_F(ConfigCalendarTest, ErrorsNameTheLine) {
  const std::string head = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n";
  struct Case {
    std::string fields;
    std::string line;
    std::string words;
  } cases[] = {
      {"      unit: day\n      calendar: day\n      requests_per_unit: 1\n",
       "c.yaml:6:", "one of 'unit', 'period' or 'calendar'"},
      {"      calendar: month\n      period: 5m\n      requests_per_unit: 1\n",
       "c.yaml:5:", "one of 'unit', 'period' or 'calendar'"},
      {"      calendar: fortnight\n      requests_per_unit: 1\n",
       "c.yaml:5:", "unknown calendar 'fortnight'"},
      {"      calendar: day\n      timezone: Europe/Lisbn\n      requests_per_unit: 1\n",
       "c.yaml:6:", "Europe/Lisbn"},
      {"      unit: day\n      timezone: UTC\n      requests_per_unit: 1\n",
       "c.yaml:6:", "'timezone' applies only to a calendar window"},
      {"      calendar: month\n      week_start: sunday\n      requests_per_unit: 1\n",
       "c.yaml:6:", "week_start applies only to calendar: week"},
      {"      calendar: week\n      week_start: friday\n      requests_per_unit: 1\n",
       "c.yaml:6:", "week_start must be monday or sunday"},
      {"      calendar: month\n      algorithm: token_bucket\n      requests_per_unit: 1\n",
       "c.yaml:6:", "algorithm must be fixed_window"},
      {"      calendar: month\n      sync: leased\n      requests_per_unit: 1\n",
       "c.yaml:6:", "cannot serve a calendar window"},
      {"      calendar: month\n      sync: {mode: batched}\n      requests_per_unit: 1\n",
       "c.yaml:6:", "cannot serve a calendar window"},
      {"      calendar: month\n      scope: global\n      regions: {mode: static, shares: {eu: "
       "0.5, us: 0.5}}\n"
       "      requests_per_unit: 10\n",
       "c.yaml:6:", "scope: global cannot serve a calendar window"},
      {"      calendar: month\n      requests_per_unit: 0\n", "c.yaml:5:", "'calendar'"},
      {"      calendar: month\n      unlimited: true\n", "c.yaml:5:", "takes no 'calendar'"},
      {"      unit: day\n      timezone_from: tz\n      requests_per_unit: 1\n",
       "c.yaml:6:", "'timezone_from' applies only to a calendar window"},
      {"      period: 5m\n      timezone_from: tz\n      requests_per_unit: 1\n",
       "c.yaml:6:", "'timezone_from' applies only to a calendar window"},
      {"      calendar: day\n      timezone_from: ''\n      requests_per_unit: 1\n",
       "c.yaml:6:", "timezone_from must not be empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fields);
    LoadOptions options;
    options.region.region = "eu";
    const std::string e = LoadError(head + c.fields, options);
    EXPECT_NE(e.find(c.line), std::string::npos) << e;
    EXPECT_NE(e.find(c.words), std::string::npos) << e;
  }
}

TEST_F(ConfigCalendarTest, DefaultSyncLeavesACalendarRuleExact) {
  LoadOptions options;
  options.default_sync.mode = SyncMode::kLeased;
  const Limit* l = Only("{calendar: day, requests_per_unit: 5}", options);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->sync.mode, SyncMode::kExact);
  ASSERT_FALSE(config_->warnings().empty());
  EXPECT_NE(config_->warnings().front().find("calendar"), std::string::npos);
}

// March 2026 in Lisbon runs from 03-01 00:00 WET (1772323200) to 04-01 00:00 WEST (1774998000).
TEST_F(ConfigCalendarTest, TheMemoryStoreDecidesInTheLocalMonth) {
  const Limit* l = Only("{calendar: month, timezone: Europe/Lisbon, requests_per_unit: 2}");
  ASSERT_NE(l, nullptr);
  auto limiter = MakeMemoryLimiter(l->spec);
  ASSERT_TRUE(limiter.has_value()) << limiter.error().message;
  EXPECT_TRUE((*limiter)->Decide("x", At(1772323200), 1).allowed);
  EXPECT_TRUE((*limiter)->Decide("x", At(1774000000), 1).allowed);
  const Decision refused = (*limiter)->Decide("x", At(1774998000 - 60), 1);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, seconds(60));
  EXPECT_EQ(refused.reset_after, seconds(60));
  const Decision april = (*limiter)->Decide("x", At(1774998000), 1);
  EXPECT_TRUE(april.allowed);
  EXPECT_EQ(april.remaining, 1);
  // April: 30 days to 05-01 00:00 WEST.
  EXPECT_EQ(april.reset_after, hours(24 * 30));
  // Another key's first request in the last second of March is in March's window.
  const Decision last = (*limiter)->Decide("y", At(1774998000 - 1), 1);
  EXPECT_EQ(last.reset_after, seconds(1));
}

// New York's 2026-03-08 is 23 hours: from 05:00Z to 03-09 04:00Z.
TEST_F(ConfigCalendarTest, ADstDayIs23Hours) {
  const Limit* l = Only("{calendar: day, timezone: America/New_York, requests_per_unit: 1}");
  ASSERT_NE(l, nullptr);
  auto limiter = MakeMemoryLimiter(l->spec);
  ASSERT_TRUE(limiter.has_value());
  const Decision first = (*limiter)->Decide("x", At(1772946000), 1);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.reset_after, hours(23));
  EXPECT_FALSE((*limiter)->Decide("x", At(1772946000 + 23 * 3600 - 1), 1).allowed);
  EXPECT_TRUE((*limiter)->Decide("x", At(1772946000 + 23 * 3600), 1).allowed);
}

}  // namespace
}  // namespace sluice::server
