// The checks and the arithmetic of an administrative adjustment (Limiter::Adjust) that every
// store shares, so that a credit means the same on the memory store and on Redis.
#include <string>

#include "sluice/adjustment.h"

namespace sluice {

Result<void> ValidateAdjustment(const LimitSpec& spec, const Adjustment& change) {
  // Lua numbers are doubles: an amount beyond 2^53 would not reach Redis exactly. No counter
  // holds that much anyway.
  constexpr int64_t kMaxAmount = int64_t{1} << 53;
  if (change.amount < 0 || change.amount > kMaxAmount) {
    return MakeError("the amount must be an integer in [0, 2^53]");
  }
  const bool fixed = spec.algorithm == Algorithm::kFixedWindow;
  if (change.allow_over_limit) {
    if (change.kind == AdjustKind::kDebit) {
      return MakeError("allow_over_limit goes with a credit or a remaining, not a debit");
    }
    if (!fixed) {
      return MakeError("allow_over_limit: " + std::string(AlgorithmName(spec.algorithm)) +
                       " has no window end for a surplus to be lost at (fixed_window only)");
    }
  }
  const int64_t capacity = spec.Capacity();
  const int64_t most = change.allow_over_limit ? 2 * capacity : capacity;
  if (change.kind == AdjustKind::kSetRemaining && change.amount > most) {
    return MakeError("remaining " + std::to_string(change.amount) +
                     " is beyond what the limit holds (" + std::to_string(most) +
                     (change.allow_over_limit ? ", one capacity of surplus included)"
                                              : "; allow_over_limit adds one capacity on a "
                                                "fixed_window)"));
  }
  return {};
}

AdjustSteps StepsOf(const Adjustment& change, int64_t capacity) {
  AdjustSteps steps;
  switch (change.kind) {
    case AdjustKind::kCredit:
      steps.credit = change.amount;
      break;
    case AdjustKind::kDebit:
      steps.debit = change.amount;
      break;
    case AdjustKind::kSetRemaining:
      steps.fresh = true;
      if (change.amount <= capacity) {
        steps.debit = capacity - change.amount;
      } else {
        steps.credit = change.amount - capacity;
      }
      break;
  }
  return steps;
}

}  // namespace sluice
