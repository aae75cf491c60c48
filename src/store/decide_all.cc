#include "sluice/decide_all.h"

#include <algorithm>

#include "store/decide_checks.h"

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

namespace {

// A reserve through any Limiter, which decides a cost and nothing more: cost + reserve is
// decided, and the reserve given back at once when it was admitted. Every verdict and retry
// time is the reserve's exact one, but not in one atomic step: between the two calls another
// request sees the reserve taken and may be refused (the strict side; never an admission beyond
// a threshold). The memory store decides its own limiters' reserves atomically.
Decision DecideThenFree(const LimitCheck& c, Timestamp now) {
  const int64_t capacity = c.limiter->spec().Capacity();
  if (c.cost > capacity) return c.limiter->Decide(c.key, now, c.cost);  // never fits
  if (c.reserve > capacity - c.cost) {
    // Never fits with its reserve; cost 0 asks for the key's numbers without taking anything.
    Decision d = c.limiter->Decide(c.key, now, 0);
    if (d.degraded) return d;
    d.allowed = false;
    d.reason = DecisionReason::kOverLimit;
    d.retry_after = kNever;
    return d;
  }
  const int64_t with_reserve = c.cost + c.reserve;
  Decision d = c.zone != nullptr ? c.limiter->DecideInZone(c.key, now, with_reserve, false, *c.zone)
                                 : c.limiter->Decide(c.key, now, with_reserve);
  if (d.allowed && !d.degraded) {
    c.limiter->Refund(c.key, now, now, c.reserve);
    d.remaining = std::min(d.limit, d.remaining + c.reserve);
  }
  return d;
}

}  // namespace

void DecideAll(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out) {
  internal::DecideChecks(checks, now, out,
                         [now](const LimitCheck& c) { return DecideThenFree(c, now); });
}

}  // namespace sluice
