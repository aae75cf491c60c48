// A multi-limit decision's checks grouped by hash slot, each group's script call built and its
// answer read (redis_slots.h).
#include "store/redis/redis_slots.h"

#include <algorithm>

#include "store/give_back.h"
#include "store/redis/crc16.h"
#include "store/redis/redis_limiter.h"
#include "store/redis/redis_store_impl.h"

namespace sluice::internal {

size_t QuotaChecks(std::span<const LimitCheck> checks) {
  return static_cast<size_t>(
      std::count_if(checks.begin(), checks.end(), [](const LimitCheck& c) { return c.quota; }));
}

// One request's checks grouped by hash slot, in order of first appearance (a standalone server
// is one group); checks decided without Redis are already in `out`.
std::vector<SlotGroup> RedisStoreImpl::Group(std::span<const LimitCheck> checks,
                                             std::span<Decision> out) const {
  std::vector<SlotGroup> groups;
  const bool cluster = !options_.cluster_seeds.empty();
  for (size_t i = 0; i < checks.size(); ++i) {
    // Only this store's limiters are RedisLimiters: told by who made them, not by their type.
    if (checks[i].limiter == nullptr || checks[i].limiter->owner() != this) {
      out[i] = Decision{};
      out[i].reason = DecisionReason::kInvalidRequest;
      out[i].retry_after = kNever;
      continue;
    }
    auto* limiter = static_cast<RedisLimiter*>(checks[i].limiter);
    std::string key;
    if (!limiter->Prepare(checks[i].key, checks[i].cost, checks[i].charge, out[i], key)) continue;
    const int slot = cluster ? RedisHashSlot(key) : 0;
    auto group = std::find_if(groups.begin(), groups.end(),
                              [slot](const SlotGroup& g) { return g.slot == slot; });
    if (group == groups.end()) group = groups.insert(groups.end(), SlotGroup{slot, {}});
    group->checks.push_back({i, limiter, std::move(key), checks[i].cost, checks[i].charge,
                             checks[i].quota, limiter->ReserveFor(checks[i]), checks[i].zone});
  }
  return groups;
}

void RedisStoreImpl::MultiCall(const SlotGroup& group, Timestamp now, size_t quota_total,
                               std::vector<std::string>& keys,
                               std::vector<std::string>& args) const {
  args.push_back(NowArg(options_, now));
  args.push_back(std::to_string(quota_total));
  for (const SlotCheck& c : group.checks) {
    keys.push_back(c.key);
    args.push_back(std::to_string(c.limiter->script_id()));
    const size_t count_at = args.size();
    args.emplace_back();
    c.limiter->AppendArgs(now, c.cost, c.charge, args, c.quota, c.reserve, c.zone);
    args[count_at] = std::to_string(args.size() - count_at - 1);
  }
}

GroupOutcome RedisStoreImpl::ReadGroup(const SlotGroup& group, const Result<RedisReply>& reply,
                                       std::span<Decision> out) const {
  GroupOutcome outcome;
  const bool ok = reply && reply->type == RedisReply::Type::kArray && reply->elements.size() == 3 &&
                  reply->elements[1].elements.size() == group.checks.size();
  const bool rolled_back = ok && reply->elements[2].integer == 1;
  for (size_t k = 0; k < group.checks.size(); ++k) {
    const SlotCheck& c = group.checks[k];
    Decision& d = out[c.index];
    if (!ok || !c.limiter->Read(reply->elements[1].elements[k], c.cost, c.charge, d, c.reserve)) {
      d = c.limiter->Failed(d,
                            reply ? Error{"redis: unexpected multi-limit reply"} : reply.error());
    } else {
      c.limiter->CountZoneMismatch(reply->elements[1].elements[k]);
      if (rolled_back && TookQuota(c.charge, d)) ReportGivenBack(d, c.cost);  // the script did
    }
  }
  outcome.admitted = ok && !rolled_back;
  if (outcome.admitted) outcome.at_us = reply->elements[0].integer;
  return outcome;
}

}  // namespace sluice::internal
