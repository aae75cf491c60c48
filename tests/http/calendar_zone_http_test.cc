// POST /v1/check with a calendar rule's timezone_from: a known zone decides in that zone's
// month (reset_after_ms to Tokyo's March 1st, from `TZ=Asia/Tokyo date -d '2026-03-01 00:00'
// +%s` = 1772290800), an unknown one is a 400 naming it and counts nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "http/http_api.h"
#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: tenant
    rate_limit: {calendar: month, timezone: UTC, timezone_from: tz, requests_per_unit: 3}
)yaml";

std::string Body(const std::string& tz) {
  return R"({"domain":"api","descriptors":[{"entries":[{"key":"tenant","value":"acme"},)"
         R"({"key":"tz","value":")" +
         tz + R"("}]}]})";
}

TEST(CalendarZoneHttp, AnUnknownZoneIs400NamingIt) {
  test::TempConfigDir dir("calzone-http");
  auto config = LoadConfig(dir.Write("api.yaml", kConfig));
  ASSERT_TRUE(config.has_value()) << config.error().message;
  const int64_t now_s = 1772290800 - 600;  // 10 minutes before March in Tokyo
  ManualClock clock(FromNanos(now_s * 1'000'000'000));
  ServiceOptions options;
  options.clock = &clock;
  auto opened = OpenStore("memory");
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  auto service = RateLimitService::Create(*config, *opened, options, nullptr);
  ASSERT_TRUE(service.has_value()) << service.error().message;
  Metrics metrics;
  HttpApi api(service->get(), &metrics, {});

  const HttpReply bad = api.Handle({"POST", "/v1/check", "", Body("Mars/Olympus")});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("Mars/Olympus"), std::string::npos) << bad.body;

  const HttpReply ok = api.Handle({"POST", "/v1/check", "", Body("Asia/Tokyo")});
  ASSERT_EQ(ok.status, 200) << ok.body;
  const nlohmann::json answer = nlohmann::json::parse(ok.body);
  const nlohmann::json& d = answer["statuses"][0];
  EXPECT_EQ(d["remaining"], 2) << ok.body;  // the refused request took nothing
  EXPECT_EQ(d["reset_after_ms"], 600'000) << ok.body;
}

}  // namespace
}  // namespace sluice::server
