// Leased limits end to end (issue 13, item 2): three real sluiced processes on one real
// redis-server, one key hammered over HTTP from many connections. The oracle is the limit: the
// 200s of all three together never exceed it. Then one sluiced whose Redis is stopped keeps
// deciding from the lease it holds, and applies the limit's failure_mode once the lease is over.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/http_test_client.h"
#include "support/redis_server.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"

namespace sluice::testing {
namespace {

// 600 an hour: within the test's seconds no more than one unit refills. A lease_ttl long
// enough that the leases outlive the hammering.
constexpr char kConfig[] = R"(domain: test
descriptors:
  - key: alg
    value: token_bucket
    rate_limit: {unit: hour, requests_per_unit: 600, sync: {mode: leased, lease_ttl: 5s}}
  - key: alg
    value: gcra
    rate_limit:
      unit: hour
      requests_per_unit: 600
      algorithm: gcra
      sync: {mode: leased, lease_ttl: 5s}
  - key: alg
    value: fixed_window
    rate_limit:
      unit: hour
      requests_per_unit: 600
      algorithm: fixed_window
      sync: {mode: leased, lease_ttl: 5s}
  - key: lone
    rate_limit:
      unit: hour
      requests_per_unit: 100000
      failure_mode: closed
      sync: {mode: leased, lease_ttl: 3s}
)";

class SluicedLeased : public ::testing::Test {
 protected:
  std::unique_ptr<SluicedProcess> Start() {
    return StartSluiced(config_, {"--store", "redis://127.0.0.1:" + std::to_string(redis_.port()),
                                  "--redis-command-timeout-ms", "200"});
  }

  static std::string Body(const std::string& key, const std::string& value) {
    return R"({"domain":"test","descriptors":[{"entries":[{"key":")" + key + R"(","value":")" +
           value + R"("}]}]})";
  }

  // The value of one sample line of /metrics ("name{labels}"), or -1.
  static double Metric(int port, const std::string& sample) {
    HttpClient c(port);
    auto r = c.Request("GET", "/metrics", "", {});
    if (!r) return -1;
    const size_t at = r->body.find(sample + " ");
    if (at == std::string::npos) return -1;
    return std::stod(r->body.substr(at + sample.size() + 1));
  }

  RedisServer redis_;
  server::test::TempConfigDir dir_{"sluiced-leased"};
  const std::string config_ = dir_.Write("test.yaml", kConfig).string();
};

TEST_F(SluicedLeased, ThreeNodesTogetherNeverAdmitBeyondTheLimit) {
  std::vector<std::unique_ptr<SluicedProcess>> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(Start());
  for (const char* alg : {"token_bucket", "gcra", "fixed_window"}) {
    SCOPED_TRACE(alg);
    const std::string body = Body("alg", alg);
    std::atomic<int> ok{0}, refused{0}, other{0};
    std::vector<std::thread> clients;
    for (int n = 0; n < 3; ++n) {
      for (int c = 0; c < 4; ++c) {
        clients.emplace_back([&, port = nodes[n]->port()] {
          HttpClient client(port);
          for (int i = 0; i < 400; ++i) {
            auto r = client.Request("POST", "/v1/check", body, {});
            if (!r) {
              ++other;
              return;
            }
            (r->status == 200 ? ok : r->status == 429 ? refused : other)++;
          }
        });
      }
    }
    for (auto& t : clients) t.join();
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(ok.load() + refused.load(), 3 * 4 * 400);
    // The limit is the oracle: 600, and one more token may refill while the test runs.
    EXPECT_LE(ok.load(), 601);
    EXPECT_GE(ok.load(), 450) << "units held idle on other nodes are bounded";
  }
  double local = 0;
  for (auto& n : nodes) {
    local += Metric(n->port(), "sluice_decisions_by_source_total{source=\"local\"}");
  }
  EXPECT_GT(local, 3 * 4 * 400) << "most of the 14,400 decisions were taken without Redis";
}

TEST_F(SluicedLeased, ALeaseOutlivesRedisForItsTtlThenTheFailureModeApplies) {
  auto node = Start();
  const int port = node->port();
  const std::string body = Body("lone", "x");
  HttpClient client(port);
  const std::string held = "sluice_lease_units_held{domain=\"test\",limit=\"test.lone\"}";
  // Hammer until the node holds a lease of at least 200 units.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Metric(port, held) < 200 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 200; ++i) {
      auto r = client.Request("POST", "/v1/check", body, {});
      ASSERT_TRUE(r.has_value());
      ASSERT_EQ(r->status, 200) << r->body;
    }
  }
  const double units = Metric(port, held);
  ASSERT_GE(units, 200) << node->Log();
  redis_.Stop();
  // Redis is gone: the lease still admits, from memory, and says nothing of a failure.
  for (int i = 0; i < 100; ++i) {
    auto r = client.Request("POST", "/v1/check", body, {});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200) << i << ": " << r->body;
    EXPECT_EQ(r->body.find("degraded\":true"), std::string::npos) << r->body;
  }
  // Once the lease has expired (its units cannot go back: Redis is down), failure_mode closed.
  // An earlier lease may have ended already (a bucket's lease also ends when the bucket with
  // it would be full again, after a pause): the node holds nothing any more.
  const std::string expired =
      "sluice_lease_events_total{domain=\"test\",limit=\"test.lone\",event=\"expired\"}";
  const auto ttl_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((Metric(port, expired) < 1 || Metric(port, held) > 0) &&
         std::chrono::steady_clock::now() < ttl_deadline) {
    std::this_thread::yield();
  }
  ASSERT_GE(Metric(port, expired), 1);
  ASSERT_EQ(Metric(port, held), 0);
  auto r = client.Request("POST", "/v1/check", body, {});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 429) << r->body;
}

}  // namespace
}  // namespace sluice::testing
