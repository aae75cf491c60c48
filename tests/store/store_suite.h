// The test suite every sluice::Store passes (store.h): the all-or-nothing oracle for DecideAll
// and DecideAllAsync, refunds, parity with the pure algorithms (include/sluice/*.h are the
// oracle), Ready() and Stats(), and the failure policy where a store can fail. The tests are in
// store_suite.cc; each store instantiates them in its own test executable:
//
//   memory store     tests/store/memory/memory_store_suite_test.cc  (store_test)
//   Redis            tests/store/redis/redis_store_suite_test.cc    (redis_test: a redis-server)
//   Redis Cluster    tests/store/redis/redis_cluster_test.cc        (redis_cluster_test: the
//                                                                     cluster is a ctest fixture)
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
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/limiter.h"
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
};

void PrintTo(const StoreUnderTest& store, std::ostream* os);
// The instantiation's test names end in the store's name.
std::string StoreSuiteName(const ::testing::TestParamInfo<StoreUnderTest>& info);

// "<stem><pid>-<n>": a name no other store opened by any test process has, for a factory's key
// prefix (a cluster outlives the test processes that use it).
std::string UniqueName(std::string_view stem);

// The fixture: the tests are in store_suite.cc; these are the helpers they share.
class StoreSuite : public ::testing::TestWithParam<StoreUnderTest> {
 public:
  // A new instance (null after reporting a failure).
  std::shared_ptr<Store> Open();
  // A limiter of `store` (null after reporting a failure).
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

 protected:
  void SetUp() override;
  void TearDown() override;

 private:
  std::vector<std::shared_ptr<std::atomic<int>>> callbacks_;  // calls of each `done`
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_STORE_STORE_SUITE_H_
