// The whole range, exact (issue 25): token_bucket, gcra, leaky_bucket, fixed_window and
// sliding_window_counter, over limits chosen for their factors (1, 7, primes, 30001, 999999,
// 2^31-1, 2^32-1) x every unit envoyproxy/ratelimit has (and odd and longest periods) x bursts up
// to 2^32-1, on random traffic with costs up to the capacity and time steps from 0 ns to the
// fill time, decide exactly what an independent oracle (exact_oracle.h: the definitions in
// 128-bit integers with unreduced denominators) decides: verdict, reason, remaining,
// reset_after, retry_after and a shaper's delay, for Decide and Charge alike. The buckets run
// both as the memory store builds them (64-bit unless NeedsWideArithmetic) and in 128 bits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "exact_oracle.h"
#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/token_bucket.h"

namespace sluice {
namespace {

using testing::i128;
using testing::Want;

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kYear = 365 * 86400 * kSecond;
constexpr int64_t kMaxFill = 100 * kYear;
constexpr int64_t kStart = 1'780'000'000 * kSecond + 123'456'789;  // 2026, not window-aligned
// Twice the longest fill time past the latest time a trace reaches stays below 2^63 ns.
constexpr int64_t kLatest = kStart + 30 * kYear;
constexpr int kSteps = 160;

constexpr int64_t kLimits[] = {1,       7,          30001,      65537,     999999,
                               1000003, 2147483647, 4294967291, 4294967295};
constexpr int64_t kPeriods[] = {kSecond,         60 * kSecond,        3600 * kSecond,
                                86400 * kSecond, 7 * 86400 * kSecond, 30 * 86400 * kSecond,
                                kYear,           7 * kSecond + 1,     3650 * 86400 * kSecond};

std::string Str(i128 v) {
  if (v < 0) return "-" + Str(-v);
  if (v < 10) return std::string(1, static_cast<char>('0' + static_cast<int>(v)));
  return Str(v / 10) + Str(v % 10);
}

std::string ReasonName(DecisionReason r) { return std::to_string(static_cast<int>(r)); }

// Compares every field the oracle defines; returns "" or what differs.
std::string Differs(const Decision& got, const Want& want) {
  std::string out;
  const auto field = [&out](const char* name, i128 g, i128 w) {
    if (g != w) out += std::string(name) + " " + Str(g) + " != " + Str(w) + "; ";
  };
  field("allowed", got.allowed, want.allowed);
  if (got.reason != want.reason) {
    out += "reason " + ReasonName(got.reason) + " != " + ReasonName(want.reason) + "; ";
  }
  field("remaining", got.remaining, want.remaining);
  field("reset_after", got.reset_after.count(), want.reset_after);
  field("delay", got.delay.count(), want.delay);
  if (want.reason == DecisionReason::kOverLimit) {
    field("retry_after", got.retry_after.count(), want.retry_after);
  } else if (want.reason == DecisionReason::kCostExceedsCapacity && got.retry_after != kNever) {
    out += "retry_after is not kNever; ";
  }
  return out;
}

i128 Uniform(std::mt19937_64& rng, i128 lo, i128 hi) {  // [lo, hi], hi - lo < 2^64
  if (hi <= lo) return lo;
  std::uniform_int_distribution<uint64_t> u(0, static_cast<uint64_t>(hi - lo));
  return lo + u(rng);
}

// Costs: 0, 1, the capacity, one above it, and anything between.
int64_t PickCost(std::mt19937_64& rng, int64_t capacity) {
  switch (rng() % 6) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return capacity;
    case 3:
      return capacity + 1;
    default:
      return static_cast<int64_t>(Uniform(rng, 1, capacity));
  }
}

// Time steps: none, a few ns, about what `cost` takes to refill, up to the whole fill time, and
// exactly the last retry time (and 1 ns short of it), to land on the boundaries.
int64_t PickGap(std::mt19937_64& rng, i128 period, i128 limit, i128 capacity, int64_t cost,
                int64_t last_retry) {
  const i128 fill = capacity * period / limit + 1;
  i128 gap = 0;
  switch (rng() % 7) {
    case 0:
      gap = 0;
      break;
    case 1:
      gap = Uniform(rng, 1, 1000);
      break;
    case 2:
      gap = Uniform(rng, 0, 2 * (std::max<int64_t>(cost, 1) * period / limit) + 1);
      break;
    case 3:
      gap = Uniform(rng, 0, fill);
      break;
    case 4:
      gap = last_retry;
      break;
    case 5:
      gap = std::max<int64_t>(0, last_retry - 1);
      break;
    default:
      gap = Uniform(rng, 0, period);
  }
  return static_cast<int64_t>(gap);
}

struct Case {
  int64_t limit;
  int64_t period;
  int64_t capacity;  // the burst for buckets, else the limit
  bool shaper = false;
  uint64_t seed;
};

std::string Describe(const Case& c) {
  return std::to_string(c.limit) + " per " + std::to_string(c.period) + "ns, capacity " +
         std::to_string(c.capacity) + (c.shaper ? " shaper" : "") + ", seed " +
         std::to_string(c.seed);
}

// Runs the algorithm and the oracle side by side; returns the number of admissions (so the
// caller can see the trace was not all refusals), or -1 after the first difference.
template <typename Alg, typename Oracle>
int Run(const Alg& alg, Oracle oracle, const Case& c) {
  std::mt19937_64 rng(c.seed);
  int64_t t = kStart;
  typename Alg::State s = alg.Initial(FromNanos(t));
  int64_t last_retry = 0;
  int admitted = 0;
  for (int i = 0; i < kSteps; ++i) {
    const int64_t cost = PickCost(rng, c.capacity);
    const int64_t gap = PickGap(rng, c.period, c.limit, c.capacity, cost, last_retry);
    t = std::min(kLatest, t + gap);
    const bool charge = rng() % 8 == 0;
    const Decision got =
        charge ? alg.Charge(s, FromNanos(t), cost) : alg.Decide(s, FromNanos(t), cost);
    const Want want =
        charge ? testing::Charged(oracle, t, cost, c.capacity) : oracle.Decide(t, cost);
    const std::string diff = Differs(got, want);
    if (!diff.empty()) {
      ADD_FAILURE() << Describe(c) << ": step " << i << (charge ? " charge " : " decide ") << cost
                    << " at +" << (t - kStart) << "ns: " << diff;
      return -1;
    }
    admitted += got.allowed ? 1 : 0;
    if (got.reason == DecisionReason::kOverLimit) last_retry = got.retry_after.count();
  }
  return admitted;
}

// Bursts for a bucket of `limit` per `period`: the limit itself, 1, 2^32-1 and a random one,
// each kept only if the bucket fills within 100 years (ValidateLimitSpec's bound).
std::vector<int64_t> Bursts(std::mt19937_64& rng, int64_t limit, int64_t period) {
  const i128 most = std::min<i128>(4294967295, static_cast<i128>(kMaxFill) * limit / period);
  std::vector<int64_t> out = {limit, 1, static_cast<int64_t>(most),
                              static_cast<int64_t>(Uniform(rng, 1, most))};
  std::erase_if(out, [&](int64_t b) {
    return static_cast<i128>(b) * period > static_cast<i128>(kMaxFill) * limit;
  });
  return out;
}

template <typename Narrow, typename Wide, typename MakeOracle>
void CheckBucket(Algorithm algorithm, MakeOracle make_oracle) {
  std::mt19937_64 rng(static_cast<uint64_t>(algorithm) * 7919 + 1);
  int cases = 0, wide_cases = 0, admitted = 0;
  for (int64_t limit : kLimits) {
    for (int64_t period : kPeriods) {
      for (int64_t burst : Bursts(rng, limit, period)) {
        const bool shaper = algorithm == Algorithm::kLeakyBucket && rng() % 2 == 0;
        LimitSpec spec{algorithm, limit, Duration(period), burst, shaper};
        const Case c{limit, period, burst, shaper, rng()};
        auto wide = Wide::Create(spec);
        ASSERT_TRUE(wide.has_value()) << Describe(c) << ": " << wide.error().message;
        const int a = Run(*wide, make_oracle(c), c);
        ASSERT_GE(a, 0);
        admitted += a;
        ++cases;
        if (NeedsWideArithmetic(spec)) {
          ++wide_cases;
          if constexpr (!std::is_same_v<Narrow, Wide>) {
            EXPECT_FALSE(Narrow::Create(spec).has_value()) << Describe(c);
          }
        } else if constexpr (!std::is_same_v<Narrow, Wide>) {
          auto narrow = Narrow::Create(spec);
          ASSERT_TRUE(narrow.has_value()) << Describe(c) << ": " << narrow.error().message;
          ASSERT_GE(Run(*narrow, make_oracle(c), c), 0);
        }
      }
    }
  }
  // The range was covered on both sides of 2^61, and the traces admitted and refused.
  EXPECT_GT(wide_cases, cases / 3);
  EXPECT_LT(wide_cases, cases);
  EXPECT_GT(admitted, cases * kSteps / 10);
  EXPECT_LT(admitted, cases * kSteps * 9 / 10);
}

TEST(RangeProperty, TokenBucketIsExactOverTheWholeRange) {
  CheckBucket<TokenBucket, WideTokenBucket>(Algorithm::kTokenBucket, [](const Case& c) {
    return testing::TokenBucketOracle(c.limit, c.period, c.capacity, kStart);
  });
}

TEST(RangeProperty, GcraIsExactOverTheWholeRange) {
  // GCRA keeps one class (its state holds any spec); both type slots name it.
  CheckBucket<Gcra, Gcra>(Algorithm::kGcra, [](const Case& c) {
    return testing::GcraOracle(c.limit, c.period, c.capacity, kStart);
  });
}

TEST(RangeProperty, LeakyBucketIsExactOverTheWholeRange) {
  CheckBucket<LeakyBucket, WideLeakyBucket>(Algorithm::kLeakyBucket, [](const Case& c) {
    return testing::LeakyBucketOracle(c.limit, c.period, c.capacity, kStart, c.shaper);
  });
}

template <typename Alg, typename MakeOracle>
void CheckWindow(Algorithm algorithm, MakeOracle make_oracle) {
  std::mt19937_64 rng(static_cast<uint64_t>(algorithm) * 104729 + 3);
  int cases = 0, wide_cases = 0, admitted = 0;
  for (int64_t limit : kLimits) {
    for (int64_t period : kPeriods) {
      const LimitSpec spec{algorithm, limit, Duration(period), 0, false};
      const Case c{limit, period, limit, false, rng()};
      auto alg = Alg::Create(spec);
      ASSERT_TRUE(alg.has_value()) << Describe(c) << ": " << alg.error().message;
      const int a = Run(*alg, make_oracle(c), c);
      ASSERT_GE(a, 0);
      admitted += a;
      ++cases;
      wide_cases += NeedsWideArithmetic(spec) ? 1 : 0;
    }
  }
  EXPECT_GT(admitted, cases * kSteps / 10);
  EXPECT_LT(admitted, cases * kSteps * 9 / 10);
  if (algorithm == Algorithm::kSlidingWindowCounter) {
    EXPECT_GT(wide_cases, cases / 3);
    EXPECT_LT(wide_cases, cases);
  }
}

TEST(RangeProperty, FixedWindowIsExactOverTheWholeRange) {
  CheckWindow<FixedWindow>(Algorithm::kFixedWindow, [](const Case& c) {
    return testing::FixedWindowOracle(c.limit, c.period, kStart);
  });
}

TEST(RangeProperty, SlidingWindowCounterIsExactOverTheWholeRange) {
  CheckWindow<SlidingWindowCounter>(Algorithm::kSlidingWindowCounter, [](const Case& c) {
    return testing::SlidingWindowCounterOracle(c.limit, c.period, kStart);
  });
}

// The oracle is not the code under test: on a hand-checked trace it gives the numbers worked
// out on paper. 7 per day, burst 3, starting full: a request of 3 empties it; one more token
// takes 86400/7 s = 12342857142857.14 ns, so it is refused until 12342857142858 ns.
TEST(RangeProperty, TheOracleMatchesAHandWorkedTrace) {
  testing::TokenBucketOracle tb(7, 86400 * kSecond, 3, 0);
  EXPECT_TRUE(tb.Decide(0, 3).allowed);
  const Want refused = tb.Decide(5, 1);
  EXPECT_FALSE(refused.allowed);
  EXPECT_TRUE(refused.retry_after == 12342857142858 - 5);
  EXPECT_FALSE(tb.Decide(12342857142857, 1).allowed);
  EXPECT_TRUE(tb.Decide(12342857142858, 1).allowed);
  // Sliding window counter, 10 per 100 ns: 10 hits in window 0; at 150 ns the estimate is
  // 0 + 10 * 50/100 = 5, so 5 more fit and a 6th waits until 160 ns (10 * 40/100 = 4).
  testing::SlidingWindowCounterOracle swc(10, 100, 0);
  EXPECT_TRUE(swc.Decide(0, 10).allowed);
  EXPECT_TRUE(swc.Decide(150, 5).allowed);
  const Want w = swc.Decide(150, 1);
  EXPECT_FALSE(w.allowed);
  EXPECT_TRUE(w.retry_after == 10);
}

}  // namespace
}  // namespace sluice
