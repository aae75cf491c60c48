// An administrative change of one counter: a credit, a debit or a remaining (Limiter::Adjust,
// the admin API's POST /v1/state; docs/quotas.md, "Credits, debits and the audit log"). The
// types and the arithmetic every store shares, so that a credit means the same on each.
#ifndef SLUICE_ADJUSTMENT_H_
#define SLUICE_ADJUSTMENT_H_

#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace sluice {

// An administrative change of one counter (Limiter::Adjust; the admin API's POST /v1/state,
// docs/quotas.md "Credits, debits and the audit log").
enum class AdjustKind {
  kCredit,        // gives `amount` back: the counter's remaining rises by it, up to the limit
  kDebit,         // takes `amount`, as a Charge of it: beyond the limit into debt (one capacity)
  kSetRemaining,  // the counter afresh, then charged so that `amount` remains (AdjustSteps)
};

struct Adjustment {
  AdjustKind kind = AdjustKind::kCredit;
  int64_t amount = 0;  // >= 0
  // A credit (or a remaining) beyond the limit: a one-off surplus of at most one capacity, spent
  // before the limit and lost at the window's end. Fixed windows only: a bucket refills to its
  // capacity and has no window end for a surplus to be lost at.
  bool allow_over_limit = false;
};

// A counter read (a cost-0 Decide) just before and just after an Adjust, in one atomic step.
struct Adjusted {
  Decision before;
  Decision after;
};

// `change` checked against a limit of `spec` before any store is asked; the error names what is
// wrong: a negative amount or one beyond 2^53, allow_over_limit off a fixed window or on a debit,
// a remaining beyond the capacity (beyond twice it with allow_over_limit).
Result<void> ValidateAdjustment(const LimitSpec& spec, const Adjustment& change);

// What `change` amounts to on a counter of `capacity`, as every store applies it: a credit
// gives `credit` hits back, a debit charges `debit`. A remaining starts the counter afresh (as a
// reset) and then charges capacity - remaining, or credits the surplus beyond the capacity:
// exact whatever the counter held, a debt included.
struct AdjustSteps {
  bool fresh = false;
  int64_t credit = 0;
  int64_t debit = 0;
};
AdjustSteps StepsOf(const Adjustment& change, int64_t capacity);

}  // namespace sluice

#endif  // SLUICE_ADJUSTMENT_H_
