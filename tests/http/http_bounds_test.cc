// Issue 12, item 5 over HTTP: POST /v1/check past the service's bounds (service/check_rules.h),
// through HttpApi on the real service (memory store, manual clock). Every request is answered,
// 200 or 429, never 400: 65 and 1030 descriptors, 17 and 65 entries, a 300-byte key, a long
// value, a request hits of 2e9 and a descriptor hits of 2^53-1 on every algorithm. The expected
// answers are written by hand from the config below, read back with nlohmann::json.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "http/http_api.h"
#include "service/rate_limit_service.h"
#include "sluice/clock.h"
#include "sluice/open_store.h"
#include "support/bounds_config.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using nlohmann::json;

using sluice::testing::kBoundsConfig;

class HttpBounds : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("bounds.yaml", kBoundsConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    api_ = std::make_unique<HttpApi>(service_.get(), &metrics_, HttpApiOptions{});
  }

  static json Descriptor(const std::vector<std::pair<std::string, std::string>>& entries,
                         uint32_t per_minute = 0) {
    json d = {{"entries", json::array()}};
    for (const auto& [k, v] : entries) d["entries"].push_back({{"key", k}, {"value", v}});
    if (per_minute != 0) d["limit"] = {{"requests_per_unit", per_minute}, {"unit", "minute"}};
    return d;
  }
  // The reply's status and body; the body must be a check's answer (never an error).
  std::pair<int, json> Check(const json& body) {
    const std::string text = body.dump();
    const HttpReply r = api_->Handle({"POST", "/v1/check", "", text});
    EXPECT_NE(r.status, 400) << r.body;
    return {r.status, json::parse(r.body)};
  }
  static json Request(json descriptors) {
    return {{"domain", "bounds"}, {"descriptors", std::move(descriptors)}};
  }

  ManualClock clock_{FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000)};
  Metrics metrics_;
  test::TempConfigDir dir_{"http-bounds"};
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<HttpApi> api_;
};

TEST_F(HttpBounds, SixtyFiveDescriptorsAreAllChecked) {
  json ds = json::array();
  for (int i = 0; i < 65; ++i) ds.push_back(Descriptor({{"user", "u" + std::to_string(i)}}));
  const auto [status, body] = Check(Request(ds));
  EXPECT_EQ(status, 200);
  ASSERT_EQ(body["statuses"].size(), 65u);
  for (const json& s : body["statuses"]) EXPECT_EQ(s["remaining"], 9);
}

TEST_F(HttpBounds, DescriptorsPastThe1024thAreOkWithoutALimit) {
  json ds = json::array();
  for (int i = 0; i < 1030; ++i) ds.push_back(Descriptor({{"path", "/p" + std::to_string(i)}}));
  Check(Request(ds));
  const auto [status, body] = Check(Request(ds));
  EXPECT_EQ(status, 429);
  EXPECT_EQ(body["statuses"][1023]["code"], "OVER_LIMIT");
  for (int i = 1024; i < 1030; ++i) {
    EXPECT_EQ(body["statuses"][i]["code"], "OK") << i;
    EXPECT_TRUE(body["statuses"][i]["limit"].is_null()) << i;
  }
}

TEST_F(HttpBounds, SeventeenEntriesAndA300ByteKeyAreCheckedSixtyFiveEntriesAreNot) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < 17; ++i) entries.emplace_back("k" + std::to_string(i), "v");
  const json seventeen = Request(json::array({Descriptor(entries, 1)}));
  EXPECT_EQ(Check(seventeen).first, 200);
  EXPECT_EQ(Check(seventeen).first, 429);

  const json long_key = Request(json::array({Descriptor({{std::string(300, 'k'), "v"}}, 1)}));
  EXPECT_EQ(Check(long_key).first, 200);
  EXPECT_EQ(Check(long_key).first, 429);

  while (entries.size() < 65) entries.emplace_back("k" + std::to_string(entries.size()), "v");
  const json many = Request(json::array({Descriptor(entries, 1)}));
  for (int i = 0; i < 2; ++i) {
    const auto [status, body] = Check(many);
    EXPECT_EQ(status, 200);
    EXPECT_TRUE(body["statuses"][0]["limit"].is_null());
  }
}

TEST_F(HttpBounds, ALongValueIsCountedNotRefused) {
  const json r = Request(json::array({Descriptor({{"path", "/" + std::string(5000, 'p')}})}));
  EXPECT_EQ(Check(r).first, 200);
  EXPECT_EQ(Check(r).first, 429);
}

TEST_F(HttpBounds, RequestHits2e9IsOverTheLimitAndTakesNothing) {
  json r = Request(json::array({Descriptor({{"user", "big"}})}));
  r["hits"] = 2'000'000'000;
  const auto [status, body] = Check(r);
  EXPECT_EQ(status, 429);
  EXPECT_TRUE(body["statuses"][0]["retry_after_ms"].is_null()) << "these hits can never pass";
  EXPECT_GT(body["statuses"][0]["reset_after_ms"], 0);
  r["hits"] = 1;
  EXPECT_EQ(Check(r).second["statuses"][0]["remaining"], 9);
}

TEST_F(HttpBounds, DescriptorHits2To53Minus1IsOverEveryAlgorithmsLimit) {
  for (const char* alg : {"token_bucket", "gcra", "leaky_bucket", "fixed_window",
                          "sliding_window_counter", "sliding_window_log"}) {
    SCOPED_TRACE(alg);
    json d = Descriptor({{"alg", alg}});
    d["hits"] = (int64_t{1} << 53) - 1;
    const auto [status, body] = Check(Request(json::array({d})));
    EXPECT_EQ(status, 429);
    EXPECT_TRUE(body["statuses"][0]["retry_after_ms"].is_null());
    EXPECT_EQ(Check(Request(json::array({Descriptor({{"alg", alg}})})))
                  .second["statuses"][0]["remaining"],
              9);
  }
}

}  // namespace
}  // namespace sluice::server
