// sluiced with Redis going wrong, end to end (issue 11, items 2, 5, 6): the real binary on a real
// redis-server, its log captured. Redis down, the breaker opening and closing, and a wrong
// password at start are log lines (the address, never the password); a restarted Redis costs no
// degraded decision and /readyz follows; an eviction policy that can drop counters is an error
// line and a metric.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/http_test_client.h"
#include "support/redis_server.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"
#include "support/wait_for.h"

namespace sluice::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kConfig[] = R"(domain: test
descriptors:
  - key: open
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 1000, failure_mode: closed}
)";

class SluicedRedisFaults : public ::testing::Test {
 protected:
  std::unique_ptr<SluicedProcess> Start(const std::string& store,
                                        std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--threads", "2", "--store", store});
    return StartSluiced(config_, extra);
  }

  static HttpResponse Request(int port, const std::string& method, const std::string& target,
                              const std::string& body = "") {
    HttpClient c(port);
    auto r = c.Request(method, target, body, {});
    EXPECT_TRUE(r.has_value());
    return r.value_or(HttpResponse{});
  }

  // One check of descriptor key=value; whether it came back degraded.
  static bool Degraded(int port, const std::string& key, const std::string& value) {
    const Json body = {{"domain", "test"},
                       {"descriptors", {{{"entries", {{{"key", key}, {"value", value}}}}}}}};
    const HttpResponse r = Request(port, "POST", "/v1/check", body.dump());
    const Json j = Json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.contains("statuses")) {
      ADD_FAILURE() << r.status << " " << r.body;
      return true;
    }
    return j["statuses"][0]["degraded"].get<bool>();
  }

  // A log line with every one of `parts`, waited for.
  static bool WaitForLine(const SluicedProcess& p, const std::vector<std::string>& parts,
                          std::chrono::milliseconds timeout = 10s) {
    return WaitFor(
        [&] {
          std::istringstream log(p.Log());
          for (std::string line; std::getline(log, line);) {
            bool all = true;
            for (const std::string& part : parts) all = all && line.find(part) != std::string::npos;
            if (all) return true;
          }
          return false;
        },
        timeout);
  }

  server::test::TempConfigDir dir_{"sluiced-redis-faults"};
  const std::string config_ = dir_.Write("test.yaml", kConfig).string();
};

TEST_F(SluicedRedisFaults, AWrongPasswordAtStartIsAnErrorInTheLogWithoutThePassword) {
  RedisServer redis({"--requirepass", "right-pw"});
  const std::string where = "redis 127.0.0.1:" + std::to_string(redis.port()) + ": ";
  auto sluiced = Start("redis://:wrong-pw@127.0.0.1:" + std::to_string(redis.port()));
  EXPECT_TRUE(WaitForLine(*sluiced, {" error ", where, "WRONGPASS"})) << sluiced->Log();
  EXPECT_EQ(Request(sluiced->port(), "GET", "/readyz").status, 503);
  EXPECT_EQ(sluiced->Log().find("wrong-pw"), std::string::npos) << sluiced->Log();
}

