// The adaptive concurrency limit against a scripted backend on a manual clock: each round the
// test holds as many permits as the limit grants (or as a light client would), moves the clock
// by the backend's latency of the moment and gives the verdicts. The oracles are the stated
// behaviour: growth at the latency floor, shrinking under queueing and drops, the bounds, and
// never more calls admitted than limit().
#include "sluice/client/adaptive_limit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace sluice::client {
namespace {

using namespace std::chrono_literals;

AdaptiveLimitOptions Options(int64_t initial, int64_t min, int64_t max) {
  AdaptiveLimitOptions o;
  o.initial_limit = initial;
  o.min_limit = min;
  o.max_limit = max;
  return o;
}

// One round: `calls` permits (at most what the limit grants) held for `latency`, then Success.
// Returns how many were granted.
int64_t Round(AdaptiveLimit& limit, ManualClock& clock, Duration latency, int64_t calls) {
  std::vector<AdaptiveLimit::Permit> held;
  while (static_cast<int64_t>(held.size()) < calls) {
    auto p = limit.Acquire();
    if (!p) break;
    held.push_back(std::move(*p));
  }
  clock.Advance(latency);
  for (auto& p : held) p.Success();
  return static_cast<int64_t>(held.size());
}

TEST(AdaptiveLimitTest, GrowsWhileLatencyStaysAtItsFloorUpToTheMax) {
  ManualClock clock;
  AdaptiveLimit limit(clock, Options(10, 1, 200));
  int64_t previous = limit.limit();
  for (int r = 0; r < 200; ++r) {
    Round(limit, clock, 100ms, INT64_MAX);  // a backend that always answers in 100 ms
    EXPECT_GE(limit.limit(), previous) << "round " << r;
    previous = limit.limit();
  }
  EXPECT_EQ(limit.floor(), 100ms);
  EXPECT_EQ(limit.limit(), 200);  // grew to the max and stayed there
}

TEST(AdaptiveLimitTest, AClientUsingLittleOfTheLimitDoesNotGrowIt) {
  ManualClock clock;
  AdaptiveLimit limit(clock, Options(20, 1, 200));
  for (int r = 0; r < 100; ++r) Round(limit, clock, 100ms, 12);
  const int64_t grown_to = limit.limit();
  EXPECT_GT(grown_to, 20);      // 12 of 20 is more than half: growth is allowed ...
  EXPECT_LE(grown_to, 2 * 12);  // ... to twice the calls in flight at most

  AdaptiveLimit idle(clock, Options(20, 1, 200));
  for (int r = 0; r < 100; ++r) Round(idle, clock, 100ms, 5);
  EXPECT_EQ(idle.limit(), 20);
}

TEST(AdaptiveLimitTest, ShrinksWhenLatencyRisesAndGrowsBackWhenItFalls) {
  ManualClock clock;
  AdaptiveLimitOptions o = Options(50, 1, 200);
  o.floor_reset_windows = 1000;  // here the latency is a queue, not a slower backend
  AdaptiveLimit limit(clock, o);
  for (int r = 0; r < 30; ++r) Round(limit, clock, 10ms, INT64_MAX);
  const int64_t before = limit.limit();
  // Latency 4x the floor: the backend queues. Every window (100 ms) must take the limit down.
  int64_t previous = before;
  for (int r = 0; r < 100; ++r) {
    Round(limit, clock, 40ms, INT64_MAX);
    EXPECT_LE(limit.limit(), previous) << "round " << r;
    previous = limit.limit();
  }
  EXPECT_LT(limit.limit(), before / 3);
  EXPECT_GE(limit.limit(), 1);
  // Latency within the tolerance (1.2x the floor < 1.5x) is not queueing: it grows again.
  const int64_t low = limit.limit();
  for (int r = 0; r < 300; ++r) Round(limit, clock, 12ms, INT64_MAX);
  EXPECT_GT(limit.limit(), low + 10);
}

TEST(AdaptiveLimitTest, DropsBackOffOncePerWindowNotOncePerCall) {
  ManualClock clock;
  AdaptiveLimit limit(clock, Options(100, 5, 200));
  // 100 calls sent together all time out: one backoff (x0.9), not 100 of them.
  std::vector<AdaptiveLimit::Permit> held;
  while (auto p = limit.Acquire()) held.push_back(std::move(*p));
  ASSERT_EQ(held.size(), 100u);
  clock.Advance(1s);
  for (auto& p : held) p.Dropped();
  EXPECT_EQ(limit.limit(), 90);
  // Drops of calls sent after that backoff take it further down, window by window, to the min.
  int64_t previous = limit.limit();
  for (int r = 0; r < 60; ++r) {
    held.clear();
    while (auto p = limit.Acquire()) held.push_back(std::move(*p));
    clock.Advance(200ms);
    for (auto& p : held) p.Dropped();
    EXPECT_LE(limit.limit(), previous) << "round " << r;
    previous = limit.limit();
  }
  EXPECT_EQ(limit.limit(), 5);  // down to the min, which holds
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitTest, NeverAdmitsMoreThanTheLimitAndSharesReserveTheRest) {
  ManualClock clock;
  AdaptiveLimit limit(clock, Options(20, 1, 100));
  std::vector<AdaptiveLimit::Permit> held;
  while (auto p = limit.Acquire(0.6)) held.push_back(std::move(*p));
  EXPECT_EQ(held.size(), 12u);  // "low": up to 60% of 20
  while (auto p = limit.Acquire(0.8)) held.push_back(std::move(*p));
  EXPECT_EQ(held.size(), 16u);  // "normal": up to 80%
  while (auto p = limit.Acquire()) held.push_back(std::move(*p));
  EXPECT_EQ(held.size(), 20u);  // "critical": the rest
  EXPECT_EQ(limit.in_flight(), 20);
  EXPECT_FALSE(limit.Acquire());
  EXPECT_FALSE(limit.Acquire(0.0));
  // The limit falls below what is held: nothing is admitted until in_flight is under it again.
  clock.Advance(1s);
  held.back().Dropped();
  held.pop_back();
  ASSERT_EQ(limit.limit(), 18);
  EXPECT_EQ(limit.in_flight(), 19);
  EXPECT_FALSE(limit.Acquire());
  held.pop_back();  // destroyed: released without a verdict
  EXPECT_FALSE(limit.Acquire());
  held.pop_back();
  EXPECT_TRUE(limit.Acquire());
}

TEST(AdaptiveLimitTest, PermitsReleasedWithoutAVerdictTeachNothing) {
  ManualClock clock;
  AdaptiveLimit limit(clock, Options(20, 1, 100));
  for (int r = 0; r < 50; ++r) {
    std::vector<AdaptiveLimit::Permit> held;
    while (auto p = limit.Acquire()) held.push_back(std::move(*p));
    clock.Advance(r % 2 ? 10ms : 5s);
    for (size_t i = 0; i < held.size(); i += 2) held[i].Ignore();
    // The rest are destroyed with the vector.
  }
  EXPECT_EQ(limit.limit(), 20);
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(limit.floor(), 0ns);
  // A moved-from permit releases nothing; the moved-to one releases once.
  auto a = limit.Acquire();
  ASSERT_TRUE(a);
  AdaptiveLimit::Permit b = std::move(*a);
  EXPECT_FALSE(a->held());
  EXPECT_TRUE(b.held());
  EXPECT_EQ(limit.in_flight(), 1);
  b.Success();
  b.Success();
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitTest, ABackendSlowerForGoodIsMeasuredAgain) {
  ManualClock clock;
  AdaptiveLimitOptions o = Options(40, 1, 200);
  o.floor_reset_windows = 5;
  AdaptiveLimit limit(clock, o);
  for (int r = 0; r < 20; ++r) Round(limit, clock, 10ms, INT64_MAX);
  EXPECT_EQ(limit.floor(), 10ms);
  // From now on the backend takes 50 ms at any concurrency (a slower dependency, not a queue).
  for (int r = 0; r < 200; ++r) Round(limit, clock, 50ms, INT64_MAX);
  EXPECT_EQ(limit.floor(), 50ms);
  EXPECT_EQ(limit.limit(), 200);  // at its new floor, it grew back to the max
}

TEST(AdaptiveLimitTest, BadOptionsAreRefusedByName) {
  auto bad = [](auto change) {
    AdaptiveLimitOptions o;
    change(o);
    auto r = ValidateAdaptiveLimitOptions(o);
    return r ? std::string() : r.error().message;
  };
  EXPECT_NE(bad([](auto& o) { o.min_limit = 0; }).find("min_limit"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.max_limit = 0; }).find("max_limit"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.initial_limit = 5000; }).find("initial_limit"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.tolerance = 0.5; }).find("tolerance"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.smoothing = 0; }).find("smoothing"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.backoff = 1; }).find("backoff"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.sample_window = 0ns; }).find("sample_window"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.min_samples = 0; }).find("min_samples"), std::string::npos);
  EXPECT_EQ(bad([](auto&) {}), "");
}

