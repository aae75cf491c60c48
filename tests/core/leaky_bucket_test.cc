#include "sluice/leaky_bucket.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

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

// A shaper seen as nginx's limit_req sees it: each admitted request is released when the ones
// ahead of it have left, one every period/limit; the queue is the time until the last leaves.
// Kept in ns x limit so that every step is exact. Independent of LeakyBucket's level arithmetic.
class ReleaseSchedule {
 public:
  ReleaseSchedule(int64_t limit, int64_t period_ns, int64_t queue, int64_t max_delay_ns)
      : limit_(limit), period_(period_ns), queue_(queue), max_delay_(max_delay_ns) {}

  // Whether a request of `cost` at t is admitted; its delay (admitted) or retry time (refused).
  struct Answer {
    bool allowed;
    int64_t delay_ns;
    int64_t retry_ns;
  };
  Answer Offer(int64_t t, int64_t cost) {
    // Time until the queue is empty, x limit.
    const int64_t wait = std::max<int64_t>(0, empty_at_ - t * limit_);
    const int64_t delay = (wait + limit_ - 1) / limit_;
    // wait / period_ns is the queued hits: it plus cost must fit in `queue`.
    const int64_t overflow = wait + cost * period_ - queue_ * period_;
    if (overflow <= 0 && delay <= max_delay_) {
      empty_at_ = std::max(empty_at_, t * limit_) + cost * period_;
      return {true, delay, 0};
    }
    const int64_t for_room = overflow > 0 ? (overflow + limit_ - 1) / limit_ : 0;
    return {false, 0, std::max(for_room, delay - max_delay_)};
  }

 private:
  int64_t limit_, period_, queue_, max_delay_;
  int64_t empty_at_ = 0;  // ns x limit
};

TEST(LeakyBucket, ShaperMatchesTheReleaseScheduleWithAndWithoutMaxDelay) {
  struct Case {
    int64_t limit;
    Duration period;
    int64_t queue;
    Duration max_delay;  // max(): none
  };
  const Case cases[] = {
      {10, seconds(1), 20, Duration::max()},        {10, seconds(1), 20, milliseconds(500)},
      {3, seconds(1), 9, milliseconds(1000)},  // 1/r does not divide: rounding matters
      {3, seconds(1), 9, milliseconds(0)},     // only an empty queue admits
      {7, milliseconds(300), 5, milliseconds(100)},
  };
  for (const Case& c : cases) {
    LimitSpec spec{Algorithm::kLeakyBucket, c.limit, c.period, c.queue, true};
    spec.max_delay = c.max_delay;
    auto lb = LeakyBucket::Create(spec);
    ASSERT_TRUE(lb.has_value()) << lb.error().message;
    const int64_t bound = c.max_delay == Duration::max() ? INT64_MAX : c.max_delay.count();
    ReleaseSchedule oracle(c.limit, c.period.count(), c.queue, bound);
    std::mt19937_64 rng(c.limit * 1000 + c.queue);
    LeakyBucket::State s = lb->Initial(FromNanos(0));
    int64_t t = 0;
    int admitted = 0, refused = 0, over_max_delay = 0;
    for (int i = 0; i < 3000; ++i) {
      // Bursts of arrivals at one instant, then gaps up to a few release intervals.
      if (rng() % 3 == 0) t += static_cast<int64_t>(rng() % (3 * c.period.count() / c.limit));
      const int64_t cost = 1 + static_cast<int64_t>(rng() % 2);
      const Decision d = lb->Decide(s, FromNanos(t), cost);
      const ReleaseSchedule::Answer want = oracle.Offer(t, cost);
      ASSERT_EQ(d.allowed, want.allowed) << DescribeLimitSpec(spec) << " request " << i;
      if (want.allowed) {
        ASSERT_EQ(d.delay.count(), want.delay_ns) << DescribeLimitSpec(spec) << " request " << i;
        ASSERT_LE(d.delay, c.max_delay);
        ++admitted;
      } else {
        ASSERT_EQ(d.retry_after.count(), want.retry_ns)
            << DescribeLimitSpec(spec) << " request " << i;
        ASSERT_EQ(d.delay, Duration(0));
        ++refused;
        // Refused for its wait alone: the queue had room.
        over_max_delay += lb->Decide(s, FromNanos(t), 0).remaining >= cost;
      }
    }
    EXPECT_GT(admitted, 300) << DescribeLimitSpec(spec);
    EXPECT_GT(refused, 300) << DescribeLimitSpec(spec);
    if (c.max_delay < milliseconds(1000)) {
      EXPECT_GT(over_max_delay, 50) << DescribeLimitSpec(spec) << ": max_delay should refuse";
    }
  }
}

TEST(LeakyBucket, ARequestRefusedForItsDelayTakesNothing) {
  LimitSpec spec{Algorithm::kLeakyBucket, 10, seconds(1), 50, true};
  spec.max_delay = milliseconds(300);
  auto lb = LeakyBucket::Create(spec);
  ASSERT_TRUE(lb.has_value());
  LeakyBucket::State s = lb->Initial(FromNanos(0));
  for (int i = 0; i < 4; ++i) {
    const Decision d = lb->Decide(s, FromNanos(0), 1);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.delay, milliseconds(100) * i);
  }
  const LeakyBucket::State before = s;
  const Decision d = lb->Decide(s, FromNanos(0), 1);  // would wait 400 ms
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, DecisionReason::kOverLimit);
  EXPECT_EQ(d.retry_after, milliseconds(100));
  EXPECT_EQ(s.scaled_level, before.scaled_level);
  // 100 ms later the wait is 300 ms: admitted.
  const Decision later = lb->Decide(s, FromNanos(100'000'000), 1);
  EXPECT_TRUE(later.allowed);
  EXPECT_EQ(later.delay, milliseconds(300));
}

}  // namespace
}  // namespace sluice
