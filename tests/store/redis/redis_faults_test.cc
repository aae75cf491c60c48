// Redis faults that used to go unnoticed or cost degraded decisions (issue 11, items 2, 5, 6),
// against real redis-servers: an eviction policy that can drop counters, evicted keys, a restart
// that leaves every pooled connection stale, a command that may have run when its connection
// failed, and the events (for the log) of each state change.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sluice/clock.h"
#include "sluice/redis_store.h"
#include "sluice/scheduler.h"
#include "store/idle_scheduler.h"
#include "store/redis/redis_client.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;
using Kind = RedisEventKind;

constexpr LimitSpec kHourly{Algorithm::kFixedWindow, 1000, std::chrono::hours(1), 0, false};

// Collects a store's events; thread-safe (they come from I/O and monitor threads).
class Events {
 public:
  RedisEventHook hook() {
    return [this](const RedisEvent& e) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(e);
      cv_.notify_all();
    };
  }
  // The first event of `kind`, waiting up to `timeout` for it.
  std::optional<RedisEvent> WaitFor(Kind kind, milliseconds timeout = milliseconds(5000)) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<RedisEvent> found;
    cv_.wait_for(lock, timeout, [&] {
      for (const RedisEvent& e : seen_) {
        if (e.kind == kind) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::vector<RedisEvent> All() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RedisEvent> seen_;
};

RedisStoreOptions OptionsFor(int port) {
  RedisStoreOptions o;
  o.port = port;
  o.connections = 4;
  o.command_timeout = milliseconds(300);
  o.breaker_failures = 2;
  o.breaker_open_for = milliseconds(60'000);  // only the monitor can close it in these tests
  return o;
}

std::unique_ptr<internal::RedisClient> Client(int port) {
  auto c = internal::RedisClient::Connect("127.0.0.1", port, milliseconds(500), seconds(5));
  if (!c) throw std::runtime_error(c.error().message);
  return std::move(*c);
}

uint64_t InfoNumber(internal::RedisClient& c, const std::string& section, const std::string& key) {
  auto info = c.Command({"INFO", section});
  if (!info) return 0;
  const size_t at = info->str.find(key + ":");
  return at == std::string::npos ? 0 : std::stoull(info->str.substr(at + key.size() + 1));
}

// ---- item 2: eviction ----

struct PolicyCase {
  std::string policy;
  std::string maxmemory;
  bool unsafe;  // the oracle: docs/redis.md, "Redis settings"
};

void PrintTo(const PolicyCase& c, std::ostream* os) {
  *os << c.policy << " with maxmemory " << c.maxmemory << (c.unsafe ? ": unsafe" : ": safe");
}

class EvictionPolicy : public ::testing::TestWithParam<PolicyCase> {};

// Every sluice key has a TTL, so the volatile-* policies (which evict keys with a TTL) can drop
// counters as surely as allkeys-*; only noeviction, or no maxmemory at all, keeps them.
INSTANTIATE_TEST_SUITE_P(Policies, EvictionPolicy,
                         ::testing::Values(PolicyCase{"noeviction", "3mb", false},
                                           PolicyCase{"allkeys-lru", "3mb", true},
                                           PolicyCase{"allkeys-lfu", "3mb", true},
                                           PolicyCase{"allkeys-random", "3mb", true},
                                           PolicyCase{"volatile-lru", "3mb", true},
                                           PolicyCase{"volatile-lfu", "3mb", true},
                                           PolicyCase{"volatile-random", "3mb", true},
                                           PolicyCase{"volatile-ttl", "3mb", true},
                                           PolicyCase{"allkeys-lru", "0", false}),
                         [](const auto& test) {
                           std::string name = test.param.policy + "_" + test.param.maxmemory;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST_P(EvictionPolicy, IsReadAtStartAndJudged) {
  testing::RedisServer server(
      {"--maxmemory", GetParam().maxmemory, "--maxmemory-policy", GetParam().policy});
  Events events;
  ManualClock clock;
  auto scheduler = std::make_shared<ManualScheduler>(clock);
  RedisStoreOptions o = OptionsFor(server.port());
  o.scheduler = scheduler;
  o.on_event = events.hook();
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  EXPECT_FALSE((*store)->Stats().server_eviction_watched) << "not read yet";
  scheduler->RunDue();  // the monitor's first round: due at once
  const StoreStats s = (*store)->Stats();
  EXPECT_TRUE(s.server_eviction_watched);
  EXPECT_EQ(s.server_eviction_unsafe, GetParam().unsafe);
  auto e = events.WaitFor(Kind::kEvictionPolicy, milliseconds(0));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->unsafe, GetParam().unsafe);
  EXPECT_NE(e->message.find("maxmemory-policy " + GetParam().policy), std::string::npos)
      << e->message;
  EXPECT_NE(e->message.find("127.0.0.1:" + std::to_string(server.port())), std::string::npos);
  EXPECT_TRUE((*store)->Ready()) << "an unsafe policy does not make the store unready";
}

TEST(RedisEviction, APolicyChangedAtRuntimeIsReportedAndTheGaugeFollows) {
  testing::RedisServer server({"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"});
  Events events;
  ManualClock clock;
  auto scheduler = std::make_shared<ManualScheduler>(clock);
  RedisStoreOptions o = OptionsFor(server.port());
  o.on_event = events.hook();
  o.scheduler = scheduler;  // and its clock
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  scheduler->RunDue();  // the first round, at start
  EXPECT_FALSE((*store)->Stats().server_eviction_unsafe);
  ASSERT_TRUE(Client(server.port())->Command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}));
  scheduler->Advance(o.monitor_interval);  // the next round
  EXPECT_TRUE((*store)->Stats().server_eviction_unsafe) << "the gauge at once";
  // The report of the change is rate-limited with the first one (event_interval, 10 s): it is
  // held, and told in the first round after the interval.
  scheduler->Advance(seconds(10));
  int reports = 0;
  bool last_unsafe = false;
  for (const RedisEvent& e : events.All()) {
    if (e.kind != Kind::kEvictionPolicy) continue;
    ++reports;
    last_unsafe = e.unsafe;
  }
  EXPECT_EQ(reports, 2) << "at start and on the change";
  EXPECT_TRUE(last_unsafe);
  scheduler->Advance(seconds(1));
  EXPECT_EQ(events.All().size(), 2u + 1u) << "no change, no event (the other: connected)";
}

// Evicted keys are counted as Redis counts them (INFO stats evicted_keys, the oracle), from the
// first reading on, and reported.
TEST(RedisEviction, EvictedKeysAreCountedAndReported) {
  testing::RedisServer server({"--maxmemory", "3mb", "--maxmemory-policy", "allkeys-random"});
  Events events;
  RedisStoreOptions o = OptionsFor(server.port());
  o.scheduler = testing::IdleScheduler();  // no monitor: only what the test calls
  o.on_event = events.hook();
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kHourly, "evict", true);
  ASSERT_TRUE(limiter.has_value());
  (*store)->MonitorOnce();
  auto client = Client(server.port());
  const uint64_t before = InfoNumber(*client, "stats", "evicted_keys");
  // Sluice counters, then other data past maxmemory: Redis evicts at random, counters too.
  for (int i = 0; i < 200; ++i)
    ASSERT_FALSE((*limiter)->Decide("k" + std::to_string(i), {}, 1).degraded);
  const std::string blob(16 * 1024, 'x');
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(client->Command({"SET", "filler:" + std::to_string(i), blob}).has_value());
  }
  const uint64_t after = InfoNumber(*client, "stats", "evicted_keys");
  ASSERT_GT(after, before) << "the filler must have pushed Redis past maxmemory";
  (*store)->MonitorOnce();
  EXPECT_EQ((*store)->Stats().server_evicted_keys, after - before);
  auto e = events.WaitFor(Kind::kKeysEvicted, milliseconds(0));
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("evicted " + std::to_string(after - before) + " keys"),
            std::string::npos)
      << e->message;
}

