// Envoy's per-request `limit` overrides through the service: any client can send any rate, so
// their limiters are kept least recently used first within the memory store's bound. A new rate
// is never refused for want of room; the least recently used rate's counters make way.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "service/rate_limit_service.h"
#include "sluice/memory_store.h"
#include "sluice/open_store.h"
#include "support/heap_in_use.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 10}
)yaml";

class OverrideLimits : public ::testing::Test {
 protected:
  void Start(size_t memory_max_bytes) {
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    OpenStoreOptions store_options;
    store_options.memory.max_bytes = memory_max_bytes;
    auto opened = OpenStore("memory", store_options);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, nullptr);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
  }
  // One descriptor api_key=`key` whose limit is overridden to `rate` per day.
  static CheckRequest Overridden(const std::string& key, int64_t rate) {
    CheckRequest r;
    r.domain = "api";
    r.hits = 1;
    r.descriptors.push_back({{{"api_key", key}}, {}, LimitOverride{rate, Unit::kDay}});
    return r;
  }
  // The remaining quota after one more hit of `key` at `rate`; -1 if the check failed.
  int64_t Remaining(const std::string& key, int64_t rate) {
    auto r = service_->Check(Overridden(key, rate));
    EXPECT_TRUE(r.has_value()) << "rate " << rate << ": " << (r ? "" : r.error().message);
    return r ? r->statuses[0].remaining : -1;
  }

  ManualClock clock_{FromNanos(int64_t{1'700'000'000} * 1'000'000'000)};
  test::TempConfigDir dir_{"override"};
  std::unique_ptr<RateLimitService> service_;
};

// The old behaviour: 1024 rates filled every place and every later new rate was a 400 until a
// restart.
TEST_F(OverrideLimits, ANewRateIsAcceptedAfterThousandsOfOthers) {
  Start(size_t{64} << 20);
  for (int64_t rate = 1; rate <= 3000; ++rate) {
    ASSERT_EQ(Remaining("k", rate), rate - 1) << "a fresh counter of " << rate << " per day";
  }
  EXPECT_EQ(Remaining("k", 5000), 4999);
  EXPECT_EQ(Remaining("k", 5000), 4998) << "and it counts";
}

// Each rate's counter is kept while the rate is in use; when a new rate needs a place, the rate
// used least recently is dropped, and its counter starts afresh if it comes back. How many
// places there are is the store's (Store::MaxTransientLimiters).
TEST_F(OverrideLimits, TheLeastRecentlyUsedRateMakesRoom) {
  auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
  ASSERT_TRUE(config.has_value());
  auto store = OpenMemoryStore({.max_bytes = size_t{64} << 20});
  ASSERT_TRUE(store.has_value());
  const int64_t places = static_cast<int64_t>((*store)->MaxTransientLimiters());
  ASSERT_GE(places, 4);
  ASSERT_LT(places, 1024) << "this test needs the store to be what limits the places";
  ServiceOptions options;
  options.clock = &clock_;
  auto service = RateLimitService::Create(*config, *store, options, nullptr);
  ASSERT_TRUE(service.has_value()) << service.error().message;
  service_ = std::move(*service);

  constexpr int64_t kOld = 5000;   // used once, first: the least recently used
  constexpr int64_t kUsed = 6000;  // used after every other rate: never dropped
  int64_t used = kUsed;
  ASSERT_EQ(Remaining("k", kOld), kOld - 1);
  ASSERT_EQ(Remaining("k", kUsed), --used);
  // Fill every place: kOld, kUsed and places - 2 rates 101, 102, ...
  for (int64_t i = 1; i <= places - 2; ++i) {
    ASSERT_EQ(Remaining("k", 100 + i), 100 + i - 1);
    ASSERT_EQ(Remaining("k", kUsed), --used);
  }
  ASSERT_EQ(Remaining("k", 101), 99) << "every rate still has its counter";
  // A new rate: kOld is the least recently used, and makes room.
  ASSERT_EQ(Remaining("k", 7000), 6999);
  EXPECT_EQ(Remaining("k", kUsed), --used) << "the rate in use kept its counter";
  EXPECT_EQ(Remaining("k", kOld), kOld - 1) << "the least recently used rate starts afresh";
  // Bringing kOld back took the place of the next least recently used: 102 (101 was used).
  EXPECT_EQ(Remaining("k", 101), 98) << "101 was used more recently than 102";
  EXPECT_EQ(Remaining("k", 102), 101) << "102 starts afresh";
}

// The bound holds for everything a client can create: a flood of unique keys, each with one of
// 1024 override rates, against an 8 MiB store. Checked with the store's own figure and with the
// heap (which also holds the service's override limiters and their bookkeeping).
TEST_F(OverrideLimits, AFloodOfUniqueKeysAndRatesStaysWithinTheMemoryBound) {
  constexpr size_t kBound = size_t{8} << 20;
  const size_t heap_before = testing::HeapInUse();
  Start(kBound);
  for (int n = 0; n < 60'000; ++n) {
    ASSERT_GE(Remaining("flood-key-" + std::to_string(n), (n % 1024) + 1), 0) << n;
    if (n % 5000 == 4999) {
      const StoreStats s = service_->StoreTotals();
      ASSERT_LE(s.bytes, kBound) << n;
      ASSERT_LE(s.max_bytes, kBound) << n;
      const size_t grown = testing::HeapInUse() - heap_before;
      ASSERT_LE(grown, kBound + kBound / 8) << "heap grew by " << grown << " after " << n;
    }
  }
  // Rates come back only after 1023 others, so each finds its limiter dropped: what the store
  // holds at the end is the counters of the override limiters alive, one key or more each.
  EXPECT_GE(service_->StoreTotals().keys, 16u) << "the override limits' counters are counted";
}

}  // namespace
}  // namespace sluice::server
