// Every rule of the permit API (POST /v1/acquire, /v1/release, /v1/renew), decided here once;
// the HTTP layer only translates JSON. docs/load-protection.md explains them.
//
// - An acquire is a check (the /v1/check body, the same rules: service/check_rules.h) that also
//   takes one slot of every matched descriptor's concurrency limit. `hits` applies to the rate
//   limits only (a slot is one request in flight, whatever its cost); `charge` is refused, since
//   a charge is for work already done and an acquire is for work to come.
// - All or nothing: the slots are taken first, all at once, then the rate limits are decided
//   together; if any slot or rate limit refuses, every slot taken is given back and no rate limit
//   is counted (a refused slot leaves the rate limits only looked at, at cost 0). A slot may be
//   seen held by another acquire for the one store round trip it takes to give it back.
// - At most kMaxPermitSlots descriptors of one acquire may have a concurrency limit.
// - A check (/v1/check, Envoy's gRPC, forward-auth) cannot give a slot back, so it skips a
//   concurrency limit: decided OK, counted as Unchecked::kConcurrency.
// - The store down: an acquire's slot is decided by the limit's failure_mode (open: granted,
//   holding nothing; closed: refused); a release or renew that cannot reach the store changes
//   nothing (degraded), and the slot stays held until its TTL.
// - The limit's mode applies to its slots as to its rate limit. A shadow (or soft) slot that is
//   granted is held, as an enforced one: in_flight stays the true count for a rollout. One that
//   is refused (full, or failure_mode closed with the store down) refuses nothing: its status
//   says what it would have answered (shadow_over_limit or soft_over_limit, retry_after,
//   permit_retry_after_ms; code OK), it holds nothing, and the permit does not name it.
#ifndef SLUICE_SERVICE_PERMIT_RULES_H_
#define SLUICE_SERVICE_PERMIT_RULES_H_

#include <cstddef>

#include "config/config.h"
#include "service/check.h"
#include "sluice/permits.h"
#include "sluice/status.h"

namespace sluice::server {

// What an acquire must be beyond a check's rules, in the caller's words.
Result<void> AdmitAcquire(const CheckRequest& request);

// The number of slots one acquire asks for, once matched.
Result<void> AdmitSlotCount(size_t slots);

// How long a refused slot, or one refused for the store being down, asks the caller to wait:
// the store's answer, or one second when the store said nothing.
inline constexpr Duration kDegradedRetryAfter = std::chrono::seconds(1);

// Whether a slot's answer lets the acquire through: granted, or the store down under
// failure_mode open.
bool SlotAdmits(const PermitAnswer& answer, FailureMode failure_mode);

// Fills `status` from its slot's answer (the descriptor's rate limit fields are left alone) in
// the status's mode; true if the slot refuses the acquire (only an enforced one does).
bool ApplySlot(DescriptorStatus& status, const PermitAnswer& answer, FailureMode failure_mode);

// Whether the acquire's permit names this slot: all but those known not to be held (answered,
// not granted: a shadow or soft slot that was refused). A slot the store did not answer may
// have been taken, and is named so that a release frees it.
bool SlotNamed(const PermitAnswer& answer);

// A refused acquire gives back the slots it took: their statuses then say so (no expiry, one
// fewer in flight), as the answer's null permit does.
void GiveBackSlots(CheckResponse& response);

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_PERMIT_RULES_H_
