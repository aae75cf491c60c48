// The refunds of a refused multi-limit request, in sequence: newest first, one at a time, so that
// a limit checked twice unwinds in reverse order (the give-back rule: store/give_back.h).
#include <algorithm>

#include "store/give_back.h"
#include "store/redis/redis_script_multi.h"
#include "store/redis/redis_store_impl.h"

namespace sluice::internal {

std::vector<std::string> RedisStoreImpl::RefundArgs(const SlotCheck& c, Timestamp now,
                                                    int64_t at_us) const {
  std::vector<std::string> args = {NowArg(options_, now), std::to_string(at_us),
                                   std::to_string(c.limiter->script_id())};
  c.limiter->AppendArgs(now, c.cost, /*charge=*/false, args);
  return args;
}

bool RedisStoreImpl::CountRefund(bool given_back) {
  (given_back ? refunds_ : refund_failures_).fetch_add(1, std::memory_order_relaxed);
  return given_back;
}

// Per check, the group's script now if its group's admissions stood (null otherwise: a group
// the script rolled back gave its admissions back itself).
std::vector<std::pair<const SlotCheck*, int64_t>> RedisStoreImpl::AdmittedByIndex(
    size_t checks, std::span<const std::pair<const SlotGroup*, int64_t>> admitted) {
  std::vector<std::pair<const SlotCheck*, int64_t>> by_index(checks, {nullptr, 0});
  for (const auto& [group, at_us] : admitted) {
    for (const SlotCheck& c : group->checks) by_index[c.index] = {&c, at_us};
  }
  return by_index;
}

// After every group answered: done, or first give back what the admitted groups took -- newest
// first and one at a time, as DecideAll does: a limit checked twice unwinds in the reverse order
// (a sliding-log refund can only take the newest entry), and refunds sent together could run in
// any order on different connections.
void RedisStoreImpl::RefundAsync(const std::shared_ptr<AsyncAll>& state) {
  const auto by_index = AdmittedByIndex(state->kinds.size(), state->admitted);
  GiveBackIfRefused(state->kinds, state->out, [&](size_t i) {
    if (by_index[i].first != nullptr) state->refunds.push_back(by_index[i]);
    return false;  // reported when its refund is answered (RefundNext)
  });
  RefundNext(state);
}

void RedisStoreImpl::RefundNext(const std::shared_ptr<AsyncAll>& state) {
  if (state->refunded == state->refunds.size()) return state->done(state->out);
  const auto [c, at_us] = state->refunds[state->refunded];
  std::vector<std::string> keys = {c->key};
  state->store->transport_->EvalAsync(kRefundScript, std::move(keys),
                                      state->store->RefundArgs(*c, state->now, at_us),
                                      [state, c](Result<RedisReply> reply) {
                                        {
                                          std::lock_guard<std::mutex> lock(state->mu);
                                          if (state->store->CountRefund(reply.has_value())) {
                                            ReportGivenBack(state->out[c->index], c->cost);
                                          }
                                          ++state->refunded;
                                        }
                                        RefundNext(state);
                                      });
}

}  // namespace sluice::internal
