// The over-limit cache (sluice/over_limit_cache.h) in front of a real redis-server: what it saves
// Redis (counted by the Redis store's own command count), which requests still reach Redis, and
// that it never admits anything. Oracles: the pure algorithms and values worked out by hand. The
// store suite (tests/store/redis/redis_store_suite_test.cc, "cached_redis") checks every
// decision's fields against the pure algorithms through the cache.
#include "sluice/over_limit_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/redis_store.h"
#include "sluice/token_bucket.h"
#include "store/idle_scheduler.h"
#include "support/heap_in_use.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

const Timestamp kStart = FromNanos(int64_t{1'800'000'000'000} * 1'000'000);  // minute-aligned

struct Node {
  std::shared_ptr<RedisStore> redis;
  std::shared_ptr<Store> cached;
  uint64_t RedisCalls() const { return redis->RedisStats().requests; }
};

// A Redis store deciding at the times it is given (no monitor: only decisions talk to Redis)
// and the cache in front of it. Nodes opened with the same prefix share their counters. The
// refusals are trusted until their retry time unless `trust` says otherwise: the tests that
// count Redis calls over many seconds count what the facts save (the default second is
// ACreditElsewhereIsSeenWithinTheTrust's).
Node OpenNode(const std::string& prefix, size_t cache_bytes = size_t{1} << 20,
              Duration trust = Duration::max()) {
  RedisStoreOptions o;
  o.port = testing::SharedRedisServer().port();
  o.use_server_time = false;
  o.command_timeout = milliseconds(2000);
  o.scheduler = testing::IdleScheduler();
  o.key_prefix = prefix;
  Node node;
  auto redis = OpenRedisStore(o);
  EXPECT_TRUE(redis.has_value()) << (redis ? "" : redis.error().message);
  if (!redis) return node;
  node.redis = *redis;
  auto cached = OpenOverLimitCache(node.redis, {.max_bytes = cache_bytes, .refusal_trust = trust});
  EXPECT_TRUE(cached.has_value()) << (cached ? "" : cached.error().message);
  if (cached) node.cached = *cached;
  return node;
}

std::unique_ptr<Limiter> Make(Store& store, const LimitSpec& spec, const std::string& id) {
  auto limiter = store.MakeLimiter(spec, LimiterOptions{.id = id, .fail_open = false});
  EXPECT_TRUE(limiter.has_value());
  return limiter ? std::move(*limiter) : nullptr;
}

std::string UniquePrefix(const char* test) {
  return std::string("olc-") + test + "-" + std::to_string(getpid());
}

// 5 tokens, one every 12 s: after 5 admissions at kStart, a cost-1 request can pass at kStart +
// 12 s, and the bucket is full again at kStart + 60 s.
const LimitSpec kFivePerMinute{Algorithm::kTokenBucket, 5, minutes(1), 5, false};

