// The batched store (sluice/batched_store.h) in front of real redis-servers: one node decides as
// the pure algorithm does (the oracle: src/core fed the same trace); several nodes on one key stay
// within the bound docs/redis.md ("Batched") states, worked out here from the spec; a dead Redis
// loses no hit; requests are all or nothing; exact limits pass through; the over-limit cache
// learns nothing from a batched limit. Time is driven by the tests (Redis decides at the times
// it is given; flushes are called at chosen instants, or the store's timers run as the test
// advances its ManualScheduler), so nothing sleeps.
#include "sluice/batched_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/clock.h"
#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/over_limit_cache.h"
#include "sluice/redis_store.h"
#include "sluice/scheduler.h"
#include "sluice/token_bucket.h"
#include "store/idle_scheduler.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

const Timestamp kStart = FromNanos(int64_t{1'800'000'000'000} * 1'000'000);  // minute-aligned
constexpr Duration kInterval = milliseconds(100);

struct Node {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kStart);
  // The batched store's timers run when the test advances it (or flushes by itself).
  std::shared_ptr<ManualScheduler> scheduler = std::make_shared<ManualScheduler>(*clock);
  std::shared_ptr<RedisStore> redis;
  std::shared_ptr<BatchedStore> batched;
  uint64_t RedisCalls() const { return redis->RedisStats().requests; }
};

// A Redis store deciding at the times it is given, with no monitor (its calls are counted), and
// the batched store in front of it on the node's manual time. Nodes opened with the same prefix
// share their counters.
Node OpenNode(const std::string& prefix, int port, size_t max_bytes = size_t{1} << 20) {
  RedisStoreOptions o;
  o.port = port;
  o.use_server_time = false;
  o.command_timeout = milliseconds(1000);
  o.connect_timeout = milliseconds(200);
  o.scheduler = testing::IdleScheduler();
  o.breaker_failures = 1000;  // a dead server: every call tries (and fails) at once
  o.key_prefix = prefix;
  Node node;
  auto redis = OpenRedisStore(o);
  EXPECT_TRUE(redis.has_value()) << (redis ? "" : redis.error().message);
  if (!redis) return node;
  node.redis = *redis;
  auto batched =
      OpenBatchedStore(node.redis, {.max_bytes = max_bytes, .scheduler = node.scheduler});
  EXPECT_TRUE(batched.has_value()) << (batched ? "" : batched.error().message);
  if (batched) node.batched = *batched;
  return node;
}

Node OpenNode(const std::string& prefix) {
  return OpenNode(prefix, testing::SharedRedisServer().port());
}

LimiterOptions Batched(const std::string& id, bool fail_open = false) {
  LimiterOptions o{.id = id, .fail_open = fail_open};
  o.sync = QuotaSync{.mode = SyncMode::kBatched, .interval = kInterval};
  return o;
}

std::unique_ptr<Limiter> Make(Store& store, const LimitSpec& spec, const LimiterOptions& o) {
  auto limiter = store.MakeLimiter(spec, o);
  EXPECT_TRUE(limiter.has_value()) << (limiter ? "" : limiter.error().message);
  return limiter ? std::move(*limiter) : nullptr;
}

std::string UniquePrefix(const char* test) {
  return std::string("batched-") + test + "-" + std::to_string(getpid());
}

// The pure algorithm with its state, as the oracle for one key.
template <typename Alg>
struct Oracle {
  Alg alg;
  typename Alg::State state;
  Oracle(const LimitSpec& spec, Timestamp start)
      : alg(*Alg::Create(spec)), state(alg.Initial(start)) {}
  Decision Decide(Timestamp now, int64_t cost) { return alg.Decide(state, now, cost); }
};

