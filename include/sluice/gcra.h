// GCRA (generic cell rate algorithm): the token bucket's admissions, kept as one number, the
// theoretical arrival time (TAT). With emission interval T = period/limit and capacity B:
//
//   backlog = max(TAT, now) - now;  admit iff backlog + cost*T <= B*T, then TAT = now + backlog +
//   cost*T.
//
// T is usually not a whole number of nanoseconds (3/s), so the TAT is a fixed-point timestamp:
// whole nanoseconds plus a fraction in units of 1/n ns. Decisions are identical to TokenBucket's
// for the same spec and a trace whose time never goes back (a test checks this on random
// traffic). After a clock step back GCRA is stricter: having no "last seen" time, it measures
// the backlog from the earlier time, where the token bucket keeps its later state's time.
#ifndef SLUICE_GCRA_H_
#define SLUICE_GCRA_H_

#include <cstddef>
#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace sluice {

class Gcra {
 public:
  struct State {
    int64_t tat_ns = 0;    // theoretical arrival time, whole nanoseconds ...
    int64_t tat_frac = 0;  // ... plus tat_frac/n ns, 0 <= tat_frac < n
  };

  static Result<Gcra> Create(const LimitSpec& spec);

  State Initial(Timestamp now) const { return State{ToNanos(now), 0}; }
  // `reserve` (priority shedding, LimitCheck::reserve): hits that must still be free after the
  // admission. Admitted only if cost + reserve would have been; takes only `cost`. Refused for
  // the reserve alone: kOverLimit, retry_after when cost + reserve fits (kNever if it never can).
  Decision Decide(State& state, Timestamp now, int64_t cost, int64_t reserve = 0) const;
  // Charges `cost` for work already done: Decide's verdict, but the cost is taken even when it
  // does not fit, into debt of at most one capacity (src/core/charge.h; docs/algorithms.md,
  // "Charges and debt").
  Decision Charge(State& state, Timestamp now, int64_t cost) const;
  // Gives back `cost` an admitted Decide(state, at, cost) took, as of `now`: the backlog ahead of
  // `now` shrinks by cost*T (never below 0). The token bucket's Refund, in TAT terms.
  void Refund(State& state, Timestamp at, Timestamp now, int64_t cost) const;
  Timestamp ReplenishedAt(const State& state) const;
  // The backlog ahead of `now` in hits (backlog / T), rounded up to a whole hit and at most two
  // capacities: the token bucket's capacity minus tokens, what a reload that changes the spec
  // keeps (src/core/carry_over.h).
  int64_t Used(const State& state, Timestamp now) const;
  static size_t HeapBytes(const State&) { return 0; }
  int64_t capacity() const { return capacity_; }

 private:
  Gcra(int64_t capacity, int64_t n, int64_t d);
  // Decide in Int arithmetic: int64_t for a narrow spec, __int128 for a wide one (the state is
  // the same: the TAT's fraction is below n).
  template <typename Int>
  // `free`: the hits that must be free to admit (cost + reserve, internal::FreeNeeded).
  Decision DecideAs(State& state, int64_t t, int64_t cost, int64_t free) const;
  Decision DecideWide(State& state, int64_t t, int64_t cost,
                      int64_t free) const;  // DecideAs<__int128>

  int64_t capacity_;
  int64_t n_;
  int64_t d_;
  WideInt capacity_scaled_;  // B*T in units of 1/n ns
  bool wide_;                // NeedsWideArithmetic: capacity_scaled_ is 2^61 or more
};

}  // namespace sluice

#endif  // SLUICE_GCRA_H_
