// What the Redis store does when Redis misbehaves, against a real redis-server: hung (SIGSTOP),
// busy (DEBUG SLEEP), stopped and restarted empty, or answering with errors. Every decision comes
// back within the command timeout with the limit's failure policy and marked degraded; the
// breaker then answers at once; once Redis is back, decisions are real again; nothing hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sluice/redis_store.h"
#include "store/redis/redis_client.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr LimitSpec kSpec{Algorithm::kTokenBucket, 100, seconds(1), 100, false};

RedisStoreOptions OptionsFor(int port, bool fail_open) {
  RedisStoreOptions o;
  o.port = port;
  o.fail_open = fail_open;
  o.limit_id = "failure";
  o.command_timeout = milliseconds(50);
  o.breaker_failures = 3;
  o.breaker_open_for = milliseconds(200);
  return o;
}

// Decides until a decision is not degraded, for at most `limit`.
bool RecoversWithin(Limiter& limiter, Clock::duration limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (!limiter.Decide("k", {}, 1).degraded) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

TEST(RedisFailure, AHungRedisCostsTheTimeoutThenNothingAndIsUsedAgainWhenItWakes) {
  testing::RedisServer server;
  for (bool fail_open : {true, false}) {
    auto store = OpenRedisStore(OptionsFor(server.port(), fail_open));
    ASSERT_TRUE(store.has_value());
    auto limiter = (*store)->MakeLimiter(kSpec, "hung", fail_open);
    ASSERT_TRUE(limiter.has_value());
    ASSERT_FALSE((*limiter)->Decide("k", {}, 1).degraded);

    server.Pause();
    // The first decisions wait for the command timeout (50 ms), not forever.
    for (int i = 0; i < 3; ++i) {
      const auto start = Clock::now();
      const Decision d = (*limiter)->Decide("k", {}, 1);
      const auto took = Clock::now() - start;
      EXPECT_TRUE(d.degraded);
      EXPECT_EQ(d.allowed, fail_open);
      EXPECT_EQ(d.reason, DecisionReason::kStoreUnavailable);
      EXPECT_LT(took, seconds(2)) << "a hung Redis must cost about the command timeout";
    }
    // Three timeouts opened the breaker: now decisions do not touch the network at all.
    const uint64_t short_before = (*limiter)->Stats().short_circuited;
    for (int i = 0; i < 1000; ++i) EXPECT_TRUE((*limiter)->Decide("k", {}, 1).degraded);
    EXPECT_GE((*limiter)->Stats().short_circuited - short_before, 990u);
    EXPECT_GE((*store)->RedisStats().connection_errors, 3u);

    server.Resume();
    EXPECT_TRUE(RecoversWithin(**limiter, seconds(5)));
  }
}

TEST(RedisFailure, ManyCallersOnAHungRedisAreAllAnsweredInBoundedTime) {
  testing::RedisServer server;
  auto store = OpenRedisStore(OptionsFor(server.port(), true));
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kSpec, "crowd", true);
  ASSERT_TRUE(limiter.has_value());
  server.Pause();
  std::atomic<int> answered{0};
  const auto start = Clock::now();
  std::vector<std::thread> callers;
  for (int t = 0; t < 16; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if ((*limiter)->Decide("k" + std::to_string(t), {}, 1).degraded) answered.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(answered.load(), 16 * 20);
  EXPECT_LT(Clock::now() - start, seconds(5));
  server.Resume();
  EXPECT_TRUE(RecoversWithin(**limiter, seconds(5)));
}

TEST(RedisFailure, ABusyRedisDebugSleepTimesOutAndRecovers) {
  testing::RedisServer server;
  auto store = OpenRedisStore(OptionsFor(server.port(), false));
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kSpec, "busy", false);
  ASSERT_TRUE(limiter.has_value());
  ASSERT_FALSE((*limiter)->Decide("k", {}, 1).degraded);
  std::thread sleeper([&] {
    auto c = internal::RedisClient::Connect("127.0.0.1", server.port(), milliseconds(500),
                                            milliseconds(5000));
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE((*c)->Command({"DEBUG", "SLEEP", "0.7"}).has_value());
  });
  std::this_thread::sleep_for(milliseconds(100));
  const auto start = Clock::now();
  const Decision d = (*limiter)->Decide("k", {}, 1);
  EXPECT_TRUE(d.degraded);
  EXPECT_FALSE(d.allowed) << "failure_mode closed";
  EXPECT_LT(Clock::now() - start, milliseconds(500));
  sleeper.join();
  EXPECT_TRUE(RecoversWithin(**limiter, seconds(5)));
}

TEST(RedisFailure, ARestartedEmptyRedisIsFoundAgainAndItsScriptsReloaded) {
  testing::RedisServer server;
  auto store = OpenRedisStore(OptionsFor(server.port(), true));
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kSpec, "restart", true);
  ASSERT_TRUE(limiter.has_value());
  ASSERT_FALSE((*limiter)->Decide("k", {}, 1).degraded);

  server.Stop();
  for (int i = 0; i < 10; ++i) {
    const Decision d = (*limiter)->Decide("k", {}, 1);
    EXPECT_TRUE(d.degraded);
    EXPECT_TRUE(d.allowed) << "failure_mode open";
  }
  ASSERT_TRUE(server.Restart());
  // The new server has no scripts: EVALSHA gets NOSCRIPT, the store loads and retries.
  EXPECT_TRUE(RecoversWithin(**limiter, seconds(5)));
  const Decision d = (*limiter)->Decide("k", {}, 1);
  EXPECT_FALSE(d.degraded);
  EXPECT_TRUE(d.allowed);
}

TEST(RedisFailure, ErrorRepliesAreDegradedDecisionsButDoNotOpenTheBreaker) {
  testing::RedisServer server;
  auto store = OpenRedisStore(OptionsFor(server.port(), false));
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kSpec, "errors", false);
  ASSERT_TRUE(limiter.has_value());
  auto c = internal::RedisClient::Connect("127.0.0.1", server.port(), milliseconds(500),
                                          milliseconds(2000));
  ASSERT_TRUE(c.has_value());
  // Someone else wrote a list where the limiter keeps a string: every script on it fails.
  ASSERT_TRUE((*c)->Command({"RPUSH", RedisKeyFor("sluice", "errors", "broken"), "x"}).has_value());
  for (int i = 0; i < 20; ++i) {
    const Decision d = (*limiter)->Decide("broken", {}, 1);
    EXPECT_TRUE(d.degraded);
    EXPECT_FALSE(d.allowed);
  }
  // The server answered every time: it is alive, and other keys are decided normally.
  const Decision ok = (*limiter)->Decide("fine", {}, 1);
  EXPECT_FALSE(ok.degraded);
  EXPECT_TRUE(ok.allowed);
  EXPECT_EQ((*limiter)->Stats().store_errors, 20u);
  EXPECT_EQ((*store)->RedisStats().short_circuited, 0u);
}

}  // namespace
}  // namespace sluice