TEST(OverLimitCache, AHotRejectedKeyCostsRedisNothingAfterItsFirstRefusal) {
  Node node = OpenNode(UniquePrefix("hot"));
  ASSERT_NE(node.cached, nullptr);
  auto limiter = Make(*node.cached, kFivePerMinute, "hot");
  ASSERT_NE(limiter, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(limiter->Decide("k", kStart, 1).allowed);
  const Decision first = limiter->Decide("k", kStart, 1);
  ASSERT_FALSE(first.allowed);
  const uint64_t calls = node.RedisCalls();
  // 1000 more refusals in the next 10 s, through every way of deciding: none reaches Redis,
  // and each says what Redis would have said at its own time.
  for (int i = 1; i <= 1000; ++i) {
    const Timestamp now = kStart + milliseconds(10 * i);
    Decision d;
    const LimitCheck check{limiter.get(), "k", 1};
    switch (i % 4) {
      case 0:
        d = limiter->Decide("k", now, 1);
        break;
      case 1: {
        std::promise<Decision> p;
        limiter->DecideAsync("k", now, 1, [&p](const Decision& got) { p.set_value(got); });
        d = p.get_future().get();
        break;
      }
      case 2:
        node.cached->DecideAll(std::span(&check, 1), now, std::span(&d, 1));
        break;
      default: {
        std::promise<Decision> p;
        node.cached->DecideAllAsync(std::span(&check, 1), now,
                                    [&p](std::span<const Decision> got) { p.set_value(got[0]); });
        d = p.get_future().get();
      }
    }
    ASSERT_FALSE(d.allowed) << i;
    ASSERT_EQ(d.reason, DecisionReason::kOverLimit) << i;
    ASSERT_EQ(d.remaining, 0) << i;
    ASSERT_EQ(d.limit, 5) << i;
    ASSERT_EQ(d.retry_after, kStart + seconds(12) - now) << i;
    ASSERT_EQ(d.reset_after, kStart + seconds(60) - now) << i;
  }
  EXPECT_EQ(node.RedisCalls(), calls) << "refusals answered from memory";
  EXPECT_EQ(node.cached->Stats().cached_decisions, 1000u);
  EXPECT_EQ(node.cached->Stats().forwarded_decisions, 6u);
  // At kStart + 12 s the cost can pass again: the request goes to Redis and is admitted.
  EXPECT_TRUE(limiter->Decide("k", kStart + seconds(12), 1).allowed);
  EXPECT_EQ(node.RedisCalls(), calls + 1);
}

TEST(OverLimitCache, ACheaperRequestStillGoesToRedisAndCanPass) {
  Node node = OpenNode(UniquePrefix("costs"));
  ASSERT_NE(node.cached, nullptr);
  auto limiter = Make(*node.cached, kFivePerMinute, "costs");
  ASSERT_NE(limiter, nullptr);
  ASSERT_TRUE(limiter->Decide("k", kStart, 1).allowed);  // 4 left
  const Decision five = limiter->Decide("k", kStart, 5);
  ASSERT_FALSE(five.allowed);
  EXPECT_EQ(five.remaining, 4);
  uint64_t calls = node.RedisCalls();
  const Decision again = limiter->Decide("k", kStart + seconds(1), 5);
  EXPECT_FALSE(again.allowed);
  EXPECT_EQ(again.retry_after, seconds(11)) << "one token short, 12 s after kStart";
  EXPECT_EQ(node.RedisCalls(), calls) << "the same cost: answered from memory";
  // A cost the cache knows nothing sure about goes to Redis, and passes.
  EXPECT_TRUE(limiter->Decide("k", kStart + seconds(1), 1).allowed);
  EXPECT_EQ(node.RedisCalls(), calls + 1);
  // ... as does a cost-0 check, which passes (no debt) ...
  EXPECT_TRUE(limiter->Decide("k", kStart + seconds(1), 0).allowed);
  EXPECT_EQ(node.RedisCalls(), calls + 2);
  // ... and, after that admission took quota, the cost-5 request again (3 left: Redis says so).
  const Decision after = limiter->Decide("k", kStart + seconds(1), 5);
  EXPECT_FALSE(after.allowed);
  EXPECT_EQ(after.remaining, 3);
  EXPECT_EQ(node.RedisCalls(), calls + 3);
}

TEST(OverLimitCache, ACostZeroCheckIsRefusedFromMemoryOnlyInDebtAndChargesAlwaysReachRedis) {
  Node node = OpenNode(UniquePrefix("debt"));
  ASSERT_NE(node.cached, nullptr);
  auto limiter = Make(*node.cached, kFivePerMinute, "debt");
  ASSERT_NE(limiter, nullptr);
  auto oracle_bucket = TokenBucket::Create(kFivePerMinute);
  ASSERT_TRUE(oracle_bucket.has_value());
  TokenBucket::State oracle{};
  bool oracle_fresh = true;
  const auto want = [&](Timestamp now, int64_t cost, bool charge) {
    if (oracle_fresh) oracle = oracle_bucket->Initial(now);
    oracle_fresh = false;
    return charge ? oracle_bucket->Charge(oracle, now, cost)
                  : oracle_bucket->Decide(oracle, now, cost);
  };
  EXPECT_TRUE(limiter->Decide("k", kStart, 0).allowed);
  EXPECT_TRUE(want(kStart, 0, false).allowed);
  // A charge of 8 (5 fit, 3 into debt): always Redis's to count, even while refused.
  uint64_t calls = node.RedisCalls();
  const Decision charged = limiter->Charge("k", kStart, 8);
  EXPECT_FALSE(charged.allowed);
  want(kStart, 8, true);
  EXPECT_EQ(node.RedisCalls(), calls + 1);
  // In debt: cost 0 is refused -- by Redis the first time, then from memory.
  const Decision zero = limiter->Decide("k", kStart + seconds(1), 0);
  const Decision want_zero = want(kStart + seconds(1), 0, false);
  EXPECT_FALSE(zero.allowed);
  EXPECT_EQ(zero.retry_after, want_zero.retry_after);
  EXPECT_EQ(node.RedisCalls(), calls + 2);
  for (int s = 2; s < 30; ++s) {
    const Timestamp now = kStart + seconds(s);
    const Decision d = limiter->Decide("k", now, 0);
    const Decision w = want(now, 0, false);
    ASSERT_EQ(d.allowed, w.allowed) << s;
    if (!w.allowed) {
      ASSERT_EQ(d.retry_after, w.retry_after) << s;
      ASSERT_EQ(d.reset_after, w.reset_after) << s;
      ASSERT_EQ(d.remaining, w.remaining) << s;
    }
  }
  // 3 tokens of debt take 36 s to repay: refused until then, passed at 36 s (by Redis).
  EXPECT_EQ(node.RedisCalls(), calls + 2) << "every refusal before 36 s from memory";
  EXPECT_TRUE(limiter->Decide("k", kStart + seconds(36), 0).allowed);
  EXPECT_EQ(node.RedisCalls(), calls + 3);
  // A charge, and a charge check in DecideAll, reach Redis while the key is refused in memory.
  ASSERT_FALSE(limiter->Decide("k", kStart + seconds(36), 1).allowed);
  ASSERT_FALSE(limiter->Decide("k", kStart + seconds(36), 1).allowed);
  calls = node.RedisCalls();
  limiter->Charge("k", kStart + seconds(36), 1);
  EXPECT_EQ(node.RedisCalls(), calls + 1);
  const LimitCheck charge{limiter.get(), "k", 1, /*charge=*/true};
  Decision out;
  node.cached->DecideAll(std::span(&charge, 1), kStart + seconds(36), std::span(&out, 1));
  EXPECT_GT(node.RedisCalls(), calls + 1);  // the multi-limit script (loaded at first use)
}

TEST(OverLimitCache, ARefundOrResetOnThisNodeDropsWhatItKnew) {
  Node node = OpenNode(UniquePrefix("drop"));
  ASSERT_NE(node.cached, nullptr);
  const LimitSpec three{Algorithm::kFixedWindow, 3, minutes(1), 0, false};
  auto limiter = Make(*node.cached, three, "drop");
  ASSERT_NE(limiter, nullptr);
  const auto fill = [&](Timestamp now) {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter->Decide("k", now, 1).allowed);
    ASSERT_FALSE(limiter->Decide("k", now, 1).allowed);  // learnt
    const uint64_t calls = node.RedisCalls();
    ASSERT_FALSE(limiter->Decide("k", now, 1).allowed);
    ASSERT_FALSE(limiter->Decide("k", now, 3).allowed) << "a fixed window refuses larger costs";
    ASSERT_EQ(node.RedisCalls(), calls) << "from memory";
  };
  fill(kStart);
  limiter->Reset("k");
  fill(kStart + seconds(1));  // passes only if the reset was seen: 3 admitted again
  limiter->Refund("k", kStart + seconds(1), kStart + seconds(2), 1);
  const uint64_t calls = node.RedisCalls();
  EXPECT_TRUE(limiter->Decide("k", kStart + seconds(2), 1).allowed) << "after the refund";
  EXPECT_EQ(node.RedisCalls(), calls + 1);
}

