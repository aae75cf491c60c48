// Charges (Alg::Charge, src/core/charge.h): a cost for work already done, taken even beyond the
// limit into debt of at most one capacity. Checked three ways:
//  - against brute-force oracles written here from the documented semantics (docs/algorithms.md,
//    "Charges and debt"), on random traffic mixing decisions, charges and oversized charges;
//  - the bucket algorithms agree with each other on every field under the same traffic;
//  - retry_after after an over-limit charge is tight: a request of the same cost passes exactly
//    then, not a nanosecond earlier.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"

namespace sluice {
namespace {

constexpr int64_t kStart = 1'700'000'000'000'000'000;  // ns; window-aligned for D | 1e9
constexpr int kSeeds = 10;
constexpr int kRequests = 1200;

struct Op {
  int64_t t_ns;
  int64_t cost;
  bool charge;
};

struct Params {
  int64_t limit;
  int64_t period_ns;
  int64_t burst;
};

// Random limits; traffic a little faster than the limit, a third of it charges, some of those
// several capacities at once, with idle gaps that let debt be repaid.
std::vector<Op> Traffic(std::mt19937_64& rng, const Params& p) {
  std::vector<Op> out;
  const int64_t per_hit = p.period_ns / p.limit;
  std::uniform_int_distribution<int64_t> gap(0, per_hit);
  std::uniform_int_distribution<int> kind(0, 29), cost(0, 3), idle(0, 60);
  int64_t t = kStart;
  for (int i = 0; i < kRequests; ++i) {
    t += gap(rng) / 10 * 10;
    if (idle(rng) == 0) t += 2 * p.period_ns;
    const int k = kind(rng);
    if (k == 0) {
      out.push_back({t, 3 * std::max(p.burst, p.limit) + 1, true});  // above every capacity
    } else {
      out.push_back({t, cost(rng), k < 10});
    }
  }
  return out;
}

Params RandomParams(std::mt19937_64& rng) {
  static constexpr int64_t kPeriods[] = {1'000'000, 7'000'000, 100'000'000, 1'000'000'000};
  std::uniform_int_distribution<int64_t> limit(1, 12);
  std::uniform_int_distribution<size_t> period(0, std::size(kPeriods) - 1);
  Params p{limit(rng), kPeriods[period(rng)], 0};
  std::uniform_int_distribution<int64_t> burst(1, 2 * p.limit);
  p.burst = burst(rng);
  return p;
}

// ---- Oracles: the documented semantics, restated over plain quantities. ----

// Token bucket: tokens kept as tokens*D (D the period): refill adds N per ns up to B*D. A request
// fits iff cost <= B and tokens >= cost; a decision takes it only then, a charge always, down to
// -B (one capacity of debt).
class BucketOracle {
 public:
  BucketOracle(int64_t b, int64_t n, int64_t d) : b_(b), n_(n), d_(d), v_(__int128{b} * d) {}
  bool Apply(int64_t t, int64_t cost, bool charge) {
    if (started_) v_ = std::min<__int128>(__int128{b_} * d_, v_ + __int128{n_} * (t - last_));
    started_ = true;
    last_ = t;
    const bool fits = cost <= b_ && v_ >= __int128{cost} * d_;
    if (fits || charge) v_ = std::max<__int128>(-__int128{b_} * d_, v_ - __int128{cost} * d_);
    return fits;
  }

 private:
  int64_t b_, n_, d_;
  __int128 v_;
  bool started_ = false;
  int64_t last_ = 0;
};

// Fixed window: hits per aligned window; a charge counts up to 2 * limit in its window.
class WindowOracle {
 public:
  WindowOracle(int64_t limit, int64_t d) : l_(limit), d_(d) {}
  bool Apply(int64_t t, int64_t cost, bool charge) {
    int64_t& used = used_[t / d_];
    const bool fits = cost <= l_ && used + cost <= l_;
    if (fits) {
      used += cost;
    } else if (charge) {
      used = std::max(used, std::min(used + cost, 2 * l_));
    }
    return fits;
  }

 private:
  int64_t l_, d_;
  std::map<int64_t, int64_t> used_;
};

// Sliding window log: hits recorded with their time; the window is (t - D, t]; a charge records
// up to 2 * limit hits in the window.
class LogOracle {
 public:
  LogOracle(int64_t limit, int64_t d) : l_(limit), d_(d) {}
  bool Apply(int64_t t, int64_t cost, bool charge) {
    int64_t in_window = 0;
    for (const auto& [at, hits] : log_) {
      if (at > t - d_ && at <= t) in_window += hits;
    }
    const bool fits = cost <= l_ && in_window + cost <= l_;
    if (fits) {
      log_.push_back({t, cost});
    } else if (charge && in_window < 2 * l_) {
      log_.push_back({t, std::min(cost, 2 * l_ - in_window)});
    }
    return fits;
  }

 private:
  int64_t l_, d_;
  std::vector<std::pair<int64_t, int64_t>> log_;
};

// Sliding window counter: estimate = current + previous * (1 - elapsed/D), compared times D; a
// charge counts up to 2 * limit in the current window.
class CounterOracle {
 public:
  CounterOracle(int64_t limit, int64_t d) : l_(limit), d_(d) {}
  bool Apply(int64_t t, int64_t cost, bool charge) {
    const int64_t w = t / d_;
    const int64_t elapsed = t - w * d_;
    int64_t& cur = per_window_[w];
    const int64_t prev = per_window_.contains(w - 1) ? per_window_[w - 1] : 0;
    const __int128 estimate = __int128{cur} * d_ + __int128{prev} * (d_ - elapsed);
    const bool fits = cost <= l_ && estimate + __int128{cost} * d_ <= __int128{l_} * d_;
    if (fits) {
      cur += cost;
    } else if (charge) {
      cur = std::max(cur, std::min(cur + cost, 2 * l_));
    }
    return fits;
  }

 private:
  int64_t l_, d_;
  std::map<int64_t, int64_t> per_window_;
};

LimitSpec Spec(Algorithm a, const Params& p) {
  return LimitSpec{a, p.limit, Duration(p.period_ns), HasBurst(a) ? p.burst : 0, false};
}

template <typename Alg>
Decision Apply(const Alg& alg, typename Alg::State& s, const Op& op) {
  return op.charge ? alg.Charge(s, FromNanos(op.t_ns), op.cost)
                   : alg.Decide(s, FromNanos(op.t_ns), op.cost);
}

// Every verdict equals the oracle's; the fields stay in range; after each over-limit answer to a
// request of cost <= capacity, a request of that cost passes exactly at retry_after and not 1 ns
// earlier (checked on copies of the state); oversized charges report never.
template <typename Alg, typename Oracle>
void CheckAgainstOracle(const Alg& alg, Oracle oracle, const std::vector<Op>& traffic) {
  typename Alg::State s = alg.Initial(FromNanos(traffic.front().t_ns));
  int fitted = 0, in_debt = 0, retries = 0;
  for (size_t i = 0; i < traffic.size(); ++i) {
    const Op& op = traffic[i];
    const bool expected = oracle.Apply(op.t_ns, op.cost, op.charge);
    const Decision d = Apply(alg, s, op);
    ASSERT_EQ(d.allowed, expected)
        << "op " << i << " at " << op.t_ns << " cost " << op.cost << (op.charge ? " (charge)" : "");
    ASSERT_GE(d.remaining, 0);
    ASSERT_LE(d.remaining, d.limit);
    fitted += d.allowed;
    if (d.allowed) continue;
    if (op.cost > alg.capacity()) {
      ASSERT_EQ(d.reason, DecisionReason::kCostExceedsCapacity) << "op " << i;
      ASSERT_EQ(d.retry_after, kNever) << "op " << i;
      continue;
    }
    ASSERT_EQ(d.reason, DecisionReason::kOverLimit) << "op " << i;
    typename Alg::State probe = s;
    if (!alg.Decide(probe, FromNanos(op.t_ns), 0).allowed) ++in_debt;
    if (retries++ > 200) continue;
    typename Alg::State later = s;
    ASSERT_TRUE(alg.Decide(later, FromNanos(op.t_ns) + d.retry_after, op.cost).allowed)
        << "op " << i;
    if (d.retry_after > Duration(1)) {
      typename Alg::State early = s;
      ASSERT_FALSE(
          alg.Decide(early, FromNanos(op.t_ns) + d.retry_after - Duration(1), op.cost).allowed)
          << "op " << i;
    }
  }
  // Both sides of the decision, and keys in debt, or the comparison proves little.
  EXPECT_GT(fitted, kRequests / 10);
  EXPECT_LT(fitted, kRequests);
  EXPECT_GT(in_debt, 0);
}

class ChargeProperty : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    rng_.seed(0xc4a26e00 + GetParam());
    params_ = RandomParams(rng_);
    traffic_ = Traffic(rng_, params_);
  }
  BucketOracle Bucket() const { return {params_.burst, params_.limit, params_.period_ns}; }
  std::mt19937_64 rng_;
  Params params_{};
  std::vector<Op> traffic_;
};

TEST_P(ChargeProperty, TokenBucket) {
  auto alg = TokenBucket::Create(Spec(Algorithm::kTokenBucket, params_));
  ASSERT_TRUE(alg.has_value());
  CheckAgainstOracle(*alg, Bucket(), traffic_);
}

TEST_P(ChargeProperty, Gcra) {
  auto alg = Gcra::Create(Spec(Algorithm::kGcra, params_));
  ASSERT_TRUE(alg.has_value());
  CheckAgainstOracle(*alg, Bucket(), traffic_);
}

TEST_P(ChargeProperty, LeakyBucket) {
  // A metering leaky bucket's level is B minus a token bucket's tokens, debt included.
  auto alg = LeakyBucket::Create(Spec(Algorithm::kLeakyBucket, params_));
  ASSERT_TRUE(alg.has_value());
  CheckAgainstOracle(*alg, Bucket(), traffic_);
}

TEST_P(ChargeProperty, FixedWindow) {
  auto alg = FixedWindow::Create(Spec(Algorithm::kFixedWindow, params_));
  ASSERT_TRUE(alg.has_value());
  CheckAgainstOracle(*alg, WindowOracle(params_.limit, params_.period_ns), traffic_);
}

TEST_P(ChargeProperty, SlidingWindowLog) {
  auto alg = SlidingWindowLog::Create(Spec(Algorithm::kSlidingWindowLog, params_));
  ASSERT_TRUE(alg.has_value());
  CheckAgainstOracle(*alg, LogOracle(params_.limit, params_.period_ns), traffic_);
}

TEST_P(ChargeProperty, SlidingWindowCounter) {
  auto alg = SlidingWindowCounter::Create(Spec(Algorithm::kSlidingWindowCounter, params_));
  ASSERT_TRUE(alg.has_value());
  CheckAgainstOracle(*alg, CounterOracle(params_.limit, params_.period_ns), traffic_);
}

TEST_P(ChargeProperty, TheBucketsAgreeOnEveryField) {
  auto tb = TokenBucket::Create(Spec(Algorithm::kTokenBucket, params_));
  auto g = Gcra::Create(Spec(Algorithm::kGcra, params_));
  auto lb = LeakyBucket::Create(Spec(Algorithm::kLeakyBucket, params_));
  ASSERT_TRUE(tb.has_value() && g.has_value() && lb.has_value());
  const Timestamp start = FromNanos(traffic_.front().t_ns);
  TokenBucket::State ts = tb->Initial(start);
  Gcra::State gs = g->Initial(start);
  LeakyBucket::State ls = lb->Initial(start);
  for (size_t i = 0; i < traffic_.size(); ++i) {
    const Decision a = Apply(*tb, ts, traffic_[i]);
    for (const Decision& b : {Apply(*g, gs, traffic_[i]), Apply(*lb, ls, traffic_[i])}) {
      ASSERT_EQ(a.allowed, b.allowed) << "op " << i;
      ASSERT_EQ(a.reason, b.reason) << "op " << i;
      ASSERT_EQ(a.remaining, b.remaining) << "op " << i;
      ASSERT_EQ(a.retry_after, b.retry_after) << "op " << i;
      ASSERT_EQ(a.reset_after, b.reset_after) << "op " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, ChargeProperty, ::testing::Range(0, kSeeds));

// Envoy's quota pattern (upstream's integration-test/scripts/token-quota.sh): a hits_addend 0
// check before the request, the real hits charged after it. With 2 per minute, the 3rd check
// still passes (2 used: not over), its charge goes into debt, and the 4th check is refused.
TEST(Charge, EnvoysQuotaPatternLimitsWithEveryAlgorithm) {
  for (Algorithm a : kAllAlgorithms) {
    const LimitSpec spec{a, 2, std::chrono::minutes(1), 0, false};
    const Timestamp t = FromNanos(kStart);
    std::vector<bool> checks;
    const auto run = [&](const auto& alg) {
      auto s = alg.Initial(t);
      for (int i = 0; i < 5; ++i) {
        const bool ok = alg.Decide(s, t, 0).allowed;
        checks.push_back(ok);
        if (ok) alg.Charge(s, t, 1);
      }
    };
    switch (a) {
      case Algorithm::kTokenBucket:
        run(*TokenBucket::Create(spec));
        break;
      case Algorithm::kGcra:
        run(*Gcra::Create(spec));
        break;
      case Algorithm::kLeakyBucket:
        run(*LeakyBucket::Create(spec));
        break;
      case Algorithm::kFixedWindow:
        run(*FixedWindow::Create(spec));
        break;
      case Algorithm::kSlidingWindowLog:
        run(*SlidingWindowLog::Create(spec));
        break;
      case Algorithm::kSlidingWindowCounter:
        run(*SlidingWindowCounter::Create(spec));
        break;
    }
    EXPECT_EQ(checks, (std::vector<bool>{true, true, true, false, false})) << AlgorithmName(a);
  }
}

// The cap: however much is charged, a token bucket owes at most one capacity, so a client that
// stops is whole again after at most two fill times. 2/min, burst 2: 1 token per 30 s; from
// -2 tokens a 1-hit request needs 3 tokens' refill, 90 s.
TEST(Charge, DebtIsCappedAtOneCapacity) {
  auto tb = TokenBucket::Create({Algorithm::kTokenBucket, 2, std::chrono::minutes(1), 2, false});
  ASSERT_TRUE(tb.has_value());
  const Timestamp t = FromNanos(kStart);
  auto s = tb->Initial(t);
  for (int i = 0; i < 100; ++i) tb->Charge(s, t, 1'000'000);
  const Decision d = tb->Charge(s, t, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, std::chrono::seconds(90));
  EXPECT_EQ(d.reset_after, std::chrono::seconds(120));  // from -2 to 2 tokens
  auto early = s;
  EXPECT_FALSE(tb->Decide(early, t + std::chrono::seconds(90) - Duration(1), 1).allowed);
  EXPECT_TRUE(tb->Decide(s, t + std::chrono::seconds(90), 1).allowed);

  // A fixed window's debt ends with its window.
  auto fw = FixedWindow::Create({Algorithm::kFixedWindow, 2, std::chrono::minutes(1), 0, false});
  auto ws = fw->Initial(t);
  const Decision over = fw->Charge(ws, t, 50);
  EXPECT_EQ(over.reason, DecisionReason::kCostExceedsCapacity);
  EXPECT_EQ(over.retry_after, kNever);
  EXPECT_FALSE(fw->Decide(ws, t, 0).allowed) << "in debt: even a cost-0 check is over";
  EXPECT_TRUE(fw->Decide(ws, t + std::chrono::minutes(1), 2).allowed);
}

}  // namespace
}  // namespace sluice
