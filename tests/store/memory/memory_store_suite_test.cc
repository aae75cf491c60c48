// The memory store in the store suite (tests/store/store_suite.h).
#include <memory>

#include "sluice/memory_store.h"
#include "store/store_suite.h"

namespace sluice::testing {
namespace {

StoreUnderTest MemoryStore() {
  StoreUnderTest store;
  store.name = "memory";
  store.open = []() -> std::shared_ptr<Store> {
    auto opened = OpenMemoryStore();
    EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error().message);
    return opened ? *opened : nullptr;
  };
  store.traffic_scale = 10;
  store.counts_keys = true;
  store.exact_late_log_refunds = true;
  // Its limiters are MemoryLimiters: Sweep drops what is replenished.
  store.drop_replenished = [](Limiter& limiter, Timestamp now) {
    dynamic_cast<MemoryLimiter&>(limiter).Sweep(now);
  };
  return store;
}

INSTANTIATE_TEST_SUITE_P(Memory, StoreSuite, ::testing::Values(MemoryStore()), StoreSuiteName);

}  // namespace
}  // namespace sluice::testing
