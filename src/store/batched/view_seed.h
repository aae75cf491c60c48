// How the batched store reads an algorithm's state back from a decision the shared store gave,
// and how far beyond its limit such a state is. Internal to the batched store.
//
// A decision says how long the key takes to be fully replenished (reset_after): for the bucket
// algorithms that is exactly how much of the capacity is used, in time, debt included; for the
// fixed window, remaining says the count and the answer's verdict whether it is beyond the
// limit. Every reading errs on the strict side: the state read back is never fuller than the
// one the answer describes (reset_after is rounded up, to Redis's microsecond, by the store).
#ifndef SLUICE_STORE_BATCHED_VIEW_SEED_H_
#define SLUICE_STORE_BATCHED_VIEW_SEED_H_

#include <algorithm>
#include <cstdint>

#include "core/arith.h"
#include "sluice/decision.h"
#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/limit_spec.h"
#include "sluice/token_bucket.h"

namespace sluice::internal {

// The numbers a spec's algorithm keeps its state in: capacity B, rate n/d per nanosecond. The
// scaled quantities are read in 128 bits, which hold every valid spec's (a narrow spec's fit the
// 64-bit state they are stored in: below 2^62); they are read once per answer, not per decision.
struct ViewScale {
  int64_t capacity = 0;
  int64_t n = 1;
  int64_t d = 1;
  int64_t period_ns = 1;
  explicit ViewScale(const LimitSpec& spec)
      : capacity(spec.Capacity()), period_ns(spec.period.count()) {
    const ReducedRate rate = Reduce(spec.limit, spec.period.count());
    n = rate.n;
    d = rate.d;
  }
  __int128 CapacityScaled() const { return static_cast<__int128>(capacity) * d; }
  // reset_after in 1/d-hit units of used capacity, at most two capacities (all a key can hold).
  __int128 UsedScaled(const Decision& answer) const {
    const __int128 most = 2 * CapacityScaled();
    const int64_t reset = std::max<int64_t>(0, answer.reset_after.count());
    return reset >= CeilDiv(most, n) ? most : std::min(most, static_cast<__int128>(reset) * n);
  }
  // Whole hits beyond the capacity in `used_scaled`.
  int64_t Beyond(__int128 used_scaled) const {
    const __int128 over = used_scaled - CapacityScaled();
    return over > 0 ? static_cast<int64_t>(CeilDiv(over, d)) : 0;
  }
};

template <typename Alg>
struct ViewSeed;

template <bool kWide>
struct ViewSeed<BasicTokenBucket<kWide>> {
  using State = typename BasicTokenBucket<kWide>::State;
  using Scaled = typename BasicTokenBucket<kWide>::Scaled;
  static State Read(const ViewScale& s, const Decision& answer, Timestamp at) {
    return State{static_cast<Scaled>(s.CapacityScaled() - s.UsedScaled(answer)), ToNanos(at)};
  }
  static int64_t Beyond(const ViewScale& s, const State& st) {
    return s.Beyond(s.CapacityScaled() - st.scaled_tokens);
  }
};

template <bool kWide>
struct ViewSeed<BasicLeakyBucket<kWide>> {
  using State = typename BasicLeakyBucket<kWide>::State;
  using Scaled = typename BasicLeakyBucket<kWide>::Scaled;
  static State Read(const ViewScale& s, const Decision& answer, Timestamp at) {
    return State{static_cast<Scaled>(s.UsedScaled(answer)), ToNanos(at)};
  }
  static int64_t Beyond(const ViewScale& s, const State& st) { return s.Beyond(st.scaled_level); }
};

// GCRA's backlog is the token bucket's used capacity, in units of 1/n ns: the TAT is
// reset_after ahead of `at`.
template <>
struct ViewSeed<Gcra> {
  static Gcra::State Read(const ViewScale& s, const Decision& answer, Timestamp at) {
    const __int128 used = s.UsedScaled(answer);
    return Gcra::State{ToNanos(at) + static_cast<int64_t>(used / s.n),
                       static_cast<int64_t>(used % s.n)};
  }
  static int64_t Beyond(const ViewScale& s, const Gcra::State& st, Timestamp at) {
    const int64_t ahead = st.tat_ns - ToNanos(at);
    if (ahead < 0) return 0;
    return s.Beyond(
        std::min(2 * s.CapacityScaled(), static_cast<__int128>(ahead) * s.n + st.tat_frac));
  }
};

// The count is limit - remaining; a refused charge, or a refused cost-0 request, says the count is
// beyond the limit, by an amount the answer does not tell: one more than the limit is read.
template <>
struct ViewSeed<FixedWindow> {
  static FixedWindow::State Read(const ViewScale& s, const Decision& answer, Timestamp at,
                                 bool in_debt) {
    const int64_t count = answer.reset_after.count() <= 0
                              ? 0
                              : (in_debt ? s.capacity + 1 : s.capacity - answer.remaining);
    return FixedWindow::State{FloorDiv(ToNanos(at), s.period_ns), std::max<int64_t>(0, count)};
  }
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_BATCHED_VIEW_SEED_H_
