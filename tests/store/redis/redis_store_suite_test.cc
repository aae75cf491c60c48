// The Redis store on one real redis-server (started at first use, for this process) in the store
// suite (tests/store/store_suite.h): the Redis store alone, and the stack sluiced runs, opened by
// OpenStore, in each sync mode. Time is passed in (use_server_time = false), so the suite's
// oracle and the store decide at the same instants; each store opened gets a key prefix of its own.
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "sluice/redis_store.h"
#include "store/open_store_under_test.h"
#include "store/store_suite.h"
#include "support/redis_server.h"

namespace sluice::testing {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<Store> Open(const RedisStoreOptions& options) {
  auto opened = OpenRedisStore(options);
  EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error().message);
  return opened ? std::shared_ptr<Store>(*opened) : nullptr;
}

StoreUnderTest StandaloneRedis() {
  StoreUnderTest store;
  store.name = "redis";
  store.open = [] {
    RedisStoreOptions o;
    o.port = SharedRedisServer().port();
    o.use_server_time = false;
    o.command_timeout = milliseconds(2000);
    o.key_prefix = UniqueName("suite");
    return Open(o);
  };
  store.open_unavailable = []() -> std::shared_ptr<Store> {
    // The store and the port nobody listens on, which it holds while it lives.
    struct Unavailable {
      UnusedPort port;
      std::shared_ptr<Store> store;
    };
    auto held = std::make_shared<Unavailable>();
    RedisStoreOptions o;
    o.port = held->port.port();
    held->store = Open(o);
    return held->store ? std::shared_ptr<Store>(held, held->store.get()) : nullptr;
  };
  store.resolution = std::chrono::microseconds(1);
  store.expires_by_its_own_clock = true;
  store.counts_keys = false;
  store.exact_late_log_refunds = false;
  // One server: a request's checks are one script call, which rolls back itself.
  store.check_all_or_nothing = [](Store& s, int) {
    const RedisStoreStats stats = dynamic_cast<RedisStore&>(s).RedisStats();
    EXPECT_EQ(stats.refunds, 0u) << "one server: the script rolls back, no refunds";
    EXPECT_EQ(stats.refund_failures, 0u);
  };
  return store;
}

INSTANTIATE_TEST_SUITE_P(Redis, StoreSuite, ::testing::Values(StandaloneRedis()), StoreSuiteName);

// The same Redis as sluiced opens it: OpenStore, the leased, batched and over-limit cache layers
// in front, every limit in one sync mode.
INSTANTIATE_TEST_SUITE_P(
    OpenStore, StoreSuite,
    ::testing::ValuesIn(ThroughOpenStoreInEveryMode(
        "redis", [] { return "redis://127.0.0.1:" + std::to_string(SharedRedisServer().port()); },
        [](int port) { return "redis://127.0.0.1:" + std::to_string(port); })),
    StoreSuiteName);

}  // namespace
}  // namespace sluice::testing
