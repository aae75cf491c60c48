// Overrides over the whole range on a real redis-server (override_range.h): the wide scripts
// serve the rates past 2^53 in Lua's doubles, deciding at the service's times.
#include <gtest/gtest.h>

#include <string>

#include "service/override_range.h"
#include "sluice/open_store.h"
#include "support/redis_server.h"

namespace sluice::server {
namespace {

TEST(OverrideRangeOnRedis, EveryUnitAndRateUpTo2To32Minus1IsServedAndCounts) {
  sluice::testing::RedisServer redis;
  OpenStoreOptions o;
  o.redis_server_time = false;
  auto store = OpenStore("redis://127.0.0.1:" + std::to_string(redis.port()), o);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  test::ExpectEveryOverrideRateServedAndCounted(*store);
}

}  // namespace
}  // namespace sluice::server
