#include "sluice/redis_store.h"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "core/arith.h"
#include "store/circuit_breaker.h"
#include "store/redis_client.h"
#include "store/redis_scripts.h"

namespace sluice {
namespace {

using internal::RedisClient;
using internal::RedisReply;

// Lua numbers are doubles: integers stay exact below 2^53.
constexpr int64_t kLuaExact = int64_t{1} << 53;
constexpr int64_t kNanosPerMicro = 1000;

class RedisLimiter final : public Limiter {
 public:
  RedisLimiter(const LimitSpec& spec, RedisStoreOptions options, std::vector<std::string> params,
               const internal::LuaScript& script)
      : spec_(spec),
        options_(std::move(options)),
        params_(std::move(params)),
        script_(script),
        clock_(options_.clock != nullptr ? options_.clock : &own_clock_),
        breaker_({options_.breaker_failures, options_.breaker_open_for}) {}

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    Decision d;
    d.limit = spec_.Capacity();
    if (cost < 0 || key.size() > options_.max_key_bytes) {
      d.reason = DecisionReason::kInvalidRequest;
      d.retry_after = kNever;
      return d;
    }
    if (cost > spec_.Capacity()) {
      d.reason = DecisionReason::kCostExceedsCapacity;
      d.retry_after = kNever;
      return d;
    }
    // Before any allocation: with the breaker open a decision costs a clock read.
    const Timestamp wall = clock_->Now();
    if (!breaker_.Allow(wall)) {
      short_circuited_.fetch_add(1, std::memory_order_relaxed);
      return Degraded(d);
    }
    std::vector<std::string> args;
    args.reserve(params_.size() + 2);
    args.push_back(options_.use_server_time ? std::string()
                                            : std::to_string(ToNanos(now) / kNanosPerMicro));
    args.insert(args.end(), params_.begin(), params_.end());
    args.push_back(std::to_string(cost));
    auto reply = Run(RedisKeyFor(options_, key), args);
    if (!reply || reply->type != RedisReply::Type::kArray || reply->elements.size() < 4) {
      errors_.fetch_add(1, std::memory_order_relaxed);
      breaker_.OnFailure(wall);
      return Degraded(d);
    }
    breaker_.OnSuccess();
    const auto& e = reply->elements;
    d.allowed = e[0].integer == 1;
    d.reason = d.allowed ? DecisionReason::kAdmitted : DecisionReason::kOverLimit;
    d.remaining = e[1].integer;
    d.reset_after = Duration(e[2].integer * kNanosPerMicro);
    d.retry_after = Duration(e[3].integer * kNanosPerMicro);
    if (e.size() > 4) d.delay = Duration(e[4].integer * kNanosPerMicro);
    return d;
  }

  size_t Sweep(Timestamp) override { return 0; }  // Redis expires keys itself (TTLs)

  StoreStats Stats() const override {
    StoreStats s;
    s.store_errors = errors_.load(std::memory_order_relaxed);
    s.short_circuited = short_circuited_.load(std::memory_order_relaxed);
    return s;
  }
  const LimitSpec& spec() const override { return spec_; }

 private:
  Decision Degraded(Decision d) const {
    d.reason = DecisionReason::kStoreUnavailable;
    d.allowed = options_.fail_open;
    d.degraded = true;
    return d;
  }

  Result<RedisReply> Run(const std::string& key, const std::vector<std::string>& args) {
    std::unique_ptr<RedisClient> client = Acquire();
    if (!client) return MakeError("redis: cannot connect");
    auto reply = client->Eval(script_, {key}, args);
    // A failed connection (I/O error, timeout) is dropped; a script error keeps it.
    if (reply || reply.error().message.rfind("redis: ", 0) != 0) Release(std::move(client));
    return reply;
  }

  std::unique_ptr<RedisClient> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    auto c = RedisClient::Connect(options_.host, options_.port, options_.connect_timeout,
                                  options_.command_timeout);
    if (!c) return nullptr;
    if (!options_.password.empty()) {
      std::vector<std::string> auth = {"AUTH"};
      if (!options_.user.empty()) auth.push_back(options_.user);
      auth.push_back(options_.password);
      if (!(*c)->Command(auth)) return nullptr;
    }
    if (options_.db != 0 && !(*c)->Command({"SELECT", std::to_string(options_.db)})) return nullptr;
    return std::move(*c);
  }

