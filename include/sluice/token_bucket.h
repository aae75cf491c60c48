// Token bucket: capacity B tokens, refilled at r = limit/period, starting full.
//
//   tokens = min(B, tokens + r * (now - last));  admit iff tokens >= cost, then tokens -= cost.
//
// Tokens are kept as an exact integer count of 1/d-token units (r reduced to n/d per nanosecond),
// so a refill adds exactly n*elapsed and long runs never drift. Not thread-safe by itself: the
// store serialises access to a key's State. Time going backwards refills nothing.
#ifndef SLUICE_TOKEN_BUCKET_H_
#define SLUICE_TOKEN_BUCKET_H_

#include <cstddef>
#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace sluice {

// kWide = false (TokenBucket): 64-bit arithmetic, for specs where !NeedsWideArithmetic(spec).
// kWide = true (WideTokenBucket): 128-bit, for every valid spec; its State is 24 bytes.
template <bool kWide>
class BasicTokenBucket {
 public:
  using Scaled = typename internal::ScaledInt<kWide>::type;
  struct State {
    Scaled scaled_tokens = 0;  // tokens * d
    int64_t last_ns = 0;       // when scaled_tokens was last brought up to date
  };

  static Result<BasicTokenBucket> Create(const LimitSpec& spec);

  State Initial(Timestamp now) const { return State{capacity_scaled_, ToNanos(now)}; }
  // `reserve` (priority shedding, LimitCheck::reserve): hits that must still be free after the
  // admission. Admitted only if cost + reserve would have been; takes only `cost`. Refused for
  // the reserve alone: kOverLimit, retry_after when cost + reserve fits (kNever if it never can).
  Decision Decide(State& state, Timestamp now, int64_t cost, int64_t reserve = 0) const;
  // Charges `cost` for work already done: Decide's verdict, but the cost is taken even when it
  // does not fit, into debt of at most one capacity (src/core/charge.h; docs/algorithms.md,
  // "Charges and debt").
  Decision Charge(State& state, Timestamp now, int64_t cost) const;
  // Gives back `cost` an admitted Decide(state, at, cost) took: refilled to `now`, then `cost`
  // tokens are returned (never above B). cost <= 0 or > B: nothing (it was never admitted).
  void Refund(State& state, Timestamp at, Timestamp now, int64_t cost) const;
  // From this instant on the state is indistinguishable from Initial(): it may be dropped.
  Timestamp ReplenishedAt(const State& state) const;
  // The hits taken and not yet refilled at `now` -- capacity minus tokens, rounded up to a whole
  // hit, beyond the capacity while in debt: what a reload that changes the spec keeps
  // (src/core/carry_over.h).
  int64_t Used(const State& state, Timestamp now) const;
  static size_t HeapBytes(const State&) { return 0; }
  int64_t capacity() const { return capacity_; }

 private:
  BasicTokenBucket(int64_t capacity, int64_t n, int64_t d);
  void Refill(State& state, int64_t t) const;

  int64_t capacity_;  // B
  int64_t n_;         // r = n_/d_ tokens per nanosecond, in lowest terms
  int64_t d_;
  Scaled capacity_scaled_;  // B * d_
  int64_t fill_ns_;         // time to refill from empty
};

using TokenBucket = BasicTokenBucket<false>;
using WideTokenBucket = BasicTokenBucket<true>;
extern template class BasicTokenBucket<false>;
extern template class BasicTokenBucket<true>;

}  // namespace sluice

#endif  // SLUICE_TOKEN_BUCKET_H_
