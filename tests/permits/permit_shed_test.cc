// Priority shedding on a concurrency limit through POST /v1/acquire (docs/load-protection.md,
// "Shedding on a concurrency limit"): the real service and HTTP API on the memory store and on a
// real redis-server. The oracle is the issue's thresholds worked out by hand for max_in_flight
// 10: `low` (above 0.6) gets 6 slots, `normal` (above 0.8) 8, `critical` all 10 -- on one pool,
// whatever the priority.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "http/http_api.h"
#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/redis_server.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: tenant
    concurrency:
      max_in_flight: 10
      permit_ttl: 30s
      shed: [{priority: low, above: 0.6}, {priority: normal, above: 0.8}]
)yaml";

// Where the priority travels: a descriptor entry (stripped before keying) or the body's field.
enum class Via { kEntry, kBody };

std::string Body(const std::string& tenant, std::optional<std::string> priority, Via via) {
  nlohmann::json descriptor = {{"entries", {{{"key", "tenant"}, {"value", tenant}}}}};
  nlohmann::json body = {{"domain", "api"}};
  if (priority && via == Via::kEntry) {
    descriptor["entries"].push_back({{"key", "priority"}, {"value", *priority}});
  }
  if (priority && via == Via::kBody) body["priority"] = *priority;
  body["descriptors"] = nlohmann::json::array({descriptor});
  return body.dump();
}

class PermitShed : public ::testing::TestWithParam<bool> {  // true: on Redis
 protected:
  void SetUp() override {
    if (GetParam()) redis_ = std::make_unique<sluice::testing::RedisServer>();
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    auto store = OpenStore(GetParam() ? "redis://127.0.0.1:" + std::to_string(redis_->port())
                                      : std::string("memory"));
    ASSERT_TRUE(store.has_value()) << store.error().message;
    auto service = RateLimitService::Create(*config, *store, ServiceOptions{}, nullptr);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    HttpApiOptions api_options;
    api_options.admin_token = "s3cret";
    api_ = std::make_unique<HttpApi>(service_.get(), &metrics_, std::move(api_options));
  }

  // The permit of a granted acquire; nullopt for a 429.
  std::optional<std::string> Acquire(std::optional<std::string> priority, Via via = Via::kEntry,
                                     const std::string& tenant = "acme") {
    const HttpReply r = api_->Handle({"POST", "/v1/acquire", "", Body(tenant, priority, via)});
    EXPECT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.body;
    if (r.status != 200) {
      last_refusal_ = r;
      return std::nullopt;
    }
    return nlohmann::json::parse(r.body)["permit"].get<std::string>();
  }
  // Acquires of `priority` until one is refused; the permits granted.
  std::vector<std::string> Fill(std::optional<std::string> priority, Via via = Via::kEntry) {
    std::vector<std::string> held;
    for (int i = 0; i < 20; ++i) {
      auto p = Acquire(priority, via);
      if (!p) break;
      held.push_back(*p);
    }
    return held;
  }
  bool Release(const std::string& permit) {
    const HttpReply r =
        api_->Handle({"POST", "/v1/release", "", nlohmann::json{{"permit", permit}}.dump()});
    EXPECT_EQ(r.status, 200) << r.body;
    return nlohmann::json::parse(r.body)["released"].get<bool>();
  }

  std::unique_ptr<sluice::testing::RedisServer> redis_;
  test::TempConfigDir dir_{"permit-shed"};
  sluice::server::Metrics metrics_;
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<HttpApi> api_;
  HttpReply last_refusal_;
};

// Each priority in turn fills what the ones before it left: 6, then 2 more, then 2 more. All
// three share one pool: were the priority entry part of the key, each would get 10.
TEST_P(PermitShed, LowGetsSixNormalEightCriticalTen) {
  EXPECT_EQ(Fill("low").size(), 6u);
  const auto refused = nlohmann::json::parse(last_refusal_.body);
  EXPECT_EQ(refused["statuses"][0]["in_flight"], 6);
  EXPECT_EQ(Fill("normal").size(), 2u);
  EXPECT_EQ(Fill("critical").size(), 2u);
  // Full: even critical is refused now, and low and normal still are.
  EXPECT_FALSE(Acquire("critical").has_value());
  EXPECT_FALSE(Acquire("low").has_value());
  // Another tenant has its own ten slots.
  EXPECT_TRUE(Acquire("low", Via::kEntry, "other").has_value());
}

