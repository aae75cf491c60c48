// RedisLimiter (redis_limiter.h): a decision, a charge, a lease take, a refund or a reset of
// one key, each one script or command.
#include "store/redis/redis_limiter.h"

#include <array>
#include <utility>

#include "store/redis/redis_script_adjust.h"
#include "store/redis/redis_script_lease.h"
#include "store/redis/redis_store_impl.h"
#include "util/hex.h"

namespace sluice {

std::string RedisKeyFor(std::string_view key_prefix, std::string_view limit_id,
                        std::string_view identity) {
  std::string key;
  key.reserve(key_prefix.size() + limit_id.size() + identity.size() + 8);
  key.append(key_prefix).append(":{").append(limit_id).push_back(':');
  for (char ch : identity) {
    const auto c = static_cast<unsigned char>(ch);
    if (c > 0x20 && c < 0x7f && c != '{' && c != '}' && c != '%' && c != ':') {
      key.push_back(ch);
    } else {
      key.push_back('%');
      util::AppendHexByte(key, c, util::HexCase::kUpper);
    }
  }
  key.push_back('}');
  return key;
}

namespace internal {

RedisLimiter::RedisLimiter(std::shared_ptr<RedisStoreImpl> store, const LimitSpec& spec,
                           std::string limit_id, bool fail_open, std::vector<std::string> params,
                           const LuaScript& script, int script_id)
    : Limiter(store.get()),
      store_(std::move(store)),
      script_id_(script_id),
      spec_(spec),
      limit_id_(std::move(limit_id)),
      fail_open_(fail_open),
      params_(std::move(params)),
      script_(script) {
  // ScriptFor validated the spec, zone included.
  if (spec_.IsCalendar()) {
    if (auto calendar = CalendarWindow::Create(spec_)) calendar_ = *calendar;
  }
}

void RedisLimiter::AppendCalendarBounds(Timestamp now, std::vector<std::string>& args,
                                        const CalendarZone* zone) const {
  // The request's zone's windows; a window the key already holds still decides until its
  // recorded end (kCalendarWindowBody), whichever zone opened it.
  const CalendarWindow windows = zone != nullptr ? calendar_->InZone(*zone, nullptr) : *calendar_;
  const CalendarWindow::State current = windows.WindowAt(now);
  const CalendarWindow::State before = windows.WindowAt(FromNanos(current.start_ns - 1));
  const CalendarWindow::State next = windows.WindowAt(FromNanos(current.end_ns));
  for (int64_t bound : {before.start_ns, current.start_ns, current.end_ns, next.end_ns}) {
    args.push_back(std::to_string(bound / kNanosPerUs));
  }
  args.push_back(std::to_string(windows.zone().id));
}

Decision RedisLimiter::Failed(const Decision& d, const Error& error) {
  const bool short_circuit = IsShortCircuit(error);
  CountFailure(short_circuit);
  if (!IsConnectionError(error)) store_->CommandError(error);
  return Degraded(d);
}

void RedisLimiter::CountFailure(bool short_circuit) {
  (short_circuit ? short_circuited_ : errors_).fetch_add(1, std::memory_order_relaxed);
  store_->CountFailure(short_circuit);
}

bool RedisLimiter::Prepare(std::string_view key, int64_t cost, bool charge, Decision& d,
                           std::string& redis_key) {
  d = Decision{};
  d.limit = spec_.Capacity();
  const RedisStoreOptions& options = store_->options();
  if (cost < 0 || key.size() > options.max_key_bytes) {
    d.reason = DecisionReason::kInvalidRequest;
    d.retry_after = kNever;
    return false;
  }
  if (cost > spec_.Capacity() && !charge) {
    d.reason = DecisionReason::kCostExceedsCapacity;
    d.retry_after = kNever;
    return false;
  }
  redis_key = RedisKeyFor(options.key_prefix, limit_id_, key);
  // With the node's breaker open, refuse before building the request.
  if (store_->transport().Refuses(redis_key)) {
    CountFailure(/*short_circuit=*/true);
    d = Degraded(d);
    return false;
  }
  return true;
}

std::string NowArg(const RedisStoreOptions& options, Timestamp now) {
  return options.use_server_time ? std::string() : std::to_string(ToNanos(now) / kNanosPerUs);
}

std::vector<std::string> RedisLimiter::ScriptArgs(Timestamp now, int64_t cost, bool charge) const {
  std::vector<std::string> args;
  args.reserve(params_.size() + 3);
  args.push_back(NowArg(store_->options(), now));
  AppendArgs(now, cost, charge, args);
  return args;
}

Decision RedisLimiter::Run(std::string_view key, Timestamp now, int64_t cost, bool charge) {
  Decision d;
  std::string redis_key;
  if (!Prepare(key, cost, charge, d, redis_key)) return d;
  std::vector<std::string> args = ScriptArgs(now, cost, charge);
  const std::string keys[1] = {std::move(redis_key)};
  auto reply = store_->transport().Eval(script_, keys, args);
  if (!reply) return Failed(d, reply.error());
  if (!Read(*reply, cost, charge, d)) {
    return Failed(d, Error{"redis: unexpected reply from the " +
                           std::string(AlgorithmName(spec_.algorithm)) + " script"});
  }
  return d;
}

void RedisLimiter::RunAsync(std::string_view key, Timestamp now, int64_t cost, bool charge,
                            DecisionCallback done) {
  Decision d;
  std::string redis_key;
  if (!Prepare(key, cost, charge, d, redis_key)) return done(d);
  std::vector<std::string> args = ScriptArgs(now, cost, charge);
  std::vector<std::string> keys;
  keys.push_back(std::move(redis_key));
  store_->transport().EvalAsync(
      script_, std::move(keys), std::move(args),
      [this, d, cost, charge, done = std::move(done)](Result<RedisReply> reply) mutable {
        if (!reply) {
          d = Failed(d, reply.error());
        } else if (!Read(*reply, cost, charge, d)) {
          d = Failed(d, Error{"redis: unexpected reply from the " +
                              std::string(AlgorithmName(spec_.algorithm)) + " script"});
        }
        done(d);
      });
}

void RedisLimiter::Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) {
  if (cost <= 0 || cost > spec_.Capacity() || key.size() > store_->options().max_key_bytes) return;
  const RedisStoreOptions& options = store_->options();
  std::vector<std::string> args = {NowArg(options, now), NowArg(options, at),
                                   std::to_string(script_id_)};
  AppendArgs(now, cost, /*charge=*/false, args);
  const std::string keys[1] = {RedisKeyFor(options.key_prefix, limit_id_, key)};
  if (auto reply = store_->transport().Eval(kRefundScript, keys, args); !reply) {
    Failed(Decision{}, reply.error());
  }
}

void RedisLimiter::TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                             LeaseCallback done) {
  LeaseGrant grant;
  std::string redis_key;
  if (!Prepare(key, request.cost, /*charge=*/false, grant.decision, redis_key)) {
    return done(grant);
  }
  const int64_t want = std::clamp<int64_t>(request.want, 0, spec_.Capacity());
  std::vector<std::string> args = {NowArg(store_->options(), now), std::to_string(script_id_),
                                   std::to_string(params_.size() + 2)};
  AppendArgs(now, request.cost, /*charge=*/false, args);
  args.push_back(std::to_string(want));
  args.emplace_back(request.holder);
  args.push_back(std::to_string(std::max<int64_t>(1, request.ttl.count() / kNanosPerUs)));
  std::vector<std::string> keys;
  keys.push_back(redis_key + ":holders");  // after the hash tag: the same slot
  keys.insert(keys.begin(), std::move(redis_key));
  store_->transport().EvalAsync(
      kLeaseScript, std::move(keys), std::move(args),
      [this, grant, want, done = std::move(done)](Result<RedisReply> reply) mutable {
        if (!reply) {
          grant.decision = Failed(grant.decision, reply.error());
          return done(grant);
        }
        const auto& e = reply->elements;
        if (reply->type != RedisReply::Type::kArray || e.size() != 4 || !IsScriptInteger(e[0]) ||
            !ReadDecision(e[1], grant.decision) || !IsScriptInteger(e[2]) ||
            !IsScriptInteger(e[3]) || e[2].integer < 0 || e[2].integer > want) {
          grant.decision =
              Failed(grant.decision, Error{"redis: unexpected reply from the lease script"});
          return done(grant);
        }
        grant.stamp_us = e[0].integer;
        grant.units = e[2].integer;
        grant.holders = e[3].integer;
        done(grant);
      });
}