// ---- item 5: stale connections after a restart ----

// Decides `n` times on distinct keys; returns how many were degraded.
int DegradedOf(Limiter& limiter, int n, const std::string& prefix) {
  int degraded = 0;
  for (int i = 0; i < n; ++i)
    degraded += limiter.Decide(prefix + std::to_string(i), {}, 1).degraded;
  return degraded;
}

// The case: Redis restarts while sluice is quiet. Every pooled connection is stale; none
// may cost a degraded decision once Redis accepts connections again, and the store is ready.
TEST(RedisRestart, NoDegradedDecisionOnceRedisIsBackAfterAQuietRestart) {
  for (bool fail_open : {true, false}) {
    SCOPED_TRACE(fail_open ? "fail_open" : "fail_closed");
    testing::RedisServer server;
    auto store = OpenRedisStore(OptionsFor(server.port()));
    ASSERT_TRUE(store.has_value());
    auto limiter = (*store)->MakeLimiter(kHourly, "restart", fail_open);
    ASSERT_TRUE(limiter.has_value());
    ASSERT_EQ(DegradedOf(**limiter, 16, "warm"), 0) << "every pooled connection used";

    ASSERT_TRUE(server.Restart());  // returns once the new server answers PING
    const int degraded = DegradedOf(**limiter, 16, "after");
    EXPECT_EQ(degraded, 0);
    EXPECT_TRUE((*store)->Ready());
    // The decisions were real ones, on the new (empty) server.
    const Decision d = (**limiter).Decide("after0", {}, 1);
    EXPECT_FALSE(d.degraded);
    EXPECT_EQ(d.remaining, 1000 - 2);
  }
}