// A request is answered from memory only when all its checks are sure refusals; one that is
// not sends it whole to Redis, which applies all-or-nothing and the quota rule.
TEST(OverLimitCache, ARequestWithAnyCheckTheCacheCannotAnswerGoesToRedisWhole) {
  Node node = OpenNode(UniquePrefix("multi"));
  ASSERT_NE(node.cached, nullptr);
  auto hot = Make(*node.cached, kFivePerMinute, "hot");
  auto quiet = Make(*node.cached, kFivePerMinute, "quiet");
  ASSERT_TRUE(hot && quiet);
  for (int i = 0; i < 6; ++i) hot->Decide("k", kStart, 1);  // the sixth refused, learnt
  uint64_t calls = node.RedisCalls();
  // Quota checks: the hot one refused, the quiet one admits: the request stands.
  const LimitCheck quota[2] = {{hot.get(), "k", 1, false, true},
                               {quiet.get(), "k", 1, false, true}};
  Decision out[2];
  node.cached->DecideAll(quota, kStart, out);
  EXPECT_FALSE(out[0].allowed);
  EXPECT_TRUE(out[1].allowed);
  EXPECT_GT(node.RedisCalls(), calls);
  EXPECT_EQ(quiet->Decide("k", kStart, 0).remaining, 4) << "the standing request kept its take";
  // Both refused from memory: answered locally, nothing taken.
  for (int i = 0; i < 5; ++i) quiet->Decide("k", kStart, 1);  // the fifth refused, learnt
  calls = node.RedisCalls();
  node.cached->DecideAll(quota, kStart + seconds(1), out);
  EXPECT_FALSE(out[0].allowed);
  EXPECT_FALSE(out[1].allowed);
  EXPECT_EQ(node.RedisCalls(), calls);
}

