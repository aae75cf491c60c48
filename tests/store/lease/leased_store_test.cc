// The leased store (sluice/leased_store.h): nodes that admit from units of quota taken ahead of
// use. Oracles: the pure algorithms (a quiet key must be decided exactly as they decide), the
// limit itself (the nodes together never admit more than capacity + refill), and the shared
// store's own count of what is left.
#include "sluice/leased_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sluice/clock.h"
#include "sluice/fixed_window.h"
#include "sluice/memory_store.h"
#include "sluice/redis_store.h"
#include "sluice/scheduler.h"
#include "sluice/token_bucket.h"
#include "store/idle_scheduler.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Timestamp kStart = FromNanos(int64_t{1'800'000'000'000} * 1'000'000);  // hour-aligned

constexpr QuotaSync kLeased{.mode = SyncMode::kLeased, .lease_ttl = seconds(2)};

std::shared_ptr<RedisStore> OpenRedis(const std::string& prefix, bool server_time) {
  RedisStoreOptions o;
  o.port = testing::SharedRedisServer().port();
  o.use_server_time = server_time;
  o.command_timeout = milliseconds(2000);
  o.scheduler = testing::IdleScheduler();  // no monitor
  o.key_prefix = prefix;
  auto redis = OpenRedisStore(o);
  EXPECT_TRUE(redis.has_value()) << (redis ? "" : redis.error().message);
  return redis ? *redis : nullptr;
}

// A leased store whose leases are given back when `scheduler` runs its sweep: by default never
// (an idle ManualScheduler); a ManualScheduler the test advances; or, given only a clock, a
// ThreadScheduler of the store's own on it (real time).
std::shared_ptr<LeasedStore> Leased(std::shared_ptr<Store> inner,
                                    std::shared_ptr<Scheduler> scheduler = nullptr,
                                    const Clock* clock = nullptr) {
  if (scheduler == nullptr && clock == nullptr) scheduler = testing::IdleScheduler();
  auto store = OpenLeasedStore(std::move(inner), {.clock = clock, .scheduler = scheduler});
  EXPECT_TRUE(store.has_value());
  return store ? *store : nullptr;
}

std::unique_ptr<Limiter> Make(Store& store, const LimitSpec& spec, const QuotaSync& sync,
                              const std::string& id = "lim") {
  auto limiter = store.MakeLimiter(spec, {.id = id, .fail_open = false, .sync = sync});
  EXPECT_TRUE(limiter.has_value()) << (limiter ? "" : limiter.error().message);
  return limiter ? std::move(*limiter) : nullptr;
}

// The limit as the shared store has it for key "k": a lease request that takes nothing, which a
// leased limiter passes to the store behind it.
LeaseGrant Take(Limiter& l, std::string_view key, Timestamp now, const LeaseRequest& request) {
  std::promise<LeaseGrant> grant;
  l.TakeAsync(key, now, request, [&](const LeaseGrant& g) { grant.set_value(g); });
  auto future = grant.get_future();
  EXPECT_EQ(future.wait_for(seconds(10)), std::future_status::ready);
  return future.get();
}

int64_t Shared(Limiter& l, Timestamp now) {
  return Take(l, "k", now, {.cost = 0, .want = 0, .holder = "peek"}).decision.remaining;
}

// A quiet key -- one request every few seconds -- takes nothing ahead: every field of every
// decision is the pure token bucket's.
TEST(LeasedStore, AQuietKeyIsDecidedExactly) {
  const LimitSpec spec{.algorithm = Algorithm::kTokenBucket, .limit = 2, .period = seconds(10)};
  auto memory = OpenMemoryStore({});
  ASSERT_TRUE(memory.has_value());
  auto store = Leased(*memory);
  auto limiter = Make(*store, spec, kLeased);
  const TokenBucket oracle = *TokenBucket::Create(spec);
  TokenBucket::State state = oracle.Initial(kStart);
  for (int i = 0; i < 40; ++i) {
    const Timestamp now = kStart + milliseconds(1700) * i;
    const int64_t cost = 1 + i % 2;
    const Decision want = oracle.Decide(state, now, cost);
    const Decision got = limiter->Decide("k", now, cost);
    EXPECT_EQ(got.allowed, want.allowed) << i;
    EXPECT_EQ(got.remaining, want.remaining) << i;
    EXPECT_EQ(got.retry_after, want.retry_after) << i;
    EXPECT_EQ(got.reset_after, want.reset_after) << i;
  }
  EXPECT_EQ(limiter->Stats().leases_taken, 0u);
  EXPECT_EQ(limiter->Stats().leased_decisions, 0u);
}

