// RedisStoreImpl::MakePermitPool: concurrency permits in Redis, each call one script on the
// key's master (redis_script_permits.h), pipelined like the store's decisions.
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "store/redis/permit_ledger.h"
#include "store/redis/redis_limiter.h"
#include "store/redis/redis_reply.h"
#include "store/redis/redis_script_permits.h"
#include "store/redis/redis_store_impl.h"

namespace sluice::internal {
namespace {

// A script's reply {granted, held, now_us, expires_us, retry_us, expired} into `a`; false
// unless it has that shape and its numbers are ones the scripts can have computed.
bool ReadPermitReply(const RedisReply& reply, PermitAnswer& a, int64_t& expired) {
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() != 6) return false;
  for (const RedisReply& e : reply.elements) {
    if (!IsScriptInteger(e) || e.integer < 0) return false;
  }
  const auto& e = reply.elements;
  if (e[0].integer > 1) return false;
  a.granted = e[0].integer == 1;
  a.in_flight = e[1].integer;
  a.store_time_us = e[2].integer;
  a.expires_us = e[3].integer;
  a.retry_after = std::chrono::microseconds(e[4].integer);
  expired = e[5].integer;
  return true;
}

enum class PermitCall { kAcquire, kRelease, kRenew };

class RedisPermitPool final : public PermitPool {
 public:
  RedisPermitPool(std::shared_ptr<RedisStoreImpl> store, const PermitSpec& spec, std::string id)
      : store_(std::move(store)),
        spec_(spec),
        id_(std::move(id)),
        ttl_us_(std::to_string(
            std::chrono::duration_cast<std::chrono::microseconds>(spec.ttl).count())) {}

  void AcquireAsync(std::string_view key, Timestamp now, const PermitAcquire& request,
                    Callback done) override {
    const int64_t reserve = std::max<int64_t>(request.reserve, 0);
    if (reserve >= spec_.max_in_flight) {
      // No acquire of this reserve is ever granted (the script may still renew an id held): a
      // refusal's wait is never, which the script, counting microseconds, cannot say.
      done = [done = std::move(done)](const PermitAnswer& answer) {
        PermitAnswer a = answer;
        if (!a.granted && !a.degraded && !a.invalid) a.retry_after = kNever;
        done(a);
      };
    }
    Call(PermitCall::kAcquire, key, now, request.permit,
         {std::to_string(spec_.max_in_flight), std::to_string(reserve), ttl_us_,
          std::string(request.permit)},
         std::move(done));
  }
  void ReleaseAsync(std::string_view key, Timestamp now, std::string_view permit,
                    Callback done) override {
    Call(PermitCall::kRelease, key, now, permit, {std::string(permit)}, std::move(done));
  }
  void RenewAsync(std::string_view key, Timestamp now, std::string_view permit,
                  Callback done) override {
    Call(PermitCall::kRenew, key, now, permit, {ttl_us_, std::string(permit)}, std::move(done));
  }

  const PermitSpec& spec() const override { return spec_; }
  PermitStats Stats(Timestamp now) const override {
    return {.in_flight = counts_->ledger.held(now),
            .expired = counts_->expired.load(std::memory_order_relaxed)};
  }

 private:
  static const LuaScript& ScriptOf(PermitCall call) {
    switch (call) {
      case PermitCall::kAcquire:
        return kPermitAcquireScript;
      case PermitCall::kRelease:
        return kPermitReleaseScript;
      case PermitCall::kRenew:
        break;
    }
    return kPermitRenewScript;
  }

  // `args`: the script's arguments after now.
  void Call(PermitCall call, std::string_view key, Timestamp now, std::string_view permit,
            std::vector<std::string> args, Callback done) {
    PermitAnswer a;
    const RedisStoreOptions& options = store_->options();
    if (permit.empty() || permit.size() > kMaxPermitIdBytes || key.size() > options.max_key_bytes) {
      a.invalid = true;
      return done(a);
    }
    std::vector<std::string> keys = {RedisKeyFor(options.key_prefix + ":permits", id_, key)};
    if (store_->transport().Refuses(keys[0])) {  // the node's breaker is open
      store_->CountFailure(/*short_circuit=*/true);
      a.degraded = true;
      return done(a);
    }
    args.insert(args.begin(), NowArg(options, now));
    store_->transport().EvalAsync(
        ScriptOf(call), std::move(keys), std::move(args),
        [store = store_, counts = counts_, ttl = spec_.ttl, call, name = std::string(key),
         id = std::string(permit), now, done = std::move(done)](Result<RedisReply> reply) {
          done(Answer(*store, *counts, ttl, call, name, id, now, reply));
        });
  }

  // What a pool's answers update: shared with the calls in flight, so that a pool may go (a
  // reload) while Redis has yet to answer them.
  struct Counts {
    PermitLedger ledger;
    std::atomic<uint64_t> expired{0};
  };

  static PermitAnswer Answer(RedisStoreImpl& store, Counts& counts, Duration ttl, PermitCall call,
                             std::string_view key, std::string_view id, Timestamp now,
                             const Result<RedisReply>& reply) {
    PermitAnswer a;
    int64_t expired = 0;
    if (!reply || !ReadPermitReply(*reply, a, expired)) {
      const Error error =
          reply ? Error{"redis: unexpected reply from a permit script"} : reply.error();
      store.CountFailure(IsShortCircuit(error));
      if (!IsConnectionError(error)) store.CommandError(error);
      return PermitAnswer{.degraded = true};
    }
    counts.expired.fetch_add(static_cast<uint64_t>(expired), std::memory_order_relaxed);
    if (call == PermitCall::kRelease || !a.granted) {
      if (call != PermitCall::kAcquire) counts.ledger.Drop(key, id, now);
    } else {
      counts.ledger.Hold(key, id, now, now + ttl);
    }
    return a;
  }

  const std::shared_ptr<RedisStoreImpl> store_;
  const PermitSpec spec_;
  const std::string id_;
  const std::string ttl_us_;
  const std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
};

}  // namespace

Result<std::unique_ptr<PermitPool>> RedisStoreImpl::MakePermitPool(const PermitSpec& spec,
                                                                   const LimiterOptions& options) {
  const std::string_view id = options.id;
  if (id.empty() || id.size() > 256 || id.find_first_of("{}") != std::string_view::npos) {
    return MakeError("redis limit id '" + std::string(id) +
                     "' must be 1-256 bytes without '{' or '}'");
  }
  if (spec.max_in_flight <= 0) return MakeError("a concurrency limit's max_in_flight must be > 0");
  if (spec.max_in_flight >= kLuaExact) return MakeError("max_in_flight is too large");
  if (spec.ttl < kMinPermitTtl || spec.ttl > kMaxPermitTtl) {
    return MakeError("a concurrency limit's permit_ttl must be between 1ms and 366 days");
  }
  return std::unique_ptr<PermitPool>(
      std::make_unique<RedisPermitPool>(shared_from_this(), spec, options.id));
}

}  // namespace sluice::internal
