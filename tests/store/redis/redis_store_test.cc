// The Redis store against a real redis-server, what is Redis's own: keys stay in their namespace
// and always carry a TTL, replays print what the memory store prints, addresses and AUTH, the
// breaker in front of a dead Redis, many asynchronous decisions pipelined from one thread. What
// every store does (decisions as the pure algorithms, refunds, all-or-nothing DecideAll, the
// failure policy) is the store suite's: tests/store/store_suite.h, redis_store_suite_test.cc.
#include "sluice/redis_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cli/replay.h"
#include "cli/trace_reader.h"
#include "sluice/leased_store.h"
#include "sluice/memory_store.h"
#include "store/idle_scheduler.h"
#include "store/redis/redis_client.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

class RedisStore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<testing::RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  RedisStoreOptions Options(const std::string& limit_id) const {
    RedisStoreOptions o;
    o.port = server_->port();
    o.use_server_time = false;
    o.limit_id = limit_id;
    o.command_timeout = milliseconds(2000);
    return o;
  }
  std::unique_ptr<internal::RedisClient> Client() const {
    auto c = internal::RedisClient::Connect("127.0.0.1", server_->port(), milliseconds(500),
                                            milliseconds(2000));
    return c ? std::move(*c) : nullptr;
  }

  static std::unique_ptr<testing::RedisServer> server_;
};
std::unique_ptr<testing::RedisServer> RedisStore::server_;

// Random millisecond traces over a few keys, with bursts and idle gaps.
struct Line {
  int64_t t_ms;
  std::string key;
  int64_t cost;
};
// Mean gap: about two hits per key per limit-share of the period, so both sides are exercised.
std::vector<Line> Trace(uint64_t seed, int n, int64_t period_ms, int64_t limit) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> key(0, 4), cost(1, 3), idle(0, 300);
  std::uniform_int_distribution<int64_t> gap(0, period_ms / (limit * 4) + 1);
  std::vector<Line> out;
  int64_t t = 1'700'000'000'000;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    if (idle(rng) == 0) t += 2 * period_ms;
    out.push_back({t, "client-" + std::to_string(key(rng)), cost(rng)});
  }
  return out;
}

// Whatever the algorithm, and through decisions, refunds and multi-limit requests (rolled back
// or not), no key is left without a TTL: INFO keyspace's db0:keys=N,expires=M.
TEST_F(RedisStore, EveryAlgorithmLeavesEveryKeyWithATtl) {
  auto store = OpenRedisStore(Options("unused"));
  ASSERT_TRUE(store.has_value());
  std::vector<std::unique_ptr<Limiter>> limiters;
  for (Algorithm a : kAllAlgorithms) {
    const LimitSpec spec{a, 10, seconds(1), HasBurst(a) ? 20 : 0, a == Algorithm::kLeakyBucket};
    auto limiter = (*store)->MakeLimiter(spec, "ttl-" + std::string(AlgorithmName(a)), false);
    ASSERT_TRUE(limiter.has_value());
    limiters.push_back(std::move(*limiter));
  }
  const auto trace = Trace(5, 600, 1000, 10);
  int refunds = 0, refused = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const Timestamp now = FromNanos(trace[i].t_ms * 1'000'000);
    Limiter& limiter = *limiters[i % limiters.size()];
    if (i % 10 == 0) {
      std::vector<LimitCheck> checks;
      for (auto& l : limiters) checks.push_back({l.get(), trace[i].key, trace[i].cost});
      std::vector<Decision> out(checks.size());
      (*store)->DecideAll(checks, now, out);
      refused +=
          std::all_of(out.begin(), out.end(), [](const Decision& d) { return d.allowed; }) ? 0 : 1;
    } else if (limiter.Decide(trace[i].key, now, trace[i].cost).allowed && i % 3 == 0) {
      limiter.Refund(trace[i].key, now, now, trace[i].cost);
      ++refunds;
    }
  }
  EXPECT_GT(refunds, 20);
  EXPECT_GT(refused, 5);
  auto c = Client();
  ASSERT_NE(c, nullptr);
  auto keyspace = c->Command({"INFO", "keyspace"});
  ASSERT_TRUE(keyspace.has_value());
  const std::string& info = keyspace->str;
  ASSERT_NE(info.find("keys="), std::string::npos) << info;
  EXPECT_EQ(std::stoll(info.substr(info.find("keys=") + 5)),
            std::stoll(info.substr(info.find("expires=") + 8)))
      << info;
}