// With traffic during the outage the breaker opens; the monitor's PING closes it once Redis
// answers, so recovery does not wait for breaker_open_for (60 s here), and once the store is
// ready no decision is degraded.
TEST(RedisRestart, AfterAnOutageWithTrafficTheMonitorClosesTheBreaker) {
  for (bool fail_open : {true, false}) {
    SCOPED_TRACE(fail_open ? "fail_open" : "fail_closed");
    testing::RedisServer server;
    RedisStoreOptions o = OptionsFor(server.port());
    o.monitor_interval = milliseconds(100);
    auto store = OpenRedisStore(o);
    ASSERT_TRUE(store.has_value());
    auto limiter = (*store)->MakeLimiter(kHourly, "outage", fail_open);
    ASSERT_TRUE(limiter.has_value());
    ASSERT_EQ(DegradedOf(**limiter, 8, "warm"), 0);
    server.Stop();
    for (int i = 0; i < 10; ++i) {
      const Decision d = (**limiter).Decide("down", {}, 1);
      EXPECT_TRUE(d.degraded);
      EXPECT_EQ(d.allowed, fail_open);
    }
    EXPECT_FALSE((*store)->Ready());
    ASSERT_TRUE(server.Restart());
    const auto back = SteadyClock::now();
    while (!(*store)->Ready() && SteadyClock::now() - back < seconds(5)) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_LT(SteadyClock::now() - back, seconds(2)) << "the monitor, not the 60 s breaker";
    EXPECT_EQ(DegradedOf(**limiter, 16, "after"), 0);
  }
}

// A command whose connection failed after it was sent may have run: it is not sent again. Redis
// is hung (SIGSTOP) with the script in its socket; the call times out; when Redis wakes it runs
// the script once -- a store that retried on a fresh connection would have it run twice.
TEST(RedisRestart, ACommandThatMayHaveRunIsNotRetried) {
  testing::RedisServer server;
  RedisStoreOptions o = OptionsFor(server.port());
  o.connections = 1;
  o.scheduler = testing::IdleScheduler();  // no monitor: only what the test calls
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kHourly, "once", false);
  ASSERT_TRUE(limiter.has_value());
  ASSERT_FALSE((**limiter).Decide("k", {}, 1).degraded);
  const std::string key = RedisKeyFor("sluice", "once", "k");

  server.Pause();
  const Decision d = (**limiter).Decide("k", {}, 1);
  EXPECT_TRUE(d.degraded) << "timed out";
  EXPECT_FALSE(d.allowed) << "failed closed";
  server.Resume();
  // A connection made after the wake-up is served after what was already in Redis's sockets.
  // The window's hit count, the second of the key's packed numbers (redis_scripts.h).
  auto count = Client(server.port())
                   ->Command({"EVAL",
                              "local w, c = struct.unpack('<dd', redis.call('GET', KEYS[1])) "
                              "return c",
                              "1", key});
  ASSERT_TRUE(count.has_value());
  EXPECT_EQ(count->integer, 2) << "the first decision and the timed-out one, which ran once";
}

