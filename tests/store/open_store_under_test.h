// The store suite (store_suite.h) through OpenStore itself: the stack sluiced runs -- Redis, the
// leased, batched and over-limit cache layers -- for an address ("memory", "redis://...",
// "redis+cluster://..."), with every limiter the suite makes in one sync mode.
//
//   INSTANTIATE_TEST_SUITE_P(OpenStore, StoreSuite,
//                            ::testing::ValuesIn(ThroughOpenStore("redis", Address)),
//                            StoreSuiteName);
//
// Background work is held still: each store opened gets a ManualClock of its own that never
// moves, so no lease expires, and in batched mode a ManualScheduler never advanced, so no batched
// sync runs behind the suite's back (either would race its decisions); the batched syncs run on
// the suite's thread instead, at the ticks the layer's timer would have run them by the traffic's
// time (StoreUnderTest::run_due).
#ifndef SLUICE_TESTS_STORE_OPEN_STORE_UNDER_TEST_H_
#define SLUICE_TESTS_STORE_OPEN_STORE_UNDER_TEST_H_

#include <functional>
#include <string>
#include <vector>

#include "sluice/quota_sync.h"
#include "store/store_suite.h"

namespace sluice::testing {

// `address()` is called at each open (a test's redis-server may start at first use);
// `unavailable_address(port)` names the same kind of store at a loopback port nobody listens on
// (empty: a store that cannot fail). The instantiation is named "<name>_<mode>".
StoreUnderTest ThroughOpenStore(const std::string& name, std::function<std::string()> address,
                                std::function<std::string(int port)> unavailable_address,
                                SyncMode mode);

// The same in every sync mode a Redis store serves: exact, leased, batched.
std::vector<StoreUnderTest> ThroughOpenStoreInEveryMode(
    const std::string& name, const std::function<std::string()>& address,
    const std::function<std::string(int port)>& unavailable_address);

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_STORE_OPEN_STORE_UNDER_TEST_H_
