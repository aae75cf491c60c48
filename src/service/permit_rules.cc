#include "service/permit_rules.h"

#include <algorithm>
#include <string>

#include "service/permit_token.h"

namespace sluice::server {

Result<void> AdmitAcquire(const CheckRequest& request) {
  if (request.charge) {
    return MakeError(request.caller == Caller::kHttpJson
                         ? "charge: not with acquire (a charge is for work already done)"
                         : "a charge cannot acquire (it is for work already done)");
  }
  return {};
}

Result<void> AdmitSlotCount(size_t slots) {
  if (slots <= kMaxPermitSlots) return {};
  return MakeError("descriptors: at most " + std::to_string(kMaxPermitSlots) +
                   " of an acquire may have a concurrency limit (" + std::to_string(slots) +
                   " do)");
}

bool SlotAdmits(const PermitAnswer& answer, FailureMode failure_mode) {
  if (answer.degraded) return failure_mode == FailureMode::kOpen;
  return answer.granted;
}

bool ApplySlot(DescriptorStatus& status, const PermitAnswer& answer, FailureMode failure_mode) {
  status.slot = true;
  status.in_flight = answer.in_flight;
  status.slot_store_time_us = answer.store_time_us;
  status.slot_expires_us = answer.granted ? answer.expires_us : 0;
  status.degraded = status.degraded || answer.degraded;
  if (SlotAdmits(answer, failure_mode)) return false;
  status.slot_refused = true;
  status.over_limit = true;
  // kNever (a reserve no acquire can leave) passes through: retry_after_ms null.
  status.slot_retry_after = answer.degraded || answer.retry_after <= Duration(0)
                                ? kDegradedRetryAfter
                                : answer.retry_after;
  switch (status.mode) {
    case Mode::kEnforce:
      status.code = Code::kOverLimit;
      return true;
    case Mode::kShadow:
      status.shadow_over_limit = true;
      return false;
    case Mode::kSoft:
      status.soft_over_limit = true;
      return false;
  }
  return false;
}

bool SlotNamed(const PermitAnswer& answer) { return answer.granted || answer.degraded; }

void GiveBackSlots(CheckResponse& response) {
  for (DescriptorStatus& s : response.statuses) {
    if (!s.slot || s.slot_expires_us == 0) continue;  // not held: nothing given back
    s.slot_expires_us = 0;
    s.in_flight = std::max<int64_t>(s.in_flight - 1, 0);
  }
}

}  // namespace sluice::server