// One node, one key hammered at five times its rate, synced by its timer every interval (the
// test advances the node's time, 20 ms a request): every decision --
// verdict, remaining, retry_after, reset_after -- is the pure algorithm's on the same trace.
// (The rate is one hit per interval: a hit sent late is charged where the exact store would
// have refilled a full bucket by at most what it could not hold, r x interval - 1 = 0 here.)
template <typename Alg>
void ExpectOneNodeDecidesAsThePureAlgorithm(const LimitSpec& spec, const char* name) {
  SCOPED_TRACE(name);
  Node node = OpenNode(UniquePrefix(name));
  ASSERT_NE(node.batched, nullptr);
  auto limiter = Make(*node.batched, spec, Batched("one"));
  ASSERT_NE(limiter, nullptr);
  Oracle<Alg> oracle(spec, kStart);
  int admitted = 0;
  for (int ms = 0; ms < 3000; ms += 20) {
    if (ms > 0) node.scheduler->Advance(milliseconds(20));  // syncs at every 100 ms
    const Timestamp now = node.clock->Now();
    ASSERT_EQ(now, kStart + milliseconds(ms));
    const int64_t cost = ms % 140 == 0 ? 2 : 1;
    const Decision got = limiter->Decide("k", now, cost);
    const Decision want = oracle.Decide(now, cost);
    ASSERT_EQ(got.allowed, want.allowed) << "at " << ms << " ms";
    ASSERT_EQ(got.remaining, want.remaining) << "at " << ms << " ms";
    ASSERT_EQ(got.retry_after, want.retry_after) << "at " << ms << " ms";
    ASSERT_EQ(got.reset_after, want.reset_after) << "at " << ms << " ms";
    admitted += got.allowed ? 1 : 0;
  }
  EXPECT_GT(admitted, 20);
  // One exact decision, then one charge per flush (29 of them), and the first use of each of the
  // two scripts loads it: not one call per decision.
  EXPECT_LE(node.RedisCalls(), 1u + 29u + 2u);
  const StoreStats s = node.batched->Stats();
  EXPECT_EQ(s.local_decisions, 149u);
  EXPECT_EQ(s.forwarded_decisions, 150u) << "every decision, the local ones included";
  EXPECT_EQ(s.batched_over_admitted_hits, 0u) << "one node never over-admits";
}

TEST(BatchedStore, OneNodeDecidesAsThePureAlgorithm) {
  ExpectOneNodeDecidesAsThePureAlgorithm<TokenBucket>(
      {Algorithm::kTokenBucket, 10, seconds(1), 20, false}, "token_bucket");
  ExpectOneNodeDecidesAsThePureAlgorithm<Gcra>({Algorithm::kGcra, 10, seconds(1), 20, false},
                                               "gcra");
  ExpectOneNodeDecidesAsThePureAlgorithm<LeakyBucket>(
      {Algorithm::kLeakyBucket, 10, seconds(1), 20, false}, "leaky_bucket");
  ExpectOneNodeDecidesAsThePureAlgorithm<FixedWindow>(
      {Algorithm::kFixedWindow, 10, seconds(1), 0, false}, "fixed_window");
}

TEST(BatchedStore, TheSlidingWindowsAndTheShaperAreRefusedByName) {
  Node node = OpenNode(UniquePrefix("refused"));
  ASSERT_NE(node.batched, nullptr);
  for (const LimitSpec& spec :
       {LimitSpec{Algorithm::kSlidingWindowLog, 10, seconds(1), 0, false},
        LimitSpec{Algorithm::kSlidingWindowCounter, 10, seconds(1), 0, false},
        LimitSpec{Algorithm::kLeakyBucket, 10, seconds(1), 0, true}}) {
    auto limiter = node.batched->MakeLimiter(spec, Batched("x"));
    ASSERT_FALSE(limiter.has_value());
    EXPECT_NE(limiter.error().message.find("batched"), std::string::npos);
  }
  EXPECT_FALSE(
      node.batched
          ->MakeLimiter({Algorithm::kSlidingWindowLog, 10, seconds(1), 0, false}, Batched("x"))
          .has_value());
  // The same specs in exact mode pass through.
  EXPECT_TRUE(node.batched
                  ->MakeLimiter({Algorithm::kSlidingWindowLog, 10, seconds(1), 0, false},
                                LimiterOptions{.id = "x"})
                  .has_value());
}

