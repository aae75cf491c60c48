// Priority shedding through the stores' DecideAll (LimitCheck::reserve): the memory store decides
// a reserve with its cost in one step, for configured and transient limiters alike; sluice::
// DecideAll honours it over any Limiter; charges ignore it; and the over-limit cache never
// answers a more important request with a less important one's refusal. Oracle: the issue's
// example worked out by hand (of 100: low above 0.6 gets 60, normal above 0.8 gets 80, critical
// all 100), and the pure algorithm's own answer with the same reserve (tests/core/
// shed_property_test.cc checks those against an independent model).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sluice/decide_all.h"
#include "sluice/fixed_window.h"
#include "sluice/memory_store.h"
#include "sluice/over_limit_cache.h"

namespace sluice {
namespace {

using std::chrono::hours;

const Timestamp kStart = FromNanos(int64_t{1'800'000'000} * 1'000'000'000);  // hour-aligned

constexpr int64_t kLow = 40;     // 100 - floor(0.6 * 100)
constexpr int64_t kNormal = 20;  // 100 - floor(0.8 * 100)

std::shared_ptr<Store> MemoryStore() {
  auto store = OpenMemoryStore();
  EXPECT_TRUE(store.has_value());
  return store ? *store : nullptr;
}

std::unique_ptr<Limiter> Make(Store& store, const LimitSpec& spec, bool transient = false) {
  auto limiter = store.MakeLimiter(spec, LimiterOptions{.id = "shed", .transient = transient});
  EXPECT_TRUE(limiter.has_value()) << (limiter ? "" : limiter.error().message);
  return limiter ? std::move(*limiter) : nullptr;
}

Decision DecideOne(Store& store, Limiter& limiter, int64_t reserve, int64_t cost = 1,
                   bool charge = false) {
  const LimitCheck checks[] = {{&limiter, "k", cost, charge, false, reserve}};
  Decision out[1];
  store.DecideAll(checks, kStart, out);
  return out[0];
}

// Admissions of cost 1 until the first refusal.
int Fill(const std::function<Decision()>& decide) {
  int n = 0;
  while (decide().allowed) ++n;
  return n;
}

const LimitSpec kHundredPerHour{Algorithm::kFixedWindow, 100, hours(1)};

TEST(ShedStore, MemoryStoreGivesLowSixtyNormalEightyCriticalAHundred) {
  for (const Algorithm a : kAllAlgorithms) {
    for (const bool transient : {false, true}) {
      SCOPED_TRACE(std::string(AlgorithmName(a)) + (transient ? " transient" : ""));
      auto store = MemoryStore();
      LimitSpec spec = kHundredPerHour;
      spec.algorithm = a;
      auto limiter = Make(*store, spec, transient);
      ASSERT_NE(limiter, nullptr);
      EXPECT_EQ(Fill([&] { return DecideOne(*store, *limiter, kLow); }), 60);
      EXPECT_EQ(Fill([&] { return DecideOne(*store, *limiter, kNormal); }), 20);
      EXPECT_EQ(Fill([&] { return DecideOne(*store, *limiter, 0); }), 20);
    }
  }
}

TEST(ShedStore, ARefusalForTheReserveSaysWhenCostAndReserveFit) {
  auto store = MemoryStore();
  auto limiter = Make(*store, kHundredPerHour);
  EXPECT_EQ(Fill([&] { return DecideOne(*store, *limiter, kLow); }), 60);
  const Decision low = DecideOne(*store, *limiter, kLow);
  EXPECT_EQ(low.reason, DecisionReason::kOverLimit);
  EXPECT_EQ(low.retry_after, hours(1));  // the next window
  EXPECT_EQ(low.remaining, 40);          // nothing was taken
  // Cost 61 with a reserve of 40 fits no window of 100: never. Cost 101 is over the capacity.
  EXPECT_EQ(DecideOne(*store, *limiter, kLow, 61).retry_after, kNever);
  EXPECT_EQ(DecideOne(*store, *limiter, kLow, 61).reason, DecisionReason::kOverLimit);
  EXPECT_EQ(DecideOne(*store, *limiter, kLow, 101).reason, DecisionReason::kCostExceedsCapacity);
}

// sluice::DecideAll over any Limiter (here one outside every store): cost + reserve decided, the
// reserve given back -- the same verdicts and retry times as the algorithm's own.
TEST(ShedStore, DecideAllOverAnyLimiterKeepsTheReserveWithTheAlgorithmsAnswers) {
  for (const Algorithm a : kAllAlgorithms) {
    SCOPED_TRACE(AlgorithmName(a));
    LimitSpec spec = kHundredPerHour;
    spec.algorithm = a;
    auto limiter = MakeMemoryLimiter(spec);
    ASSERT_TRUE(limiter.has_value());
    auto store = MemoryStore();
    auto reference = Make(*store, spec);
    const auto both = [&](int64_t reserve, int64_t cost, Timestamp at) {
      const LimitCheck any[] = {{limiter->get(), "k", cost, false, false, reserve}};
      const LimitCheck own[] = {{reference.get(), "k", cost, false, false, reserve}};
      Decision got[1], want[1];
      DecideAll(any, at, got);
      store->DecideAll(own, at, want);
      EXPECT_EQ(got[0].allowed, want[0].allowed);
      EXPECT_EQ(got[0].reason, want[0].reason);
      EXPECT_EQ(got[0].remaining, want[0].remaining);
      EXPECT_EQ(got[0].retry_after, want[0].retry_after);
      return got[0].allowed;
    };
    int low = 0;
    while (both(kLow, 1, kStart)) ++low;
    EXPECT_EQ(low, 60);
    both(kLow, 61, kStart);  // never
    both(kNormal, 3, kStart + std::chrono::minutes(7));
    both(0, 5, kStart + std::chrono::minutes(31));
    both(kLow, 2, kStart + std::chrono::minutes(59));
  }
}

// A charge is for work already done: taken whatever the reserve (docs/load-protection.md).
TEST(ShedStore, ChargesIgnoreTheReserve) {
  auto store = MemoryStore();
  auto limiter = Make(*store, kHundredPerHour);
  EXPECT_EQ(Fill([&] { return DecideOne(*store, *limiter, kLow); }), 60);
  const Decision charged = DecideOne(*store, *limiter, kLow, 10, /*charge=*/true);
  EXPECT_TRUE(charged.allowed);  // 70 of 100: fits without the reserve
  EXPECT_EQ(charged.remaining, 30);
}

// Threads of mixed priorities on one key: every admitted request left its reserve free (the
// decision and the take are one step), and exactly the capacity is taken in all.
TEST(ShedStore, ConcurrentPrioritiesKeepTheirReservesAndFillTheCapacity) {
  auto store = MemoryStore();
  auto limiter = Make(*store, kHundredPerHour);
  std::atomic<int> admitted{0}, violations{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const int64_t reserve = t == 0 ? 0 : (t == 1 ? kNormal : kLow);
      for (int i = 0; i < 200; ++i) {
        const Decision d = DecideOne(*store, *limiter, reserve);
        if (!d.allowed) continue;
        admitted.fetch_add(1);
        if (d.remaining < reserve) violations.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(admitted.load(), 100);  // the critical thread takes what the others leave
}

// The over-limit cache in front of the memory store: a fixed window's refusal is normally a fact
// for the rest of its window (every cost >= the refused one), but a refusal taken with a reserve
// says nothing about a request with a smaller one.
TEST(ShedStore, TheOverLimitCacheNeverRefusesCriticalWithALowRefusal) {
  auto cached = OpenOverLimitCache(MemoryStore(), {});
  ASSERT_TRUE(cached.has_value());
  Store& store = **cached;
  auto limiter = Make(store, kHundredPerHour);
  EXPECT_EQ(Fill([&] { return DecideOne(store, *limiter, kLow); }), 60);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(DecideOne(store, *limiter, kLow).allowed);
  EXPECT_TRUE(DecideOne(store, *limiter, kNormal).allowed);
  EXPECT_TRUE(DecideOne(store, *limiter, 0).allowed);
  EXPECT_EQ(store.Stats().cached_decisions, 0u);  // no low refusal was answered from memory
  EXPECT_EQ(Fill([&] { return DecideOne(store, *limiter, 0); }), 100 - 62);
  // A refusal without a reserve is a fact for every priority: answered from memory.
  EXPECT_FALSE(DecideOne(store, *limiter, 0).allowed);
  EXPECT_FALSE(DecideOne(store, *limiter, 0).allowed);
  EXPECT_GT(store.Stats().cached_decisions, 0u);
}

}  // namespace
}  // namespace sluice
