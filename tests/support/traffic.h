// Test traffic generators and brute-force oracles. The oracles restate each algorithm's
// documented semantics over the whole admitted history (no incremental state), so they share no
// code or formula shape with src/core.
#ifndef SLUICE_TESTS_SUPPORT_TRAFFIC_H_
#define SLUICE_TESTS_SUPPORT_TRAFFIC_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace sluice::testing {

struct Request {
  int64_t t_ns;
  int64_t cost;
};

struct Admitted {
  int64_t t_ns;
  int64_t cost;
};

// Uniformly random arrivals with mean gap `mean_gap_ns`, times multiples of `grain_ns`.
inline std::vector<Request> RandomTraffic(std::mt19937_64& rng, int n, int64_t start_ns,
                                          int64_t mean_gap_ns, int64_t grain_ns, int max_cost) {
  std::vector<Request> out;
  std::uniform_int_distribution<int64_t> gap(0, 2 * mean_gap_ns);
  std::uniform_int_distribution<int> cost(1, max_cost);
  int64_t t = start_ns;
  for (int i = 0; i < n; ++i) {
    t += gap(rng) / grain_ns * grain_ns;
    out.push_back({t, cost(rng)});
  }
  return out;
}

// Bursts of 1..burst_max requests within `spread_ns` of each other, separated by idle gaps of up
// to `idle_max_ns`: the pattern that separates the algorithms.
inline std::vector<Request> BurstyTraffic(std::mt19937_64& rng, int n, int64_t start_ns,
                                          int burst_max, int64_t spread_ns, int64_t idle_max_ns,
                                          int64_t grain_ns, int max_cost) {
  std::vector<Request> out;
  std::uniform_int_distribution<int> burst(1, burst_max);
  std::uniform_int_distribution<int64_t> spread(0, spread_ns);
  std::uniform_int_distribution<int64_t> idle(0, idle_max_ns);
  std::uniform_int_distribution<int> cost(1, max_cost);
  int64_t t = start_ns;
  while (static_cast<int>(out.size()) < n) {
    t += idle(rng) / grain_ns * grain_ns;
    const int k = burst(rng);
    for (int i = 0; i < k && static_cast<int>(out.size()) < n; ++i) {
      t += spread(rng) / grain_ns * grain_ns;
      out.push_back({t, cost(rng)});
    }
  }
  return out;
}

// Token bucket (capacity B, rate N per D ns, full at the first request): tokens just before a
// request at t are the least, over every earlier-or-equal request time s, of
// B + r*(t - s) - (hits admitted in [s, t)). Compared in units of hits*D to stay exact.
class TokenBucketOracle {
 public:
  TokenBucketOracle(int64_t capacity, int64_t n, int64_t d) : b_(capacity), n_(n), d_(d) {}
  bool Admit(int64_t t, int64_t cost) {
    __int128 least = static_cast<__int128>(b_) * d_;  // s = t
    __int128 hits = 0;
    for (size_t i = history_.size(); i-- > 0;) {
      hits += history_[i].admitted;
      const __int128 v = static_cast<__int128>(b_) * d_ +
                         static_cast<__int128>(n_) * (t - history_[i].t) - hits * d_;
      if (v < least) least = v;
    }
    const bool ok = cost <= b_ && least >= static_cast<__int128>(cost) * d_;
    history_.push_back({t, ok ? cost : 0});
    return ok;
  }

 private:
  struct Seen {
    int64_t t;
    int64_t admitted;
  };
  int64_t b_, n_, d_;
  std::vector<Seen> history_;
};

// Fixed window: admitted hits per aligned window [k*D, (k+1)*D).
class FixedWindowOracle {
 public:
  FixedWindowOracle(int64_t limit, int64_t d) : n_(limit), d_(d) {}
  bool Admit(int64_t t, int64_t cost) {
    int64_t& used = per_window_[t / d_];
    const bool ok = used + cost <= n_;
    if (ok) used += cost;
    return ok;
  }

 private:
  int64_t n_, d_;
  std::map<int64_t, int64_t> per_window_;
};

// Sliding window log: the admitted hits with time in (t - D, t], counted from the full list.
class SlidingLogOracle {
 public:
  SlidingLogOracle(int64_t limit, int64_t d) : n_(limit), d_(d) {}
  bool Admit(int64_t t, int64_t cost) {
    int64_t in_window = 0;
    for (const Admitted& a : admitted_) {
      if (a.t_ns > t - d_ && a.t_ns <= t) in_window += a.cost;
    }
    const bool ok = in_window + cost <= n_;
    if (ok) admitted_.push_back({t, cost});
    return ok;
  }

 private:
  int64_t n_, d_;
  std::vector<Admitted> admitted_;
};

// Sliding window counter from per-window totals: current + previous * (1 - elapsed), exactly.
class SlidingCounterOracle {
 public:
  SlidingCounterOracle(int64_t limit, int64_t d) : n_(limit), d_(d) {}
  bool Admit(int64_t t, int64_t cost) {
    const int64_t w = t / d_;
    const int64_t elapsed = t - w * d_;
    const auto at = [&](int64_t k) {
      auto it = per_window_.find(k);
      return it == per_window_.end() ? 0 : it->second;
    };
    // estimate + cost <= N, all multiplied by D
    const __int128 lhs = static_cast<__int128>(at(w)) * d_ +
                         static_cast<__int128>(at(w - 1)) * (d_ - elapsed) +
                         static_cast<__int128>(cost) * d_;
    const bool ok = cost <= n_ && lhs <= static_cast<__int128>(n_) * d_;
    if (ok) per_window_[w] += cost;
    return ok;
  }

 private:
  int64_t n_, d_;
  std::map<int64_t, int64_t> per_window_;
};

// Hits admitted in (t - d, t] for each admitted t (the exact sliding count).
inline int64_t MaxInAnyWindow(const std::vector<Admitted>& admitted, int64_t d) {
  int64_t best = 0;
  for (const Admitted& end : admitted) {
    int64_t sum = 0;
    for (const Admitted& a : admitted) {
      if (a.t_ns > end.t_ns - d && a.t_ns <= end.t_ns) sum += a.cost;
    }
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_TRAFFIC_H_