TEST_F(SluicedRedisFaults, RedisDownAndBackAndTheBreakerAreLogged) {
  RedisServer redis({"--requirepass", "s3cret-pw"});
  const std::string where = "redis 127.0.0.1:" + std::to_string(redis.port()) + ": ";
  auto sluiced = Start("redis://:s3cret-pw@127.0.0.1:" + std::to_string(redis.port()),
                       {"--redis-breaker-failures", "2", "--redis-breaker-open-ms", "600000"});
  ASSERT_TRUE(WaitForLine(*sluiced, {" info ", where, "connected"})) << sluiced->Log();
  EXPECT_FALSE(Degraded(sluiced->port(), "open", "a"));

  redis.Stop();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Degraded(sluiced->port(), "open", "a"));
  EXPECT_TRUE(WaitForLine(*sluiced, {" error ", where, "connection lost"})) << sluiced->Log();
  EXPECT_EQ(Request(sluiced->port(), "GET", "/readyz").status, 503);
  ASSERT_TRUE(redis.Restart());
  // Rate-limited: the restored line may be held up to the event interval (10 s), not longer.
  EXPECT_TRUE(WaitForLine(*sluiced, {" info ", where, "connection restored"}, 15s))
      << sluiced->Log();
  EXPECT_EQ(Request(sluiced->port(), "GET", "/readyz").status, 200);
  EXPECT_FALSE(Degraded(sluiced->port(), "open", "a"));

  // A refused connection costs nothing and never opens the breaker; a hung Redis does.
  redis.Pause();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Degraded(sluiced->port(), "open", "a"));
  EXPECT_TRUE(WaitForLine(*sluiced, {" warning ", where, "circuit breaker open"}))
      << sluiced->Log();
  redis.Resume();
  EXPECT_TRUE(WaitForLine(*sluiced, {" info ", where, "circuit breaker closed"}, 15s))
      << sluiced->Log();
  EXPECT_FALSE(Degraded(sluiced->port(), "open", "a"));
  EXPECT_EQ(sluiced->Log().find("s3cret-pw"), std::string::npos) << sluiced->Log();
}

// The issue's reproduction: Redis restarts while sluiced is idle; its pooled connections are all
// stale. Once Redis accepts again, no check is degraded, fail open or closed, and /readyz is 200.
TEST_F(SluicedRedisFaults, NoDegradedCheckOnceARestartedRedisIsBack) {
  RedisServer redis;
  auto sluiced =
      Start("redis://127.0.0.1:" + std::to_string(redis.port()), {"--redis-connections", "4"});
  for (int i = 0; i < 8; ++i) {
    ASSERT_FALSE(Degraded(sluiced->port(), i % 2 ? "open" : "closed", "w" + std::to_string(i)));
  }
  ASSERT_TRUE(redis.Restart());
  int degraded = 0;
  for (int i = 0; i < 16; ++i) {
    degraded += Degraded(sluiced->port(), i % 2 ? "open" : "closed", "r" + std::to_string(i));
  }
  EXPECT_EQ(degraded, 0);
  EXPECT_EQ(Request(sluiced->port(), "GET", "/readyz").status, 200);
}

TEST_F(SluicedRedisFaults, AnEvictionPolicyThatCanDropCountersIsAnErrorAndAMetric) {
  RedisServer redis({"--maxmemory", "3mb", "--maxmemory-policy", "allkeys-lru"});
  const std::string where = "redis 127.0.0.1:" + std::to_string(redis.port()) + ": ";
  auto sluiced = Start("redis://127.0.0.1:" + std::to_string(redis.port()));
  EXPECT_TRUE(WaitForLine(*sluiced, {" error ", where, "maxmemory-policy allkeys-lru"}))
      << sluiced->Log();
  const std::string metrics = Request(sluiced->port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("\nsluice_store_redis_eviction_unsafe 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nsluice_store_redis_evicted_keys_total 0\n"), std::string::npos)
      << metrics;
  EXPECT_EQ(Request(sluiced->port(), "GET", "/readyz").status, 200)
      << "an unsafe policy is reported, not made an outage (docs/redis.md)";
}

TEST_F(SluicedRedisFaults, NoevictionIsSafeAndTheMemoryStoreHasNoRedisMetrics) {
  RedisServer redis({"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"});
  auto sluiced = Start("redis://127.0.0.1:" + std::to_string(redis.port()));
  ASSERT_TRUE(WaitForLine(*sluiced, {" info ", "maxmemory-policy noeviction"})) << sluiced->Log();
  EXPECT_NE(Request(sluiced->port(), "GET", "/metrics")
                .body.find("\nsluice_store_redis_eviction_unsafe 0\n"),
            std::string::npos);
  auto memory = Start("memory");
  EXPECT_EQ(Request(memory->port(), "GET", "/metrics").body.find("sluice_store_redis_"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::testing
