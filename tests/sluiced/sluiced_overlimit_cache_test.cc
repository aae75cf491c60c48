// The over-limit cache end to end (issue 13, item 1): the real sluiced on a real redis-server,
// one key hammered over its limit, with the cache (the default) and without it. Redis's own
// INFO commandstats is the oracle for what reached it; the answers are the same either way.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/http_test_client.h"
#include "support/redis_server.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"

namespace sluice::testing {
namespace {

using Json = nlohmann::json;

constexpr char kConfig[] = R"(domain: test
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
)";

class SluicedOverLimitCache : public ::testing::Test {
 protected:
  std::unique_ptr<SluicedProcess> Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--store", "redis://127.0.0.1:" + std::to_string(redis_.port())});
    return StartSluiced(config_, extra);
  }

  static HttpResponse Request(int port, const std::string& method, const std::string& target,
                              const std::string& body = "") {
    HttpClient c(port);
    auto r = c.Request(method, target, body, {});
    EXPECT_TRUE(r.has_value());
    return r.value_or(HttpResponse{});
  }

  // Redis's count of EVALSHA calls since the last reset, and a reset.
  int64_t EvalshaCalls() {
    auto c =
        internal::RedisClient::Connect("127.0.0.1", redis_.port(), std::chrono::milliseconds(500),
                                       std::chrono::milliseconds(2000));
    if (!c) return -1;
    auto info = (*c)->Command({"INFO", "commandstats"});
    (*c)->Command({"CONFIG", "RESETSTAT"});
    if (!info) return -1;
    const std::string& text = info->str;
    const size_t at = text.find("cmdstat_evalsha:calls=");
    if (at == std::string::npos) return 0;
    return std::stoll(text.substr(at + std::string("cmdstat_evalsha:calls=").size()));
  }

  void Flush() {
    auto c =
        internal::RedisClient::Connect("127.0.0.1", redis_.port(), std::chrono::milliseconds(500),
                                       std::chrono::milliseconds(2000));
    ASSERT_TRUE(c.has_value());
    ASSERT_TRUE((*c)->Command({"FLUSHALL"}).has_value());
  }

  // 3 admitted, then 50 refused, one at a time; the statuses of the refused ones.
  std::vector<Json> Hammer(int port) {
    const std::string body =
        R"({"domain":"test","descriptors":[{"entries":[{"key":"user","value":"u1"}]}]})";
    std::vector<Json> refused;
    for (int i = 0; i < 53; ++i) {
      const HttpResponse r = Request(port, "POST", "/v1/check", body);
      EXPECT_EQ(r.status, i < 3 ? 200 : 429) << i << ": " << r.body;
      if (i >= 3) refused.push_back(Json::parse(r.body, nullptr, false)["statuses"][0]);
    }
    return refused;
  }

  RedisServer redis_;
  server::test::TempConfigDir dir_{"sluiced-overlimit"};
  const std::string config_ = dir_.Write("test.yaml", kConfig).string();
};

TEST_F(SluicedOverLimitCache, AHammeredKeyCostsRedisOneRefusalWithTheCacheAndEveryOneWithout) {
  std::vector<Json> cached, uncached;
  {
    auto sluiced = Start();
    Flush();
    EvalshaCalls();  // reset
    cached = Hammer(sluiced->port());
    EXPECT_EQ(EvalshaCalls(), 4) << "3 admissions and the first refusal; the rest from memory";
    const std::string metrics = Request(sluiced->port(), "GET", "/metrics").body;
    EXPECT_NE(metrics.find("sluice_decisions_by_source_total{source=\"cache\"} 49"),
              std::string::npos)
        << metrics;
    EXPECT_NE(metrics.find("sluice_decisions_by_source_total{source=\"redis\"} 4"),
              std::string::npos)
        << metrics;
  }
  {
    auto sluiced = Start({"--local-cache-bytes", "0"});
    Flush();
    EvalshaCalls();
    uncached = Hammer(sluiced->port());
    EXPECT_EQ(EvalshaCalls(), 53);
    // No cache: the batched layer (always in front of Redis) still counts by source.
    const std::string metrics = Request(sluiced->port(), "GET", "/metrics").body;
    EXPECT_EQ(metrics.find("source=\"cache\""), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("sluice_decisions_by_source_total{source=\"redis\"} 53"),
              std::string::npos)
        << metrics;
  }
  // The same answers either way (the refusals are a token's wait, 20 minutes, minus the time
  // the requests took: equal to the second).
  ASSERT_EQ(cached.size(), uncached.size());
  for (size_t i = 0; i < cached.size(); ++i) {
    EXPECT_EQ(cached[i]["code"], "OVER_LIMIT") << cached[i];
    EXPECT_EQ(cached[i]["remaining"], uncached[i]["remaining"]) << i;
    EXPECT_EQ(cached[i]["limit"], uncached[i]["limit"]) << i;
    EXPECT_NEAR(cached[i]["retry_after_ms"].get<double>(),
                uncached[i]["retry_after_ms"].get<double>(), 1000)
        << i;
    EXPECT_GT(cached[i]["retry_after_ms"].get<double>(), 19 * 60 * 1000) << cached[i];
  }
}

}  // namespace
}  // namespace sluice::testing