void RedisLimiter::GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) {
  RefundInBackground(key, std::to_string(stamp_us), now, units);
}

void RedisLimiter::RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) {
  RefundInBackground(key, NowArg(store_->options(), at), now, cost);
}

void RedisLimiter::RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                              GivenBackCallback done) {
  RefundInBackground(key, NowArg(store_->options(), at), now, cost, std::move(done));
}

void RedisLimiter::GiveBackThen(std::string_view key, int64_t stamp_us, Timestamp now,
                                int64_t units, GivenBackCallback done) {
  RefundInBackground(key, std::to_string(stamp_us), now, units, std::move(done));
}

void RedisLimiter::RefundInBackground(std::string_view key, std::string at_arg, Timestamp now,
                                      int64_t cost, GivenBackCallback done) {
  if (cost <= 0 || cost > spec_.Capacity() || key.size() > store_->options().max_key_bytes) {
    if (done) done(false);  // never admitted: nothing to give back
    return;
  }
  const RedisStoreOptions& options = store_->options();
  std::vector<std::string> args = {NowArg(options, now), std::move(at_arg),
                                   std::to_string(script_id_)};
  AppendArgs(now, cost, /*charge=*/false, args);
  std::vector<std::string> keys = {RedisKeyFor(options.key_prefix, limit_id_, key)};
  // The store, not this limiter, hears of a failure: the limiter may be gone by then. The
  // store's connections send what is queued before they close.
  store_->transport().EvalAsync(kRefundScript, std::move(keys), std::move(args),
                                [store = store_, done = std::move(done)](Result<RedisReply> reply) {
                                  if (!reply) {
                                    store->CountFailure(IsShortCircuit(reply.error()));
                                    if (!IsConnectionError(reply.error())) {
                                      store->CommandError(reply.error());
                                    }
                                  }
                                  if (done) done(reply.has_value());
                                });
}

