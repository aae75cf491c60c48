// The test suite every sluice::Store passes (store.h): the all-or-nothing oracle for DecideAll
// and DecideAllAsync, refunds, parity with the pure algorithms (include/sluice/*.h are the
// oracle), Ready() and Stats(), and the failure policy where a store can fail. The tests are in
// store_suite.cc; each store instantiates them in its own test executable:
//
//   memory store     tests/store/memory/memory_store_suite_test.cc  (store_test)
//   Redis            tests/store/redis/redis_store_suite_test.cc    (redis_test: a redis-server)
//   Redis Cluster    tests/store/redis/redis_cluster_test.cc        (redis_cluster_test: the
//                                                                     cluster is a ctest fixture)
// each through OpenStore, the stack sluiced runs, in every sync mode it serves
// (store/open_store_under_test.h), and the Redis stores also alone.
//
// How a new store joins:
//   1. Write a factory: a function returning a StoreUnderTest whose `open` opens a new, empty
//      instance of the store each time it is called (the suite opens a second one to check that a
//      store refuses another instance's limiters), with the other fields saying what the store
//      is (see each field).
//   2. In its test executable, one line:
//        INSTANTIATE_TEST_SUITE_P(MyStore, StoreSuite, ::testing::Values(MyStoreUnderTest()),
//                                 StoreSuiteName);
//   3. Link the suite into that executable (tests/CMakeLists.txt: sluice_store_suite).
// The tests are then named MyStore/StoreSuite.<Test>/<name>.
#ifndef SLUICE_TESTS_STORE_STORE_SUITE_H_
#define SLUICE_TESTS_STORE_STORE_SUITE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/quota_sync.h"
#include "sluice/store.h"
#include "sluice/time.h"
#include "support/ports.h"

namespace sluice::testing {

struct StoreUnderTest {
  // Names the instantiation's tests (letters, digits and '_').
  std::string name;
  // A new instance of the store, empty of the suite's counters: a Redis store gets a key prefix
  // of its own. Null on failure (with the reason reported as a test failure).
  std::function<std::shared_ptr<Store>()> open;
  // Optional: run before every test (GTEST_SKIP or fail there when the store cannot be reached).
  std::function<void()> set_up;
  // Optional: an instance that cannot answer (Redis at a port nobody listens on), for the
  // failure policy. Null for a store that cannot fail (the memory store).
  std::function<std::shared_ptr<Store>()> open_unavailable;
  // Durations in its decisions are exact to this (Redis counts microseconds): the suite compares
  // retry_after, reset_after and delay after rounding both sides up to a multiple of it.
  Duration resolution{1};
  // Its keys expire by its own clock whatever time it is given (Redis TTLs): the suite's traffic
  // then never advances slower than real time, or a key could expire before it replenished.
  bool expires_by_its_own_clock = false;
  // Multiplies the suite's generated traffic: a store that decides in memory can afford more.
  int traffic_scale = 1;
  // Stats().keys counts the counters it holds (the memory store; Redis reports 0).
  bool counts_keys = false;
  // Stats().keys counts the views a layer holds in front of a store that reports 0 (the
  // batched layer over Redis): one per live limiter and key it decided, seeded by the first
  // decision and dropped only by a sync after an interval unused, or with the limiter. Only
  // IsReadyAndItsStatsCountItsLiveLimiters reads it, where no sync runs: elsewhere the views
  // follow the sync timer, not the counters a refund or a reset leaves.
  bool counts_views_as_keys = false;
  // A sliding-window-log refund made later removes the request's entry wherever it is, as the
  // pure algorithm does (the memory store); false: only while it is the newest (Redis).
  bool exact_late_log_refunds = true;
  // Optional: for a store that decides keys in separate partitions (a cluster's hash slots),
  // which one a limit's key is in. The suite checks that its multi-limit requests span them.
  std::function<int(std::string_view limit_id, std::string_view identity)> partition_of;
  // Optional: drop the counters that are replenished at `now` (the memory store's Sweep), so
  // refunds and decisions meet dropped counters.
  std::function<void(Limiter& limiter, Timestamp now)> drop_replenished;
  // Optional: store-specific checks after the all-or-nothing runs, given the store and the number
  // of requests it refused while some of their limits admitted (e.g. how Redis gave quota back).
  std::function<void(Store& store, int partly_admitted)> check_all_or_nothing;
  // Optional: store-specific checks after each parity run (decisions, async decisions, charges
  // against the pure algorithms), given the store (e.g. that a cache answered some of them).
  std::function<void(Store& store)> check_parity;

