// Calendar rules through the service on the memory store, with a manual clock: reset times are
// the real time to the next local period start (worked out by hand from the published DST
// rules), and the RateLimit fields give the unit's nominal length as w=.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "service/rate_limit_service.h"
#include "service/ratelimit_headers.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: tenant
    rate_limit: {name: monthly, calendar: month, timezone: Europe/Lisbon, requests_per_unit: 2}
  - key: sydney
    rate_limit: {name: daily, calendar: day, timezone: Australia/Sydney, requests_per_unit: 1}
)yaml";

Timestamp At(int64_t unix_seconds) { return FromNanos(unix_seconds * 1'000'000'000); }

class CalendarService : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
  }
  CheckResponse Check(const std::string& key, const std::string& value) {
    CheckRequest r;
    r.domain = "api";
    r.hits = 1;
    r.descriptors.push_back({{{key, value}}, {}, {}});
    auto response = service_->Check(r);
    EXPECT_TRUE(response.has_value()) << response.error().message;
    return response ? std::move(*response) : CheckResponse{};
  }
  static std::string Get(const CheckResponse& r, const std::string& name) {
    for (const auto& [n, v] : RateLimitHeaders(r, HeaderOptions{})) {
      if (n == name) return v;
    }
    return "<missing>";
  }

  ManualClock clock_;
  Metrics metrics_;
  test::TempConfigDir dir_{"calsvc"};
  std::unique_ptr<RateLimitService> service_;
};

// 2026-03-31 23:30 WEST (22:30Z) is 30 minutes before April in Lisbon (04-01 00:00 WEST =
// 1774998000); April has 30 days and no DST change.
TEST_F(CalendarService, AMonthlyQuotaResetsAtTheLocalFirst) {
  clock_.Set(At(1774998000 - 1800));
  EXPECT_EQ(Check("tenant", "acme").overall, Code::kOk);
  EXPECT_EQ(Check("tenant", "acme").overall, Code::kOk);
  const CheckResponse over = Check("tenant", "acme");
  ASSERT_EQ(over.overall, Code::kOverLimit);
  EXPECT_EQ(over.statuses[0].retry_after, seconds(1800));
  EXPECT_EQ(over.statuses[0].reset_after, seconds(1800));
  EXPECT_EQ(Get(over, "RateLimit-Policy"), R"("monthly";q=2;w=2592000)");
  EXPECT_EQ(Get(over, "RateLimit"), R"("monthly";r=0;t=1800)");
  EXPECT_EQ(Get(over, "Retry-After"), "1800");

  clock_.Advance(seconds(1800));
  const CheckResponse april = Check("tenant", "acme");
  ASSERT_EQ(april.overall, Code::kOk);
  EXPECT_EQ(april.statuses[0].remaining, 1);
  EXPECT_EQ(april.statuses[0].reset_after, hours(24 * 30));
}

// Sydney's 2026-04-05 (clocks back at 03:00 AEDT) is 25 hours: 04-04 13:00Z to 04-05 14:00Z.
TEST_F(CalendarService, ADayWhenClocksGoBackIs25Hours) {
  clock_.Set(At(1775307600));
  const CheckResponse first = Check("sydney", "s");
  ASSERT_EQ(first.overall, Code::kOk);
  EXPECT_EQ(first.statuses[0].reset_after, hours(25));
  clock_.Advance(hours(24));
  const CheckResponse still = Check("sydney", "s");
  EXPECT_EQ(still.overall, Code::kOverLimit);
  EXPECT_EQ(Get(still, "Retry-After"), "3600");
  clock_.Advance(hours(1));
  EXPECT_EQ(Check("sydney", "s").overall, Code::kOk);
}

}  // namespace
}  // namespace sluice::server
