#include "store/open_store_under_test.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "sluice/batched_store.h"
#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/open_store.h"
#include "sluice/scheduler.h"

namespace sluice::testing {
namespace {

std::string ModeName(SyncMode mode) {
  switch (mode) {
    case SyncMode::kExact:
      return "exact";
    case SyncMode::kLeased:
      return "leased";
    case SyncMode::kBatched:
      return "batched";
  }
  return "unknown";
}

// The batched layer's sync timer, as the suite runs it (StoreUnderTest::run_due) for each store
// opened, per store (an entry lives as long as its store).
struct SyncTimer {
  Timestamp next;  // the next tick, by the traffic's time
  Timestamp last;  // the traffic's time at the last call
  // How far the traffic's time has been ahead of real time (steady_clock) at most, at a call:
  // no sync may be less ahead than that, or it could meet a key Redis expired too early.
  int64_t ahead_ns = 0;
  int64_t last_real_ns = 0;  // the real time at the end of the last call
  Duration late{0};          // how much later than its tick a sync ran, at most
};
struct SyncTicks {
  std::mutex mu;
  std::map<const Store*, SyncTimer> timers;
};

// What an opened store holds while it lives: its clock (which must outlive it) and, for an
// unavailable one, the port nobody listens on. The store is released first.
struct Opened {
  ManualClock clock;  // never moves: no sweep or timer sync comes due (leases end in request time)
  // The batched mode's scheduler, never advanced: a ThreadScheduler would run the batched syncs
  // by the wall clock, at this clock's time 0, behind the suite's back (run_due runs them).
  ManualScheduler scheduler{clock};
  std::shared_ptr<SyncTicks> ticks;  // the batched mode's, where this store's entry goes
  std::unique_ptr<UnusedPort> port;
  std::shared_ptr<Store> store;
  // Expires once the Redis store under the layers is destroyed: its event hook holds it. Empty
  // (expired) for the memory store.
  std::weak_ptr<void> redis_alive;
  // The store and its layers can outlive this owner for a moment, reading the clock: a Redis
  // callback that holds them may answer its caller just before it is destroyed, and the units
  // of leased limiters that went are given back in the background, holding the Redis store
  // until Redis answers. So the clock waits for the Redis store to go, and with it every layer
  // above it (each holds the one below until its own destructor is done).
  ~Opened() {
    if (ticks != nullptr) {
      std::lock_guard lock(ticks->mu);
      ticks->timers.erase(store.get());
    }
    const std::weak_ptr<Store> top = store;
    store.reset();
    // Generous: what holds them answers within the Redis command timeout, but CI runs the
    // suite beside two other builds on two cores (once seen above 10 s there).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!(top.expired() && redis_alive.expired()) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(top.expired()) << "the top store is still alive 60 s after its owner let go";
    EXPECT_TRUE(redis_alive.expired())
        << "the Redis store is still alive 60 s after its owner let go";
  }
};

std::shared_ptr<Store> Open(std::shared_ptr<Opened> held, const std::string& address,
                            SyncMode mode) {
  OpenStoreOptions o;
  o.clock = &held->clock;
  // Redis decides at the suite's times, under a key prefix of this store's own (a cluster
  // outlives the test processes), and waits long enough for a loaded machine.
  o.redis_server_time = false;
  o.redis_key_prefix = UniqueName("suite");
  o.redis_command_timeout = std::chrono::milliseconds(2000);
  auto alive = std::make_shared<int>(0);
  held->redis_alive = alive;
  o.redis_events = [alive = std::move(alive)](const RedisEvent&) {};
  // A batched store's syncs run on the suite's thread (run_due), and OpenStore returns the batched
  // layer itself only without the over-limit cache above it, which passes batched limits through
  // undecided anyway (it learns nothing from a decision Redis did not make).
  if (mode == SyncMode::kBatched) {
    o.local_cache_bytes = 0;
    o.scheduler = std::shared_ptr<Scheduler>(std::shared_ptr<void>(), &held->scheduler);
  }
  auto opened = OpenStore(address, o);
  EXPECT_TRUE(opened.has_value()) << address << ": " << (opened ? "" : opened.error().message);
  if (!opened) return nullptr;
  held->store = std::move(*opened);
  Store* store = held->store.get();
  return std::shared_ptr<Store>(std::move(held), store);
}

// The syncs the batched layer's timer would have run by `now`, the traffic's time, each at its
// tick: every `interval` since the store's first traffic. A sync run late would charge its hits
// later than the timer does, and lose more of the refill the stated bound allows for
// (docs/redis.md, "Batched"). A tick that finds nothing to send or drop (no view is left) lets
// the timer start again at `now`; so does time going back (a test's next run of traffic).
//
// But Redis expires keys by its own clock. A key asked about at traffic time s and real time
// r, with a TTL of T (the time its state takes to be full), is gone by real time r + T; a sync
// at traffic time t and real time r' then meets a fresh key where the pure bucket, at t, is not
// full yet, if r' - r > t - s: it would be laxer than the pure algorithm. The traffic's time keeps
// ahead of real time from one call to the next (StoreSuite's TrafficTime), but a tick is earlier
// than the call that runs it, and the syncs before a request delay it in real time. So every
// sync runs no less ahead of real time than the store has ever been asked (a tick not yet that
// far runs at that floor instead), and how late it ran widens the bound
// (StoreUnderTest::late_syncs): on an idle machine, by microseconds.
constexpr Duration kRedisTtlGrain = std::chrono::milliseconds(2);  // PEXPIRE's ms, rounded

void RunSyncTimer(SyncTicks& ticks, Store& store, Duration interval, Timestamp now) {
  auto* batched = dynamic_cast<BatchedStore*>(&store);
  ASSERT_NE(batched, nullptr) << "a remote store in batched mode is the batched layer";
  const auto real = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::lock_guard lock(ticks.mu);
  const int64_t ahead = ToNanos(now) - real();
  auto [it, fresh] = ticks.timers.try_emplace(&store, SyncTimer{now, now, ahead, real()});
  SyncTimer& timer = it->second;
  if (now < timer.last) {  // a new run of traffic, on keys of its own
    timer.next = now;
    timer.ahead_ns = ahead;
    timer.last_real_ns = real();
  }
  const Timestamp last = timer.last;
  timer.last = now;
  while (timer.next <= now) {
    // Ahead as far as ever, and of the last request by twice the real time since (a script runs
    // some time after it is sent, as TrafficTime allows for), and Redis's millisecond TTLs.
    const int64_t before = real();
    const int64_t floor =
        std::max(timer.ahead_ns + before, ToNanos(last) + 2 * (before - timer.last_real_ns)) +
        kRedisTtlGrain.count();
    const Timestamp at = std::max(timer.next, std::min(now, FromNanos(floor)));
    timer.late = std::max(timer.late, at - timer.next);
    timer.ahead_ns = std::max(timer.ahead_ns, ToNanos(at) - before);
    const BatchedFlush flushed = batched->FlushDue(at);
    const bool idle = flushed.keys_sent == 0 && flushed.views_dropped == 0;
    timer.next = (idle ? std::max(at, now) : at) + interval;
  }
  // The request that follows is asked at `now`, in real time after the syncs.
  timer.last_real_ns = real();
  timer.ahead_ns = std::max(timer.ahead_ns, ToNanos(now) - timer.last_real_ns);
}

// The parity runs must have been decided by the mode's own layer, or they would not test it.
void CheckLayerDecided(Store& store, SyncMode mode, bool cached) {
  const StoreStats s = store.Stats();
  switch (mode) {
    case SyncMode::kExact:
      if (!cached) return;
      std::printf("over-limit cache: %llu decisions from memory, %llu from Redis\n",
                  static_cast<unsigned long long>(s.cached_decisions),
                  static_cast<unsigned long long>(s.forwarded_decisions));
      EXPECT_TRUE(s.over_limit_cache);
      EXPECT_GT(s.cached_decisions, s.forwarded_decisions / 50)
          << "the cache answered too few of the suite's refusals";
      return;
    case SyncMode::kLeased:
      std::printf("leased: %llu decisions from units held, %llu leases taken\n",
                  static_cast<unsigned long long>(s.leased_decisions),
                  static_cast<unsigned long long>(s.leases_taken));
      EXPECT_GT(s.leases_taken, 0u) << "no lease was taken: every decision was Redis's";
      EXPECT_GT(s.leased_decisions, 0u) << "no decision was made from units held";
      return;
    case SyncMode::kBatched:
      std::printf("batched: %llu decisions from views\n",
                  static_cast<unsigned long long>(s.local_decisions));
      EXPECT_TRUE(s.batched);
      EXPECT_GT(s.local_decisions, 0u) << "no decision was made from a view";
      // docs/redis.md, "Batched": one node alone never over-admits, so its syncs never find a
      // hit the shared count had no room for.
      EXPECT_EQ(s.batched_over_admitted_hits, 0u) << "one node over-admitted";
      return;
  }
}

}  // namespace

StoreUnderTest ThroughOpenStore(const std::string& name, std::function<std::string()> address,
                                std::function<std::string(int port)> unavailable_address,
                                SyncMode mode) {
  StoreUnderTest store;
  store.name = name + "_" + ModeName(mode);
  store.sync.mode = mode;
  store.same_in_every_field = mode == SyncMode::kExact;
  const auto ticks = mode == SyncMode::kBatched ? std::make_shared<SyncTicks>() : nullptr;
  const auto opened = [ticks] {
    auto held = std::make_shared<Opened>();
    held->ticks = ticks;
    return held;
  };
  store.open = [address, mode, opened] { return Open(opened(), address(), mode); };
  const bool remote = unavailable_address != nullptr;
  if (remote) {
    store.open_unavailable = [unavailable_address, mode, opened] {
      auto held = opened();
      held->port = std::make_unique<UnusedPort>();
      const std::string at = unavailable_address(held->port->port());
      return Open(std::move(held), at, mode);
    };
    store.resolution = std::chrono::microseconds(1);  // Redis counts microseconds
    store.expires_by_its_own_clock = true;            // Redis TTLs
    store.counts_keys = false;
    store.exact_late_log_refunds = false;
  } else {  // the memory store
    store.traffic_scale = 10;
    store.counts_keys = true;
    store.exact_late_log_refunds = true;
    store.drop_replenished = [](Limiter& limiter, Timestamp now) {
      dynamic_cast<MemoryLimiter&>(limiter).Sweep(now);
    };
  }
  // No case is skipped: leased limits pass every case as exact ones do (one node decides as the
  // pure algorithm, docs/redis.md "Leased"); batched ones within their stated bound below.
  if (mode == SyncMode::kBatched && remote) {
    // One node's batched decisions may be stricter than the pure algorithm's by one interval's
    // refill, and never laxer (docs/redis.md, "Batched": one node).
    store.strict_within = store.sync.interval;
    // The batched layer counts its views as keys (Redis under it reports 0).
    store.counts_views_as_keys = true;
  }
  if (mode == SyncMode::kBatched) {
    store.run_due = [ticks, interval = store.sync.interval](Store& s, Timestamp now) {
      RunSyncTimer(*ticks, s, interval, now);
    };
    store.late_syncs = [ticks](Store& s) {
      std::lock_guard lock(ticks->mu);
      auto it = ticks->timers.find(&s);
      return it == ticks->timers.end() ? Duration(0) : it->second.late;
    };
  }
  store.check_parity = [mode, remote](Store& s) { CheckLayerDecided(s, mode, remote); };
  return store;
}

std::vector<StoreUnderTest> ThroughOpenStoreInEveryMode(
    const std::string& name, const std::function<std::string()>& address,
    const std::function<std::string(int port)>& unavailable_address) {
  std::vector<StoreUnderTest> out;
  for (SyncMode mode : {SyncMode::kExact, SyncMode::kLeased, SyncMode::kBatched}) {
    out.push_back(ThroughOpenStore(name, address, unavailable_address, mode));
  }
  return out;
}

}  // namespace sluice::testing
