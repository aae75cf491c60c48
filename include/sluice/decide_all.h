// DecideAll: one request checked against several limits, all or nothing, through any Limiter.
//
//   const LimitCheck checks[] = {{per_user.get(), "user=alice", 1},
//                                {per_ip.get(), "ip=10.0.0.1", 1}};
//   Decision out[2];
//   DecideAll(checks, clock.Now(), out);  // the request passes iff out[0] and out[1] allow it
//
// A request rejected by one limit does not take quota from the others: every admission it got
// is given back with Limiter::Refund at the same `now`. That is exact for each limit (the key is
// left as if the request had never come), but not atomic across them: between the decision and
// the refund, a concurrent request may see the quota taken and be refused (the strict side);
// it can never be admitted beyond any limit. A Redis store's own RedisStore::DecideAll does the
// same in one script per hash slot.
#ifndef SLUICE_DECIDE_ALL_H_
#define SLUICE_DECIDE_ALL_H_

#include <span>

#include "sluice/decision.h"
#include "sluice/limiter.h"
#include "sluice/store.h"  // RequestRefused
#include "sluice/time.h"

namespace sluice {

// Decides checks[i] into out[i] (out.size() >= checks.size()), in order, each at `now`. If the
// request is refused (RequestRefused: a degraded fail-closed refusal counts, a null limiter is
// kInvalidRequest), every allowed, non-degraded check is refunded and its `remaining` reported
// as after the give-back (min(limit, remaining + cost)) -- except charges (LimitCheck::charge),
// which stay taken. out[i] stays each limit's own verdict. A degraded admission (fail-open) took
// nothing and is not refunded. The same limiter and key may appear more than once: each check
// takes its own cost. A check's reserve (LimitCheck::reserve) is honoured through Limiter's
// Decide and Refund: cost + reserve decided, the reserve given back at once -- the exact verdict,
// but not atomic (a concurrent request may see the reserve taken: the strict side). Charges
// ignore the reserve.
void DecideAll(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out);

}  // namespace sluice

#endif  // SLUICE_DECIDE_ALL_H_
