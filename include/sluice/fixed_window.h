// Fixed window counter: windows [k*D, (k+1)*D) aligned to the Unix epoch; admit iff
// count + cost <= limit. Cheap and simple, but a client can pass up to 2x the limit across a
// window edge (limit at the end of one window, limit again at the start of the next).
#ifndef SLUICE_FIXED_WINDOW_H_
#define SLUICE_FIXED_WINDOW_H_

#include <cstddef>
#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace sluice {

class FixedWindow {
 public:
  struct State {
    int64_t window = 0;  // floor(t / D) of the window `count` belongs to
    int64_t count = 0;
  };

  static Result<FixedWindow> Create(const LimitSpec& spec);

  State Initial(Timestamp now) const;
  // `reserve` (priority shedding, LimitCheck::reserve): hits that must still be free after the
  // admission. Admitted only if cost + reserve would have been; takes only `cost`. Refused for
  // the reserve alone: kOverLimit, retry_after when cost + reserve fits (kNever if it never can).
  Decision Decide(State& state, Timestamp now, int64_t cost, int64_t reserve = 0) const;
  // Charges `cost` for work already done: Decide's verdict, but the cost is taken even when it
  // does not fit, into debt of at most one capacity (src/core/charge.h; docs/algorithms.md,
  // "Charges and debt").
  Decision Charge(State& state, Timestamp now, int64_t cost) const;
  // Gives back `cost` an admitted Decide(state, at, cost) took: subtracted from the count if
  // `at`'s window is still the state's window (an older one no longer counts).
  void Refund(State& state, Timestamp at, Timestamp now, int64_t cost) const;
  Timestamp ReplenishedAt(const State& state) const;
  static size_t HeapBytes(const State&) { return 0; }
  int64_t capacity() const { return limit_; }

 private:
  FixedWindow(int64_t limit, int64_t window_ns) : limit_(limit), window_ns_(window_ns) {}

  int64_t limit_;
  int64_t window_ns_;
};

}  // namespace sluice

#endif  // SLUICE_FIXED_WINDOW_H_
