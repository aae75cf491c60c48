#include "sluice/decide_all.h"

#include <algorithm>

namespace sluice {

void DecideAll(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out) {
  bool rejected = false;
  // Every check is decided even after a refusal: out[i] reports each limit's own verdict (its
  // retry_after is what a client needs), at the price of a refund for those that admitted.
  for (size_t i = 0; i < checks.size(); ++i) {
    const LimitCheck& c = checks[i];
    if (c.limiter == nullptr) {
      out[i] = Decision{};
      out[i].reason = DecisionReason::kInvalidRequest;
      out[i].retry_after = kNever;
    } else {
      out[i] = c.charge ? c.limiter->Charge(c.key, now, c.cost)
                        : c.limiter->Decide(c.key, now, c.cost);
    }
    rejected = rejected || !out[i].allowed;
  }
  if (!rejected) return;
  // Newest first, so a limit checked twice for one request unwinds in the reverse order.
  for (size_t i = checks.size(); i-- > 0;) {
    Decision& d = out[i];
    if (!d.allowed || d.degraded || checks[i].charge) continue;  // charges stay taken
    checks[i].limiter->Refund(checks[i].key, now, now, checks[i].cost);
    d.remaining = std::min(d.limit, d.remaining + checks[i].cost);
  }
}

}  // namespace sluice
