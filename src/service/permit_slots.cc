#include "service/permit_slots.h"

#include <atomic>
#include <utility>

namespace sluice::server {

namespace {

// The calls of one CallSlots. Owned by a count rather than a shared_ptr so that each slot's
// callback (two words) fits in std::function's own buffer: one allocation per permit call
// instead of one per slot plus the state's. `left` counts the answers still to come and one
// more for CallSlots' own loop, so the state outlives the loop even when a store answers
// before its call returns; whoever takes it to zero calls `done` and deletes it.
struct SlotsState {
  std::vector<PermitSlot> slots;
  std::string permit;
  std::vector<PermitAnswer> answers;
  std::atomic<size_t> left;
  SlotsCallback done;

  // Each answer writes its own element; the last one to let go (acq_rel) sees them all.
  void Let() {
    if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      done(std::move(answers));
      delete this;
    }
  }
};

}  // namespace

void CallSlots(SlotCall call, std::vector<PermitSlot> slots, const std::string& permit,
               Timestamp now, SlotsCallback done) {
  if (slots.empty()) return done({});
  auto* state = new SlotsState;
  state->answers.resize(slots.size());
  state->left.store(slots.size() + 1);
  state->slots = std::move(slots);
  state->permit = permit;
  state->done = std::move(done);
  for (size_t i = 0; i < state->slots.size(); ++i) {
    auto answered = [state, i](const PermitAnswer& answer) {
      state->answers[i] = answer;
      state->Let();
    };
    const PermitSlot& slot = state->slots[i];
    if (slot.pool == nullptr) {
      answered(PermitAnswer{});
      continue;
    }
    switch (call) {
      case SlotCall::kAcquire:
        slot.pool->AcquireAsync(slot.key, now, {.permit = state->permit, .reserve = slot.reserve},
                                answered);
        break;
      case SlotCall::kRelease:
        slot.pool->ReleaseAsync(slot.key, now, state->permit, answered);
        break;
      case SlotCall::kRenew:
        slot.pool->RenewAsync(slot.key, now, state->permit, answered);
        break;
    }
  }
  state->Let();
}

}  // namespace sluice::server
