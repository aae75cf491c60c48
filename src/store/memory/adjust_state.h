// An administrative adjustment (Limiter::Adjust) applied to one algorithm's state, for the
// memory store's shards. The Redis store's kAdjustScript (redis_script_adjust.h) does the same in
// Lua; docs/quotas.md, "Credits, debits and the audit log", states the meaning. Internal.
#ifndef SLUICE_STORE_MEMORY_ADJUST_STATE_H_
#define SLUICE_STORE_MEMORY_ADJUST_STATE_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "sluice/calendar_window.h"
#include "sluice/fixed_window.h"
#include "sluice/limiter.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"

namespace sluice::internal {

// Gives `hits` back to a state Decide has just brought up to `now` (at most twice the
// capacity: all a key can hold).
template <typename Alg>
void CreditState(const Alg& alg, typename Alg::State& s, Timestamp now, int64_t hits,
                 bool allow_over_limit) {
  if constexpr (std::is_same_v<Alg, FixedWindow> || std::is_same_v<Alg, CalendarWindow>) {
    // A surplus is a negative count: spent first, and gone with the window (Decide starts the
    // next one at 0). A plain credit never adds to one, nor takes one away.
    const int64_t lowest = allow_over_limit ? -alg.capacity() : std::min<int64_t>(0, s.count);
    s.count = std::max(lowest, s.count - hits);
  } else if constexpr (std::is_same_v<Alg, SlidingWindowCounter>) {
    // The current window's hits first, then the previous one's (which weigh less: the credit
    // may raise remaining by less than `hits`).
    const auto take = [&hits](uint32_t& count) {
      const int64_t taken = std::min<int64_t>(hits, count);
      count = static_cast<uint32_t>(count - taken);
      hits -= taken;
    };
    take(s.current);
    take(s.previous);
  } else if constexpr (std::is_same_v<Alg, SlidingWindowLog>) {
    // The newest hits: those that would have left the window last.
    const uint32_t n = static_cast<uint32_t>(std::min<int64_t>(hits, s.stamps.size()));
    s.stamps.Erase(s.stamps.size() - n, n);
  } else {
    // The buckets: returned as a refund returns them, in steps of at most the capacity (what
    // Refund takes), so that a debt is repaid before the bucket fills.
    while (hits > 0) {
      const int64_t step = std::min(hits, alg.capacity());
      alg.Refund(s, now, now, step);
      hits -= step;
    }
  }
}

// `steps` (StepsOf) applied to `s`, which Decide has just brought up to `now`.
template <typename Alg>
void AdjustState(const Alg& alg, typename Alg::State& s, Timestamp now, const AdjustSteps& steps,
                 bool allow_over_limit) {
  const int64_t most = 2 * alg.capacity();
  if (steps.fresh) s = alg.Initial(now);
  if (steps.debit > 0) alg.Charge(s, now, std::min(steps.debit, most));
  if (steps.credit > 0) {
    CreditState(alg, s, now, std::min(steps.credit, most), allow_over_limit);
  }
}

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_ADJUST_STATE_H_
