#include "store/open_store_under_test.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <utility>

#include "sluice/batched_store.h"
#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/open_store.h"

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

// What an opened store holds while it lives: its clock (which must outlive it) and, for an
// unavailable one, the port nobody listens on. The store is released first.
struct Opened {
  ManualClock clock;  // never moves: no sweep or timer sync comes due (leases end in request time)
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
  if (mode == SyncMode::kBatched) o.local_cache_bytes = 0;
  auto opened = OpenStore(address, o);
  EXPECT_TRUE(opened.has_value()) << address << ": " << (opened ? "" : opened.error().message);
  if (!opened) return nullptr;
  held->store = std::move(*opened);
  Store* store = held->store.get();
  return std::shared_ptr<Store>(std::move(held), store);
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
  store.open = [address, mode] { return Open(std::make_shared<Opened>(), address(), mode); };
  const bool remote = unavailable_address != nullptr;
  if (remote) {
    store.open_unavailable = [unavailable_address, mode] {
      auto held = std::make_shared<Opened>();
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
  // Each skip below is a failure the suite found (issue 24, item 5), with what was found about
  // it: none is a design limit the oracle could state; each is a defect of the layer, listed
  // in the report of helper H9 with its smallest case. Leased limits pass every case: one node
  // decides exactly as the pure algorithm (docs/redis.md, "Leased").
  if (mode == SyncMode::kBatched && remote) {
    // A request with a key that has no view goes to Redis whole (BatchedStoreImpl::
    // DecideAllAsync), and Redis decides it without the hits this node admitted from its views
    // and has not synced yet: one node over-admits. Seed 3, request 15 (t = kStartMs + 517 ms):
    // u1 took 2 from its token_bucket 10/1s burst 6 view at +478 ms (pending); the next request
    // checks that limit with one whose key has no view, so Redis decides it and admits cost 2
    // where the pure bucket (1.68 tokens) refuses.
    const std::string unsynced =
        "BUG (batched over-admits on one node): a request sent to Redis whole (a key without a "
        "view) is decided without this node's unsynced hits on its other keys (request 15, "
        "token_bucket 10/1s burst 6)";
    // The parity runs refuse what the pure algorithm admits, with views below the pure state
    // by a fraction of a token (seed 3: 0.41 token at +372 ms and still at +457 ms). Whether a
    // sync ran in between (docs/redis.md allows "a take counted twice until the next sync") was
    // not checked: not yet explained.
    const std::string low =
        "NOT EXPLAINED: batched views stay below the shared state across syncs (a fraction of a "
        "token), refusing what the pure algorithm admits; first seen ";
    store.skip = {
        {"DecideAllIsAllOrNothing", unsynced},
        {"DecideAllAsyncIsAllOrNothing", unsynced},
        {"DecidesAsThePureAlgorithm", low + "token_bucket 10/1s burst 20, request 42"},
        {"DecideAsyncDecidesAsThePureAlgorithm", low + "token_bucket 3/1s burst 5"},
        {"ChargesMatchThePureAlgorithm", low + "token_bucket 4/1s"},
        {"RefundAtTheRequestsOwnTimeIsAnExactUndo", low + "token_bucket"},
        {"LaterRefundsMatchThePureAlgorithm", low + "token_bucket"},
        {"IsReadyAndItsStatsCountItsLiveLimiters",
         "by design, to state in the suite: the batched layer counts its views as keys (9), so "
         "it is neither a store that counts keys per limiter nor one that says 0"},
    };
  }
  if (mode == SyncMode::kBatched) {
    // The syncs due by the traffic's time, as the layer's timer would run them at that time.
    store.run_due = [](Store& s, Timestamp now) { dynamic_cast<BatchedStore&>(s).FlushDue(now); };
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
