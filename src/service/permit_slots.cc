#include "service/permit_slots.h"

#include <atomic>
#include <utility>

namespace sluice::server {

void CallSlots(SlotCall call, std::vector<PermitSlot> slots, const std::string& permit,
               Timestamp now, SlotsCallback done) {
  if (slots.empty()) return done({});
  struct State {
    std::vector<PermitSlot> slots;
    std::string permit;
    std::vector<PermitAnswer> answers;
    std::atomic<size_t> left;
    SlotsCallback done;
  };
  auto state = std::make_shared<State>();
  state->answers.resize(slots.size());
  state->left.store(slots.size());
  state->slots = std::move(slots);
  state->permit = permit;
  state->done = std::move(done);
  for (size_t i = 0; i < state->slots.size(); ++i) {
    // Each answer writes its own element; the last one (acq_rel) sees them all.
    auto answered = [state, i](const PermitAnswer& answer) {
      state->answers[i] = answer;
      if (state->left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        state->done(std::move(state->answers));
      }
    };
    const PermitSlot& slot = state->slots[i];
    if (slot.pool == nullptr) {
      answered(PermitAnswer{});
      continue;
    }
    switch (call) {
      case SlotCall::kAcquire:
        slot.pool->AcquireAsync(slot.key, now, {.permit = state->permit, .reserve = slot.reserve},
                                std::move(answered));
        break;
      case SlotCall::kRelease:
        slot.pool->ReleaseAsync(slot.key, now, state->permit, std::move(answered));
        break;
      case SlotCall::kRenew:
        slot.pool->RenewAsync(slot.key, now, state->permit, std::move(answered));
        break;
    }
  }
}

}  // namespace sluice::server
