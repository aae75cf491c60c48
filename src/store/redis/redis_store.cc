// The Redis store (include/sluice/redis_store.h): limiters made, multi-limit decisions sent by
// slot group, and the store opened.
#include "sluice/redis_store.h"

#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/decide_all.h"
#include "store/give_back.h"
#include "store/redis/redis_script_choice.h"
#include "store/redis/redis_script_multi.h"
#include "store/redis/redis_store_impl.h"

namespace sluice {
namespace internal {

void RedisStoreImpl::Delete(RedisStoreImpl* store) {
  if (!store->transport().OnIoThread()) {
    delete store;
    return;
  }
  try {
    // Detached: nothing waits for a store nobody holds. It lasts as long as the store's
    // destruction, which the command timeout bounds.
    std::thread([store] { delete store; }).detach();
  } catch (const std::system_error&) {
    // No thread to be had: the store is left alive, since destroying it here would abort.
  }
}

Result<std::unique_ptr<Limiter>> RedisStoreImpl::MakeLimiter(const LimitSpec& spec,
                                                             const LimiterOptions& options) {
  const std::string_view limit_id = options.id;
  if (limit_id.empty() || limit_id.size() > 256 ||
      limit_id.find_first_of("{}") != std::string_view::npos) {
    return MakeError("redis limit id '" + std::string(limit_id) +
                     "' must be 1-256 bytes without '{' or '}'");
  }
  auto call = ScriptFor(spec, options.spec_generation);
  if (!call) return std::unexpected(call.error());
  return std::unique_ptr<Limiter>(
      std::make_unique<RedisLimiter>(shared_from_this(), spec, options.id, options.fail_open,
                                     std::move(call->params), *call->script, call->id));
}

void RedisStoreImpl::DecideAll(std::span<const LimitCheck> checks, Timestamp now,
                               std::span<Decision> out) {
  const std::vector<SlotGroup> groups = Group(checks, out);
  const size_t quota_total = QuotaChecks(checks);
  // Groups whose admissions stand unless another group rejects, with the script's now.
  std::vector<std::pair<const SlotGroup*, int64_t>> admitted;
  for (const SlotGroup& group : groups) {
    std::vector<std::string> keys;
    std::vector<std::string> args;
    MultiCall(group, now, quota_total, keys, args);
    const GroupOutcome outcome = ReadGroup(group, transport_->Eval(kMultiScript, keys, args), out);
    if (outcome.admitted) admitted.emplace_back(&group, outcome.at_us);
  }
  // Another slot (or a check decided without Redis) refused the request: the groups whose
  // admissions stood give them back, one script each.
  const auto by_index = AdmittedByIndex(checks.size(), admitted);
  GiveBackIfRefused(checks, out, [&](size_t i) {
    const auto [c, at_us] = by_index[i];
    if (c == nullptr) return false;
    const std::string keys[1] = {c->key};
    return CountRefund(
        transport_->Eval(kRefundScript, keys, RefundArgs(*c, now, at_us)).has_value());
  });
}

void RedisStoreImpl::DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                                    DecideAllCallback done) {
  auto state = std::make_shared<AsyncAll>();
  state->store = shared_from_this();
  state->now = now;
  state->out.resize(checks.size());
  state->done = std::move(done);
  state->groups = Group(checks, state->out);
  if (state->groups.empty()) return state->done(state->out);
  state->kinds.assign(checks.begin(), checks.end());
  for (LimitCheck& c : state->kinds) c.key = {};
  state->pending = state->groups.size();
  const size_t quota_total = QuotaChecks(checks);
  for (const SlotGroup& group : state->groups) {
    std::vector<std::string> keys;
    std::vector<std::string> args;
    MultiCall(group, now, quota_total, keys, args);
    transport_->EvalAsync(
        kMultiScript, std::move(keys), std::move(args), [state, &group](Result<RedisReply> reply) {
          bool last = false;
          {
            std::lock_guard<std::mutex> lock(state->mu);
            const GroupOutcome outcome = state->store->ReadGroup(group, reply, state->out);
            if (outcome.admitted) state->admitted.emplace_back(&group, outcome.at_us);
            last = --state->pending == 0;
          }
          if (last) RefundAsync(state);
        });
  }
}

SentinelSettings SentinelFor(const RedisStoreOptions& options, const RedisEndpoint& master) {
  SentinelSettings s;
  s.master = options.sentinel_master;
  s.master_template = master;
  for (const std::string& sentinel : options.sentinels) {
    RedisEndpoint e;
    const size_t colon = sentinel.rfind(':');
    e.host = sentinel.substr(0, colon);
    e.port = std::stoi(sentinel.substr(colon + 1));
    e.password = options.sentinel_password;
    // rediss+sentinel://: the store's TLS context; each sentinel verified against its own host
    // as the address names it (not --redis-tls-server-name, which names the Redis servers').
    e.tls = master.tls;
    e.connect_timeout = options.connect_timeout;
    e.command_timeout = options.connect_timeout;
    s.sentinels.push_back(std::move(e));
  }
  return s;
}

}  // namespace internal

Result<std::shared_ptr<RedisStore>> OpenRedisStore(const RedisStoreOptions& options) {
  if (options.connections < 1 || options.connections > 64) {
    return MakeError("redis connections must be 1-64");
  }
  if (options.command_timeout.count() <= 0 || options.connect_timeout.count() <= 0) {
    return MakeError("redis timeouts must be positive");
  }
  if (options.breaker_failures < 1) return MakeError("breaker_failures must be at least 1");
  if (options.monitor_interval.count() < 0)
    return MakeError("monitor_interval must not be negative");
  if (!options.sentinels.empty() && options.sentinel_master.empty()) {
    return MakeError("redis sentinel: the master's name is missing");
  }
  if (!options.unix_path.empty() && !options.cluster_seeds.empty()) {
    return MakeError(
        "a Redis Cluster cannot be reached through a Unix socket: its nodes name "
        "each other by host and port");
  }
  auto made = internal::MakeEndpoint(options);
  if (!made) return std::unexpected(made.error());
  const internal::RedisEndpoint& endpoint = *made;
  std::vector<internal::RedisEndpoint> seeds;
  for (const std::string& seed : options.cluster_seeds) {
    internal::RedisEndpoint e = endpoint;
    const size_t colon = seed.rfind(':');
    e.host = seed.substr(0, colon);
    e.port = std::stoi(seed.substr(colon + 1));
    e.db = 0;
    seeds.push_back(std::move(e));
  }
  return std::shared_ptr<RedisStore>(std::shared_ptr<internal::RedisStoreImpl>(
      new internal::RedisStoreImpl(options, endpoint, std::move(seeds)),
      &internal::RedisStoreImpl::Delete));
}

Result<std::unique_ptr<Limiter>> MakeRedisLimiter(const LimitSpec& spec,
                                                  const RedisStoreOptions& options) {
  auto store = OpenRedisStore(options);
  if (!store) return std::unexpected(store.error());
  return (*store)->MakeLimiter(spec, options.limit_id, options.fail_open);
}

}  // namespace sluice
