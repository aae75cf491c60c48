// Overrides over the whole range on the memory store (override_range.h).
#include "service/override_range.h"

#include <gtest/gtest.h>

#include "sluice/open_store.h"

namespace sluice::server {
namespace {

TEST(OverrideRange, EveryUnitAndRateUpTo2To32Minus1IsServedAndCounts) {
  auto store = OpenStore("memory");
  ASSERT_TRUE(store.has_value()) << store.error().message;
  test::ExpectEveryOverrideRateServedAndCounted(*store);
}

}  // namespace
}  // namespace sluice::server
