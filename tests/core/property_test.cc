// Property tests: every algorithm, on random and bursty traffic with random parameters, makes
// exactly the decision its brute-force oracle makes (so it never admits more than the
// documented bound and never rejects what fits), and the admitted traffic obeys the bound.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"
#include "support/traffic.h"

namespace sluice {
namespace {

using testing::Admitted;
using testing::Request;

constexpr int64_t kStart = 1'700'000'000'000'000'000;  // ns; window-aligned for D | 1e9
constexpr int kSeeds = 12;
constexpr int kRequests = 1500;

struct Params {
  int64_t limit;
  int64_t period_ns;
  int64_t burst;
  int max_cost;
};

Params RandomParams(std::mt19937_64& rng) {
  static constexpr int64_t kPeriods[] = {1'000'000, 7'000'000, 100'000'000, 1'000'000'000,
                                         3'000'000'000};
  std::uniform_int_distribution<int64_t> limit(1, 25);
  std::uniform_int_distribution<size_t> period(0, std::size(kPeriods) - 1);
  std::uniform_int_distribution<int> cost(1, 3);
  Params p{limit(rng), kPeriods[period(rng)], 0, cost(rng)};
  std::uniform_int_distribution<int64_t> burst(1, 3 * p.limit);
  p.burst = burst(rng);
  return p;
}

// Mixed traffic: half the seeds random, half bursty, gaps scaled to the period. Times are
// multiples of 10 ns, which the sliding log's quantum divides for every period above.
std::vector<Request> Traffic(std::mt19937_64& rng, const Params& p, int seed) {
  const int64_t per_hit = p.period_ns / p.limit;
  if (seed % 2 == 0) {
    return testing::RandomTraffic(rng, kRequests, kStart, per_hit / 2 + 10, 10, p.max_cost);
  }
  return testing::BurstyTraffic(rng, kRequests, kStart, static_cast<int>(2 * p.limit + 2),
                                per_hit / 20 + 10, 3 * p.period_ns, 10, p.max_cost);
}

template <typename Alg, typename Oracle>
std::vector<Admitted> CheckAgainstOracle(const Alg& alg, Oracle oracle,
                                         const std::vector<Request>& traffic) {
  typename Alg::State s = alg.Initial(FromNanos(traffic.front().t_ns));
  std::vector<Admitted> admitted;
  for (size_t i = 0; i < traffic.size(); ++i) {
    const Request& r = traffic[i];
    const Decision d = alg.Decide(s, FromNanos(r.t_ns), r.cost);
    const bool expected = oracle.Admit(r.t_ns, r.cost);
    EXPECT_EQ(d.allowed, expected) << "request " << i << " at " << r.t_ns << " cost " << r.cost;
    if (d.allowed != expected) break;
    EXPECT_EQ(d.retry_after == Duration(0), d.allowed) << "request " << i;
    EXPECT_GE(d.remaining, 0);
    EXPECT_LE(d.remaining, d.limit);
    if (d.allowed) admitted.push_back({r.t_ns, r.cost});
  }
  // The traffic must exercise both sides of the decision, or the comparison proves little.
  EXPECT_GT(admitted.size(), traffic.size() / 10);
  EXPECT_LT(admitted.size(), traffic.size());
  return admitted;
}

// A rejected request retried at exactly retry_after passes; one nanosecond earlier it does not.
template <typename Alg>
void CheckRetryAfterIsTight(const Alg& alg, const std::vector<Request>& traffic) {
  typename Alg::State s = alg.Initial(FromNanos(traffic.front().t_ns));
  int checked = 0;
  for (const Request& r : traffic) {
    const Decision d = alg.Decide(s, FromNanos(r.t_ns), r.cost);
    if (d.allowed || d.reason != DecisionReason::kOverLimit || checked >= 50) continue;
    ++checked;
    typename Alg::State later = s;
    EXPECT_TRUE(alg.Decide(later, FromNanos(r.t_ns) + d.retry_after, r.cost).allowed);
    if (d.retry_after > Duration(1)) {
      typename Alg::State early = s;
      EXPECT_FALSE(
          alg.Decide(early, FromNanos(r.t_ns) + d.retry_after - Duration(1), r.cost).allowed);
    }
  }
}

// Token bucket bound: hits admitted in any [a, b] <= B + r * (b - a).
void CheckBucketBound(const std::vector<Admitted>& admitted, const Params& p) {
  for (size_t i = 0; i < admitted.size(); ++i) {
    __int128 hits = 0;
    for (size_t j = i; j < admitted.size(); ++j) {
      hits += admitted[j].cost;
      const __int128 allowance =
          static_cast<__int128>(p.burst) * p.period_ns +
          static_cast<__int128>(p.limit) * (admitted[j].t_ns - admitted[i].t_ns);
      ASSERT_LE(hits * p.period_ns, allowance) << "interval " << i << ".." << j;
    }
  }
}

LimitSpec Spec(Algorithm a, const Params& p) {
  const bool bucket = HasBurst(a);
  return LimitSpec{a, p.limit, Duration(p.period_ns), bucket ? p.burst : 0, false};
}

class Property : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    rng_.seed(0x5eed0000 + GetParam());
    params_ = RandomParams(rng_);
    traffic_ = Traffic(rng_, params_, GetParam());
  }
  std::mt19937_64 rng_;
  Params params_{};
  std::vector<Request> traffic_;
};

TEST_P(Property, TokenBucketMatchesOracleAndBound) {
  auto tb = TokenBucket::Create(Spec(Algorithm::kTokenBucket, params_));
  ASSERT_TRUE(tb.has_value()) << tb.error().message;
  const auto admitted = CheckAgainstOracle(
      *tb, testing::TokenBucketOracle(params_.burst, params_.limit, params_.period_ns), traffic_);
  CheckBucketBound(admitted, params_);
  CheckRetryAfterIsTight(*tb, traffic_);
}

TEST_P(Property, GcraMatchesTheTokenBucketOracle) {
  auto g = Gcra::Create(Spec(Algorithm::kGcra, params_));
  ASSERT_TRUE(g.has_value()) << g.error().message;
  const auto admitted = CheckAgainstOracle(
      *g, testing::TokenBucketOracle(params_.burst, params_.limit, params_.period_ns), traffic_);
  CheckBucketBound(admitted, params_);
  CheckRetryAfterIsTight(*g, traffic_);
}

TEST_P(Property, LeakyBucketMeterMatchesTheTokenBucketOracle) {
  // A metering leaky bucket's level is B minus a token bucket's tokens: same admissions.
  auto lb = LeakyBucket::Create(Spec(Algorithm::kLeakyBucket, params_));
  ASSERT_TRUE(lb.has_value()) << lb.error().message;
  const auto admitted = CheckAgainstOracle(
      *lb, testing::TokenBucketOracle(params_.burst, params_.limit, params_.period_ns), traffic_);
  CheckBucketBound(admitted, params_);
  CheckRetryAfterIsTight(*lb, traffic_);
}

TEST_P(Property, LeakyBucketShaperReleasesAreSpacedByTheRate) {
  LimitSpec spec = Spec(Algorithm::kLeakyBucket, params_);
  spec.shaper = true;
  auto lb = LeakyBucket::Create(spec);
  ASSERT_TRUE(lb.has_value());
  LeakyBucket::State s = lb->Initial(FromNanos(traffic_.front().t_ns));
  // Releases (arrival + delay) never go backwards, and a delayed release comes no sooner than
  // the previous request's cost / r after the previous release (to the nanosecond).
  std::vector<Admitted> releases;
  for (const Request& r : traffic_) {
    const Decision d = lb->Decide(s, FromNanos(r.t_ns), r.cost);
    if (!d.allowed) continue;
    const int64_t release = r.t_ns + d.delay.count();
    if (!releases.empty()) {
      ASSERT_GE(release, releases.back().t_ns);
      // Back to back: the previous request's hits take cost/r to leave, rounded to 1 ns.
      const int64_t gap = release - releases.back().t_ns;
      if (d.delay > Duration(0)) {
        const __int128 lhs = static_cast<__int128>(gap + 1) * params_.limit;
        ASSERT_GE(lhs, static_cast<__int128>(releases.back().cost) * params_.period_ns);
      }
    }
    releases.push_back({release, r.cost});
  }
  EXPECT_FALSE(releases.empty());
}

TEST_P(Property, FixedWindowMatchesOracle) {
  auto fw = FixedWindow::Create(Spec(Algorithm::kFixedWindow, params_));
  ASSERT_TRUE(fw.has_value());
  const auto admitted = CheckAgainstOracle(
      *fw, testing::FixedWindowOracle(params_.limit, params_.period_ns), traffic_);
  // Bound: any interval of length D spans at most two windows, so at most 2 * limit.
  EXPECT_LE(testing::MaxInAnyWindow(admitted, params_.period_ns), 2 * params_.limit);
  CheckRetryAfterIsTight(*fw, traffic_);
}

TEST_P(Property, SlidingWindowLogMatchesOracleExactly) {
  auto log = SlidingWindowLog::Create(Spec(Algorithm::kSlidingWindowLog, params_));
  ASSERT_TRUE(log.has_value());
  const auto admitted = CheckAgainstOracle(
      *log, testing::SlidingLogOracle(params_.limit, params_.period_ns), traffic_);
  EXPECT_LE(testing::MaxInAnyWindow(admitted, params_.period_ns), params_.limit);
  CheckRetryAfterIsTight(*log, traffic_);
}

TEST_P(Property, SlidingWindowCounterMatchesOracleAndBound) {
  auto swc = SlidingWindowCounter::Create(Spec(Algorithm::kSlidingWindowCounter, params_));
  ASSERT_TRUE(swc.has_value());
  const auto admitted = CheckAgainstOracle(
      *swc, testing::SlidingCounterOracle(params_.limit, params_.period_ns), traffic_);
  const int64_t D = params_.period_ns;
  for (const Admitted& a : admitted) {
    const int64_t w = a.t_ns / D;
    int64_t previous = 0;
    int64_t in_interval = 0;
    for (const Admitted& b : admitted) {
      if (b.t_ns / D == w - 1) previous += b.cost;
      if (b.t_ns > a.t_ns - D && b.t_ns <= a.t_ns) in_interval += b.cost;
    }
    const __int128 bound =
        static_cast<__int128>(params_.limit) * D + static_cast<__int128>(a.t_ns - w * D) * previous;
    ASSERT_LE(static_cast<__int128>(in_interval) * D, bound) << "at " << a.t_ns;
  }
  CheckRetryAfterIsTight(*swc, traffic_);
}

TEST_P(Property, GcraAndTokenBucketAgreeOnEveryField) {
  auto tb = TokenBucket::Create(Spec(Algorithm::kTokenBucket, params_));
  LimitSpec gspec = Spec(Algorithm::kGcra, params_);
  auto g = Gcra::Create(gspec);
  ASSERT_TRUE(tb.has_value() && g.has_value());
  TokenBucket::State ts = tb->Initial(FromNanos(traffic_.front().t_ns));
  Gcra::State gs = g->Initial(FromNanos(traffic_.front().t_ns));
  for (const Request& r : traffic_) {
    const Decision a = tb->Decide(ts, FromNanos(r.t_ns), r.cost);
    const Decision b = g->Decide(gs, FromNanos(r.t_ns), r.cost);
    ASSERT_EQ(a.allowed, b.allowed);
    ASSERT_EQ(a.remaining, b.remaining);
    ASSERT_EQ(a.retry_after, b.retry_after);
    ASSERT_EQ(a.reset_after, b.reset_after);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, Property, ::testing::Range(0, kSeeds));

}  // namespace
}  // namespace sluice
