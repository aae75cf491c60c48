// The test suite every PermitPool passes (sluice/permits.h): acquiring up to max_in_flight and
// no further, releases, renewals, reserve, malformed ids, expiry, a holder that never releases.
// The tests are in permit_suite.cc; each store instantiates them in its own test executable:
//
//   memory store     tests/store/memory/memory_permits_test.cc  (store_test)
//   Redis            tests/store/redis/redis_permits_test.cc    (redis_test)
//   Redis Cluster    tests/store/redis/redis_cluster_test.cc    (redis_cluster_test)
//
//   INSTANTIATE_TEST_SUITE_P(MyStore, PermitSuite, ::testing::Values(MyPermitStore()),
//                            PermitSuiteName);
//
// Times are read from the answers (store_time_us, expires_us), the store's clock: on a store
// that decides by the `now` it is given (the memory store) the suite drives that clock by hand;
// on one with a clock of its own (Redis TIME) it uses short ttls and waits on conditions.
#ifndef SLUICE_TESTS_STORE_PERMIT_SUITE_H_
#define SLUICE_TESTS_STORE_PERMIT_SUITE_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "sluice/permits.h"
#include "sluice/store.h"
#include "sluice/time.h"

namespace sluice::testing {

struct PermitStoreUnderTest {
  std::string name;  // letters, digits and '_'
  // A new instance of the store, empty of the suite's permits.
  std::function<std::shared_ptr<Store>()> open;
  // Decides by the `now` it is given (true), or by a clock of its own (false).
  bool manual_clock = true;
  // Optional: run before every test (GTEST_SKIP there when the store cannot be reached).
  std::function<void()> set_up;
};

void PrintTo(const PermitStoreUnderTest& store, std::ostream* os);
std::string PermitSuiteName(const ::testing::TestParamInfo<PermitStoreUnderTest>& info);

// A call's answer, waited for (the store may answer on another thread).
PermitAnswer Await(const std::function<void(PermitPool::Callback)>& call);
PermitAnswer Acquire(PermitPool& pool, std::string_view key, Timestamp now, std::string_view id,
                     int64_t reserve = 0);
PermitAnswer Release(PermitPool& pool, std::string_view key, Timestamp now, std::string_view id);
PermitAnswer Renew(PermitPool& pool, std::string_view key, Timestamp now, std::string_view id);

class PermitSuite : public ::testing::TestWithParam<PermitStoreUnderTest> {
 protected:
  void SetUp() override;
  // A pool of the store under test.
  std::unique_ptr<PermitPool> Pool(int64_t max_in_flight, Duration ttl);
  // The suite's clock: the store's own clock's instant for the memory store (driven by
  // Advance); the wall clock otherwise (ignored by a store with its own clock).
  Timestamp Now() const;
  // Moves the manual clock (a store with its own clock: a no-op, see WaitUntilExpired).
  void Advance(Duration d) { manual_ += d; }
  // Lets `expires_us` pass on the store's clock: the manual clock is set to it; otherwise waits
  // until an acquire on a fresh key reports a store time at or past it.
  void PassStoreTime(int64_t expires_us);

  std::shared_ptr<Store> store_;
  Timestamp manual_ = FromNanos(int64_t{1'760'000'000} * 1'000'000'000);
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_STORE_PERMIT_SUITE_H_
