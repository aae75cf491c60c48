#include "sluice/decide_all.h"

#include "store/give_back.h"

namespace sluice {

bool RequestRefused(std::span<const LimitCheck> checks, std::span<const Decision> out) {
  bool any_quota = false, quota_allowed = false;
  for (size_t i = 0; i < checks.size(); ++i) {
    if (!checks[i].quota) {
      if (!out[i].allowed) return true;
      continue;
    }
    any_quota = true;
    quota_allowed = quota_allowed || out[i].allowed;
  }
  return any_quota && !quota_allowed;
}

void DecideAll(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out) {
  // Every check is decided even after a refusal: out[i] reports each limit's own verdict (its
  // retry_after is what a client needs), at the price of a refund for those that admitted.
  for (size_t i = 0; i < checks.size(); ++i) {
    const LimitCheck& c = checks[i];
    if (c.limiter == nullptr) {
      out[i] = Decision{};
      out[i].reason = DecisionReason::kInvalidRequest;
      out[i].retry_after = kNever;
    } else if (c.zone != nullptr) {
      out[i] = c.limiter->DecideInZone(c.key, now, c.cost, c.charge, *c.zone);
    } else {
      out[i] =
          c.charge ? c.limiter->Charge(c.key, now, c.cost) : c.limiter->Decide(c.key, now, c.cost);
    }
  }
  internal::GiveBackIfRefused(checks, out, [&](size_t i) {
    checks[i].limiter->Refund(checks[i].key, now, now, checks[i].cost);
    return true;
  });
}

}  // namespace sluice