// N nodes on one key, each offered far more than the limit, flushing at staggered instants.
// docs/redis.md ("Batched"): in each interval a node admits at most what its view held at its
// last sync plus r x interval; from a full bucket the nodes together over-admit at most
// (N-1) x (B + r x I) once, and under sustained load (N-1) x r x I per interval, charged as
// debt that the following intervals repay. So over a span T from a full bucket:
//   admitted <= B + r x T + (N-1) x (B + r x I) + (N-1) x r x I.
// For the fixed window each node may admit up to L - (count it saw) per window before its next
// sync: admitted per window <= L + (N-1) x L.
TEST(BatchedStore, ThreeNodesOnOneKeyStayWithinTheStatedBound) {
  constexpr int kNodes = 3;
  const std::string prefix = UniquePrefix("nodes");
  struct Case {
    LimitSpec spec;
    const char* name;
  };
  for (const Case& c : {Case{{Algorithm::kTokenBucket, 100, seconds(1), 50, false}, "token_bucket"},
                        Case{{Algorithm::kGcra, 100, seconds(1), 50, false}, "gcra"},
                        Case{{Algorithm::kLeakyBucket, 100, seconds(1), 50, false}, "leaky"},
                        Case{{Algorithm::kFixedWindow, 100, seconds(1), 0, false}, "fixed"}}) {
    SCOPED_TRACE(c.name);
    std::vector<Node> nodes;
    std::vector<std::unique_ptr<Limiter>> limiters;
    for (int i = 0; i < kNodes; ++i) {
      nodes.push_back(OpenNode(prefix));
      ASSERT_NE(nodes.back().batched, nullptr);
      limiters.push_back(Make(*nodes.back().batched, c.spec, Batched(c.name)));
      ASSERT_NE(limiters.back(), nullptr);
    }
    // 4 s; every node gets a request every millisecond (1000/s each, 10x the limit); node i
    // flushes at i x 33 ms past each interval.
    const int span_ms = 4000;
    int64_t admitted = 0;
    std::vector<int64_t> per_window(span_ms / 1000 + 1, 0);
    for (int ms = 0; ms < span_ms; ++ms) {
      const Timestamp now = kStart + milliseconds(ms);
      for (int i = 0; i < kNodes; ++i) {
        if (ms % 100 == i * 33 && ms >= 100) nodes[i].batched->Flush(now);
        if (limiters[i]->Decide("hot", now, 1).allowed) {
          ++admitted;
          ++per_window[ms / 1000];
        }
      }
    }
    const int64_t r_interval = 100 * 100 / 1000;  // r x I = 10 hits
    const int64_t exact = c.spec.algorithm == Algorithm::kFixedWindow
                              ? 100 * (span_ms / 1000)
                              : c.spec.Capacity() + 100 * span_ms / 1000;
    if (c.spec.algorithm == Algorithm::kFixedWindow) {
      for (int w = 0; w < span_ms / 1000; ++w) {
        EXPECT_LE(per_window[w], 100 + (kNodes - 1) * 100) << "window " << w;
        EXPECT_GE(per_window[w], 100) << "window " << w;
      }
    } else {
      const int64_t bound =
          exact + (kNodes - 1) * (c.spec.Capacity() + r_interval) + (kNodes - 1) * r_interval;
      EXPECT_LE(admitted, bound);
    }
    EXPECT_GE(admitted, exact) << "a node that knows the others' hits late admits no fewer";
    uint64_t found_beyond = 0;  // what the syncs found beyond the limit, as the metric counts it
    for (const Node& n : nodes) found_beyond += n.batched->Stats().batched_over_admitted_hits;
    if (c.spec.algorithm != Algorithm::kFixedWindow) {
      EXPECT_GT(found_beyond, 0u);
      EXPECT_LE(found_beyond, static_cast<uint64_t>(admitted));
      EXPECT_GE(found_beyond, static_cast<uint64_t>(admitted - exact))
          << "the metric shows at least the excess over the exact store";
    }
    std::printf(
        "%s: %d nodes admitted %lld over %d ms; the exact store's most %lld; the syncs "
        "found %llu beyond the limit\n",
        c.name, kNodes, static_cast<long long>(admitted), span_ms, static_cast<long long>(exact),
        static_cast<unsigned long long>(found_beyond));
    limiters.clear();  // their last hits are sent as they go
  }
}

