// The design note's worked example, exactly: r = 10 tokens/s, B = 50, starts full.
#include "sluice/token_bucket.h"

#include <gtest/gtest.h>

#include "sluice/clock.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TokenBucket WorkedExampleBucket() {
  auto tb = TokenBucket::Create(LimitSpec{Algorithm::kTokenBucket, 10, seconds(1), 50, false});
  EXPECT_TRUE(tb.has_value());
  return *tb;
}

class WorkedExample : public ::testing::Test {
 protected:
  TokenBucket tb_ = WorkedExampleBucket();
  ManualClock clock_{FromNanos(1'700'000'000'000'000'000)};
  TokenBucket::State state_ = tb_.Initial(clock_.Now());
};

TEST_F(WorkedExample, IdleThenBurstOf45AllAdmittedFiveLeft) {
  clock_.Advance(seconds(10));  // would refill 100, but the bucket saturates at 50
  Decision last;
  for (int i = 0; i < 45; ++i) {
    last = tb_.Decide(state_, clock_.Now(), 1);
    ASSERT_TRUE(last.allowed) << "request " << i;
    EXPECT_EQ(last.retry_after, Duration(0));
  }
  EXPECT_EQ(last.remaining, 5);
  EXPECT_EQ(last.limit, 50);
}

TEST_F(WorkedExample, BurstOf60FirstFiftyPassLastTenGet100msRetry) {
  clock_.Advance(seconds(10));
  for (int i = 0; i < 60; ++i) {
    const Decision d = tb_.Decide(state_, clock_.Now(), 1);
    if (i < 50) {
      EXPECT_TRUE(d.allowed) << "request " << i;
    } else {
      EXPECT_FALSE(d.allowed) << "request " << i;
      EXPECT_EQ(d.reason, DecisionReason::kOverLimit);
      EXPECT_EQ(d.retry_after, milliseconds(100)) << "request " << i;
      EXPECT_EQ(d.remaining, 0);
      EXPECT_EQ(d.reset_after, seconds(5));  // 50 tokens at 10/s
    }
  }
}

TEST_F(WorkedExample, FortyFiveSpreadOver200msKeepTheTwoRefilledTokens) {
  clock_.Advance(seconds(10));
  const Timestamp start = clock_.Now();
  Decision last;
  for (int i = 0; i < 45; ++i) {
    clock_.Set(start + milliseconds(200) * i / 44);
    last = tb_.Decide(state_, clock_.Now(), 1);
    ASSERT_TRUE(last.allowed) << "request " << i;
  }
  // 50 - 45 + 2 tokens refilled during the 200ms.
  EXPECT_EQ(last.remaining, 7);
}

TEST_F(WorkedExample, Sustained10PerSecondIsNeverRejected) {
  for (int i = 0; i < 10'000; ++i) {  // 1000 s
    clock_.Advance(milliseconds(100));
    ASSERT_TRUE(tb_.Decide(state_, clock_.Now(), 1).allowed) << "request " << i;
  }
}

TEST_F(WorkedExample, Sustained10PerSecondFromEmptyIsNeverRejected) {
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(tb_.Decide(state_, clock_.Now(), 1).allowed);
  for (int i = 0; i < 10'000; ++i) {
    clock_.Advance(milliseconds(100));
    ASSERT_TRUE(tb_.Decide(state_, clock_.Now(), 1).allowed) << "request " << i;
  }
}

