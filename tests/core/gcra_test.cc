#include "sluice/gcra.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

Gcra MakeGcra(int64_t limit, Duration per, int64_t burst) {
  auto g = Gcra::Create(LimitSpec{Algorithm::kGcra, limit, per, burst, false});
  EXPECT_TRUE(g.has_value()) << (g ? "" : g.error().message);
  return *g;
}

TEST(Gcra, WorkedExampleBurstOf60) {
  const Gcra g = MakeGcra(10, seconds(1), 50);
  const Timestamp t0 = FromNanos(1'700'000'000'000'000'000);
  Gcra::State s = g.Initial(t0);
  const Timestamp t = t0 + seconds(10);
  for (int i = 0; i < 60; ++i) {
    const Decision d = g.Decide(s, t, 1);
    EXPECT_EQ(d.allowed, i < 50) << "request " << i;
    if (i == 44) {
      EXPECT_EQ(d.remaining, 5);
    }
    if (i >= 50) {
      EXPECT_EQ(d.retry_after, milliseconds(100));
    }
  }
}

TEST(Gcra, StateIsOneTheoreticalArrivalTime) {
  const Gcra g = MakeGcra(10, seconds(1), 50);
  Gcra::State s = g.Initial(FromNanos(0));
  for (int i = 0; i < 20; ++i) g.Decide(s, FromNanos(0), 1);
  EXPECT_EQ(s.tat_ns, 2'000'000'000);  // 20 emission intervals of 100 ms
  EXPECT_EQ(s.tat_frac, 0);
  EXPECT_EQ(g.ReplenishedAt(s), FromNanos(2'000'000'000));
}

TEST(Gcra, FractionalEmissionIntervalIsExact) {
  // 3/s: T = 333333333.33 ns. After 3 hits the TAT is exactly one second ahead.
  const Gcra g = MakeGcra(3, seconds(1), 3);
  Gcra::State s = g.Initial(FromNanos(0));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(g.Decide(s, FromNanos(0), 1).allowed);
  EXPECT_EQ(s.tat_ns, 1'000'000'000);
  EXPECT_EQ(s.tat_frac, 0);
  const Decision d = g.Decide(s, FromNanos(0), 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Duration(333'333'334));  // rounded up, never early
}

TEST(Gcra, CostLargerThanCapacityIsRejectedWithAReason) {
  const Gcra g = MakeGcra(10, seconds(1), 5);
  Gcra::State s = g.Initial(FromNanos(0));
  const Decision d = g.Decide(s, FromNanos(0), 6);
  EXPECT_EQ(d.reason, DecisionReason::kCostExceedsCapacity);
  EXPECT_EQ(d.retry_after, kNever);
  EXPECT_TRUE(g.Decide(s, FromNanos(0), 5).allowed);
}

TEST(Gcra, ClockFarInThePastDoesNotOverflow) {
  const Gcra g = MakeGcra(1'000'000, seconds(1), 1'000'000);
  Gcra::State s = g.Initial(FromNanos(4'000'000'000'000'000'000));
  g.Decide(s, FromNanos(4'000'000'000'000'000'000), 1'000'000);
  const Decision d = g.Decide(s, FromNanos(0), 1);  // 127 years earlier
  EXPECT_FALSE(d.allowed);
  EXPECT_GT(d.retry_after, Duration(0));
}

}  // namespace
}  // namespace sluice