// Run under TSan too: four threads acquire, hold and release against one limit while the clock
// moves; the calls held at once, counted by the test, never exceed the limit's bound.
TEST(ClientConcurrencyTest, AnAdaptiveLimitSharedByFourThreadsNeverAdmitsTooMany) {
  ManualClock clock;
  AdaptiveLimitOptions o = Options(8, 2, 16);
  o.sample_window = 1ms;
  o.min_samples = 1;
  AdaptiveLimit limit(clock, o);
  std::atomic<int64_t> holding{0}, most{0}, granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        auto p = limit.Acquire(t == 0 ? 0.6 : 1.0);
        if (!p) continue;
        ++granted;
        const int64_t now_holding = ++holding;
        int64_t seen = most.load();
        while (now_holding > seen && !most.compare_exchange_weak(seen, now_holding)) {
        }
        EXPECT_LE(limit.in_flight(), 16);
        clock.Advance(std::chrono::microseconds(100 + (i % 7) * 300));
        --holding;
        if (i % 11 == 0) {
          p->Dropped();
        } else if (i % 5 == 0) {
          p->Ignore();
        } else {
          p->Success();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), 16);
  EXPECT_GT(granted.load(), 0);
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_GE(limit.limit(), 2);
  EXPECT_LE(limit.limit(), 16);
}

}  // namespace
}  // namespace sluice::client
