// DecideChecks: the loop of every in-process DecideAll (decide_all.h) -- each check decided or
// charged in order, then the give-back rule (give_back.h) -- with the store's own way to decide
// a check that keeps a reserve (LimitCheck::reserve, priority shedding). Internal.
#ifndef SLUICE_STORE_DECIDE_CHECKS_H_
#define SLUICE_STORE_DECIDE_CHECKS_H_

#include <cstddef>
#include <span>

#include "sluice/decision.h"
#include "sluice/limiter.h"
#include "store/give_back.h"

namespace sluice::internal {

// reserving(check) decides a check with reserve > 0 that is not a charge: admitted only if its
// cost plus its reserve fits, taking only its cost, in check.zone when it has one. A check with
// a zone (a calendar limit's, LimitCheck::zone) is decided by Limiter::DecideInZone. Charges ignore
// the reserve: they are for work already done, taken whatever the limit says
// (docs/load-protection.md, "Priority shedding").
template <typename ReservingFn>
void DecideChecks(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out,
                  ReservingFn&& reserving) {
  // Every check is decided even after a refusal: out[i] reports each limit's own verdict (its
  // retry_after is what a client needs), at the price of a refund for those that admitted.
  for (size_t i = 0; i < checks.size(); ++i) {
    const LimitCheck& c = checks[i];
    if (c.limiter == nullptr) {
      out[i] = Decision{};
      out[i].reason = DecisionReason::kInvalidRequest;
      out[i].retry_after = kNever;
    } else if (c.charge) {
      out[i] = c.zone != nullptr ? c.limiter->DecideInZone(c.key, now, c.cost, true, *c.zone)
                                 : c.limiter->Charge(c.key, now, c.cost);
    } else if (c.reserve > 0) {
      out[i] = reserving(c);
    } else if (c.zone != nullptr) {
      out[i] = c.limiter->DecideInZone(c.key, now, c.cost, false, *c.zone);
    } else {
      out[i] = c.limiter->Decide(c.key, now, c.cost);
    }
  }
  GiveBackIfRefused(checks, out, [&](size_t i) {
    checks[i].limiter->Refund(checks[i].key, now, now, checks[i].cost);
    return true;
  });
}

}  // namespace sluice::internal

#endif  // SLUICE_STORE_DECIDE_CHECKS_H_
