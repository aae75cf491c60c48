// Changing a limit mid-period on Redis (a real redis-server): the scenarios of limit_change.h,
// whose hand-computed expectations the memory store passes too, and nodes reloading one after
// another -- a node still on the old spec decides a counter written under the newer one by the
// spec the counter records, so no counter is converted back and forth.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "service/limit_change.h"
#include "sluice/open_store.h"
#include "support/redis_server.h"

namespace sluice::server::test {
namespace {

class RedisLimitChange : public ::testing::TestWithParam<Algorithm> {
 protected:
  // A node: its own store (connections) on the shared redis-server, deciding at the `now` its
  // manual clock passes (not Redis's TIME), with a key prefix of this test's own.
  std::unique_ptr<MonthlyQuota> Node() {
    OpenStoreOptions options;
    options.redis_server_time = false;
    options.redis_command_timeout = std::chrono::milliseconds(5000);
    options.redis_key_prefix =
        std::string("lc-") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto store = OpenStore("redis://127.0.0.1:" + std::to_string(redis_.port()), options);
    EXPECT_TRUE(store.has_value()) << store.error().message;
    // 5,000 a month is beyond the Redis sliding log's exact range (limit x period < 2^53 us).
    const bool log = GetParam() == Algorithm::kSlidingWindowLog;
    return std::make_unique<MonthlyQuota>(GetParam(), store ? *store : nullptr,
                                          log ? "hour" : "month");
  }
  static sluice::testing::RedisServer redis_;
};

sluice::testing::RedisServer RedisLimitChange::redis_;

TEST_P(RedisLimitChange, RaisingKeepsWhatWasUsed) { ExpectRaisingKeepsWhatWasUsed(*Node()); }

TEST_P(RedisLimitChange, LoweringBelowTheUsageRefuses) {
  ExpectLoweringBelowTheUsageRefuses(*Node(), GetParam());
}

// Node A reloads 1,000 -> 5,000 a second after both started; node B, still on 1,000, reads the
// counter A wrote. A bucket's counter records its spec: B decides it under the newer one (5,000)
// and never converts it back. A window's counts are the same under either limit: each node
// compares them with its own, so B refuses beyond 1,000 until it reloads; no count is lost.
TEST_P(RedisLimitChange, ANodeNotYetReloadedNeverConvertsBack) {
  auto a = Node();
  auto b = Node();
  a->Start(1000);
  b->Start(1000);
  ASSERT_EQ(b->Check(900).code, Code::kOk);
  // A second on: A reloads, B (the same time, which GCRA needs not to see a clock step back)
  // does not yet.
  a->clock().Advance(std::chrono::seconds(1));
  b->clock().Advance(std::chrono::seconds(1));
  a->Reload(5000);
  EXPECT_EQ(a->Check(100).remaining, 4000);
  const DescriptorStatus b_says = b->Check(100);
  if (a->bucket()) {
    EXPECT_EQ(b_says.code, Code::kOk);
    EXPECT_EQ(b_says.remaining, 3900);
    EXPECT_EQ(a->Remaining(), 3900) << "B's hits count under A's spec, and A still reads them";
  } else {
    EXPECT_EQ(b_says.code, Code::kOverLimit) << "1,000 used: B's own limit";
    EXPECT_EQ(a->Remaining(), 4000);
  }
  b->clock().Advance(std::chrono::seconds(2));
  b->Reload(5000);
  EXPECT_EQ(b->Remaining(), a->bucket() ? 3900 : 4000);
}

// Lowering on A to 100 after 900 keeps two capacities (200) in a bucket's counter. Were B (older
// spec, 1,000) to convert that back, it would admit 800; it decides under 100 and refuses. A
// window keeps its 900, over either limit.
TEST_P(RedisLimitChange, ANodeNotYetReloadedDoesNotUndoALowering) {
  auto a = Node();
  auto b = Node();
  a->Start(1000);
  b->Start(1000);
  ASSERT_EQ(b->Check(900).code, Code::kOk);
  // A second on: A reloads, B (the same time, which GCRA needs not to see a clock step back)
  // does not yet.
  a->clock().Advance(std::chrono::seconds(1));
  b->clock().Advance(std::chrono::seconds(1));
  a->Reload(100);
  EXPECT_EQ(a->Check(1).code, Code::kOverLimit);
  if (a->bucket()) {
    EXPECT_EQ(b->Check(1).code, Code::kOverLimit);
    EXPECT_EQ(b->Check(1).code, Code::kOverLimit);
  } else {
    EXPECT_EQ(b->Check(100).code, Code::kOk) << "B's own limit, 1,000, until it reloads";
    EXPECT_EQ(b->Check(1).code, Code::kOverLimit);
  }
  // Once B reloads too (a newer generation, the same spec) nothing changes.
  b->clock().Advance(std::chrono::seconds(2));
  b->Reload(100);
  EXPECT_EQ(b->Check(1).code, Code::kOverLimit);
  EXPECT_EQ(a->Check(1).code, Code::kOverLimit);
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, RedisLimitChange, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& p) { return std::string(AlgorithmName(p.param)); });

}  // namespace
}  // namespace sluice::server::test
