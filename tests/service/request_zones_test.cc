// RequestZones' caches, with the tz database behind a counting stand-in: a name, valid or not,
// is looked up once and then answered from the cache the same way; a flood of distinct unknown
// names fills only its own bounded cache (names past the bound are looked up each time and still
// answered as unknown), and never takes a valid zone's place.
#include "service/request_zones.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: tenant
    rate_limit: {name: monthly, calendar: month, timezone: Europe/Lisbon,
                 timezone_from: tz, requests_per_unit: 2}
)yaml";

class RequestZonesCache : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    config_ = *config;
    domain_ = config_->FindDomain("api");
    ASSERT_NE(domain_, nullptr);
    ASSERT_EQ(domain_->limits.size(), 1u);
  }

  // The zone a request naming `tz` is decided in, as HTTP asks (an unknown name is an error).
  Result<std::optional<CalendarZone>> Ask(const std::string& tz, bool unknown_is_error = true) {
    const std::vector<RequestAttribute> attributes = {{"tz", tz}};
    return zones_.For(*domain_, domain_->limits[0], {}, attributes, unknown_is_error);
  }

  static uint64_t IdOf(std::string_view name) {
    auto zone = ResolveCalendarZone(name);
    EXPECT_TRUE(zone.has_value()) << name;
    return zone ? zone->id : 0;
  }

  std::map<std::string, int, std::less<>> lookups_;
  std::vector<std::string> warnings_;
  ManualClock clock_;
  RequestZones zones_{[this](const std::string& m) { warnings_.push_back(m); }, &clock_,
                      [this](std::string_view name) {
                        ++lookups_[std::string(name)];
                        return ResolveCalendarZone(name);
                      }};
  test::TempConfigDir dir_{"request-zones"};
  std::shared_ptr<const Config> config_;
  const Domain* domain_ = nullptr;
};

TEST_F(RequestZonesCache, AnUnknownNameIsLookedUpOnceAndAnsweredTheSameEveryTime) {
  for (int i = 0; i < 3; ++i) {
    auto zone = Ask("Mars/Olympus_Mons");
    ASSERT_FALSE(zone.has_value()) << "ask " << i;
    EXPECT_NE(zone.error().message.find("unknown time zone 'Mars/Olympus_Mons'"), std::string::npos)
        << zone.error().message;
  }
  EXPECT_EQ(lookups_["Mars/Olympus_Mons"], 1);

  // From Envoy the same cached answer decides in the rule's zone, counted and logged.
  auto envoy = Ask("Mars/Olympus_Mons", /*unknown_is_error=*/false);
  ASSERT_TRUE(envoy.has_value()) << envoy.error().message;
  ASSERT_TRUE(envoy->has_value());
  EXPECT_EQ((*envoy)->id, IdOf("Europe/Lisbon"));
  EXPECT_EQ(lookups_["Mars/Olympus_Mons"], 1);
  EXPECT_EQ(warnings_.size(), 1u);
}

TEST_F(RequestZonesCache, AValidNameIsLookedUpOnce) {
  for (int i = 0; i < 3; ++i) {
    auto zone = Ask("Asia/Tokyo");
    ASSERT_TRUE(zone.has_value()) << zone.error().message;
    ASSERT_TRUE(zone->has_value());
    EXPECT_EQ((*zone)->id, IdOf("Asia/Tokyo"));
  }
  EXPECT_EQ(lookups_["Asia/Tokyo"], 1);
}

TEST_F(RequestZonesCache, AFloodOfUnknownNamesStaysBoundedAndCorrect) {
  ASSERT_TRUE(Ask("Asia/Tokyo").has_value());  // cached before the flood
  constexpr size_t kFlood = RequestZones::kMaxUnknownCached + 100;
  for (size_t i = 0; i < kFlood; ++i) {
    const std::string name = "Nowhere/Zone_" + std::to_string(i);
    auto zone = Ask(name);
    ASSERT_FALSE(zone.has_value()) << name;
    ASSERT_NE(zone.error().message.find(name), std::string::npos) << zone.error().message;
  }
  // The first names were cached; those past the bound were not, and are looked up again and
  // still refused.
  ASSERT_FALSE(Ask("Nowhere/Zone_0").has_value());
  EXPECT_EQ(lookups_["Nowhere/Zone_0"], 1);
  const std::string past = "Nowhere/Zone_" + std::to_string(RequestZones::kMaxUnknownCached + 50);
  ASSERT_FALSE(Ask(past).has_value());
  ASSERT_FALSE(Ask(past).has_value());
  EXPECT_EQ(lookups_[past], 3);

  // Valid zones are untouched by the flood: the one cached before is still cached, and a new
  // one still resolves (and is cached).
  auto tokyo = Ask("Asia/Tokyo");
  ASSERT_TRUE(tokyo.has_value() && tokyo->has_value());
  EXPECT_EQ((*tokyo)->id, IdOf("Asia/Tokyo"));
  EXPECT_EQ(lookups_["Asia/Tokyo"], 1);
  for (int i = 0; i < 2; ++i) {
    auto york = Ask("America/New_York");
    ASSERT_TRUE(york.has_value() && york->has_value());
    EXPECT_EQ((*york)->id, IdOf("America/New_York"));
  }
  EXPECT_EQ(lookups_["America/New_York"], 1);
}

}  // namespace
}  // namespace sluice::server