TEST(BatchedStore, ADeadRedisLosesNoHitAndLocalDecisionsGoOn) {
  testing::RedisServer server;
  const std::string prefix = UniquePrefix("dead");
  Node node = OpenNode(prefix, server.port());
  ASSERT_NE(node.batched, nullptr);
  const LimitSpec spec{Algorithm::kFixedWindow, 100, minutes(1), 0, false};
  auto limiter = Make(*node.batched, spec, Batched("dead"));
  ASSERT_NE(limiter, nullptr);
  ASSERT_TRUE(limiter->Decide("k", kStart, 1).allowed);  // exact: seeds the view

  server.Stop();
  // The view decides on, without Redis.
  for (int i = 1; i <= 30; ++i) {
    const Decision d = limiter->Decide("k", kStart + milliseconds(i), 1);
    ASSERT_TRUE(d.allowed) << i;
    ASSERT_FALSE(d.degraded) << i;
    ASSERT_EQ(d.remaining, 100 - 1 - i) << i;
  }
  const BatchedFlush failed = node.batched->Flush(kStart + milliseconds(100));
  EXPECT_EQ(failed.hits_kept, 30u);
  EXPECT_EQ(failed.hits_sent, 0u);
  EXPECT_EQ(node.batched->Stats().batched_pending_hits, 30u);
  // More hits while it is down; a key never seen is decided by the failure policy (closed).
  for (int i = 31; i <= 40; ++i) {
    ASSERT_TRUE(limiter->Decide("k", kStart + milliseconds(100 + i), 1).allowed);
  }
  const Decision unseen = limiter->Decide("other", kStart + milliseconds(200), 1);
  EXPECT_TRUE(unseen.degraded);
  EXPECT_FALSE(unseen.allowed);

  // Redis is back (empty, as after a crash): the kept hits are sent, all 40 of them.
  ASSERT_TRUE(server.Restart());
  const BatchedFlush sent = node.batched->Flush(kStart + milliseconds(300));
  EXPECT_EQ(sent.hits_sent, 40u);
  EXPECT_EQ(node.batched->Stats().batched_pending_hits, 0u);
  auto exact = Make(*node.redis, spec, LimiterOptions{.id = "dead", .fail_open = false});
  ASSERT_NE(exact, nullptr);
  EXPECT_EQ(exact->Decide("k", kStart + milliseconds(400), 0).remaining, 100 - 40);
}

TEST(BatchedStore, ChargesAreTakenLocallyIntoDebtAndSentWhole) {
  Node node = OpenNode(UniquePrefix("charge"));
  ASSERT_NE(node.batched, nullptr);
  const LimitSpec spec{Algorithm::kTokenBucket, 10, minutes(1), 10, false};
  auto limiter = Make(*node.batched, spec, Batched("charge"));
  ASSERT_NE(limiter, nullptr);
  Oracle<TokenBucket> oracle(spec, kStart);
  ASSERT_TRUE(limiter->Decide("k", kStart, 4).allowed);
  oracle.Decide(kStart, 4);
  // 12 more charged: 6 tokens left, so 6 into debt; refused, as the pure algorithm says.
  const Decision charged = limiter->Charge("k", kStart + seconds(1), 12);
  const Decision want = oracle.alg.Charge(oracle.state, kStart + seconds(1), 12);
  EXPECT_FALSE(charged.allowed);
  EXPECT_EQ(charged.reset_after, want.reset_after);
  EXPECT_EQ(node.batched->Stats().batched_pending_hits, 12u);
  node.batched->Flush(kStart + seconds(2));
  // Redis holds the debt: a cost-0 check there is refused until it is repaid, as the oracle's.
  auto exact = Make(*node.redis, spec, LimiterOptions{.id = "charge", .fail_open = false});
  const Decision there = exact->Decide("k", kStart + seconds(2), 0);
  const Decision oracle_there = oracle.Decide(kStart + seconds(2), 0);
  EXPECT_EQ(there.allowed, oracle_there.allowed);
  EXPECT_EQ(there.reset_after, oracle_there.reset_after);
}