Result<Adjusted> RedisLimiter::Adjust(std::string_view key, Timestamp now,
                                      const Adjustment& change) {
  if (auto valid = ValidateAdjustment(spec_, change); !valid) return std::unexpected(valid.error());
  Decision d;
  std::string redis_key;
  if (!Prepare(key, 0, /*charge=*/false, d, redis_key)) {
    if (d.degraded) return MakeError("redis: the store is unavailable (circuit breaker open)");
    return MakeError("the counter key is over the store's bound");
  }
  const int64_t most = 2 * spec_.Capacity();
  const AdjustSteps steps = StepsOf(change, spec_.Capacity());
  std::vector<std::string> args = {NowArg(store_->options(), now),
                                   std::to_string(script_id_),
                                   change.allow_over_limit ? "1" : "0",
                                   steps.fresh ? "1" : "0",
                                   std::to_string(std::min(steps.debit, most)),
                                   std::to_string(std::min(steps.credit, most))};
  args.insert(args.end(), params_.begin(), params_.end());
  // A calendar window's spec arguments include the bounds of the windows around `now`.
  if (calendar_) AppendCalendarBounds(now, args);
  const std::string keys[1] = {std::move(redis_key)};
  auto reply = store_->transport().Eval(kAdjustScript, keys, args);
  if (!reply) {
    CountFailure(/*short_circuit=*/false);
    return MakeError("redis: " + reply.error().message);
  }
  Adjusted r;
  r.before.limit = r.after.limit = spec_.Capacity();
  if (reply->type != RedisReply::Type::kArray || reply->elements.size() != 2 ||
      !ReadDecision(reply->elements[0], r.before) || !ReadDecision(reply->elements[1], r.after)) {
    return MakeError("redis: unexpected reply from the adjust script");
  }
  return r;
}

void RedisLimiter::Reset(std::string_view key) {
  const std::string redis_key = RedisKeyFor(store_->options().key_prefix, limit_id_, key);
  const std::array<std::string_view, 2> del = {"DEL", redis_key};
  if (auto reply = store_->transport().Command(redis_key, del); !reply) {
    Failed(Decision{}, reply.error());
  }
}

}  // namespace internal
}  // namespace sluice
