#include "sluice/clock.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(ManualClock, MovesOnlyWhenTold) {
  ManualClock c(FromNanos(100));
  EXPECT_EQ(c.Now(), FromNanos(100));
  c.Advance(std::chrono::seconds(2));
  EXPECT_EQ(c.Now(), FromNanos(2'000'000'100));
  c.Set(FromNanos(5));
  EXPECT_EQ(c.Now(), FromNanos(5));
}

TEST(MonotonicClock, IsAnchoredToWallTimeAndNeverGoesBack) {
  MonotonicClock c;
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  Timestamp prev = c.Now();
  EXPECT_LT(std::chrono::abs(prev.time_since_epoch() - wall), std::chrono::seconds(5));
  for (int i = 0; i < 10'000; ++i) {
    const Timestamp now = c.Now();
    ASSERT_GE(now, prev);
    prev = now;
  }
}

}  // namespace
}  // namespace sluice
