// Envoy's per-descriptor `limit` overrides as a user sends them, to the real sluiced over HTTP on
// the memory store: a tenant's negotiated rate keeps its counter while other callers use
// thousands of other rates, with the default bound and with --memory-max-bytes 64Mi; and when
// the bound is too small for the callers' counters, the live ones evicted are counted on
// /metrics by reason and logged.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/http_test_client.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"

namespace sluice::testing {
namespace {

using Json = nlohmann::json;

constexpr char kConfig[] = R"(domain: api
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 10}
)";

class SluicedOverridesTest : public ::testing::Test {
 protected:
  // The status of one check of api_key=`key` overridden to `rate` per day, on `client`'s
  // connection; 0 if it got no answer.
  static int Check(HttpClient& client, const std::string& key, int64_t rate) {
    const Json body = {{"domain", "api"},
                       {"descriptors",
                        {{{"entries", {{{"key", "api_key"}, {"value", key}}}},
                          {"limit", {{"requests_per_unit", rate}, {"unit", "day"}}}}}}};
    auto r = client.Request("POST", "/v1/check", body.dump());
    return r ? r->status : 0;
  }
  static std::string Metrics(int port) {
    HttpClient c(port);
    auto r = c.Request("GET", "/metrics");
    EXPECT_TRUE(r.has_value());
    return r ? r->body : "";
  }
  // The value of the sample `series` (name and labels, as printed) on a /metrics page; -1 if
  // absent.
  static double Sample(const std::string& page, const std::string& series) {
    const size_t at = page.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(page.substr(at + series.size() + 2));
  }

  server::test::TempConfigDir dir_{"sluiced-overrides"};
  const std::string config_ = dir_.Write("api.yaml", kConfig).string();
};

TEST_F(SluicedOverridesTest, ATenantsRateKeepsItsCounterWhileTenThousandOtherRatesAreUsed) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{}, std::vector<std::string>{"--memory-max-bytes", "64Mi"}}) {
    const std::string setup = flags.empty() ? "the default bound" : "--memory-max-bytes 64Mi";
    auto sluiced = StartSluiced(config_, flags);
    HttpClient client(sluiced->port());
    ASSERT_TRUE(client.connected());
    for (int i = 0; i < 5; ++i) ASSERT_EQ(Check(client, "tenant", 5), 200) << setup;
    for (int64_t rate = 100; rate < 10'100; ++rate) {
      ASSERT_EQ(Check(client, "caller-" + std::to_string(rate), rate), 200) << setup << rate;
    }
    EXPECT_EQ(Check(client, "tenant", 5), 429) << setup << ": the 5/day counter was kept";
    const std::string page = Metrics(sluiced->port());
    EXPECT_EQ(Sample(page, "sluice_store_evictions_total{reason=\"lru\"}"), 0) << setup;
    EXPECT_EQ(Sample(page, "sluice_store_evictions_total{reason=\"replenished\"}"), 0) << setup;
    EXPECT_GE(Sample(page, "sluice_store_keys"), 10'001) << setup;
  }
}

// More callers' counters than a small bound holds: live ones are evicted (each may admit a
// request again), which /metrics counts under reason="lru" and the log says, once for the burst.
TEST_F(SluicedOverridesTest, LiveCountersEvictedAreCountedAndLogged) {
  auto sluiced = StartSluiced(config_, {"--memory-max-bytes", "2Mi"});
  HttpClient client(sluiced->port());
  ASSERT_TRUE(client.connected());
  for (int n = 0; n < 20'000; ++n) {
    ASSERT_EQ(Check(client, "caller-" + std::to_string(n), 5 + n % 100), 200) << n;
  }
  const std::string page = Metrics(sluiced->port());
  EXPECT_GT(Sample(page, "sluice_store_evictions_total{reason=\"lru\"}"), 0) << page;
  EXPECT_GE(Sample(page, "sluice_store_evictions_total{reason=\"replenished\"}"), 0) << page;
  EXPECT_TRUE(sluiced->WaitForLog("evicted (least recently used)"));
  EXPECT_NE(sluiced->Log().find("raise --memory-max-bytes"), std::string::npos);
}

}  // namespace
}  // namespace sluice::testing
