#include "store/redis/circuit_breaker.h"

#include <gtest/gtest.h>

#include "sluice/clock.h"

namespace sluice::internal {
namespace {

using std::chrono::milliseconds;
using State = CircuitBreaker::State;

TEST(CircuitBreaker, OpensAfterConsecutiveFailuresProbesAndCloses) {
  ManualClock clock(FromNanos(1'000'000'000));
  CircuitBreaker b({.failure_threshold = 3, .open_for = milliseconds(500)});
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(b.Allow(clock.Now()));
    b.OnFailure(clock.Now());
  }
  EXPECT_EQ(b.state(), State::kClosed);
  b.OnSuccess();  // a success resets the count: failures must be consecutive
  for (int i = 0; i < 3; ++i) b.OnFailure(clock.Now());
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_FALSE(b.Allow(clock.Now()));
  clock.Advance(milliseconds(499));
  EXPECT_FALSE(b.Allow(clock.Now()));
  clock.Advance(milliseconds(1));
  EXPECT_TRUE(b.Allow(clock.Now())) << "the probe";
  EXPECT_EQ(b.state(), State::kHalfOpen);
  EXPECT_FALSE(b.Allow(clock.Now())) << "only one probe at a time";
  b.OnSuccess();
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_TRUE(b.Allow(clock.Now()));
}

TEST(CircuitBreaker, AFailedProbeOpensItAgain) {
  ManualClock clock(FromNanos(0));
  CircuitBreaker b({.failure_threshold = 1, .open_for = milliseconds(100)});
  b.OnFailure(clock.Now());
  clock.Advance(milliseconds(100));
  ASSERT_TRUE(b.Allow(clock.Now()));
  b.OnFailure(clock.Now());
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_FALSE(b.Allow(clock.Now() + milliseconds(99)));
  EXPECT_TRUE(b.Allow(clock.Now() + milliseconds(100)));
}

}  // namespace
}  // namespace sluice::internal
