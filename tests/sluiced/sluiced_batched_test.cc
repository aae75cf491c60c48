// Batched sync end to end (issue 13, item 2): three real sluiced processes on one real
// redis-server, configured with `sync: {mode: batched, interval: 100ms}`, one key hammered on all
// three at once. The oracle is the bound docs/redis.md ("Batched") states for a fixed window
// (N x L per window), Redis's own counter (every admitted hit reaches it, once) and its INFO
// commandstats (a handful of scripts, not one per decision).
#include <gtest/gtest.h>

#include <algorithm>
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

constexpr int kNodes = 3;
constexpr int kLimit = 100;
constexpr int kEach = 300;

// A day-long window: the run cannot straddle two unless it starts within seconds of midnight.
constexpr char kConfig[] = R"(domain: test
descriptors:
  - key: user
    rate_limit:
      unit: day
      requests_per_unit: 100
      algorithm: fixed_window
      sync: {mode: batched, interval: 100ms}
)";

class SluicedBatched : public ::testing::Test {
 protected:
  std::unique_ptr<SluicedProcess> Start() {
    return StartSluiced(config_, {"--store", "redis://127.0.0.1:" + std::to_string(redis_.port())});
  }

  std::unique_ptr<internal::RedisClient> Redis() {
    auto c =
        internal::RedisClient::Connect("127.0.0.1", redis_.port(), std::chrono::milliseconds(500),
                                       std::chrono::milliseconds(2000));
    EXPECT_TRUE(c.has_value());
    return c ? std::move(*c) : nullptr;
  }

  // The one counter in Redis: the fixed window's count (hash field c).
  int64_t RedisCount() {
    auto c = Redis();
    auto keys = c->Command({"KEYS", "sluice:*"});
    if (!keys || keys->elements.size() != 1) return -1;
    // A fixed window's state is {window index, hits}, two packed doubles (docs/redis.md, Keys).
    auto count =
        c->Command({"EVAL", "return select(2, struct.unpack('<dd', redis.call('GET', KEYS[1])))",
                    "1", keys->elements[0].str});
    return count ? count->integer : -1;
  }

  int64_t EvalshaCalls() {
    auto info = Redis()->Command({"INFO", "commandstats"});
    if (!info) return -1;
    const size_t at = info->str.find("cmdstat_evalsha:calls=");
    if (at == std::string::npos) return 0;
    return std::stoll(info->str.substr(at + std::string("cmdstat_evalsha:calls=").size()));
  }

  static std::string Metric(int port, const std::string& line_start) {
    HttpClient c(port);
    auto r = c.Request("GET", "/metrics", "", {});
    if (!r) return "";
    const size_t at = r->body.find("\n" + line_start);
    if (at == std::string::npos) return "";
    const size_t begin = at + 1 + line_start.size();
    return r->body.substr(begin, r->body.find('\n', begin) - begin);
  }

  RedisServer redis_;
  server::test::TempConfigDir dir_{"sluiced-batched"};
  const std::string config_ = dir_.Write("test.yaml", kConfig).string();
};

TEST_F(SluicedBatched, ThreeNodesOnOneKeyAdmitWithinTheBoundAndRedisCountsEveryHitOnce) {
  std::vector<std::unique_ptr<SluicedProcess>> nodes;
  for (int i = 0; i < kNodes; ++i) nodes.push_back(Start());
  for (const auto& n : nodes) ASSERT_GT(n->port(), 0);
  Redis()->Command({"CONFIG", "RESETSTAT"});

  const std::string body =
      R"({"domain":"test","descriptors":[{"entries":[{"key":"user","value":"u1"}]}]})";
  std::vector<int> admitted(kNodes, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kNodes; ++i) {
    threads.emplace_back([&, i] {
      HttpClient c(nodes[i]->port());
      for (int k = 0; k < kEach; ++k) {
        auto r = c.Request("POST", "/v1/check", body, {});
        ASSERT_TRUE(r.has_value());
        ASSERT_TRUE(r->status == 200 || r->status == 429) << r->body;
        if (r->status == 200) ++admitted[i];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int total = 0;
  for (int a : admitted) total += a;
  std::printf("admitted per node: %d %d %d; total %d, limit %d\n", admitted[0], admitted[1],
              admitted[2], total, kLimit);
  EXPECT_GE(total, kLimit) << "no fewer than an exact store";
  EXPECT_LE(total, kNodes * kLimit) << "the fixed window's bound: N x L per window";
  for (int a : admitted) EXPECT_LE(a, kLimit) << "one node alone never over-admits";

  // Every node syncs by itself within its interval: wait until none has hits left to send.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const auto& n : nodes) {
    while (Metric(n->port(), "sluice_batched_pending_hits ") != "0" &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(Metric(n->port(), "sluice_batched_pending_hits "), "0");
  }
  // Every admitted hit was charged to Redis, once -- up to what a key can hold, twice its limit
  // (a charge beyond it is dropped, docs/algorithms.md "Charges and debt").
  EXPECT_EQ(RedisCount(), std::min(total, 2 * kLimit)) << "admitted " << total;
  const int64_t calls = EvalshaCalls();
  EXPECT_LT(calls, kNodes * kEach / 10) << "a few scripts per node per interval, not one per "
                                           "decision ("
                                        << calls << " for " << kNodes * kEach << ")";
  EXPECT_NE(Metric(nodes[0]->port(), "sluice_decisions_by_source_total{source=\"local\"} "), "0");
  // The limit's own series (a fixed window's syncs find no debt to count: docs/redis.md).
  EXPECT_EQ(
      Metric(nodes[0]->port(),
             "sluice_batched_limit_over_admitted_hits_total{domain=\"test\",limit=\"test.user\"} "),
      "0");
}

}  // namespace
}  // namespace sluice::testing