// ---- item 6: events for the log ----

TEST(RedisEvents, DownBreakerOpenRestoredAndBreakerClosedAreToldWithoutTheCredentials) {
  testing::RedisServer server({"--requirepass", "s3cret-pw"});
  Events events;
  RedisStoreOptions o = OptionsFor(server.port());
  o.password = "s3cret-pw";
  o.monitor_interval = milliseconds(100);
  o.event_interval = milliseconds(0);  // every event: this test is about their kinds
  o.on_event = events.hook();
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kHourly, "events", true);
  ASSERT_TRUE(limiter.has_value());
  EXPECT_TRUE(events.WaitFor(Kind::kConnected).has_value()) << "the monitor connects at start";
  server.Stop();
  for (int i = 0; i < 3; ++i) (**limiter).Decide("k", {}, 1);
  EXPECT_TRUE(events.WaitFor(Kind::kConnectionLost).has_value());
  ASSERT_TRUE(server.Restart());
  EXPECT_TRUE(events.WaitFor(Kind::kConnectionRestored).has_value());
  // Refusals cost nothing and leave the breaker closed; a hung Redis's timeouts open it.
  server.Pause();
  for (int i = 0; i < 3; ++i) (**limiter).Decide("k", {}, 1);
  EXPECT_TRUE(events.WaitFor(Kind::kBreakerOpened).has_value());
  server.Resume();
  EXPECT_TRUE(events.WaitFor(Kind::kBreakerClosed).has_value());
  const std::string where = "redis 127.0.0.1:" + std::to_string(server.port()) + ": ";
  for (const RedisEvent& e : events.All()) {
    EXPECT_TRUE(e.message.starts_with(where)) << e.message;
    EXPECT_EQ(e.message.find("s3cret"), std::string::npos) << e.message;
  }
}

TEST(RedisEvents, AWrongPasswordIsToldAtStartBeforeAnyRequest) {
  testing::RedisServer server({"--requirepass", "right"});
  Events events;
  RedisStoreOptions o = OptionsFor(server.port());
  o.password = "wrong-pw";
  o.on_event = events.hook();
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto e = events.WaitFor(Kind::kAuthFailed);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message.find("wrong-pw"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("WRONGPASS"), std::string::npos) << e->message;
  EXPECT_FALSE((*store)->Ready());
}

TEST(RedisEvents, ScriptErrorsAreToldAndRateLimited) {
  testing::RedisServer server;
  Events events;
  RedisStoreOptions o = OptionsFor(server.port());
  o.scheduler = testing::IdleScheduler();  // no monitor: only what the test calls
  o.on_event = events.hook();
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kHourly, "broken", false);
  ASSERT_TRUE(limiter.has_value());
  // A list where the limiter keeps a string: every script on it fails with WRONGTYPE.
  ASSERT_TRUE(Client(server.port())->Command({"RPUSH", RedisKeyFor("sluice", "broken", "k"), "x"}));
  for (int i = 0; i < 50; ++i) EXPECT_TRUE((**limiter).Decide("k", {}, 1).degraded);
  int told = 0;
  for (const RedisEvent& e : events.All()) {
    if (e.kind != Kind::kCommandError) continue;
    ++told;
    EXPECT_NE(e.message.find("WRONGTYPE"), std::string::npos) << e.message;
  }
  EXPECT_EQ(told, 1) << "50 failures, one line per event_interval (10 s)";
}

}  // namespace
}  // namespace sluice