TEST(BatchedStore, ARefusedRequestGivesBackWhatItsOtherChecksTookLocally) {
  Node node = OpenNode(UniquePrefix("all"));
  ASSERT_NE(node.batched, nullptr);
  const LimitSpec wide{Algorithm::kFixedWindow, 100, minutes(1), 0, false};
  const LimitSpec narrow{Algorithm::kFixedWindow, 2, minutes(1), 0, false};
  auto a = Make(*node.batched, wide, Batched("wide"));
  auto b = Make(*node.batched, narrow, Batched("narrow"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  for (int i = 0; i < 4; ++i) {
    const LimitCheck checks[] = {{a.get(), "k", 1}, {b.get(), "k", 1}};
    Decision out[2];
    node.batched->DecideAll(checks, kStart + milliseconds(i), out);
    EXPECT_EQ(out[1].allowed, i < 2) << i;
    EXPECT_EQ(out[0].remaining, 100 - std::min(i + 1, 2)) << i << ": given back when refused";
  }
  EXPECT_GT(node.batched->Stats().local_decisions, 0u);
  node.batched->Flush(kStart + milliseconds(100));
  auto exact = Make(*node.redis, wide, LimiterOptions{.id = "wide", .fail_open = false});
  EXPECT_EQ(exact->Decide("k", kStart + milliseconds(200), 0).remaining, 98);
}

TEST(BatchedStore, ExactLimitsPassThroughAndTheCacheLearnsNothingFromBatchedOnes) {
  Node node = OpenNode(UniquePrefix("pass"));
  ASSERT_NE(node.batched, nullptr);
  auto cached = OpenOverLimitCache(node.batched, {.max_bytes = 1 << 20});
  ASSERT_TRUE(cached.has_value());
  const LimitSpec spec{Algorithm::kTokenBucket, 2, minutes(1), 2, false};
  auto exact = Make(**cached, spec, LimiterOptions{.id = "exact", .fail_open = false});
  auto batched = Make(**cached, spec, Batched("batched"));
  ASSERT_NE(exact, nullptr);
  ASSERT_NE(batched, nullptr);
  exact->Decide("warm", kStart, 1);  // loads the script
  uint64_t calls = node.RedisCalls();
  for (int i = 0; i < 3; ++i) exact->Decide("k", kStart, 1);
  EXPECT_EQ(node.RedisCalls(), calls + 3) << "every exact decision is a Redis call";
  calls = node.RedisCalls();
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(batched->Decide("k", kStart + milliseconds(i), 1).allowed, i < 2) << i;
  }
  EXPECT_EQ(node.RedisCalls(), calls + 1) << "the first decision only";
  const StoreStats s = (*cached)->Stats();
  EXPECT_EQ(s.cached_decisions, 0u) << "batched refusals are the views', not Redis's";
  EXPECT_EQ(s.local_decisions, 49u);
  EXPECT_TRUE(s.batched);
}

TEST(BatchedStore, ALimiterThatGoesSendsItsHitsAndUnusedViewsAreDropped) {
  Node node = OpenNode(UniquePrefix("gone"));
  ASSERT_NE(node.batched, nullptr);
  const LimitSpec spec{Algorithm::kFixedWindow, 100, minutes(1), 0, false};
  auto limiter = Make(*node.batched, spec, Batched("gone"));
  ASSERT_NE(limiter, nullptr);
  for (int i = 0; i < 10; ++i) limiter->Decide("k" + std::to_string(i % 2), kStart, 1);
  EXPECT_EQ(node.batched->Stats().keys, 2u);
  const BatchedFlush first = node.batched->Flush(kStart + milliseconds(100));
  EXPECT_EQ(first.keys_sent, 2u);
  EXPECT_EQ(first.hits_sent, 8u) << "the first of each key was decided by Redis";
  const BatchedFlush second = node.batched->Flush(kStart + milliseconds(200));
  EXPECT_EQ(second.views_dropped, 2u);
  EXPECT_EQ(node.batched->Stats().keys, 0u);
  for (int i = 0; i < 5; ++i) limiter->Decide("k0", kStart + milliseconds(300), 1);
  node.clock->Set(kStart + milliseconds(300));
  limiter.reset();                                  // sends without waiting for the answer
  node.batched->Flush(kStart + milliseconds(300));  // which a flush waits for
  auto exact = Make(*node.redis, spec, LimiterOptions{.id = "gone", .fail_open = false});
  EXPECT_EQ(exact->Decide("k0", kStart + milliseconds(400), 0).remaining, 100 - 10);
}

TEST(BatchedStore, ViewsStayWithinTheByteBound) {
  Node node = OpenNode(UniquePrefix("bound"), testing::SharedRedisServer().port(), 4096);
  ASSERT_NE(node.batched, nullptr);
  const LimitSpec spec{Algorithm::kFixedWindow, 3, minutes(1), 0, false};
  auto limiter = Make(*node.batched, spec, Batched("bound"));
  ASSERT_NE(limiter, nullptr);
  for (int i = 0; i < 200; ++i) {
    const std::string key = "key-with-a-long-name-" + std::to_string(i);
    for (int j = 0; j < 4; ++j) {
      ASSERT_EQ(limiter->Decide(key, kStart, 1).allowed, j < 3) << key << " " << j;
    }
  }
  const StoreStats s = node.batched->Stats();
  EXPECT_LE(s.bytes, 4096u);
  EXPECT_GT(s.keys, 0u);
  EXPECT_LT(s.keys, 200u) << "the keys beyond the bound are decided by Redis";
}

// The timer: the store syncs by itself every interval, here while threads decide a few keys at
// once and the test advances the time (the timer runs on the test's thread, in Advance, beside
// the deciding threads). When the limiter goes, Redis has counted every admitted hit, none lost
// and none twice (a fixed window wide enough to admit them all).
TEST(BatchedStore, TheTimerSyncsWhileThreadsDecideAndNoHitIsLostOrCountedTwice) {
  RedisStoreOptions o;
  o.port = testing::SharedRedisServer().port();
  o.command_timeout = milliseconds(2000);
  o.scheduler = testing::IdleScheduler();
  o.key_prefix = UniquePrefix("timer");
  o.use_server_time = false;
  auto redis = OpenRedisStore(o);
  ASSERT_TRUE(redis.has_value());
  ManualClock clock(kStart);
  auto scheduler = std::make_shared<ManualScheduler>(clock);
  auto store = OpenBatchedStore(*redis, {.max_bytes = 1 << 20, .scheduler = scheduler});
  ASSERT_TRUE(store.has_value());
  // An hour's window: however fast the test moves time on, every hit falls in it.
  const LimitSpec spec{Algorithm::kFixedWindow, 100'000, hours(1), 0, false};
  LimiterOptions lo = Batched("timer");
  lo.sync.interval = milliseconds(5);
  auto limiter = Make(**store, spec, lo);
  ASSERT_NE(limiter, nullptr);
  constexpr int kThreads = 4;
  constexpr int kEach = 3000;
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string key = "k" + std::to_string((t + i) % 3);
        if (i % 2 == 0) {
          EXPECT_TRUE(limiter->Decide(key, clock.Now(), 1).allowed);
        } else {
          const LimitCheck check{limiter.get(), key, 1};
          Decision d;
          (*store)->DecideAll(std::span(&check, 1), clock.Now(), std::span(&d, 1));
          EXPECT_TRUE(d.allowed);
        }
      }
      --running;
    });
  }
  while (running.load() > 0 && clock.Now() < kStart + minutes(30)) {
    scheduler->Advance(milliseconds(1));
  }
  for (std::thread& t : threads) t.join();
  // Nothing is pending once one more interval has passed: the timer sent it without being asked.
  scheduler->Advance(lo.sync.interval);
  EXPECT_EQ((*store)->Stats().batched_pending_hits, 0u) << "the timer synced";
  EXPECT_GT((*store)->Stats().local_decisions, 0u);
  limiter.reset();
  (*store)->Flush(clock.Now());  // waits for the limiter's last send
  auto exact = Make(**redis, spec, LimiterOptions{.id = "timer", .fail_open = false});
  int64_t counted = 0;
  for (int k = 0; k < 3; ++k) {
    counted += 100'000 - exact->Decide("k" + std::to_string(k), clock.Now(), 0).remaining;
  }
  EXPECT_EQ(counted, kThreads * kEach);
}