// A hot key is mostly decided from units held, which the shared store shows as taken; when the
// lease expires they go back, and the shared store has exactly the capacity minus what was
// admitted.
TEST(LeasedStore, AHotKeySpendsLeasesAndGivesBackWhatItDidNotSpend) {
  // 1,000,000 per hour: no refill to speak of within the test's few simulated seconds... but
  // exactly 277 per second; the oracle accounts for it.
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 100'000, .period = hours(1)};
  auto memory = OpenMemoryStore({});
  ASSERT_TRUE(memory.has_value());
  ManualClock clock(kStart);
  auto scheduler = std::make_shared<ManualScheduler>(clock);
  auto store = Leased(*memory, scheduler);
  auto limiter = Make(*store, spec, kLeased);
  int64_t admitted = 0;
  // 10,000 requests per second for one second.
  for (int i = 0; i < 10'000; ++i) {
    clock.Set(kStart + std::chrono::microseconds(100) * i);
    admitted += limiter->Decide("k", clock.Now(), 1).allowed;
  }
  EXPECT_EQ(admitted, 10'000);
  const StoreStats stats = limiter->Stats();
  EXPECT_GT(stats.leases_taken, 0u);
  EXPECT_GT(stats.leased_decisions, 9'000u) << "most decisions from the units held";
  EXPECT_GT(stats.lease_units_held, 0);
  // The shared count is what was admitted plus what this node holds.
  EXPECT_EQ(Shared(*limiter, clock.Now()), spec.limit - admitted - stats.lease_units_held);
  // The lease ends: the store's sweep gives its units back.
  scheduler->Advance(seconds(3));
  EXPECT_EQ(limiter->Stats().lease_units_held, 0);
  EXPECT_GE(limiter->Stats().leases_expired, 1u);
  EXPECT_EQ(Shared(*limiter, clock.Now()), spec.limit - admitted);
}

// Over its limit, a key is refused from memory until the retry time the shared store gave, and
// then asks again.
TEST(LeasedStore, OverTheLimitAKeyIsRefusedLocallyUntilTheRetryTime) {
  const LimitSpec spec{.algorithm = Algorithm::kTokenBucket, .limit = 10, .period = seconds(10)};
  auto memory = OpenMemoryStore({});
  ASSERT_TRUE(memory.has_value());
  auto store = Leased(*memory);
  auto limiter = Make(*store, spec, kLeased);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(limiter->Decide("k", kStart, 1).allowed);
  const Decision first = limiter->Decide("k", kStart, 1);
  ASSERT_FALSE(first.allowed);
  EXPECT_EQ(first.retry_after, seconds(1));
  const uint64_t local_before = limiter->Stats().leased_decisions;
  for (int i = 0; i < 100; ++i) {
    const Decision d = limiter->Decide("k", kStart + milliseconds(5 * i), 1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after, seconds(1) - milliseconds(5 * i));
  }
  EXPECT_EQ(limiter->Stats().leased_decisions - local_before, 100u);
  EXPECT_TRUE(limiter->Decide("k", kStart + seconds(1), 1).allowed);
}

// A request refused by another limit keeps nothing of a leased one: the admission goes back
// into the units held, and the shared store is untouched by it.
TEST(LeasedStore, ARefusedRequestKeepsNothing) {
  const LimitSpec big{.algorithm = Algorithm::kTokenBucket, .limit = 1000, .period = hours(1)};
  const LimitSpec small{.algorithm = Algorithm::kTokenBucket, .limit = 1, .period = hours(1)};
  auto memory = OpenMemoryStore({});
  ASSERT_TRUE(memory.has_value());
  auto store = Leased(*memory);
  auto leased = Make(*store, big, kLeased, "big");
  auto exact = Make(*store, small, QuotaSync{}, "small");
  const LimitCheck both[] = {{leased.get(), "k", 5}, {exact.get(), "k", 1}};
  Decision out[2];
  store->DecideAll(both, kStart, out);
  EXPECT_TRUE(out[0].allowed && out[1].allowed);
  store->DecideAll(both, kStart, out);
  EXPECT_TRUE(out[0].allowed);
  EXPECT_FALSE(out[1].allowed);
  EXPECT_EQ(Shared(*leased, kStart), 995) << "the refused request's 5 came back";
}

// Under-admission, measured: a node that stops getting a key's traffic holds its units idle until
// its lease ends -- at most 1.5 targets, a target being its rate over the horizon (docs/redis.md,
// "Leased", Bounds) -- and then gives them back to the node still serving the key.
TEST(LeasedStore, UnitsIdleOnAQuietNodeAreBoundedAndComeBackAtExpiry) {
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 100'000, .period = hours(1)};
  auto memory = OpenMemoryStore({});
  ASSERT_TRUE(memory.has_value());
  ManualClock clock(kStart);
  auto scheduler = std::make_shared<ManualScheduler>(clock);
  // Node A; every other node sees the shared counter, which Shared() reads.
  auto store_a = Leased(*memory, scheduler);
  auto a = Make(*store_a, spec, kLeased);
  // 10,000 a second for half a second on node A.
  int64_t a_admitted = 0;
  for (int i = 0; i < 5000; ++i) {
    clock.Set(kStart + std::chrono::microseconds(100) * i);
    a_admitted += a->Decide("k", clock.Now(), 1).allowed;
  }
  ASSERT_EQ(a_admitted, 5000);
  const int64_t idle = a->Stats().lease_units_held;
  // The target: 10,000/s over the horizon, min(2s / 4, 250ms): 2,500 units; at most 1.5 of it.
  EXPECT_GT(idle, 0);
  EXPECT_LE(idle, 3750);
  // What the shared counter has left for every other node while A holds them.
  EXPECT_EQ(Shared(*a, clock.Now()), spec.limit - a_admitted - idle);
  scheduler->Advance(seconds(3));  // the sweep runs every 20 ms of it
  EXPECT_EQ(Shared(*a, clock.Now()), spec.limit - a_admitted) << "the idle units came back";
  std::printf("node A held %lld idle units for its lease\n", static_cast<long long>(idle));
}

// A burst after a quiet spell gets exactly what the pure bucket gives (issue 24's smallest case:
// token bucket 10/s, burst 20; a node holding a lease, nothing for 1.9 s, then a burst). Units
// held while the bucket refilled are usable only until the bucket with them would be full again:
// past that they go back before Redis is asked, and the burst is decided on the whole quota.
TEST(LeasedStore, ABurstAfterAQuietSpellGetsWhatThePureBucketGives) {
  const LimitSpec spec{
      .algorithm = Algorithm::kTokenBucket, .limit = 10, .period = seconds(1), .burst = 20};
  auto memory = OpenMemoryStore({});
  ASSERT_TRUE(memory.has_value());
  auto store = Leased(*memory);  // no sweep: expiry is the requests' business
  auto limiter = Make(*store, spec, kLeased);
  const TokenBucket oracle = *TokenBucket::Create(spec);
  TokenBucket::State state = oracle.Initial(kStart);
  int burst_admitted = 0, pure_burst_admitted = 0;
  const auto decide = [&](Timestamp now, int* admitted, int* pure) {
    const Decision want = oracle.Decide(state, now, 1);
    const Decision got = limiter->Decide("k", now, 1);
    EXPECT_EQ(got.allowed, want.allowed) << "at +" << (now - kStart).count() << " ns";
    if (admitted != nullptr) *admitted += got.allowed;
    if (pure != nullptr) *pure += want.allowed;
  };
  // 50 a second for 200 ms: hot enough for a lease.
  for (int i = 0; i < 10; ++i) decide(kStart + milliseconds(20) * i, nullptr, nullptr);
  ASSERT_GT(limiter->Stats().lease_units_held, 0) << "the node should hold a lease";
  // Quiet until +1.9 s (within lease_ttl), then 40 at once.
  const Timestamp burst = kStart + milliseconds(1900);
  for (int i = 0; i < 40; ++i) decide(burst, &burst_admitted, &pure_burst_admitted);
  EXPECT_EQ(burst_admitted, pure_burst_admitted);
  EXPECT_EQ(pure_burst_admitted, 20) << "the pure bucket is full again";
}

// A lease ends in the requests' time, whether or not a sweep ran: the next request past its
// end gives the units back before it asks again, and the new grant does not revive them.
TEST(LeasedStore, AnExpiredLeaseGoesBackAtTheNextRequestWithoutASweep) {
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 100'000, .period = hours(1)};
  auto memory = OpenMemoryStore({});
  ASSERT_TRUE(memory.has_value());
  auto store = Leased(*memory);  // an idle scheduler: the sweep never runs
  auto limiter = Make(*store, spec, kLeased);
  int64_t admitted = 0;
  for (int i = 0; i < 10'000; ++i) {
    admitted += limiter->Decide("k", kStart + std::chrono::microseconds(100) * i, 1).allowed;
  }
  const int64_t held = limiter->Stats().lease_units_held;
  ASSERT_GT(held, 0);
  ASSERT_EQ(limiter->Stats().leases_expired, 0u);
  // 3 s later (lease_ttl 2 s): one request.
  const Timestamp late = kStart + seconds(4);
  admitted += limiter->Decide("k", late, 1).allowed;
  const StoreStats after = limiter->Stats();
  EXPECT_EQ(after.leases_expired, 1u) << "the expired lease was given back by the request";
  // The shared count is what was admitted and what the node holds now: the old units came back.
  EXPECT_EQ(Shared(*limiter, late), spec.limit - admitted - after.lease_units_held);
  EXPECT_EQ(after.lease_returns, 1u);
  // At most 1.5 targets of 10,000/s over 250 ms (Bounds): the old units are not among them.
  EXPECT_LE(after.lease_units_held, 3750) << "the new grant revived the old units";
}

// Leasing needs an algorithm whose admissions are units of one count.
TEST(LeasedStore, RefusesAlgorithmsThatCannotLend) {
  auto memory = OpenMemoryStore({});
  ASSERT_TRUE(memory.has_value());
  auto store = Leased(*memory);
  for (Algorithm a : {Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter}) {
    const LimitSpec spec{.algorithm = a, .limit = 10, .period = seconds(1)};
    auto limiter = store->MakeLimiter(spec, {.id = "x", .sync = kLeased});
    ASSERT_FALSE(limiter.has_value());
    EXPECT_NE(limiter.error().message.find("sync mode leased needs"), std::string::npos);
  }
  const LimitSpec shaper{
      .algorithm = Algorithm::kLeakyBucket, .limit = 10, .period = seconds(1), .shaper = true};
  EXPECT_FALSE(store->MakeLimiter(shaper, {.id = "x", .sync = kLeased}).has_value());
}

// Three nodes on one Redis, each hammered from several threads for a few hundred ms: together
// they admit at most capacity + what refilled, whatever the algorithm, and most decisions are
// local. Redis's clock decides (the real deployment).
struct Hammered {
  int64_t admitted = 0;
  uint64_t local = 0;
  uint64_t decisions = 0;
};

Hammered Hammer(const LimitSpec& spec, const std::string& prefix, milliseconds run_for) {
  constexpr int kNodes = 3;
  constexpr int kThreadsPerNode = 3;
  MonotonicClock clock;
  std::vector<std::shared_ptr<LeasedStore>> nodes;
  std::vector<std::unique_ptr<Limiter>> limiters;
  for (int n = 0; n < kNodes; ++n) {
    // Real time: the leases expire by Redis's clock, which the test cannot drive.
    nodes.push_back(Leased(OpenRedis(prefix, /*server_time=*/true), nullptr, &clock));
    limiters.push_back(
        Make(*nodes.back(), spec, {.mode = SyncMode::kLeased, .lease_ttl = milliseconds(400)}));
  }
  std::atomic<int64_t> admitted{0};
  std::atomic<uint64_t> decisions{0};
  std::vector<std::thread> threads;
  const auto until = std::chrono::steady_clock::now() + run_for;
  for (int n = 0; n < kNodes; ++n) {
    for (int t = 0; t < kThreadsPerNode; ++t) {
      threads.emplace_back([&, n] {
        while (std::chrono::steady_clock::now() < until) {
          admitted += limiters[n]->Decide("hot", clock.Now(), 1).allowed;
          ++decisions;
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  Hammered h;
  h.admitted = admitted.load();
  h.decisions = decisions.load();
  for (auto& l : limiters) h.local += l->Stats().leased_decisions;
  return h;
}

class LeasedOnRedis : public ::testing::TestWithParam<Algorithm> {};

TEST_P(LeasedOnRedis, ThreeNodesNeverAdmitBeyondTheLimit) {
  // 2,000 per hour (burst 2,000): in under a second at most one more unit refills.
  const LimitSpec spec{.algorithm = GetParam(), .limit = 2000, .period = hours(1)};
  const Hammered h =
      Hammer(spec, "lease-" + std::string(AlgorithmName(GetParam())), milliseconds(600));
  EXPECT_LE(h.admitted, 2001) << h.decisions << " decisions";
  EXPECT_GE(h.admitted, 1500) << "nodes may hold units idle, but not most of the limit";
  EXPECT_GT(h.decisions, 5u * 2000) << "the key was hammered well past its limit";
  EXPECT_GT(h.local, h.decisions / 2) << "most decisions answered without Redis";
}

INSTANTIATE_TEST_SUITE_P(Algorithms, LeasedOnRedis,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kGcra,
                                           Algorithm::kFixedWindow, Algorithm::kLeakyBucket),
                         [](const auto& p) { return std::string(AlgorithmName(p.param)); });

// The lease script takes the request's cost and the units in one step, counts the nodes drawing
// on the key, and a give-back at the lease's own time restores the count.
TEST(LeaseScript, TakesCountsHoldersAndGivesBack) {
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 100, .period = hours(1)};
  auto redis = OpenRedis("lease-script", /*server_time=*/false);
  ASSERT_NE(redis, nullptr);
  auto limiter = redis->MakeLimiter(spec, {.id = "fw"});
  ASSERT_TRUE(limiter.has_value());
  Limiter& l = **limiter;
  auto take = [&](const char* holder, int64_t cost, int64_t want) {
    return Take(l, "k", kStart, {.cost = cost, .want = want, .holder = holder, .ttl = seconds(2)});
  };
  const LeaseGrant a = take("node-a", 3, 40);
  EXPECT_TRUE(a.decision.allowed);
  EXPECT_EQ(a.units, 40);
  EXPECT_EQ(a.decision.remaining, 57);
  EXPECT_EQ(a.holders, 1);
  EXPECT_EQ(a.stamp_us, ToNanos(kStart) / 1000);
  const LeaseGrant b = take("node-b", 1, 100);
  EXPECT_EQ(b.units, 56) << "as many as were free";
  EXPECT_EQ(b.decision.remaining, 0);
  EXPECT_EQ(b.holders, 2);
  const LeaseGrant c = take("node-c", 1, 0);
  EXPECT_FALSE(c.decision.allowed);
  EXPECT_EQ(c.units, 0);
  EXPECT_EQ(c.holders, 0) << "a node asking for no units is not counted";
  l.GiveBack("k", a.stamp_us, kStart, 40);  // queued: wait until Redis has run it
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (l.Decide("k", kStart, 0).remaining != 40 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(l.Decide("k", kStart, 0).remaining, 40);
  // Given back after its window ended, nothing changes: the units belonged to that window.
  l.GiveBack("k", a.stamp_us, kStart + hours(1), 10);
  EXPECT_EQ(l.Decide("k", kStart + hours(1), 0).remaining, 100);
}

}  // namespace
}  // namespace sluice
