// Independent oracles for the range property test (range_property_test.cc): each simulates an
// algorithm's definition (docs/algorithms.md) in exact 128-bit integers with the spec's own,
// unreduced, denominators -- tokens x period, TAT x limit, level x period -- not the production
// state (tokens x d with d = period / gcd, a 64- or 128-bit choice, fractions below n). Every
// quantity stays below 2^100 for limits and bursts below 2^32, periods up to 3650 days and times
// below 2^62 ns. Times only move forward here (a clock step back has its own tests).
#ifndef SLUICE_TESTS_CORE_EXACT_ORACLE_H_
#define SLUICE_TESTS_CORE_EXACT_ORACLE_H_

#include <algorithm>
#include <cstdint>

#include "sluice/decision.h"

namespace sluice::testing {

using i128 = __int128;

// What a decision must say. retry_after is checked only when refused over the limit.
struct Want {
  bool allowed = false;
  DecisionReason reason = DecisionReason::kOverLimit;
  i128 remaining = 0;
  i128 reset_after = 0;
  i128 retry_after = 0;
  i128 delay = 0;
};

inline i128 Ceil(i128 a, i128 b) { return a <= 0 ? 0 : (a + b - 1) / b; }
inline i128 Floor(i128 a, i128 b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Admissions' common shape: a cost above the capacity never passes; a charge that does not fit
// is taken anyway, `take` adding min(cost, 2B) hits (at most one capacity of debt), and the
// answer is the state's reading for a request of min(cost, B).
template <typename Model>
Want Charged(Model& m, i128 t, i128 cost, i128 capacity) {
  const Want verdict = m.Decide(t, cost);
  if (verdict.allowed) return verdict;
  m.Take(std::min(cost, 2 * capacity));
  Want after = m.Decide(t, std::min(cost, capacity));
  after.allowed = false;
  after.reason = verdict.reason;
  return after;
}

// Token bucket: tokens(t) = min(B, tokens(last) + (t - last) * L / P), kept as X = tokens * P.
struct TokenBucketOracle {
  i128 L, P, B, X, last;
  TokenBucketOracle(i128 limit, i128 period, i128 capacity, i128 t)
      : L(limit), P(period), B(capacity), X(capacity * period), last(t) {}
  void Advance(i128 t) {
    if (t > last) X = std::min(B * P, X + (t - last) * L);
    last = std::max(last, t);
  }
  Want Decide(i128 t, i128 cost) {
    Advance(t);
    Want w;
    if (cost > B) {
      w.reason = DecisionReason::kCostExceedsCapacity;
    } else if (X >= cost * P) {
      X -= cost * P;
      w.allowed = true;
      w.reason = DecisionReason::kAdmitted;
    } else {
      w.retry_after = Ceil(cost * P - X, L);  // until X + tau * L >= cost * P
    }
    w.remaining = std::max<i128>(0, Floor(X, P));
    w.reset_after = Ceil(B * P - X, L);
    return w;
  }
  void Take(i128 hits) { X = std::max(-B * P, X - hits * P); }
};

// GCRA: emission interval T = P / L; the TAT kept as Y = TAT * L. backlog = max(TAT, t) - t;
// admit iff backlog + cost * T <= B * T.
struct GcraOracle {
  i128 L, P, B, Y, now = 0;
  GcraOracle(i128 limit, i128 period, i128 capacity, i128 t)
      : L(limit), P(period), B(capacity), Y(t * limit) {}
  i128 BacklogL(i128 t) const { return std::max<i128>(0, Y - t * L); }  // backlog * L
  Want Decide(i128 t, i128 cost) {
    now = t;
    const i128 backlog = BacklogL(t);
    Want w;
    if (cost > B) {
      w.reason = DecisionReason::kCostExceedsCapacity;
    } else if (backlog + cost * P <= B * P) {
      Y = t * L + backlog + cost * P;
      w.allowed = true;
      w.reason = DecisionReason::kAdmitted;
      w.remaining = (B * P - (backlog + cost * P)) / P;
      w.reset_after = Ceil(backlog + cost * P, L);
      return w;
    } else {
      w.retry_after = Ceil(backlog + cost * P - B * P, L);
    }
    w.remaining = backlog >= B * P ? 0 : (B * P - backlog) / P;
    w.reset_after = Ceil(backlog, L);
    return w;
  }
  void Take(i128 hits) {
    const i128 backlog = BacklogL(now);
    const i128 after = std::min(2 * B * P, backlog + hits * P);
    if (after > backlog) Y = now * L + after;
  }
};

// Leaky bucket: level(t) = max(0, level(last) - (t - last) * L / P), kept as Z = level * P;
// admit iff level + cost <= B. A shaper's admitted request waits level / rate.
struct LeakyBucketOracle {
  i128 L, P, B, Z = 0, last;
  bool shaper;
  LeakyBucketOracle(i128 limit, i128 period, i128 capacity, i128 t, bool shape)
      : L(limit), P(period), B(capacity), last(t), shaper(shape) {}
  Want Decide(i128 t, i128 cost) {
    if (t > last) Z = std::max<i128>(0, Z - (t - last) * L);
    last = std::max(last, t);
    Want w;
    if (cost > B) {
      w.reason = DecisionReason::kCostExceedsCapacity;
    } else if (Z + cost * P <= B * P) {
      if (shaper) w.delay = Ceil(Z, L);
      Z += cost * P;
      w.allowed = true;
      w.reason = DecisionReason::kAdmitted;
    } else {
      w.retry_after = Ceil(Z + cost * P - B * P, L);
    }
    w.remaining = std::max<i128>(0, Floor(B * P - Z, P));
    w.reset_after = Ceil(Z, L);
    return w;
  }
  void Take(i128 hits) { Z = std::min(2 * B * P, Z + hits * P); }
};

// Fixed window: at most L hits in each [k * P, (k + 1) * P).
struct FixedWindowOracle {
  i128 L, P, window, count = 0;
  FixedWindowOracle(i128 limit, i128 period, i128 t) : L(limit), P(period), window(t / P) {}
  Want Decide(i128 t, i128 cost) {
    if (t / P > window) {
      window = t / P;
      count = 0;
    }
    const i128 until_next = (window + 1) * P - t;
    Want w;
    if (cost > L) {
      w.reason = DecisionReason::kCostExceedsCapacity;
    } else if (count + cost <= L) {
      count += cost;
      w.allowed = true;
      w.reason = DecisionReason::kAdmitted;
    } else {
      w.retry_after = until_next;
    }
    w.remaining = std::max<i128>(0, L - count);
    w.reset_after = count > 0 ? until_next : 0;
    return w;
  }
  void Take(i128 hits) { count = std::max(count, std::min(count + hits, 2 * L)); }
};

// Sliding window counter: estimate(t) = current + previous * (P - offset) / P over the aligned
// windows; admit iff estimate + cost <= L. The retry time is found by bisection over the
// admission test itself (the estimate never grows while time passes), not by a formula.
struct SlidingWindowCounterOracle {
  i128 L, P, window, current = 0, previous = 0, now = 0;
  SlidingWindowCounterOracle(i128 limit, i128 period, i128 t)
      : L(limit), P(period), window(t / P) {}
  struct View {
    i128 current, previous, window;
  };
  View At(i128 t) const {
    const i128 w = t / P;
    if (w == window) return {current, previous, window};
    return {0, w == window + 1 ? current : 0, w};
  }
  // estimate * P at t.
  i128 EstimateP(i128 t) const {
    const View v = At(t);
    return v.current * P + v.previous * (P - (t - v.window * P));
  }
  bool Fits(i128 t, i128 cost) const { return EstimateP(t) + cost * P <= L * P; }
  Want Decide(i128 t, i128 cost) {
    now = t;
    const View v = At(t);
    current = v.current;
    previous = v.previous;
    window = v.window;
    Want w;
    if (cost > L) {
      w.reason = DecisionReason::kCostExceedsCapacity;
    } else if (Fits(t, cost)) {
      current += cost;
      w.allowed = true;
      w.reason = DecisionReason::kAdmitted;
    } else {
      i128 lo = 0, hi = 2 * P;  // fits at t + hi: both windows have passed
      while (lo < hi) {
        const i128 mid = lo + (hi - lo) / 2;
        if (Fits(t + mid, cost)) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      w.retry_after = lo;
    }
    w.remaining = std::max<i128>(0, Floor(L * P - EstimateP(t), P));
    const i128 window_end = (window + 1) * P;
    w.reset_after = current > 0 ? window_end + P - t : (previous > 0 ? window_end - t : 0);
    return w;
  }
  void Take(i128 hits) {
    const i128 most = std::min<i128>(2 * L, UINT32_MAX);
    current = std::max(current, std::min(current + hits, most));
  }
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CORE_EXACT_ORACLE_H_