// Two nodes on one Redis, random traffic from both: whatever either answers from memory, no
// admission is one the shared count would refuse (the pure algorithm on the shared traffic is
// the oracle), and a cached refusal's retry_after is never later than the truth.
TEST(OverLimitCache, TwoNodesNeverAdmitWhatTheSharedCountRefuses) {
  const std::string prefix = UniquePrefix("two");
  Node a = OpenNode(prefix), b = OpenNode(prefix);
  ASSERT_TRUE(a.cached && b.cached);
  const LimitSpec spec{Algorithm::kTokenBucket, 10, seconds(1), 10, false};
  auto on_a = Make(*a.cached, spec, "shared"), on_b = Make(*b.cached, spec, "shared");
  ASSERT_TRUE(on_a && on_b);
  auto bucket = TokenBucket::Create(spec);
  ASSERT_TRUE(bucket.has_value());
  std::vector<TokenBucket::State> oracle(3);
  std::vector<bool> fresh(3, true);
  std::mt19937_64 rng(13);
  Timestamp now = kStart;
  int admitted = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    now += milliseconds(rng() % 40);
    const int k = static_cast<int>(rng() % 3);
    const std::string key = "k" + std::to_string(k);
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 2);
    Limiter& node = rng() % 2 == 0 ? *on_a : *on_b;
    if (fresh[k]) oracle[k] = bucket->Initial(now);
    fresh[k] = false;
    const Decision want = bucket->Decide(oracle[k], now, cost);
    const Decision got = node.Decide(key, now, cost);
    ASSERT_EQ(got.allowed, want.allowed) << "request " << i;
    ASSERT_LE(got.retry_after, want.retry_after) << "request " << i;
    (got.allowed ? admitted : refused)++;
  }
  EXPECT_GT(admitted, 300);
  EXPECT_GT(refused, 300);
  EXPECT_GT(a.cached->Stats().cached_decisions + b.cached->Stats().cached_decisions, 100u);
}

// Threads deciding the same keys at once, synchronously and asynchronously (answers then come
// on Redis's I/O threads), with resets: every key admits exactly its limit between resets --
// Redis's count -- however many refusals the cache answered meanwhile.
TEST(OverLimitCache, ConcurrentDecisionsAdmitExactlyTheLimit) {
  Node node = OpenNode(UniquePrefix("threads"));
  ASSERT_NE(node.cached, nullptr);
  const LimitSpec hundred{Algorithm::kFixedWindow, 100, minutes(60), 0, false};
  auto limiter = Make(*node.cached, hundred, "threads");
  ASSERT_NE(limiter, nullptr);
  constexpr int kThreads = 4, kKeys = 3, kPerThread = 600;
  for (int round = 0; round < 2; ++round) {
    std::atomic<int> admitted[kKeys] = {};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          const int k = (i + t) % kKeys;
          const std::string key = "k" + std::to_string(k);
          if (i % 2 == 0) {
            admitted[k] += limiter->Decide(key, kStart, 1).allowed ? 1 : 0;
          } else {
            std::promise<bool> p;
            limiter->DecideAsync(key, kStart, 1,
                                 [&p](const Decision& d) { p.set_value(d.allowed); });
            admitted[k] += p.get_future().get() ? 1 : 0;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int k = 0; k < kKeys; ++k) {
      EXPECT_EQ(admitted[k].load(), 100) << "round " << round << ", key " << k;
      limiter->Reset("k" + std::to_string(k));
    }
  }
  EXPECT_GT(node.cached->Stats().cached_decisions, 1000u);
}

