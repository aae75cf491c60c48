#include "sluice/leaky_bucket.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

LeakyBucket MakeLeaky(int64_t limit, Duration per, int64_t queue, bool shaper) {
  auto lb = LeakyBucket::Create(LimitSpec{Algorithm::kLeakyBucket, limit, per, queue, shaper});
  EXPECT_TRUE(lb.has_value()) << (lb ? "" : lb.error().message);
  return *lb;
}

TEST(LeakyBucket, MeterRejectsWhenTheQueueIsFull) {
  const LeakyBucket lb = MakeLeaky(10, seconds(1), 5, false);
  LeakyBucket::State s = lb.Initial(FromNanos(0));
  for (int i = 0; i < 5; ++i) {
    const Decision d = lb.Decide(s, FromNanos(0), 1);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.delay, Duration(0));  // a meter never delays
  }
  const Decision full = lb.Decide(s, FromNanos(0), 1);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.retry_after, milliseconds(100));
  // 100 ms later exactly one slot has leaked out.
  EXPECT_TRUE(lb.Decide(s, FromNanos(100'000'000), 1).allowed);
  EXPECT_FALSE(lb.Decide(s, FromNanos(100'000'000), 1).allowed);
}

TEST(LeakyBucket, ShaperSpacesReleasesExactlyOneOverRApart) {
  const LeakyBucket lb = MakeLeaky(10, seconds(1), 50, true);
  LeakyBucket::State s = lb.Initial(FromNanos(0));
  for (int i = 0; i < 50; ++i) {
    const Decision d = lb.Decide(s, FromNanos(0), 1);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.delay, milliseconds(100) * i) << "request " << i;
  }
  const Decision d = lb.Decide(s, FromNanos(0), 1);
  EXPECT_FALSE(d.allowed) << "queue full";
  EXPECT_EQ(d.retry_after, milliseconds(100));
}

TEST(LeakyBucket, ShaperWithFractionalIntervalNeverReleasesEarly) {
  // 3/s: releases due at k/3 s; each delay is the first whole nanosecond at or after it.
  const LeakyBucket lb = MakeLeaky(3, seconds(1), 30, true);
  LeakyBucket::State s = lb.Initial(FromNanos(0));
  for (int64_t k = 0; k < 30; ++k) {
    const Decision d = lb.Decide(s, FromNanos(0), 1);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.delay, Duration((k * 1'000'000'000 + 2) / 3)) << "k=" << k;
  }
}

TEST(LeakyBucket, ShaperDelayShrinksAsTheQueueDrains) {
  const LeakyBucket lb = MakeLeaky(10, seconds(1), 50, true);
  LeakyBucket::State s = lb.Initial(FromNanos(0));
  for (int i = 0; i < 10; ++i) lb.Decide(s, FromNanos(0), 1);  // queue holds 10 = 1 s of work
  const Decision d = lb.Decide(s, FromNanos(250'000'000), 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.delay, milliseconds(750));
  EXPECT_EQ(d.reset_after, milliseconds(850));
}

TEST(LeakyBucket, StartsEmptyAndReplenishesWhenDrained) {
  const LeakyBucket lb = MakeLeaky(10, seconds(1), 50, false);
  LeakyBucket::State s = lb.Initial(FromNanos(0));
  EXPECT_LE(lb.ReplenishedAt(s), FromNanos(0));
  lb.Decide(s, FromNanos(0), 5);
  EXPECT_EQ(lb.ReplenishedAt(s), FromNanos(500'000'000));
}

}  // namespace
}  // namespace sluice