  // How the suite's limits are shared (LimiterOptions::sync on every limiter it makes). Leased
  // and batched serve only what SharedSyncCanServe says (token bucket, GCRA, fixed window, the
  // leaky-bucket meter) and refuse the rest at MakeLimiter: for those modes the suite leaves the
  // other algorithms out of every test (StoreSuite::Serves), so they are neither made nor
  // checked. The oracle stays the pure algorithm in every mode: the suite is one node, and one
  // node alone gets exactly its decisions from a leased limit (it spends units it took from the
  // shared count, at the instant it would have taken them), and from a batched one decisions
  // never laxer and stricter only within `strict_within` (its view is the shared state plus its
  // own hits, and a sync charges them at its own instant; docs/redis.md, "Batched": one node).
  QuotaSync sync;
  // Whether the oracle's comparisons (StoreSuite::Same) hold for every field of a decision, or
  // only for its verdict -- allowed, reason, degraded, limit -- where the sync mode reports the
  // rest from the shared count rather than from this node's (leased: units taken ahead are
  // gone from `remaining`; batched: durations read back from Redis's answers, strict by up to a
  // microsecond).
  bool same_in_every_field = true;
  // The one bound within which a store's decisions may be stricter than the pure algorithm's
  // on one node, as refill time (0: none, every decision is the oracle's). Batched: a sync
  // charges the hits of its interval at its own instant, so the refill the pure bucket would
  // have gained at its cap (or the charges it would have lost at its debt floor) between a hit
  // and the sync is not credited, and the shared state is below the pure algorithm's by at most
  // one interval's refill (docs/redis.md, "Batched": one node). For the bucket algorithms
  // (token bucket, GCRA, leaky-bucket meter) the suite then checks that each decision's
  // reset_after is the oracle's or later by at most this, that a refusal where the oracle admits
  // is within it (and the oracle then keeps nothing either), and that nothing the oracle refuses
  // is admitted; the fixed window, whose charges add up the same whenever they are sent, and
  // the exact stores are checked field by field (StoreSuite::Same).
  Duration strict_within{0};
  // Optional: how much later than their ticks the store's syncs ran at most so far, which widens
  // strict_within by as much (the bound is one sync spacing's refill). The suite's traffic time
  // runs ahead of real time (expires_by_its_own_clock), and a sync run at a tick that real time
  // has already outrun since the store was last asked would meet keys Redis expired early.
  std::function<Duration(Store& store)> late_syncs;
  // Optional: runs the store's background work due by `now`, the suite's traffic time, on the
  // suite's thread (a batched store's syncs), before each decision of the suite's traffic. Null:
  // the store has none, or its background work never comes due (a clock held still).
  std::function<void(Store& store, Timestamp now)> run_due;
  // Tests that cannot hold for this store by design, by test name (without the instantiation's
  // prefix and suffix), each with the reason they are skipped: reported as skipped, never
  // passed.
  std::map<std::string, std::string, std::less<>> skip;
};

void PrintTo(const StoreUnderTest& store, std::ostream* os);
// The instantiation's test names end in the store's name.
std::string StoreSuiteName(const ::testing::TestParamInfo<StoreUnderTest>& info);

// "<stem><pid>.<random tag>-<n>": a name no other store opened by any test process has, for a
// factory's key prefix (a cluster outlives the test processes that use it, and pids come round).
std::string UniqueName(std::string_view stem);

// The fixture: the tests are in store_suite.cc; these are the helpers they share.
class StoreSuite : public ::testing::TestWithParam<StoreUnderTest> {
 public:
  // A new instance (null after reporting a failure).
  std::shared_ptr<Store> Open();
  // Whether the store under test serves `spec` in its sync mode; a test leaves out the specs
  // it does not.
  static bool Serves(const LimitSpec& spec);
  // The store's background work due by `now` (StoreUnderTest::run_due), if it has any.
  static void RunDue(Store& store, Timestamp now);
  // A limiter of `store` in the store's sync mode (null after reporting a failure).
  std::unique_ptr<Limiter> Make(Store& store, const LimitSpec& spec, const std::string& id,
                                bool fail_open = false);
  // Store::DecideAll, or DecideAllAsync waited on (bounded), into a vector. `after_return` runs
  // as soon as the call returns (before its answer is waited for).
  std::vector<Decision> DecideAll(Store& store, std::span<const LimitCheck> checks, Timestamp now,
                                  bool async, const std::function<void()>& after_return = {});
  // Limiter::Decide, or DecideAsync waited on (bounded).
  Decision Decide(Limiter& limiter, std::string_view key, Timestamp now, int64_t cost,
                  bool async = false);
  // A duration as the store resolves it: rounded up to a multiple of its resolution.
  Duration Resolved(Duration d) const;
  // Every field of `got` is the oracle's `want` (durations as the store resolves them).
  ::testing::AssertionResult Same(const Decision& got, const Decision& want) const;
  // For a decision of `spec`: Same, or, where the store may be stricter (strict_within), as
  // strict as it may be: the verdict's other fields the oracle's, `allowed` too unless the
  // store refused what the oracle admits, and reset_after no earlier than the oracle's and no
  // later by more than strict_within (and late_syncs). `want` is what the oracle decided without
  // taking, when the store refused and the oracle admits.
  ::testing::AssertionResult Within(Store& store, const Decision& got, const Decision& want,
                                    const LimitSpec& spec) const;
  // Whether the store may have been that strict for `spec`: the oracle then keeps nothing.
  static bool MayRefuse(const LimitSpec& spec);

 protected:
  void SetUp() override;
  void TearDown() override;

 private:
  std::vector<std::shared_ptr<std::atomic<int>>> callbacks_;  // calls of each `done`
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_STORE_STORE_SUITE_H_
