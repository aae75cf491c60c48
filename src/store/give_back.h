// The give-back rule, written once for every store and layer: when a request is refused
// (RequestRefused, decide_all.h), every check that took quota -- allowed, not degraded (a
// fail-open admission took nothing), not a charge (charges stay taken) -- gives its cost back,
// and reports `remaining` as after the give-back. How the quota goes back (a Refund, a
// RefundAsync, a queued script, nothing because a script already rolled it back) is the
// caller's. Internal.
#ifndef SLUICE_STORE_GIVE_BACK_H_
#define SLUICE_STORE_GIVE_BACK_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "sluice/decide_all.h"
#include "sluice/decision.h"
#include "sluice/limiter.h"

namespace sluice::internal {

// Whether a check decided `d` took quota that a refused request gives back.
inline bool TookQuota(bool charge, const Decision& d) {
  return d.allowed && !d.degraded && !charge;
}

// `d` as reported once its `cost` went back: never above the limit.
inline void ReportGivenBack(Decision& d, int64_t cost) {
  d.remaining = std::min(d.limit, d.remaining + cost);
}

// If the request of `checks`, decided `out`, is refused: give_back(i) for every check i that
// took quota, newest first (a limit checked twice unwinds in reverse order: a sliding-log
// refund can only take the newest entry). give_back returns whether the quota went back now;
// then out[i] is reported so (false: it failed, it was given back and reported elsewhere, or it
// is reported when an asynchronous give-back completes). Returns whether the request was
// refused.
template <typename GiveBackFn>
bool GiveBackIfRefused(std::span<const LimitCheck> checks, std::span<Decision> out,
                       GiveBackFn&& give_back) {
  if (!RequestRefused(checks, out)) return false;
  for (size_t i = checks.size(); i-- > 0;) {
    if (!TookQuota(checks[i].charge, out[i])) continue;
    if (give_back(i)) ReportGivenBack(out[i], checks[i].cost);
  }
  return true;
}

}  // namespace sluice::internal

#endif  // SLUICE_STORE_GIVE_BACK_H_
