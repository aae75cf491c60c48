// The charge every algorithm offers next to Decide. Internal to libsluice.
//
// A charge is for work already done (Envoy's hits sent when a stream ends, an LLM's tokens
// counted after the answer): it cannot be refused, so its cost is taken even beyond the limit,
// and the key goes into debt that refill or the next window repays. The verdict is still
// Decide's -- whether the cost fitted -- so that a limit that counts every hit answers over the
// limit exactly when a refusing one would. Debt is capped: a key never holds more than twice its
// capacity (one capacity of debt), so a client that keeps sending recovers within two refill
// times or windows once it stops. docs/algorithms.md, "Charges and debt".
#ifndef SLUICE_CORE_CHARGE_H_
#define SLUICE_CORE_CHARGE_H_

#include <algorithm>
#include <cstdint>

#include "sluice/decision.h"
#include "sluice/time.h"

namespace sluice::internal {

// Alg::Decide, then, when the cost did not fit, take(state, hits) adds `hits` to what the
// state holds, saturating at twice the capacity. hits is at most 2 * capacity (no algorithm
// can hold more), so it never overflows scaled arithmetic. The decision reported is Decide's
// reading of the state after the charge: remaining, reset_after, and the retry time of a
// request of the same cost (never, for a cost above the capacity).
template <typename Alg, typename Take>
Decision ChargeBeyondLimit(const Alg& alg, typename Alg::State& state, Timestamp now, int64_t cost,
                           Take take) {
  const Decision verdict = alg.Decide(state, now, cost);
  if (verdict.allowed || verdict.reason == DecisionReason::kInvalidRequest) return verdict;
  // Decide brought the state up to `now` and took nothing.
  const int64_t capacity = alg.capacity();
  take(state, std::min(cost, 2 * capacity));
  // The state now holds more than the capacity, so this Decide refuses and changes nothing.
  Decision after = alg.Decide(state, now, std::min(cost, capacity));
  after.allowed = false;
  after.delay = Duration(0);
  if (verdict.reason == DecisionReason::kCostExceedsCapacity) {
    after.reason = verdict.reason;
    after.retry_after = kNever;
  } else {
    after.reason = DecisionReason::kOverLimit;
  }
  return after;
}

}  // namespace sluice::internal

#endif  // SLUICE_CORE_CHARGE_H_