  void Release(std::unique_ptr<RedisClient> c) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(c));
  }

  const LimitSpec spec_;
  const RedisStoreOptions options_;
  const std::vector<std::string> params_;  // the script's spec arguments, between now and cost
  const internal::LuaScript& script_;
  MonotonicClock own_clock_;
  const Clock* clock_;
  internal::CircuitBreaker breaker_;
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> short_circuited_{0};
  std::mutex mu_;
  std::vector<std::unique_ptr<RedisClient>> idle_;
};

}  // namespace

Result<RedisStoreOptions> ParseRedisAddress(std::string_view address) {
  const std::string shown(address);
  constexpr std::string_view kScheme = "redis://";
  if (address.substr(0, kScheme.size()) != kScheme) {
    return MakeError("store address '" + shown +
                     "' must look like redis://[user:password@]host:port[/db]");
  }
  std::string_view rest = address.substr(kScheme.size());
  RedisStoreOptions o;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view cred = rest.substr(0, at);
    const size_t colon = cred.find(':');
    if (colon == std::string_view::npos) {
      o.password = std::string(cred);
    } else {
      o.user = std::string(cred.substr(0, colon));
      o.password = std::string(cred.substr(colon + 1));
    }
    rest.remove_prefix(at + 1);
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (db.empty() || db.size() > 4 ||
        db.find_first_not_of("0123456789") != std::string_view::npos) {
      return MakeError("store address '" + shown + "': database must be a number");
    }
    o.db = std::stoi(std::string(db));
    rest = rest.substr(0, slash);
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return MakeError("store address '" + shown + "': expected host:port");
  }
  const std::string_view port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) == 0 || std::stoi(std::string(port)) > 65535) {
    return MakeError("store address '" + shown + "': port must be 1-65535");
  }
  o.host = std::string(rest.substr(0, colon));
  o.port = std::stoi(std::string(port));
  return o;
}

std::string RedisKeyFor(const RedisStoreOptions& options, std::string_view identity) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string key = options.key_prefix + ":{" + options.limit_id + ":";
  for (char ch : identity) {
    const auto c = static_cast<unsigned char>(ch);
    if (c > 0x20 && c < 0x7f && c != '{' && c != '}' && c != '%' && c != ':') {
      key.push_back(ch);
    } else {
      key.push_back('%');
      key.push_back(kHex[c >> 4]);
      key.push_back(kHex[c & 0xf]);
    }
  }
  key.push_back('}');
  return key;
}

Result<std::unique_ptr<Limiter>> MakeRedisLimiter(const LimitSpec& spec,
                                                  const RedisStoreOptions& options) {
  auto valid = ValidateLimitSpec(spec);
  if (!valid) return std::unexpected(valid.error());
  if (spec.period.count() % kNanosPerMicro != 0) {
    return MakeError("the redis store counts in microseconds: period must be a whole number of us");
  }
  const int64_t period_us = spec.period.count() / kNanosPerMicro;
  auto out_of_range = [&] {
    return MakeError(std::string(AlgorithmName(spec.algorithm)) + " " + DescribeLimitSpec(spec) +
                     " is outside the redis store's exact range (Lua integers below 2^53)");
  };
  std::vector<std::string> params;
  const internal::LuaScript* script = nullptr;
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra:
    case Algorithm::kLeakyBucket: {
      const auto rate = internal::Reduce(spec.limit, period_us);
      const __int128 cap = static_cast<__int128>(spec.Capacity()) * rate.d;
      if (cap * rate.n >= kLuaExact) return out_of_range();
      params = {std::to_string(static_cast<int64_t>(cap)), std::to_string(rate.n),
                std::to_string(rate.d)};
      if (spec.algorithm == Algorithm::kLeakyBucket) params.push_back(spec.shaper ? "1" : "0");
      script = spec.algorithm == Algorithm::kTokenBucket ? &internal::kTokenBucketScript
               : spec.algorithm == Algorithm::kGcra      ? &internal::kGcraScript
                                                         : &internal::kLeakyBucketScript;
      break;
    }
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowCounter:
      if (static_cast<__int128>(spec.limit) * period_us * 4 >= kLuaExact) return out_of_range();
      params = {std::to_string(spec.limit), std::to_string(period_us)};
      script = spec.algorithm == Algorithm::kFixedWindow ? &internal::kFixedWindowScript
                                                         : &internal::kSlidingWindowCounterScript;
      break;
    default:
      return MakeError("the redis store does not support " +
                       std::string(AlgorithmName(spec.algorithm)) +
                       " yet (all but sliding_window_log)");
  }
  return std::unique_ptr<Limiter>(
      std::make_unique<RedisLimiter>(spec, options, std::move(params), *script));
}

}  // namespace sluice