TEST_P(PermitShed, ThePriorityMayComeFromTheBody) {
  EXPECT_EQ(Fill("normal", Via::kBody).size(), 8u);
  EXPECT_FALSE(Acquire("low", Via::kBody).has_value());
  EXPECT_EQ(Fill("critical", Via::kBody).size(), 2u);
}

// A priority absent or not listed is the lowest listed: it cannot claim more by inventing one.
TEST_P(PermitShed, AnAbsentOrUnknownPriorityIsTheLowest) {
  EXPECT_EQ(Fill(std::nullopt).size(), 6u);
  EXPECT_FALSE(Acquire("urgent").has_value());
  EXPECT_FALSE(Acquire("low").has_value());
  EXPECT_TRUE(Acquire("normal").has_value());
}

// A low refusal leaves critical's slots untouched, and a release lets low in again only once
// in-flight is back below its threshold.
TEST_P(PermitShed, AReleaseAdmitsLowOnlyBelowItsThreshold) {
  std::vector<std::string> critical = Fill("critical");
  ASSERT_EQ(critical.size(), 10u);
  EXPECT_FALSE(Acquire("low").has_value());
  // 9 in flight: critical may take the slot freed, low may not (9 + 1 > 6).
  ASSERT_TRUE(Release(critical.back()));
  critical.pop_back();
  EXPECT_FALSE(Acquire("low").has_value());
  EXPECT_TRUE(Acquire("critical").has_value());
  // Down to 5 in flight: one low fits (6 <= 6), a second does not.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Release(critical.back()));
    critical.pop_back();
  }
  EXPECT_TRUE(Acquire("low").has_value());
  EXPECT_FALSE(Acquire("low").has_value());
  EXPECT_TRUE(Acquire("normal").has_value());
}

// The pool does not depend on the shed rule: a reload that only edits it keeps the permits held,
// and the new thresholds apply at once (low above 0.3 of 10: 3 slots, already all taken).
TEST_P(PermitShed, AReloadThatEditsOnlyShedKeepsThePermits) {
  const std::vector<std::string> held = Fill("low");
  ASSERT_EQ(held.size(), 6u);
  std::string edited = kConfig;
  edited.replace(edited.find("above: 0.6"), 10, "above: 0.3");
  auto config = LoadConfig(dir_.Write("api.yaml", edited));
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ASSERT_TRUE(service_->Reload(*config).has_value());
  EXPECT_FALSE(Acquire("low").has_value());
  EXPECT_EQ(nlohmann::json::parse(last_refusal_.body)["statuses"][0]["in_flight"], 6);
  EXPECT_EQ(Fill("critical").size(), 4u);
  EXPECT_TRUE(Release(held.front())) << "held under the old rule, still known";
}

// /v1/limits shows the concurrency block's shed as a rate limit's: exact decimals in strings.
TEST_P(PermitShed, LimitsShowsTheShedRule) {
  const HttpReply r = api_->Handle({"GET", "/v1/limits", "Bearer s3cret", ""});
  ASSERT_EQ(r.status, 200) << r.body;
  const auto json = nlohmann::json::parse(r.body);
  const auto& shed = json["domains"][0]["limits"][0]["concurrency"]["shed"];
  ASSERT_EQ(shed.size(), 2u) << r.body;
  EXPECT_EQ(shed[0]["priority"], "low");
  EXPECT_EQ(shed[0]["above"], "0.6");
  EXPECT_EQ(shed[1]["priority"], "normal");
  EXPECT_EQ(shed[1]["above"], "0.8");
}

INSTANTIATE_TEST_SUITE_P(Stores, PermitShed, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Redis" : "Memory";
                         });

}  // namespace
}  // namespace sluice::server