TEST_F(RedisStore, EveryKeyHasATtlNoLongerThanItsReplenishTime) {
  auto limiter =
      MakeRedisLimiter({Algorithm::kTokenBucket, 10, seconds(1), 50, false}, Options("ttl"));
  ASSERT_TRUE(limiter.has_value());
  const Timestamp now = FromNanos(1'700'000'000'000'000'000);
  for (int i = 0; i < 20; ++i) (*limiter)->Decide("k" + std::to_string(i), now, 1 + i);
  auto c = Client();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 20; ++i) {
    auto ttl = c->Command({"PTTL", RedisKeyFor(Options("ttl"), "k" + std::to_string(i))});
    ASSERT_TRUE(ttl.has_value());
    EXPECT_GT(ttl->integer, 0) << "no TTL on k" << i;
    EXPECT_LE(ttl->integer, (1 + i) * 100) << "k" << i << " outlives its refill";
  }
  auto keyspace = c->Command({"INFO", "keyspace"});
  ASSERT_TRUE(keyspace.has_value());
  // db0:keys=N,expires=M: every key expires.
  const std::string& info = keyspace->str;
  const auto keys_at = info.find("keys=");
  const auto expires_at = info.find("expires=");
  ASSERT_NE(keys_at, std::string::npos);
  EXPECT_EQ(std::stoll(info.substr(keys_at + 5)), std::stoll(info.substr(expires_at + 8)));
}

