// Leaky bucket: a queue of size B drained at a constant r = limit/period.
//
//   level = max(0, level - r * (now - last));  admit iff level + cost <= B, then level += cost.
//
// As a meter (default) it only admits or rejects. As a shaper (spec.shaper) an admitted request
// also gets delay = level / r, taken before adding it: releases come out exactly 1/r apart
// (rounded up to the nanosecond, never early). A shaper with spec.max_delay refuses a request
// whose delay would exceed it (retry_after: when the queue has drained to it), taking nothing.
// The level is exact, as in TokenBucket.
#ifndef SLUICE_LEAKY_BUCKET_H_
#define SLUICE_LEAKY_BUCKET_H_

#include <cstddef>
#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace sluice {

// kWide = false (LeakyBucket): 64-bit arithmetic, for specs where !NeedsWideArithmetic(spec).
// kWide = true (WideLeakyBucket): 128-bit, for every valid spec; its State is 24 bytes.
template <bool kWide>
class BasicLeakyBucket {
 public:
  using Scaled = typename internal::ScaledInt<kWide>::type;
  struct State {
    Scaled scaled_level = 0;  // queued hits * d
    int64_t last_ns = 0;
  };

  static Result<BasicLeakyBucket> Create(const LimitSpec& spec);

  State Initial(Timestamp now) const { return State{0, ToNanos(now)}; }
  // `reserve` (priority shedding, LimitCheck::reserve): hits that must still be free after the
  // admission. Admitted only if cost + reserve would have been; takes only `cost`. Refused for
  // the reserve alone: kOverLimit, retry_after when cost + reserve fits (kNever if it never can).
  Decision Decide(State& state, Timestamp now, int64_t cost, int64_t reserve = 0) const;
  // Charges `cost` for work already done: Decide's verdict, but the cost is taken even when it
  // does not fit, into debt of at most one capacity (src/core/charge.h; docs/algorithms.md,
  // "Charges and debt").
  Decision Charge(State& state, Timestamp now, int64_t cost) const;
  // Gives back `cost` an admitted Decide(state, at, cost) took: drained to `now`, then the level
  // drops by `cost` (never below 0). A shaper's later requests are released sooner accordingly.
  void Refund(State& state, Timestamp at, Timestamp now, int64_t cost) const;
  Timestamp ReplenishedAt(const State& state) const;
  // The hits queued and not yet drained at `now`, rounded up to a whole hit (beyond the capacity
  // after a Charge): what a reload that changes the spec keeps (src/core/carry_over.h).
  int64_t Used(const State& state, Timestamp now) const;
  static size_t HeapBytes(const State&) { return 0; }
  int64_t capacity() const { return capacity_; }
  bool shaper() const { return shaper_; }

 private:
  static constexpr int64_t kUnbounded = INT64_MAX;
  BasicLeakyBucket(int64_t capacity, int64_t n, int64_t d, bool shaper, int64_t max_delay_ns);
  void Drain(State& state, int64_t t) const;

  int64_t capacity_;
  int64_t n_;
  int64_t d_;
  Scaled capacity_scaled_;
  int64_t drain_ns_;      // time to drain a full queue
  int64_t max_delay_ns_;  // shaper: longest delay admitted; kUnbounded: the queue decides
  bool shaper_;
};

using LeakyBucket = BasicLeakyBucket<false>;
using WideLeakyBucket = BasicLeakyBucket<true>;
extern template class BasicLeakyBucket<false>;
extern template class BasicLeakyBucket<true>;

}  // namespace sluice

#endif  // SLUICE_LEAKY_BUCKET_H_
