// Sliding window counter: counts for the current aligned window and the one before it.
//
//   w = floor(t/D);  elapsed = (t - w*D)/D;  estimate = current + previous * (1 - elapsed)
//   admit iff estimate + cost <= limit   (previous is 0 unless window w-1 was the last one seen)
//
// Computed exactly in integers (everything multiplied by D). O(1) memory. It assumes the
// previous window's hits were spread evenly; when they were bunched at its end, the true count
// in a sliding interval (t-D, t] can exceed the limit: it is at most
// limit + elapsed * previous < 2 * limit (see docs/algorithms.md; a test checks the bound).
#ifndef SLUICE_SLIDING_WINDOW_COUNTER_H_
#define SLUICE_SLIDING_WINDOW_COUNTER_H_

#include <cstddef>
#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace sluice {

class SlidingWindowCounter {
 public:
  struct State {
    int64_t window = 0;
    uint32_t current = 0;
    uint32_t previous = 0;
  };

  static Result<SlidingWindowCounter> Create(const LimitSpec& spec);

  State Initial(Timestamp now) const;
  // `reserve` (priority shedding, LimitCheck::reserve): hits that must still be free after the
  // admission. Admitted only if cost + reserve would have been; takes only `cost`. Refused for
  // the reserve alone: kOverLimit, retry_after when cost + reserve fits (kNever if it never can).
  Decision Decide(State& state, Timestamp now, int64_t cost, int64_t reserve = 0) const;
  // Charges `cost` for work already done: Decide's verdict, but the cost is taken even when it
  // does not fit, into debt of at most one capacity (src/core/charge.h; docs/algorithms.md,
  // "Charges and debt").
  Decision Charge(State& state, Timestamp now, int64_t cost) const;
  // Gives back `cost` an admitted Decide(state, at, cost) took: from `current` if `at` is in the
  // state's window, from `previous` if in the one before, else nothing (no longer weighed).
  void Refund(State& state, Timestamp at, Timestamp now, int64_t cost) const;
  Timestamp ReplenishedAt(const State& state) const;
  static size_t HeapBytes(const State&) { return 0; }
  int64_t capacity() const { return limit_; }

 private:
  SlidingWindowCounter(int64_t limit, int64_t window_ns, bool wide)
      : limit_(limit), window_ns_(window_ns), wide_(wide) {}
  // Decide's arithmetic in Int: int64_t for a narrow spec, __int128 for a wide one (the state is
  // the same: counts fit 32 bits).
  template <typename Int>
  // `free`: the hits that must be free to admit (cost + reserve, internal::FreeNeeded).
  Decision DecideAs(State& state, int64_t t, int64_t cost, int64_t free) const;
  Decision DecideWide(State& state, int64_t t, int64_t cost,
                      int64_t free) const;  // DecideAs<__int128>

  int64_t limit_;
  int64_t window_ns_;
  bool wide_;  // NeedsWideArithmetic: limit x window reaches 2^60
};

}  // namespace sluice

#endif  // SLUICE_SLIDING_WINDOW_COUNTER_H_