// The bound: many refused keys in a small cache. The oracle is the process's heap, not the
// cache's own accounting: once the cache is full, thousands more refused keys do not grow it.
TEST(OverLimitCache, ItsMemoryStaysWithinItsBound) {
  constexpr size_t kBound = 16 << 10;
  Node node = OpenNode(UniquePrefix("bound"), kBound);
  ASSERT_NE(node.cached, nullptr);
  const LimitSpec one{Algorithm::kFixedWindow, 1, minutes(1), 0, false};
  auto limiter = Make(*node.cached, one, "bound");
  ASSERT_NE(limiter, nullptr);
  const auto key = [](int i) { return "a-key-long-enough-to-be-allocated-" + std::to_string(i); };
  const auto refuse = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      ASSERT_TRUE(limiter->Decide(key(i), kStart, 1).allowed);
      ASSERT_FALSE(limiter->Decide(key(i), kStart, 1).allowed);  // learnt
    }
  };
  refuse(0, 500);  // fills the cache (about 60 entries fit)
  const size_t heap_full = testing::HeapInUse();
  refuse(500, 5500);
  const size_t heap_after = testing::HeapInUse();
  EXPECT_LE(heap_after, heap_full + 4096) << "5000 more refused keys (1.5 MB unbounded)";
  const StoreStats stats = node.cached->Stats();
  EXPECT_LE(stats.bytes, kBound);
  EXPECT_GT(stats.bytes, kBound / 2);
  EXPECT_EQ(stats.max_bytes, kBound);
  EXPECT_GT(stats.evictions, 5000u);
  // The newest refusal is held: answered without Redis.
  const uint64_t calls = node.RedisCalls();
  EXPECT_FALSE(limiter->Decide(key(5499), kStart, 1).allowed);
  EXPECT_EQ(node.RedisCalls(), calls);
}

TEST(OverLimitCache, RefusesToOpenWithoutAStoreOrWithATinyBound) {
  EXPECT_FALSE(OpenOverLimitCache(nullptr).has_value());
  Node node = OpenNode(UniquePrefix("tiny"));
  ASSERT_NE(node.redis, nullptr);
  const auto tiny = OpenOverLimitCache(node.redis, {.max_bytes = 100});
  ASSERT_FALSE(tiny.has_value());
  EXPECT_NE(tiny.error().message.find("4096"), std::string::npos) << tiny.error().message;
}

// An admin credit on one node (Limiter::Adjust) is seen on another, whose cache holds the key's
// refusal, once its trust (a second by default) has passed: a month-long window does not keep a
// credited key refused from memory for the rest of the month.
TEST(OverLimitCache, ACreditElsewhereIsSeenWithinTheTrust) {
  const LimitSpec monthly{Algorithm::kFixedWindow, 3, std::chrono::hours(24 * 30), 0, false};
  Node a = OpenNode(UniquePrefix("credit"), size_t{1} << 20, seconds(1));
  Node b = OpenNode(UniquePrefix("credit"), size_t{1} << 20, seconds(1));
  auto la = Make(*a.cached, monthly, "monthly");
  auto lb = Make(*b.cached, monthly, "monthly");
  ASSERT_NE(la, nullptr);
  ASSERT_NE(lb, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(lb->Decide("k", kStart, 1).allowed);
  ASSERT_FALSE(lb->Decide("k", kStart, 1).allowed);
  const uint64_t calls = b.RedisCalls();
  auto credited = la->Adjust("k", kStart, Adjustment{.kind = AdjustKind::kCredit, .amount = 2});
  ASSERT_TRUE(credited.has_value()) << credited.error().message;
  EXPECT_EQ(credited->after.remaining, 2);
  // Within the second, b answers from memory what it learnt: refused (the bound, measured).
  EXPECT_FALSE(lb->Decide("k", kStart + milliseconds(999), 1).allowed);
  EXPECT_EQ(b.RedisCalls(), calls);
  // Then it asks Redis, which has the credit.
  EXPECT_TRUE(lb->Decide("k", kStart + seconds(1), 1).allowed);
  EXPECT_TRUE(lb->Decide("k", kStart + seconds(1), 1).allowed);
  EXPECT_FALSE(lb->Decide("k", kStart + seconds(1), 1).allowed);
}

// On the node that made it, the credit drops the key's facts at once.
TEST(OverLimitCache, ACreditHereIsSeenAtOnce) {
  const LimitSpec monthly{Algorithm::kFixedWindow, 3, std::chrono::hours(24 * 30), 0, false};
  Node a = OpenNode(UniquePrefix("credit-here"));
  auto limiter = Make(*a.cached, monthly, "monthly");
  ASSERT_NE(limiter, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter->Decide("k", kStart, 1).allowed);
  ASSERT_FALSE(limiter->Decide("k", kStart, 1).allowed);
  ASSERT_TRUE(limiter->Adjust("k", kStart, Adjustment{.kind = AdjustKind::kCredit, .amount = 1}));
  EXPECT_TRUE(limiter->Decide("k", kStart, 1).allowed);
  EXPECT_FALSE(limiter->Decide("k", kStart, 1).allowed);
}

}  // namespace
}  // namespace sluice