// Keys written by a version that kept its state in hashes (rolling upgrade, docs/redis.md "Keys")
// are read as they are: each holds 7 of 10 units used, so a cost of 1 leaves 2 -- worked out by
// hand from the fields, not by the scripts' formulas. The write that follows stores the new
// format, and the key keeps counting from there.
TEST_F(RedisStore, KeysAnEarlierVersionWroteAsHashesAreReadAndReplaced) {
  constexpr int64_t kNowUs = 1'700'000'000'000'000;  // a whole second
  const Timestamp now = FromNanos(kNowUs * 1000);
  // 10 per second: the buckets count in units of d = 100000 per token, refilled 1 per us.
  struct Old {
    Algorithm algorithm;
    std::vector<std::string> fields;
  };
  const std::vector<Old> olds = {
      {Algorithm::kFixedWindow, {"w", std::to_string(kNowUs / 1'000'000), "c", "7"}},
      {Algorithm::kSlidingWindowCounter,
       {"w", std::to_string(kNowUs / 1'000'000), "c", "7", "p", "0"}},
      {Algorithm::kTokenBucket, {"s", "300000", "l", std::to_string(kNowUs)}},  // 3 tokens left
      {Algorithm::kGcra, {"t", std::to_string(kNowUs + 700'000), "f", "0"}},    // 7 ahead
      {Algorithm::kLeakyBucket, {"s", "700000", "l", std::to_string(kNowUs)}},  // 7 queued
  };
  auto c = Client();
  ASSERT_NE(c, nullptr);
  for (const Old& old : olds) {
    const std::string name(AlgorithmName(old.algorithm));
    RedisStoreOptions o = Options("old-" + name);
    const bool window = old.algorithm == Algorithm::kFixedWindow ||
                        old.algorithm == Algorithm::kSlidingWindowCounter;
    auto limiter = MakeRedisLimiter({old.algorithm, 10, seconds(1), window ? 0 : 10, false}, o);
    ASSERT_TRUE(limiter.has_value()) << name;
    const std::string key = RedisKeyFor(o, "k");
    std::vector<std::string> hset = {"HSET", key};
    hset.insert(hset.end(), old.fields.begin(), old.fields.end());
    ASSERT_TRUE(c->Command(hset).has_value());
    ASSERT_TRUE(c->Command({"PEXPIRE", key, "60000"}).has_value());

    const Decision first = (*limiter)->Decide("k", now, 1);
    EXPECT_FALSE(first.degraded) << name;
    EXPECT_TRUE(first.allowed) << name;
    EXPECT_EQ(first.remaining, 2) << name;
    auto type = c->Command({"TYPE", key});
    ASSERT_TRUE(type.has_value());
    EXPECT_EQ(type->str, "string") << name << ": rewritten in the new format";
    const Decision second = (*limiter)->Decide("k", now, 2);
    EXPECT_TRUE(second.allowed) << name;
    EXPECT_EQ(second.remaining, 0) << name;
    EXPECT_FALSE((*limiter)->Decide("k", now, 1).allowed) << name;
  }
}

TEST_F(RedisStore, IdentitiesCannotLeaveTheirNamespace) {
  const RedisStoreOptions o = Options("api");
  EXPECT_EQ(RedisKeyFor(o, "k1"), "sluice:{api:k1}");
  EXPECT_EQ(RedisKeyFor(o, "a}b{c"), "sluice:{api:a%7Db%7Bc}");
  EXPECT_EQ(RedisKeyFor(o, "x:y%z"), "sluice:{api:x%3Ay%25z}");
  EXPECT_EQ(RedisKeyFor(o, std::string("\n\0 ", 3)), "sluice:{api:%0A%00%20}");
  EXPECT_NE(RedisKeyFor(o, "a:b"), RedisKeyFor(Options("api:a"), "b"));
}

TEST_F(RedisStore, OutOfRangeSpecsAndBadLimitIdsAreClearErrors) {
  for (const char* bad_id : {"", "a{b", "a}b"}) {
    RedisStoreOptions o = Options("x");
    o.limit_id = bad_id;
    auto limiter = MakeRedisLimiter({Algorithm::kTokenBucket, 10, seconds(1), 10, false}, o);
    ASSERT_FALSE(limiter.has_value()) << bad_id;
    EXPECT_NE(limiter.error().message.find("limit id"), std::string::npos);
  }
  RedisStoreOptions no_connections = Options("x");
  no_connections.connections = 0;
  EXPECT_FALSE(OpenRedisStore(no_connections).has_value());
  // Past 2^53 the wide scripts decide it (redis_script_wide.h)...
  EXPECT_TRUE(MakeRedisLimiter({Algorithm::kTokenBucket, 7, std::chrono::hours(24), 20'000, false},
                               Options("x"))
                  .has_value());
  // ...whose divisors stay below 2^45 us: 1 per 600 days, burst 44, is past 2^53 scaled.
  auto big = MakeRedisLimiter({Algorithm::kTokenBucket, 1, std::chrono::hours(24 * 600), 44, false},
                              Options("x"));
  ASSERT_FALSE(big.has_value());
  EXPECT_NE(big.error().message.find("2^45"), std::string::npos) << big.error().message;
}

// `sluice replay --store redis://...` must print exactly what the memory store prints.
std::string ReplayToString(const std::vector<Line>& trace, Limiter& limiter) {
  std::string csv;
  for (const Line& l : trace)
    csv += std::to_string(l.t_ms) + "," + l.key + "," + std::to_string(l.cost) + "\n";
  std::FILE* in = fmemopen(csv.data(), csv.size(), "r");
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  cli::TraceReader reader(in);
  auto result = cli::Replay(reader, limiter, cli::ReplayOutput::kJsonl, out);
  std::fclose(out);
  std::fclose(in);
  std::string text = result ? std::string(buf, len) : "error: " + result.error().message;
  std::free(buf);
  return text;
}

TEST_F(RedisStore, ReplayThroughRedisPrintsWhatTheMemoryStorePrints) {
  int n = 0;
  for (const LimitSpec& spec :
       {LimitSpec{Algorithm::kTokenBucket, 10, seconds(1), 30, false},
        LimitSpec{Algorithm::kFixedWindow, 10, seconds(1), 0, false},
        LimitSpec{Algorithm::kSlidingWindowCounter, 10, seconds(1), 0, false},
        LimitSpec{Algorithm::kSlidingWindowLog, 10, seconds(1), 0, false}}) {
    const auto trace = Trace(7 + n, 2000, 1000, spec.limit);
    auto memory = MakeMemoryLimiter(spec);
    auto redis = MakeRedisLimiter(spec, Options("replay" + std::to_string(n++)));
    ASSERT_TRUE(memory.has_value() && redis.has_value());
    const std::string want = ReplayToString(trace, **memory);
    EXPECT_EQ(ReplayToString(trace, **redis), want) << DescribeLimitSpec(spec);
    EXPECT_NE(want.find("\"allowed\":false"), std::string::npos);
  }
}

TEST(RedisAddress, ParsesTheDocumentedForms) {
  auto a = ParseRedisAddress("redis://127.0.0.1:6380");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 6380);
  auto b = ParseRedisAddress("redis://alice:s3cr:et@cache.internal:6379/2");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->user, "alice");
  EXPECT_EQ(b->password, "s3cr:et");
  EXPECT_EQ(b->host, "cache.internal");
  EXPECT_EQ(b->db, 2);
  auto c = ParseRedisAddress("redis://:pw@h:1");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->user, "");
  EXPECT_EQ(c->password, "pw");
  for (const char* bad :
       {"memcached://h:1", "redis://h", "redis://h:0", "redis://h:99999", "redis://h:12x",
        "redis://h:1/x", "redis://:6379", "redis+cluster://", "redis+cluster://h:1,",
        "redis+cluster://h:1,h", "redis+cluster://h:1/2"}) {
    EXPECT_FALSE(ParseRedisAddress(bad).has_value()) << bad;
  }
}

TEST(RedisAddress, ClusterSeedsAndCredentials) {
  auto a = ParseRedisAddress("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7001");
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(a->cluster_seeds, (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7001"}));
  EXPECT_EQ(a->user, "u");
  EXPECT_EQ(a->password, "p");
  auto b = ParseRedisAddress("redis+cluster://127.0.0.1:7000");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->cluster_seeds.size(), 1u);
  EXPECT_TRUE(ParseRedisAddress("redis://127.0.0.1:7000")->cluster_seeds.empty());
}

// redis+unix://[user:password@]/path[?db=N]: the credentials end at the "@/" before the
// absolute path; without them, the path is everything up to ?db=.
TEST(RedisAddress, UnixSocketForms) {
  auto a = ParseRedisAddress("redis+unix:///run/redis/redis.sock");
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(a->unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(a->db, 0);
  EXPECT_EQ(a->password, "");
  auto b = ParseRedisAddress("redis+unix://alice:p@ss/w:rd@/run/redis/redis.sock?db=7");
  ASSERT_TRUE(b.has_value()) << b.error().message;
  EXPECT_EQ(b->user, "alice");
  EXPECT_EQ(b->password, "p@ss/w:rd");
  EXPECT_EQ(b->unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(b->db, 7);
  auto c = ParseRedisAddress("redis+unix://:pw@/tmp/a@b/r.sock");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->password, "pw");
  EXPECT_EQ(c->unix_path, "/tmp/a@b/r.sock");
  auto d = ParseRedisAddress("redis+unix:///tmp/a@b/r.sock");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->unix_path, "/tmp/a@b/r.sock") << "no credentials: an '@' is the path's";
  EXPECT_TRUE(d->password.empty());
  for (const char* bad :
       {"redis+unix://", "redis+unix://relative.sock", "redis+unix://pw@relative.sock",
        "redis+unix:///r.sock?db=", "redis+unix:///r.sock?db=x", "redis+unix:///r.sock?timeout=1",
        "redis+unix:///"}) {
    EXPECT_FALSE(ParseRedisAddress(bad).has_value()) << bad;
  }
  const std::string long_path = "redis+unix:///" + std::string(120, 'x');
  EXPECT_FALSE(ParseRedisAddress(long_path).has_value()) << "longer than sun_path";
  // Over a Unix socket there is no cluster: its nodes name each other by host and port.
  RedisStoreOptions both = *ParseRedisAddress("redis+unix:///r.sock");
  both.cluster_seeds = {"127.0.0.1:7000"};
  auto refused = OpenRedisStore(both);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("Unix socket"), std::string::npos);
}

// Addresses reach logs and error messages; their credentials must not.
TEST(RedisAddress, CredentialsAreRedactedForLogsAndErrors) {
  EXPECT_EQ(RedactRedisAddress("redis+unix://alice:p@ss/w@/run/redis.sock?db=2"),
            "redis+unix://***@/run/redis.sock?db=2");
  EXPECT_EQ(RedactRedisAddress("redis+unix://:pw@/tmp/a@b/r.sock"),
            "redis+unix://***@/tmp/a@b/r.sock")
      << "the path keeps its own '@'";
  EXPECT_EQ(RedactRedisAddress("redis+unix:///tmp/a@b/r.sock"), "redis+unix:///tmp/a@b/r.sock");
  EXPECT_EQ(RedactRedisAddress("redis+unix://secret@relative.sock"),
            "redis+unix://***@relative.sock")
      << "malformed, the password is hidden all the same";
  auto bad_unix = ParseRedisAddress("redis+unix://:hunter2@/r.sock?db=x");
  ASSERT_FALSE(bad_unix.has_value());
  EXPECT_EQ(bad_unix.error().message.find("hunter2"), std::string::npos)
      << bad_unix.error().message;
  EXPECT_EQ(RedactRedisAddress("redis://:s3cret@127.0.0.1:6379/2"), "redis://***@127.0.0.1:6379/2");
  EXPECT_EQ(RedactRedisAddress("redis://alice:pw@h:1"), "redis://***@h:1");
  EXPECT_EQ(RedactRedisAddress("redis+cluster://u:p@a:7000,b:7001"),
            "redis+cluster://***@a:7000,b:7001");
  EXPECT_EQ(RedactRedisAddress("redis://u:p@ss/w@rd@h:1"), "redis://***@h:1")
      << "a password holding '@' and '/' is hidden whole";
  EXPECT_EQ(RedactRedisAddress("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
  EXPECT_EQ(RedactRedisAddress("memory"), "memory");
  // A refused address is named in the error without its password.
  auto bad = ParseRedisAddress("redis://:hunter2@host:99999");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message.find("hunter2"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("redis://***@host:99999"), std::string::npos)
      << bad.error().message;
}

// A Redis that refuses connections costs a caller nothing: each decision is degraded at once,
// each connection tries again at most every min_backoff (25 ms), and the breaker, which exists to
// spare callers timeouts, stays closed. So when Redis is back the first decision after that pace
// is real; the store's clock is frozen here, so a breaker left open would never let one through.
TEST(RedisStoreDown, ARefusingRedisIsRetriedAtAPaceAndNeverOpensTheBreaker) {
  testing::RedisServer server;
  const int port = server.port();
  server.Stop();
  ManualClock clock(FromNanos(1'000'000'000));
  RedisStoreOptions o;
  o.port = port;
  o.connections = 1;
  o.breaker_failures = 3;
  o.breaker_open_for = milliseconds(500);
  o.clock = &clock;
  auto limiter = MakeRedisLimiter({Algorithm::kTokenBucket, 10, seconds(1), 10, false}, o);
  ASSERT_TRUE(limiter.has_value());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE((*limiter)->Decide("k", clock.Now(), 1).degraded);
  StoreStats s = (*limiter)->Stats();
  EXPECT_EQ(s.short_circuited, 0u) << "the breaker stayed closed";
  EXPECT_EQ(s.store_errors, 100u);
  ASSERT_TRUE(server.Restart());
  const auto deadline = std::chrono::steady_clock::now() + seconds(5);
  bool answered = false;
  while (!answered && std::chrono::steady_clock::now() < deadline) {
    answered = !(*limiter)->Decide("k", clock.Now(), 1).degraded;
  }
  EXPECT_TRUE(answered) << "a decision after Redis came back was real";
}

TEST_F(RedisStore, OneThreadKeepsManyAsyncDecisionsInFlight) {
  RedisStoreOptions o = Options("inflight");
  o.connections = 1;
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter({Algorithm::kFixedWindow, 100, seconds(60), 0, false},
                                       "inflight", false);
  ASSERT_TRUE(limiter.has_value());
  // The script cache is emptied first: the first calls load it, later ones reload by EVAL.
  auto c = Client();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Command({"SCRIPT", "FLUSH"}).has_value());
  const Timestamp now = FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000);
  constexpr int kCalls = 1000;
  std::atomic<int> answered{0}, admitted{0};
  std::promise<void> all;
  for (int i = 0; i < kCalls; ++i) {
    (*limiter)->DecideAsync("one-key", now, 1, [&](const Decision& d) {
      EXPECT_FALSE(d.degraded);
      admitted.fetch_add(d.allowed ? 1 : 0);
      if (answered.fetch_add(1) + 1 == kCalls) all.set_value();
    });
  }
  all.get_future().wait();
  EXPECT_EQ(admitted.load(), 100) << "exactly the limit, however many were in flight";
  const RedisStoreStats stats = (*store)->RedisStats();
  EXPECT_GT(static_cast<double>(stats.requests) / static_cast<double>(stats.batches), 2.0)
      << "the calls were pipelined: " << stats.requests << " commands in " << stats.batches
      << " writes";
}

// Whether what `watch` points at is destroyed within `limit` (polled: it goes on another thread).
bool GoneWithin(const std::weak_ptr<int>& watch, std::chrono::steady_clock::duration limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!watch.expired()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// What a callback holds goes as soon as it has answered, though nothing else is sent (no monitor,
// one connection): not at the connection's next wake, which may never come. A caller's capture
// may be the store and its layers, whose clock the caller frees once it let go of them.
TEST_F(RedisStore, AnAnsweredCallbackIsReleasedWithoutFurtherTraffic) {
  RedisStoreOptions o = Options("released");
  o.connections = 1;
  o.monitor_interval = milliseconds(0);
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter({Algorithm::kTokenBucket, 10, seconds(1), 10, false},
                                       "released", false);
  ASSERT_TRUE(limiter.has_value());
  const Timestamp now = FromNanos(int64_t{1'000'000'000});
  for (bool all : {false, true}) {
    auto held = std::make_shared<int>(0);
    const std::weak_ptr<int> watch = held;
    std::promise<Decision> answered;
    if (all) {
      const LimitCheck check{.limiter = limiter->get(), .key = "k", .cost = 1};
      (*store)->DecideAllAsync(std::span(&check, 1), now,
                               [held = std::move(held), &answered](std::span<const Decision> out) {
                                 answered.set_value(out[0]);
                               });
    } else {
      (*limiter)->DecideAsync("k", now, 1, [held = std::move(held), &answered](const Decision& d) {
        answered.set_value(d);
      });
    }
    const Decision d = answered.get_future().get();
    EXPECT_FALSE(d.degraded);
    EXPECT_TRUE(d.allowed);
    EXPECT_TRUE(GoneWithin(watch, seconds(10)))
        << (all ? "DecideAllAsync" : "DecideAsync")
        << ": the callback's capture was still held 10 s after it answered";
  }
}

// A store's options (its event hook's capture) go last when it is destroyed: `alive` expires once
// the store is gone in full.
RedisStoreOptions WatchedOptions(int port, std::weak_ptr<int>& alive) {
  RedisStoreOptions o;
  o.port = port;
  o.use_server_time = false;
  o.connections = 1;
  o.command_timeout = seconds(10);  // the answer waits for the paused server
  auto token = std::make_shared<int>(0);
  alive = token;
  o.on_event = [token = std::move(token)](const RedisEvent&) {};
  return o;
}

// The last reference to a Redis store can go on the store's own connection thread: a callback
// that holds a limiter (as a refund given back in the background holds the store) answers after
// its owner let go. The store is then destroyed in full, promptly, and not on that thread, whose
// connection's destructor would join itself (std::system_error, abort).
TEST(RedisStoreLifetime, ALastReferenceDroppedOnItsOwnConnectionThreadDestroysTheStore) {
  testing::RedisServer server;
  std::weak_ptr<int> alive;
  std::shared_ptr<sluice::RedisStore> store;
  {
    auto opened = OpenRedisStore(WatchedOptions(server.port(), alive));
    ASSERT_TRUE(opened.has_value());
    store = std::move(*opened);
  }
  auto made =
      store->MakeLimiter({Algorithm::kTokenBucket, 10, seconds(1), 10, false}, "last", false);
  ASSERT_TRUE(made.has_value());
  std::shared_ptr<Limiter> limiter = std::move(*made);
  const Timestamp now = FromNanos(int64_t{1'000'000'000});
  ASSERT_FALSE(limiter->Decide("k", now, 1).degraded);  // connected, script loaded
  // Redis answers only once the caller has let go: the callback then holds the last reference.
  server.Pause();
  std::atomic<bool> answered{false};
  limiter->DecideAsync("k", now, 1, [limiter, &answered](const Decision&) { answered = true; });
  limiter.reset();
  store.reset();
  server.Resume();
  EXPECT_TRUE(GoneWithin(alive, seconds(20))) << "the store was not destroyed";
  EXPECT_TRUE(answered.load());
}

// The same through the leased layer, as at sluiced's shutdown: the leased limiter that goes gives
// its units back in the background, and that refund holds the Redis store after everyone else
// let go of it.
TEST(RedisStoreLifetime, LeasesGivenBackAfterEveryOwnerLetGoDestroyTheStore) {
  testing::RedisServer server;
  std::weak_ptr<int> alive;
  std::shared_ptr<Store> leased;
  {
    auto redis = OpenRedisStore(WatchedOptions(server.port(), alive));
    ASSERT_TRUE(redis.has_value());
    auto opened = OpenLeasedStore(*redis, {.scheduler = testing::IdleScheduler()});
    ASSERT_TRUE(opened.has_value());
    leased = std::move(*opened);
  }
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 100'000, .period = hours(1)};
  auto limiter = leased->MakeLimiter(spec, {.id = "leased", .sync = {.mode = SyncMode::kLeased}});
  ASSERT_TRUE(limiter.has_value());
  // A hot key (1000 requests a second) takes units ahead; the takes are answered in the background.
  const Timestamp start = FromNanos(int64_t{1'000'000'000});
  for (int i = 0; i < 5000 && (*limiter)->Stats().lease_units_held == 0; ++i) {
    ASSERT_FALSE((*limiter)->Decide("k", start + milliseconds(i), 1).degraded);
  }
  ASSERT_GT((*limiter)->Stats().lease_units_held, 0) << "no units held: nothing to give back";
  server.Pause();
  limiter->reset();  // its units go back in the background, answered once Redis resumes
  leased.reset();
  server.Resume();
  EXPECT_TRUE(GoneWithin(alive, seconds(20))) << "the store was not destroyed";
}

// AUTH with a password, and with an ACL user, against servers that require them.
TEST(RedisAuth, PasswordAndAclUserAreSentAndAWrongOneFailsByPolicy) {
  testing::RedisServer server(
      {"--requirepass", "s3cret", "--user", "alice", "on", ">alicepw", "~*", "&*", "+@all"});
  const LimitSpec spec{Algorithm::kTokenBucket, 10, seconds(1), 10, false};
  for (const std::string& address :
       {"redis://:s3cret@127.0.0.1:" + std::to_string(server.port()),
        "redis://alice:alicepw@127.0.0.1:" + std::to_string(server.port())}) {
    auto options = ParseRedisAddress(address);
    ASSERT_TRUE(options.has_value());
    auto limiter = MakeRedisLimiter(spec, *options);
    ASSERT_TRUE(limiter.has_value());
    const Decision d = (*limiter)->Decide("k", {}, 1);
    EXPECT_FALSE(d.degraded) << address;
    EXPECT_TRUE(d.allowed);
  }
  auto wrong = ParseRedisAddress("redis://alice:nope@127.0.0.1:" + std::to_string(server.port()));
  ASSERT_TRUE(wrong.has_value());
  wrong->fail_open = false;
  auto limiter = MakeRedisLimiter(spec, *wrong);
  ASSERT_TRUE(limiter.has_value());
  const Decision d = (*limiter)->Decide("k", {}, 1);
  EXPECT_TRUE(d.degraded);
  EXPECT_FALSE(d.allowed);
}

}  // namespace
}  // namespace sluice
