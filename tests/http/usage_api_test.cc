// GET /v1/usage and sluice_limit_identities over the real service (memory store, manual
// clock): traffic whose per-identity counts are known, and an oracle computed here from those
// counts -- what a fixed window of 100 per minute leaves each identity (its peak is its count,
// at most 100), who reached 90, who went over -- never from the views' own code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http/http_api.h"
#include "metrics/hyperloglog.h"
#include "metrics/usage_views.h"
#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using Json = nlohmann::json;

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 100, algorithm: fixed_window}
  - key: trial
    rate_limit: {name: trial_cap, unit: minute, requests_per_unit: 20, mode: shadow,
                 algorithm: fixed_window}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 50, algorithm: fixed_window}
)yaml";

int64_t NearestRank(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double Tolerance(double n) { return 3 * HyperLogLog::kRelativeError * n + 0.5; }

class UsageApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    options.usage = &views_;
    metrics_.SetUsageViews(&views_);
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    HttpApiOptions api;
    api.admin_token = "t";
    api.usage = &views_;
    api_ = std::make_unique<HttpApi>(service_.get(), &metrics_, api);
  }

  void Check(const std::string& key, const std::string& value) {
    CheckRequest r;
    r.domain = "api";
    r.hits = 1;
    r.descriptors.push_back({{{key, value}}, {}, {}});
    ASSERT_TRUE(service_->Check(r).has_value());
  }

  Json Usage(const std::string& query) {
    const HttpReply r = api_->Handle({"GET", "/v1/usage?" + query, "Bearer t", ""});
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body, nullptr, false);
  }

  test::TempConfigDir dir_{"usage-api"};
  ManualClock clock_{FromNanos(int64_t{1'700'000'000} * 1'000'000'000)};
  UsageViews views_{{.period = std::chrono::hours(1),
                     .near_limit_ratio = 0.9,
                     .max_bytes = size_t{4} << 20,
                     .clock = &clock_}};
  Metrics metrics_{0.9};
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<HttpApi> api_;
};

TEST_F(UsageApiTest, ReportsTheIdentitiesAndTheirPeaksAsTheTrafficMadeThem) {
  std::vector<int64_t> peaks;
  size_t near = 0, over = 0;
  for (int i = 0; i < 240; ++i) {
    const int requests = (i * 53) % 130 + 1;  // 1 .. 130 in one minute
    for (int n = 0; n < requests; ++n) Check("api_key", "k" + std::to_string(i));
    peaks.push_back(std::min(requests, 100));
    near += requests >= 90 && requests <= 100 ? 1 : 0;  // reached 90 and never refused
    over += requests > 100 ? 1 : 0;
  }
  const Json j = Usage("domain=api&limit=per_key");
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["domain"], "api");
  EXPECT_EQ(j["limit"], "per_key");
  EXPECT_EQ(j["period_s"], 3600);
  EXPECT_NEAR(j["identities"].get<double>(), 240, Tolerance(240));
  EXPECT_EQ(j["percentiles"]["p50"], NearestRank(peaks, 0.50));
  EXPECT_EQ(j["percentiles"]["p90"], NearestRank(peaks, 0.90));
  EXPECT_EQ(j["percentiles"]["p95"], NearestRank(peaks, 0.95));
  EXPECT_EQ(j["percentiles"]["p99"], NearestRank(peaks, 0.99));
  EXPECT_EQ(j["percentiles"]["max"], 100);
  EXPECT_EQ(j.size(), 5u) << j.dump();
  EXPECT_EQ(j["percentiles"].size(), 5u) << j.dump();

  // The same in /metrics, one series per state (identities that were refused were near
  // before: "near" is of allowed decisions, so they count there too).
  const std::string text = metrics_.Render();
  const auto value = [&](const std::string& state) {
    const std::string head =
        "sluice_limit_identities{domain=\"api\",limit=\"per_key\",state=\"" + state + "\"} ";
    const size_t at = text.find(head);
    EXPECT_NE(at, std::string::npos) << state << "\n" << text;
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + head.size()));
  };
  EXPECT_NEAR(value("seen"), 240, Tolerance(240));
  EXPECT_NEAR(value("near"), static_cast<double>(near + over), Tolerance(near + over));
  EXPECT_NEAR(value("over"), static_cast<double>(over), Tolerance(over));
  EXPECT_EQ(value("shadow_over"), 0);
}

TEST_F(UsageApiTest, ShadowLimitsCountWhoWouldHaveBeenRefused) {
  size_t would = 0;
  for (int i = 0; i < 60; ++i) {
    const int requests = i % 30 + 1;  // a shadow limit of 20 per minute
    for (int n = 0; n < requests; ++n) Check("trial", "t" + std::to_string(i));
    would += requests > 20 ? 1 : 0;
  }
  const std::string text = metrics_.Render();
  const std::string head =
      "sluice_limit_identities{domain=\"api\",limit=\"trial_cap\",state=\"shadow_over\"} ";
  const size_t at = text.find(head);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(at + head.size())), static_cast<double>(would),
              Tolerance(would));
  EXPECT_EQ(Usage("domain=api&limit=trial_cap")["percentiles"]["max"], 20);
}

TEST_F(UsageApiTest, ALimitIsFoundByItsNameOrItsMetricLabel) {
  Check("ip", "203.0.113.9");
  // The unnamed limit's metric label is ratelimit's dotted key.
  const Json j = Usage("domain=api&limit=api.ip");
  EXPECT_EQ(j["limit"], "api.ip");
  EXPECT_EQ(j["percentiles"]["max"], 1);
}

TEST_F(UsageApiTest, BadQueriesAreClearErrors) {
  const auto status = [&](const std::string& target) {
    return api_->Handle({"GET", target, "Bearer t", ""}).status;
  };
  EXPECT_EQ(status("/v1/usage?domain=api"), 400);
  EXPECT_EQ(status("/v1/usage?limit=per_key"), 400);
  EXPECT_EQ(status("/v1/usage?domain=nope&limit=per_key"), 400);
  EXPECT_EQ(status("/v1/usage?domain=api&limit=nope"), 400);
  EXPECT_EQ(status("/v1/usage?domain=api&limit=per_key&x=1"), 400);
  EXPECT_EQ(api_->Handle({"GET", "/v1/usage?domain=api&limit=per_key", "", ""}).status, 401);
  EXPECT_EQ(api_->Handle({"POST", "/v1/usage?domain=api&limit=per_key", "Bearer t", ""}).status,
            405);
  HttpApiOptions off;
  off.admin_token = "t";
  const HttpApi no_views(service_.get(), &metrics_, off);
  const HttpReply r =
      no_views.Handle({"GET", "/v1/usage?domain=api&limit=per_key", "Bearer t", ""});
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("--usage-tracking"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace sluice::server
