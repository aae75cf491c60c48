// Envoy's per-request `limit` overrides through the service: any client can send any rate. The
// service keeps the limiters of the rates it saw last (least recently used first); their
// counters live in the memory store's override table, keyed by (rate, key), so a dropped
// limiter forgets nothing, and only the table's memory bound evicts counters.
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
    r.descriptors.push_back(
        {{{"api_key", key}}, {}, LimitOverride{rate, LimitPeriod::Of(Unit::kDay)}});
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

// The store bound sluiced gives the memory store (ComputeMemoryBudget in flags.cc): all of
// --memory-max-bytes but the usage views' sixteenth.
constexpr size_t SluicedStoreBound(size_t memory_max_bytes) {
  return memory_max_bytes - memory_max_bytes / 16;
}

// A tenant's negotiated rate, sent as an override, keeps its counter while other callers use
// 10,000 other rates (one key each): the limiter of its rate is dropped and made again by the
// service meanwhile, and the counter, in the store's override table, stays.
TEST_F(OverrideLimits, AKeyStaysRefusedWhileTenThousandOtherRatesAreUsed) {
  for (size_t memory_max : {size_t{512} << 20 /* sluiced's default */, size_t{64} << 20}) {
    Start(SluicedStoreBound(memory_max));
    for (int i = 0; i < 5; ++i) ASSERT_EQ(Remaining("tenant", 5), 4 - i);
    for (int64_t rate = 100; rate < 10'100; ++rate) {
      ASSERT_EQ(Remaining("caller-" + std::to_string(rate), rate), rate - 1);
    }
    clock_.Advance(std::chrono::seconds(10));
    auto r = service_->Check(Overridden("tenant", 5));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->statuses[0].code, Code::kOverLimit) << "--memory-max-bytes " << memory_max;
    EXPECT_EQ(service_->StoreTotals().evictions, 0u);
  }
}

// A million override keys (64 rates, half of them 1/s, which replenish within the flood) against
// an 8 MiB store: the store's accounting and the heap stay within the bound, and the evictions
// this takes are counted by reason.
TEST_F(OverrideLimits, AMillionKeyFloodStaysWithinTheBoundAndCountsEvictions) {
  constexpr size_t kBound = size_t{8} << 20;
  const size_t heap_before = testing::HeapInUse();
  Start(kBound);
  for (int n = 0; n < 1'000'000; ++n) {
    clock_.Advance(std::chrono::milliseconds(1));
    CheckRequest r = Overridden("flood-" + std::to_string(n), 5 + n % 32);
    if (n % 2 == 0)
      r.descriptors[0].limit_override = LimitOverride{1, LimitPeriod::Of(Unit::kSecond)};
    ASSERT_TRUE(service_->Check(r).has_value()) << n;
    if (n % 100'000 == 99'999) {
      const StoreStats s = service_->StoreTotals();
      ASSERT_LE(s.bytes, kBound) << n;
      ASSERT_LE(s.max_bytes, kBound) << n;
      const size_t grown = testing::HeapInUse() - heap_before;
      ASSERT_LE(grown, kBound + kBound / 8) << "heap grew by " << grown << " after " << n;
    }
  }
  const StoreStats s = service_->StoreTotals();
  EXPECT_GT(s.evictions, 100'000u) << "live 5/day counters made room";
  EXPECT_GT(s.evicted_replenished, 0u) << "replenished 1/s counters made room too";
  EXPECT_GT(s.keys, 10'000u) << "while the store kept many counters";
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