// Requests for a key go to Redis while its view is not seeded yet, many at once; answers come
// back in any order on Redis's connection threads. Until each answer is in, local decisions
// count its cost as taken: one node admits what Redis alone would (10 a minute here; the run
// takes far less than the 6 s a token takes to come back).
TEST(BatchedStore, OneNodeDoesNotOverAdmitWhileRequestsAreOnTheirWayToRedis) {
  RedisStoreOptions o;
  o.port = testing::SharedRedisServer().port();
  o.command_timeout = milliseconds(2000);
  o.scheduler = testing::IdleScheduler();
  o.key_prefix = UniquePrefix("inflight");
  auto redis = OpenRedisStore(o);  // Redis's clock
  ASSERT_TRUE(redis.has_value());
  auto clock = std::make_shared<MonotonicClock>();
  auto store = OpenBatchedStore(*redis, {.max_bytes = 1 << 20, .clock = clock});
  ASSERT_TRUE(store.has_value());
  const LimitSpec spec{Algorithm::kTokenBucket, 10, minutes(1), 10, false};
  auto limiter = Make(**store, spec, Batched("inflight"));
  ASSERT_NE(limiter, nullptr);
  std::atomic<int> admitted{0};
  std::atomic<int> answered{0};
  constexpr int kEach = 2000;
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto count = [&](bool allowed) {
          if (allowed) ++admitted;
          ++answered;
        };
        if (t == 0) {
          const LimitCheck check{limiter.get(), "k", 1};
          (*store)->DecideAllAsync(
              std::span(&check, 1), clock->Now(),
              [&, count](std::span<const Decision> out) { count(out[0].allowed); });
        } else {
          limiter->DecideAsync("k", clock->Now(), 1,
                               [&, count](const Decision& d) { count(d.allowed); });
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (answered.load() < 2 * kEach && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(answered.load(), 2 * kEach);
  // Whether any of the burst was decided locally depends on timing: every request may have gone
  // out before the first answer seeded the key's view. Once the answers are in, the view exists
  // and the node refuses from it without asking Redis.
  for (int i = 0; i < 100 && (*store)->Stats().local_decisions == 0; ++i) {
    if (limiter->Decide("k", clock->Now(), 1).allowed) ++admitted;
  }
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_LT(took, seconds(6)) << "a token came back: the count below would not hold";
  EXPECT_EQ(admitted.load(), 10);
  EXPECT_GT((*store)->Stats().local_decisions, 0u);
}

// A request that goes to Redis whole (an exact limit among its checks) carries this node's
// unsent hits on its batched keys, added to their checks' costs: Redis refuses what the view
// would refuse, and takes the hits with an admitted request's cost or not at all.
TEST(BatchedStore, ARequestSentToRedisWholeCarriesTheNodesUnsentHits) {
  Node node = OpenNode(UniquePrefix("ride"));
  ASSERT_NE(node.batched, nullptr);
  // A slow rate: Redis's keys outlive the test by far (their TTLs run on real time).
  const LimitSpec spec{Algorithm::kTokenBucket, 10, hours(1), 6, false};
  auto batched = Make(*node.batched, spec, Batched("b"));
  auto exact = Make(*node.batched, spec, LimiterOptions{.id = "e"});
  auto in_redis = Make(*node.redis, spec, LimiterOptions{.id = "b"});  // b's shared counter
  ASSERT_TRUE(batched && exact && in_redis);
  const Timestamp t = kStart;
  // u: seeded by Redis (5 left there), then 5 taken from the view, unsent. Redis alone would
  // admit 1 more; the node must not.
  ASSERT_TRUE(batched->Decide("u", t, 1).allowed);
  ASSERT_TRUE(batched->Decide("u", t, 5).allowed);
  EXPECT_EQ(node.batched->Stats().batched_pending_hits, 5u);
  std::vector<LimitCheck> checks = {{batched.get(), "u", 1}, {exact.get(), "x", 1}};
  Decision out[2];
  node.batched->DecideAll(checks, t, out);
  EXPECT_FALSE(out[0].allowed) << "Redis decided without this node's 5 unsent hits";
  EXPECT_EQ(out[0].remaining, 0) << "reported as for its own cost, the hits in the count";
  EXPECT_EQ(out[1].remaining, 6) << "the exact check's admission is given back";
  EXPECT_EQ(node.batched->Stats().batched_pending_hits, 5u) << "refused: the hits stay unsent";
  EXPECT_EQ(in_redis->Decide("u", t, 0).remaining, 5);
  // v: 5 left in Redis, 2 of them taken from the view: a cost of 3 fits, and the request takes
  // the 2 unsent hits with it.
  ASSERT_TRUE(batched->Decide("v", t, 1).allowed);
  ASSERT_TRUE(batched->Decide("v", t, 2).allowed);
  checks = {{batched.get(), "v", 3}, {exact.get(), "y", 1}};
  node.batched->DecideAll(checks, t, out);
  EXPECT_TRUE(out[0].allowed && out[1].allowed);
  EXPECT_EQ(out[0].remaining, 0);
  EXPECT_EQ(in_redis->Decide("v", t, 0).remaining, 0) << "the hits went with the request";
  EXPECT_FALSE(batched->Decide("v", t, 1).allowed) << "and the view counts the request's cost";
  EXPECT_EQ(node.batched->Stats().batched_pending_hits, 5u) << "only u's are still unsent";
  node.batched->Flush(t);
  EXPECT_EQ(in_redis->Decide("u", t, 0).remaining, 0);
  EXPECT_EQ(node.batched->Stats().batched_over_admitted_hits, 0u);
}

// The bound one node is held to (docs/redis.md, "Batched"): a sync charges its interval's hits
// at its own instant, so refill the pure bucket gains at its cap between a hit and the sync is
// not credited. Here all of it: the bucket is full when the node takes it all, and the sync
// comes one interval later, so the node is one interval's refill (1 token) below the pure
// bucket, and refuses for as long (retry_after: the interval) what the pure bucket admits.
// One token an interval, on a 10 s interval: Redis's keys (TTLs on real time) outlive the test.
TEST(BatchedStore, OneNodeIsStrictByAtMostOneIntervalsRefill) {
  Node node = OpenNode(UniquePrefix("strict"));
  ASSERT_NE(node.batched, nullptr);
  constexpr Duration kSlow = seconds(10);
  const LimitSpec spec{Algorithm::kTokenBucket, 1, kSlow, 10, false};
  LimiterOptions options = Batched("s");
  options.sync.interval = kSlow;
  auto limiter = Make(*node.batched, spec, options);
  ASSERT_NE(limiter, nullptr);
  Oracle<TokenBucket> oracle(spec, kStart);
  const auto both = [&](Timestamp at, int64_t cost) {
    const Decision got = limiter->Decide("k", at, cost);
    const Decision want = oracle.Decide(at, cost);
    return std::pair(got, want);
  };
  auto [got, want] = both(kStart, 1);  // Redis: 9 left at kStart
  ASSERT_TRUE(got.allowed && want.allowed);
  std::tie(got, want) = both(kStart + kSlow, 10);  // full again: all of it, in the view
  ASSERT_TRUE(got.allowed && want.allowed);
  node.batched->Flush(kStart + 2 * kSlow);  // Redis: min(10, 9 + 2) - 10 = 0
  std::tie(got, want) = both(kStart + 2 * kSlow, 1);
  EXPECT_TRUE(want.allowed) << "the pure bucket refilled 1 token since the take";
  EXPECT_FALSE(got.allowed);
  EXPECT_EQ(got.retry_after, kSlow) << "one interval's refill behind, no more";
  EXPECT_EQ(node.batched->Stats().batched_over_admitted_hits, 0u);
}

}  // namespace
}  // namespace sluice