TEST_F(WorkedExample, Sustained15PerSecondFirstRejectedAfterAboutTenSeconds) {
  // The bucket drains at 15 - 10 = 5 tokens/s: 50 tokens last about 10 s.
  const Timestamp start = clock_.Now();
  Duration first_rejection{-1};
  for (int k = 0; k < 15 * 20; ++k) {
    const Timestamp t = start + Duration(int64_t{1'000'000'000} * k / 15);
    if (!tb_.Decide(state_, t, 1).allowed) {
      first_rejection = t - start;
      break;
    }
  }
  EXPECT_GE(first_rejection, milliseconds(9'500));
  EXPECT_LE(first_rejection, milliseconds(10'500));
}

TEST(TokenBucket, FractionalRatesDoNotDriftOverLongRuns) {
  // 3 per second, capacity 2 (so the bucket never saturates here): a token every 333333333.33 ns.
  // For a million seconds, each request one nanosecond before its token is due fails and the one at
  // the first whole nanosecond after it passes. Accumulated rounding in either direction would
  // break one side.
  auto tb = TokenBucket::Create(LimitSpec{Algorithm::kTokenBucket, 3, seconds(1), 2, false});
  ASSERT_TRUE(tb.has_value());
  TokenBucket::State s = tb->Initial(FromNanos(0));
  ASSERT_TRUE(tb->Decide(s, FromNanos(0), 2).allowed);  // empty at t = 0
  for (int64_t k = 1; k <= 3'000'000; ++k) {
    const int64_t due = (k * 1'000'000'000 + 2) / 3;  // ceil(k/3 s) in ns
    ASSERT_FALSE(tb->Decide(s, FromNanos(due - 1), 1).allowed) << "k=" << k;
    ASSERT_TRUE(tb->Decide(s, FromNanos(due), 1).allowed) << "k=" << k;
  }
}

TEST(TokenBucket, GoingBackInTimeChangesNothing) {
  auto tb = TokenBucket::Create(LimitSpec{Algorithm::kTokenBucket, 10, seconds(1), 10, false});
  ASSERT_TRUE(tb.has_value());
  TokenBucket::State s = tb->Initial(FromNanos(1'000'000'000'000));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(tb->Decide(s, FromNanos(1'000'000'000'000), 1).allowed);
  const TokenBucket::State before = s;
  const Decision d = tb->Decide(s, FromNanos(999'000'000'000), 1);  // one second earlier
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(s.scaled_tokens, before.scaled_tokens);
  EXPECT_EQ(s.last_ns, before.last_ns);
  // The wait is measured from the state's time: 1 s back + 100 ms for the token.
  EXPECT_EQ(d.retry_after, milliseconds(1100));
}

TEST(TokenBucket, CostLargerThanCapacityIsRejectedWithAReasonAndNoConsumption) {
  auto tb = TokenBucket::Create(LimitSpec{Algorithm::kTokenBucket, 10, seconds(1), 50, false});
  ASSERT_TRUE(tb.has_value());
  TokenBucket::State s = tb->Initial(FromNanos(0));
  const Decision d = tb->Decide(s, FromNanos(0), 51);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, DecisionReason::kCostExceedsCapacity);
  EXPECT_EQ(d.retry_after, kNever);
  EXPECT_EQ(d.remaining, 50);
  EXPECT_TRUE(tb->Decide(s, FromNanos(0), 50).allowed);
}

TEST(TokenBucket, WeightedRequestsConsumeTheirCost) {
  auto tb = TokenBucket::Create(LimitSpec{Algorithm::kTokenBucket, 10, seconds(1), 50, false});
  ASSERT_TRUE(tb.has_value());
  TokenBucket::State s = tb->Initial(FromNanos(0));
  EXPECT_EQ(tb->Decide(s, FromNanos(0), 30).remaining, 20);
  const Decision d = tb->Decide(s, FromNanos(0), 25);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, milliseconds(500));  // 5 more tokens at 10/s
  EXPECT_EQ(d.remaining, 20);                   // a rejection takes nothing
}

TEST(TokenBucket, CostZeroAsksWithoutConsumingAndNegativeCostIsInvalid) {
  auto tb = TokenBucket::Create(LimitSpec{Algorithm::kTokenBucket, 10, seconds(1), 5, false});
  ASSERT_TRUE(tb.has_value());
  TokenBucket::State s = tb->Initial(FromNanos(0));
  const Decision peek = tb->Decide(s, FromNanos(0), 0);
  EXPECT_TRUE(peek.allowed);
  EXPECT_EQ(peek.remaining, 5);
  const Decision bad = tb->Decide(s, FromNanos(0), -1);
  EXPECT_FALSE(bad.allowed);
  EXPECT_EQ(bad.reason, DecisionReason::kInvalidRequest);
  EXPECT_EQ(tb->Decide(s, FromNanos(0), 0).remaining, 5);
}

TEST(TokenBucket, ReplenishedAtIsWhenTheBucketIsFullAgain) {
  auto tb = TokenBucket::Create(LimitSpec{Algorithm::kTokenBucket, 10, seconds(1), 50, false});
  ASSERT_TRUE(tb.has_value());
  TokenBucket::State s = tb->Initial(FromNanos(0));
  EXPECT_LE(tb->ReplenishedAt(s), FromNanos(0));
  tb->Decide(s, FromNanos(0), 20);
  EXPECT_EQ(tb->ReplenishedAt(s), FromNanos(2'000'000'000));
}

}  // namespace
}  // namespace sluice
