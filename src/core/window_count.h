// The count of one window, shared by the windows that differ only in where a window starts and
// ends: the fixed window (epoch-aligned lengths) and the calendar window (a zone's periods).
// Each works out its window and the time to its end; what a count then admits, reports and
// gives back is decided here, once. Internal to libsluice.
#ifndef SLUICE_CORE_WINDOW_COUNT_H_
#define SLUICE_CORE_WINDOW_COUNT_H_

#include <algorithm>
#include <cstdint>

#include "core/arith.h"
#include "sluice/decision.h"
#include "sluice/time.h"

namespace sluice::internal {

// Admits `cost` (>= 0) into `count` when it fits under `limit` with `reserve` hits to spare
// (LimitCheck::reserve), in a window that ends in `until_next` ns. A negative count is a surplus
// (an admin credit beyond the limit, docs/quotas.md): spent first, and gone with the window, which
// is why the reset time is the window's end whenever the count is not zero.
inline Decision DecideWindowCount(int64_t& count, int64_t limit, int64_t until_next, int64_t cost,
                                  int64_t reserve = 0) {
  Decision d;
  d.limit = limit;
  const int64_t free = cost > limit ? -1 : FreeNeeded(cost, reserve, limit);
  if (cost > limit) {
    d = Rejected(DecisionReason::kCostExceedsCapacity, limit);
  } else if (free < 0) {
    d = ShedForever(limit);
  } else if (count + free <= limit) {
    count += cost;
    d.allowed = true;
    d.reason = DecisionReason::kAdmitted;
  } else {
    // The next window starts empty: cost + reserve <= limit fits there.
    d.reason = DecisionReason::kOverLimit;
    d.retry_after = Duration(until_next);
  }
  d.remaining = std::max<int64_t>(0, limit - count);
  d.reset_after = Duration(count != 0 ? until_next : 0);
  return d;
}

// A charge's hits added to the count, saturating at twice the limit (core/charge.h).
inline void ChargeWindowCount(int64_t& count, int64_t limit, int64_t hits) {
  count = std::max(count, std::min(count + hits, 2 * limit));
}

// Gives back `cost` admitted in this window: into a surplus only if the admission was taken
// from one.
inline void RefundWindowCount(int64_t& count, int64_t limit, int64_t cost) {
  count = std::max<int64_t>(count < 0 ? -limit : 0, count - cost);
}

}  // namespace sluice::internal

#endif  // SLUICE_CORE_WINDOW_COUNT_H_
