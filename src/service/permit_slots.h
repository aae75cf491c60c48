// The store calls of one permit: every slot asked at once (one PermitPool call each, possibly
// answered on several store threads), `done` called once with every answer, in slot order, on
// the thread that answers last. Internal to the service.
#ifndef SLUICE_SERVICE_PERMIT_SLOTS_H_
#define SLUICE_SERVICE_PERMIT_SLOTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sluice/permits.h"
#include "sluice/time.h"

namespace sluice::server {

struct PermitSlot {
  std::shared_ptr<PermitPool> pool;  // null: no such pool here (answered not granted)
  std::string key;
  int64_t reserve = 0;  // an acquire's PermitAcquire::reserve (priority shedding)
};

enum class SlotCall { kAcquire, kRelease, kRenew };

using SlotsCallback = std::function<void(std::vector<PermitAnswer>)>;

// `slots` and `permit` are copied; `done` may run before this returns.
void CallSlots(SlotCall call, std::vector<PermitSlot> slots, const std::string& permit,
               Timestamp now, SlotsCallback done);

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_PERMIT_SLOTS_H_
