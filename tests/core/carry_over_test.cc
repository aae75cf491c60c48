// Changing a limit mid-period (src/core/carry_over.h): a counter's usage read under the old spec
// and written under the new one, against expectations computed by hand from the documented rule
// (a bucket keeps capacity - tokens, a window its counts).
#include "core/carry_over.h"

#include <gtest/gtest.h>

#include <chrono>

#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/token_bucket.h"

namespace sluice {
namespace {

using internal::StateFromUsage;
using internal::UsageOf;

constexpr int64_t kDayNs = int64_t{86400} * 1'000'000'000;
constexpr Duration kMonth{30 * kDayNs};
// Day 20010 is a multiple of 30 days: a 30-day fixed window opens here.
const Timestamp kT0 = FromNanos(20010 * kDayNs);
// 30 days / 800: the time one hit of an 800-a-month bucket takes to refill, 3,240 s.
constexpr Duration kPerHitAt800 = std::chrono::seconds(3240);

LimitSpec Monthly(Algorithm a, int64_t limit) { return LimitSpec{a, limit, kMonth}; }

// Decides `hits` one at a time under `from` at kT0, converts the state to `to` at `at`, and
// returns it with the algorithm for `to`.
template <typename Alg>
struct Converted {
  Alg alg;
  typename Alg::State state;
};

template <typename From, typename To = From>
Converted<To> UseThenChange(const LimitSpec& from, int64_t hits, const LimitSpec& to,
                            Timestamp at) {
  const From old = *From::Create(from);
  typename From::State s = old.Initial(kT0);
  for (int64_t i = 0; i < hits; ++i) EXPECT_TRUE(old.Decide(s, kT0, 1).allowed);
  EXPECT_EQ(CarryOverFor(from, to), CarryOver::kConvert);
  const To next = *To::Create(to);
  auto state = StateFromUsage(next, UsageOf(old, s, at), at);
  EXPECT_TRUE(state.has_value());
  return Converted<To>{next, state.value_or(next.Initial(at))};
}

template <typename Alg>
void ExpectRaisedKeepsUsage(Algorithm a) {
  SCOPED_TRACE(AlgorithmName(a));
  // 1,000 a month, 900 used, raised to 5,000: 4,100 left.
  auto c = UseThenChange<Alg>(Monthly(a, 1000), 900, Monthly(a, 5000), kT0);
  EXPECT_EQ(c.alg.Decide(c.state, kT0, 0).remaining, 4100);
  EXPECT_TRUE(c.alg.Decide(c.state, kT0, 4100).allowed);
  EXPECT_FALSE(c.alg.Decide(c.state, kT0, 1).allowed);
}

TEST(CarryOver, RaisingAMonthlyQuotaKeepsWhatWasUsed) {
  ExpectRaisedKeepsUsage<TokenBucket>(Algorithm::kTokenBucket);
  ExpectRaisedKeepsUsage<Gcra>(Algorithm::kGcra);
  ExpectRaisedKeepsUsage<LeakyBucket>(Algorithm::kLeakyBucket);
  ExpectRaisedKeepsUsage<FixedWindow>(Algorithm::kFixedWindow);
  ExpectRaisedKeepsUsage<SlidingWindowCounter>(Algorithm::kSlidingWindowCounter);
  ExpectRaisedKeepsUsage<SlidingWindowLog>(Algorithm::kSlidingWindowLog);
}

// Lowered to 800 after 900: the bucket is 100 hits in debt, so the next hit passes once 101 hits
// have refilled at 800 a month: 101 x 3,240 s.
template <typename Alg>
void ExpectLoweredBucketRefusesUntilRefilled(Algorithm a) {
  SCOPED_TRACE(AlgorithmName(a));
  auto c = UseThenChange<Alg>(Monthly(a, 1000), 900, Monthly(a, 800), kT0);
  Decision d = c.alg.Decide(c.state, kT0, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 101 * kPerHitAt800);
  const Timestamp later = kT0 + 101 * kPerHitAt800;
  EXPECT_FALSE(c.alg.Decide(c.state, later - Duration(1), 1).allowed);
  EXPECT_TRUE(c.alg.Decide(c.state, later, 1).allowed);
}

TEST(CarryOver, LoweringABucketBelowItsUsageRefusesUntilRefilled) {
  ExpectLoweredBucketRefusesUntilRefilled<TokenBucket>(Algorithm::kTokenBucket);
  ExpectLoweredBucketRefusesUntilRefilled<Gcra>(Algorithm::kGcra);
  ExpectLoweredBucketRefusesUntilRefilled<LeakyBucket>(Algorithm::kLeakyBucket);
}

TEST(CarryOver, LoweringAFixedWindowBelowItsUsageRefusesUntilTheWindowEnds) {
  const Algorithm a = Algorithm::kFixedWindow;
  auto c = UseThenChange<FixedWindow>(Monthly(a, 1000), 900, Monthly(a, 800), kT0);
  const Decision d = c.alg.Decide(c.state, kT0 + std::chrono::hours(24), 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, kMonth - std::chrono::hours(24));
  EXPECT_FALSE(c.alg.Decide(c.state, kT0 + kMonth - Duration(1), 1).allowed);
  EXPECT_TRUE(c.alg.Decide(c.state, kT0 + kMonth, 1).allowed);
}

TEST(CarryOver, ABucketKeepsItsUsageAsOfTheChangeRoundedUp) {
  // 1,000 per 1,000 s (one a second): 900 taken at kT0, 100.5 s later 100.5 have refilled, so
  // 799.5 are used, kept as 800; at 5,000 per 1,000 s that leaves 4,200.
  const LimitSpec from{Algorithm::kTokenBucket, 1000, std::chrono::seconds(1000)};
  const LimitSpec to{Algorithm::kTokenBucket, 5000, std::chrono::seconds(1000)};
  const Timestamp at = kT0 + std::chrono::milliseconds(100'500);
  auto c = UseThenChange<TokenBucket>(from, 900, to, at);
  EXPECT_EQ(c.alg.Decide(c.state, at, 0).remaining, 4200);
  // A burst change alone keeps it too: capacity 2,000 at the same rate, 1,200 left.
  LimitSpec burst = from;
  burst.burst = 2000;
  auto b = UseThenChange<TokenBucket>(from, 900, burst, at);
  EXPECT_EQ(b.alg.Decide(b.state, at, 0).remaining, 1200);
}

TEST(CarryOver, ABucketMovesToAndFromTheWideArithmetic) {
  const LimitSpec narrow{Algorithm::kTokenBucket, 1000, std::chrono::hours(24 * 365)};
  const LimitSpec wide{Algorithm::kTokenBucket, 1'000'000'007, std::chrono::hours(24 * 365)};
  ASSERT_FALSE(NeedsWideArithmetic(narrow));
  ASSERT_TRUE(NeedsWideArithmetic(wide));
  auto up = UseThenChange<TokenBucket, WideTokenBucket>(narrow, 900, wide, kT0);
  EXPECT_EQ(up.alg.Decide(up.state, kT0, 0).remaining, 1'000'000'007 - 900);
  auto down = UseThenChange<WideTokenBucket, TokenBucket>(wide, 900, narrow, kT0);
  EXPECT_EQ(down.alg.Decide(down.state, kT0, 0).remaining, 100);
}

TEST(CarryOver, AKeyHoldsAtMostTwoOfTheNewCapacities) {
  // 900 used, lowered to 100: the sliding counter keeps 200 in its window, the log the newest
  // 200 stamps, the bucket one capacity of debt (it refills in two fill times, not nine).
  const Algorithm swc = Algorithm::kSlidingWindowCounter;
  auto c = UseThenChange<SlidingWindowCounter>(Monthly(swc, 1000), 900, Monthly(swc, 100), kT0);
  EXPECT_EQ(c.state.current, 200u);
  const Algorithm log = Algorithm::kSlidingWindowLog;
  auto l = UseThenChange<SlidingWindowLog>(Monthly(log, 1000), 900, Monthly(log, 100), kT0);
  EXPECT_EQ(l.state.stamps.size(), 200u);
  const Algorithm tb = Algorithm::kTokenBucket;
  auto t = UseThenChange<TokenBucket>(Monthly(tb, 1000), 900, Monthly(tb, 100), kT0);
  EXPECT_EQ(t.alg.Used(t.state, kT0), 200);
  EXPECT_FALSE(t.alg.Decide(t.state, kT0 + 2 * kMonth - Duration(1), 100).allowed);
  EXPECT_TRUE(t.alg.Decide(t.state, kT0 + 2 * kMonth, 100).allowed);
}

TEST(CarryOver, WhichChangesKeepTheUsage) {
  const LimitSpec fw = Monthly(Algorithm::kFixedWindow, 1000);
  const LimitSpec tb = Monthly(Algorithm::kTokenBucket, 1000);
  EXPECT_EQ(CarryOverFor(fw, fw), CarryOver::kKeep);
  EXPECT_EQ(CarryOverFor(fw, tb), CarryOver::kDrop);  // another algorithm
  LimitSpec week = fw;
  week.period = std::chrono::hours(24 * 7);
  EXPECT_EQ(CarryOverFor(fw, week), CarryOver::kDrop);  // a window of another length
  LimitSpec tb_week = tb;
  tb_week.period = std::chrono::hours(24 * 7);
  EXPECT_EQ(CarryOverFor(tb, tb_week), CarryOver::kConvert);  // a bucket's hits are hits
  LimitSpec shaper = Monthly(Algorithm::kLeakyBucket, 1000);
  LimitSpec meter = shaper;
  shaper.shaper = true;
  EXPECT_EQ(CarryOverFor(meter, shaper), CarryOver::kConvert);
  // Usage of another kind is never read as this algorithm's.
  const FixedWindow window = *FixedWindow::Create(fw);
  const TokenBucket bucket = *TokenBucket::Create(tb);
  EXPECT_FALSE(StateFromUsage(window, UsageOf(bucket, bucket.Initial(kT0), kT0), kT0));
  EXPECT_FALSE(StateFromUsage(bucket, UsageOf(window, window.Initial(kT0), kT0), kT0));
}

}  // namespace
}  // namespace sluice
