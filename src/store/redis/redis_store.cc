#include "sluice/redis_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/arith.h"
#include "sluice/decide_all.h"
#include "store/redis/crc16.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_events.h"
#include "store/redis/redis_reply.h"
#include "store/redis/redis_script_call.h"
#include "store/redis/redis_script_lease.h"
#include "store/redis/redis_script_log.h"
#include "store/redis/redis_script_multi.h"
#include "store/redis/redis_scripts.h"
#include "store/redis/redis_transport.h"
#include "util/hex.h"

namespace sluice {
namespace {

using internal::ReadDecision;
using internal::RedisReply;

using internal::kLuaExact;
constexpr int64_t kNanosPerMicro = 1000;

class RedisStoreImpl;

class RedisLimiter final : public Limiter {
 public:
  RedisLimiter(std::shared_ptr<RedisStoreImpl> store, const LimitSpec& spec, std::string limit_id,
               bool fail_open, std::vector<std::string> params, const internal::LuaScript& script);

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    return Run(key, now, cost, /*charge=*/false);
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    return Run(key, now, cost, /*charge=*/true);
  }
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    RunAsync(key, now, cost, /*charge=*/false, std::move(done));
  }
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    RunAsync(key, now, cost, /*charge=*/true, std::move(done));
  }

  // The checks before any I/O: false with `d` filled when the request is decided without Redis
  // (invalid, too costly, or refused by an open breaker); true with the key to use otherwise.
  // A charge is never too costly: it is taken up to the debt cap.
  bool Prepare(std::string_view key, int64_t cost, bool charge, Decision& d,
               std::string& redis_key);
  // A single-limit script's ARGV: now (empty under Redis's clock), the spec's, the cost, charge.
  std::vector<std::string> ScriptArgs(Timestamp now, int64_t cost, bool charge) const;
  // The script arguments after now: the spec's, the cost (a charge's clamped to twice the
  // capacity, which is all a key can hold), then the flags (charge, quota).
  void AppendArgs(int64_t cost, bool charge, std::vector<std::string>& args,
                  bool quota = false) const {
    args.insert(args.end(), params_.begin(), params_.end());
    args.push_back(std::to_string(std::min(cost, 2 * spec_.Capacity())));
    args.push_back(std::to_string((charge ? 1 : 0) + (quota ? 2 : 0)));  // redis_scripts.h
  }
  // A script's answer into `d`; false when it is not one. A charge above the capacity can
  // never pass as a request: kCostExceedsCapacity, retry never.
  bool Read(const RedisReply& reply, int64_t cost, bool charge, Decision& d) const {
    if (!ReadDecision(reply, d)) return false;
    if (charge && cost > spec_.Capacity()) {
      d.reason = DecisionReason::kCostExceedsCapacity;
      d.retry_after = kNever;
    }
    return true;
  }
  // `d` after Redis failed to answer: the failure policy, marked degraded.
  Decision Failed(const Decision& d, const Error& error);
  // Counted for this limiter and for its store.
  void CountFailure(bool short_circuit);
  // Gives back an admission (see Limiter::Refund). Under Redis's clock the admission time is
  // taken as Redis's now: the caller's clock may be skewed from it.
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override;
  void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override;
  // Forgets the key's counter.
  void Reset(std::string_view key) override;
  // Both in one script (redis_script_lease.h), under the store's clock; the nodes drawing on
  // the key are counted in a hash next to it.
  void TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                 LeaseCallback done) override;
  // kRefundScript at the lease's own time in Redis's clock, whichever clock decides; queued,
  // not waited for (it may come from an I/O thread or a destructor).
  void GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) override;

  int script_id() const { return script_id_; }

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
    d.allowed = fail_open_;
    d.degraded = true;
    return d;
  }
  // kRefundScript for an admission at `at_arg` (microseconds, '' for now), queued.
  void RefundInBackground(std::string_view key, std::string at_arg, Timestamp now, int64_t cost);
  // Decide (charge false) or Charge, waiting for Redis.
  Decision Run(std::string_view key, Timestamp now, int64_t cost, bool charge);
  void RunAsync(std::string_view key, Timestamp now, int64_t cost, bool charge,
                DecisionCallback done);

  const std::shared_ptr<RedisStoreImpl> store_;
  const int script_id_;  // its body in the multi-limit scripts
  const LimitSpec spec_;
  const std::string limit_id_;
  const bool fail_open_;
  const std::vector<std::string> params_;  // the script's spec arguments, between now and cost
  const internal::LuaScript& script_;
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> short_circuited_{0};
};

// One check of a multi-limit decision, in its hash slot's group.
struct SlotCheck {
  size_t index;  // into the checks and decisions
  RedisLimiter* limiter;
  std::string key;
  int64_t cost;
  bool charge;  // never given back
  bool quota;   // LimitCheck::quota
};

struct SlotGroup {
  int slot;
  std::vector<SlotCheck> checks;
};

// What one group's multi-limit script said.
struct GroupOutcome {
  bool admitted = false;  // the group's admissions stand (unless another group rejects)
  int64_t at_us = 0;      // the script's now, for refunds
};

class RedisStoreImpl final : public RedisStore,
                             public std::enable_shared_from_this<RedisStoreImpl> {
 public:
  RedisStoreImpl(RedisStoreOptions options, const internal::RedisEndpoint& endpoint,
                 std::vector<internal::RedisEndpoint> seeds)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : &own_clock_),
        server_(seeds.empty() ? endpoint.Name() : seeds.front().Name()),
        throttle_(options_.on_event, *clock_, options_.event_interval),
        events_([this](RedisEvent e) { throttle_.Emit(std::move(e)); }) {
    const internal::NodeSettings settings{
        {options_.breaker_failures, options_.breaker_open_for}, clock_, &events_};
    transport_ =
        seeds.empty()
            ? internal::MakeStandaloneTransport(endpoint, options_.connections, settings)
            : internal::MakeClusterTransport(std::move(seeds), options_.connections, settings);
    if (options_.monitor_interval.count() > 0) monitor_ = std::thread([this] { RunMonitor(); });
  }

  ~RedisStoreImpl() override {
    {
      std::lock_guard<std::mutex> lock(monitor_mu_);
      stopping_ = true;
    }
    monitor_wake_.notify_one();
    if (monitor_.joinable()) monitor_.join();
  }

  void MonitorOnce() override {
    std::lock_guard<std::mutex> lock(monitor_round_mu_);
    transport_->Monitor();
    throttle_.Flush();
  }

  // A script call Redis answered with an error (OOM, WRONGTYPE, NOAUTH, a script bug).
  void CommandError(const Error& error) {
    events_(RedisEvent{internal::IsAuthFailure(error) ? RedisEventKind::kAuthFailed
                                                      : RedisEventKind::kCommandError,
                       server_, "redis " + server_ + ": script call failed: " + error.message,
                       false, 0});
  }

  using RedisStore::MakeLimiter;
  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override;

  void DecideAll(std::span<const LimitCheck> checks, Timestamp now,
                 std::span<Decision> out) override;
  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      DecideAllCallback done) override;

  bool Ping() override {
    const std::array<std::string_view, 1> ping = {"PING"};
    auto reply = transport_->Command("", ping);
    return reply.has_value() && reply->str == "PONG";
  }

  StoreStats Stats() const override {
    StoreStats s;
    s.store_errors = errors_.load(std::memory_order_relaxed);
    s.short_circuited = short_circuited_.load(std::memory_order_relaxed);
    const internal::EvictionState e = transport_->Eviction();
    s.server_eviction_watched = e.watched;
    s.server_eviction_unsafe = e.unsafe;
    s.server_evicted_keys = e.evicted;
    return s;
  }

  void CountFailure(bool short_circuit) {
    (short_circuit ? short_circuited_ : errors_).fetch_add(1, std::memory_order_relaxed);
  }

  RedisStoreStats RedisStats() const override {
    const internal::TransportStats t = transport_->Stats();
    RedisStoreStats s{t.requests,      t.batches,         t.redirects,        t.retries,
                      t.map_refreshes, t.short_circuited, t.connection_errors};
    s.refunds = refunds_.load(std::memory_order_relaxed);
    s.refund_failures = refund_failures_.load(std::memory_order_relaxed);
    return s;
  }

  const RedisStoreOptions& options() const { return options_; }
  internal::RedisTransport& transport() { return *transport_; }

 private:
  struct AsyncAll;

  // The pieces DecideAll and DecideAllAsync share, so that both decide alike.
  std::vector<SlotGroup> Group(std::span<const LimitCheck> checks, std::span<Decision> out) const;
  void MultiCall(const SlotGroup& group, Timestamp now, size_t quota_total,
                 std::vector<std::string>& keys, std::vector<std::string>& args) const;
  GroupOutcome ReadGroup(const SlotGroup& group, const Result<RedisReply>& reply,
                         std::span<Decision> out) const;
  std::vector<std::string> RefundArgs(const SlotCheck& c, Timestamp now, int64_t at_us) const;
  void CountRefund(bool given_back, const SlotCheck& c, Decision& d);
  static void RefundAsync(const std::shared_ptr<AsyncAll>& state);
  static void RefundNext(const std::shared_ptr<AsyncAll>& state);

  // The monitor thread: a round at once (a wrong password is reported at start, not at the
  // first request), then one every monitor_interval until the store closes.
  void RunMonitor() {
    std::unique_lock<std::mutex> lock(monitor_mu_);
    while (!stopping_) {
      lock.unlock();
      MonitorOnce();
      lock.lock();
      monitor_wake_.wait_for(lock, options_.monitor_interval, [this] { return stopping_; });
    }
  }

  const RedisStoreOptions options_;
  MonotonicClock own_clock_;
  const Clock* clock_;
  const std::string server_;  // host:port (a cluster: its first seed), for events
  internal::EventThrottle throttle_;
  std::function<void(RedisEvent)> events_;  // into throttle_
  std::atomic<uint64_t> refunds_{0};
  std::atomic<uint64_t> refund_failures_{0};
  std::atomic<uint64_t> errors_{0};  // failed calls of every limiter (Stats)
  std::atomic<uint64_t> short_circuited_{0};
  // After the clock and the events: its connections' threads stop before those go away.
  std::unique_ptr<internal::RedisTransport> transport_;
  std::mutex monitor_round_mu_;  // one round at a time (the thread's, a test's)
  std::mutex monitor_mu_;
  std::condition_variable monitor_wake_;
  bool stopping_ = false;  // guarded by monitor_mu_
  std::thread monitor_;    // joined by the destructor, before anything else goes
};

RedisLimiter::RedisLimiter(std::shared_ptr<RedisStoreImpl> store, const LimitSpec& spec,
                           std::string limit_id, bool fail_open, std::vector<std::string> params,
                           const internal::LuaScript& script)
    : Limiter(store.get()),
      store_(std::move(store)),
      script_id_(internal::ScriptAlgorithmId(spec.algorithm)),
      spec_(spec),
      limit_id_(std::move(limit_id)),
      fail_open_(fail_open),
      params_(std::move(params)),
      script_(script) {}

Decision RedisLimiter::Failed(const Decision& d, const Error& error) {
  const bool short_circuit = internal::IsShortCircuit(error);
  CountFailure(short_circuit);
  if (!internal::IsConnectionError(error)) store_->CommandError(error);
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
  return options.use_server_time ? std::string() : std::to_string(ToNanos(now) / kNanosPerMicro);
}

std::vector<std::string> RedisLimiter::ScriptArgs(Timestamp now, int64_t cost, bool charge) const {
  std::vector<std::string> args;
  args.reserve(params_.size() + 3);
  args.push_back(NowArg(store_->options(), now));
  AppendArgs(cost, charge, args);
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

}  // namespace

namespace {

Result<std::pair<std::string, int>> ParseHostPort(std::string_view hp, const std::string& shown) {
  const size_t colon = hp.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return MakeError("store address '" + shown + "': expected host:port");
  }
  const std::string_view port = hp.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) == 0 || std::stoi(std::string(port)) > 65535) {
    return MakeError("store address '" + shown + "': port must be 1-65535");
  }
  return std::make_pair(std::string(hp.substr(0, colon)), std::stoi(std::string(port)));
}

}  // namespace

std::string RedactRedisAddress(std::string_view address) {
  const size_t scheme = address.find("://");
  if (scheme == std::string_view::npos) return std::string(address);
  const size_t authority = scheme + 3;
  // Credentials end at the last '@', as ParseRedisAddress reads them: a password may itself
  // hold '@', ':' or '/'.
  const size_t at = address.rfind('@');
  if (at == std::string_view::npos || at < authority) return std::string(address);
  return std::string(address.substr(0, authority)) + "***" + std::string(address.substr(at));
}

Result<RedisStoreOptions> ParseRedisAddress(std::string_view address) {
  // Error messages show the address without its credentials: they end up in logs.
  const std::string shown = RedactRedisAddress(address);
  constexpr std::string_view kScheme = "redis://";
  constexpr std::string_view kClusterScheme = "redis+cluster://";
  const bool cluster = address.starts_with(kClusterScheme);
  if (!cluster && !address.starts_with(kScheme)) {
    return MakeError("store address '" + shown +
                     "' must look like redis://[user:password@]host:port[/db] or "
                     "redis+cluster://[user:password@]host:port[,host:port...]");
  }
  std::string_view rest = address.substr(cluster ? kClusterScheme.size() : kScheme.size());
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
    if (cluster) return MakeError("store address '" + shown + "': a cluster has only database 0");
    const std::string_view db = rest.substr(slash + 1);
    if (db.empty() || db.size() > 4 ||
        db.find_first_not_of("0123456789") != std::string_view::npos) {
      return MakeError("store address '" + shown + "': database must be a number");
    }
    o.db = std::stoi(std::string(db));
    rest = rest.substr(0, slash);
  }
  if (!cluster) {
    auto hp = ParseHostPort(rest, shown);
    if (!hp) return std::unexpected(hp.error());
    o.host = hp->first;
    o.port = hp->second;
    return o;
  }
  for (;;) {
    const size_t comma = rest.find(',');
    const std::string_view one = rest.substr(0, comma);
    auto hp = ParseHostPort(one, shown);
    if (!hp) return std::unexpected(hp.error());
    o.cluster_seeds.push_back(hp->first + ":" + std::to_string(hp->second));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (o.cluster_seeds.empty()) {
    return MakeError("store address '" + shown + "': expected host:port[,host:port...]");
  }
  o.host = o.cluster_seeds.front().substr(0, o.cluster_seeds.front().rfind(':'));
  return o;
}

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

Result<ScriptCall> ScriptFor(const LimitSpec& spec) {
  auto valid = ValidateLimitSpec(spec);
  if (!valid) return std::unexpected(valid.error());
  if (spec.algorithm == Algorithm::kSlidingWindowLog) {
    auto params = internal::SlidingWindowLogParams(spec);
    if (!params) return std::unexpected(params.error());
    return ScriptCall{&internal::kSlidingWindowLogScript, std::move(*params)};
  }
  if (spec.period.count() % kNanosPerMicro != 0) {
    return MakeError("the redis store counts in microseconds: period must be a whole number of us");
  }
  const int64_t period_us = spec.period.count() / kNanosPerMicro;
  auto out_of_range = [&] {
    return MakeError(DescribeLimitSpec(spec) +
                     " is outside the redis store's exact range (Lua integers below 2^53)");
  };
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra:
    case Algorithm::kLeakyBucket: {
      const auto rate = internal::Reduce(spec.limit, period_us);
      const __int128 cap = static_cast<__int128>(spec.Capacity()) * rate.d;
      // Four capacities: a backlog of one capacity of debt plus a charge of two stays exact.
      if (4 * cap * rate.n >= kLuaExact) return out_of_range();
      ScriptCall call;
      call.params = {std::to_string(static_cast<int64_t>(cap)), std::to_string(rate.n),
                     std::to_string(rate.d)};
      if (spec.algorithm == Algorithm::kLeakyBucket) {
        call.params.push_back(spec.shaper ? "1" : "0");
        if (spec.HasMaxDelay() && spec.max_delay.count() % kNanosPerMicro != 0) {
          return MakeError(
              "the redis store counts in microseconds: max_delay must be a whole "
              "number of us");
        }
        call.params.push_back(
            spec.HasMaxDelay() ? std::to_string(spec.max_delay.count() / kNanosPerMicro) : "-1");
      }
      call.script = spec.algorithm == Algorithm::kTokenBucket ? &internal::kTokenBucketScript
                    : spec.algorithm == Algorithm::kGcra      ? &internal::kGcraScript
                                                              : &internal::kLeakyBucketScript;
      return call;
    }
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowCounter: {
      if (static_cast<__int128>(spec.limit) * period_us * 4 >= kLuaExact) return out_of_range();
      ScriptCall call;
      call.params = {std::to_string(spec.limit), std::to_string(period_us)};
      call.script = spec.algorithm == Algorithm::kFixedWindow
                        ? &internal::kFixedWindowScript
                        : &internal::kSlidingWindowCounterScript;
      return call;
    }
    default:
      return MakeError("the redis store does not support " +
                       std::string(AlgorithmName(spec.algorithm)));
  }
}

}  // namespace internal

Result<std::unique_ptr<Limiter>> RedisStoreImpl::MakeLimiter(const LimitSpec& spec,
                                                             const LimiterOptions& options) {
  const std::string_view limit_id = options.id;
  if (limit_id.empty() || limit_id.size() > 256 ||
      limit_id.find_first_of("{}") != std::string_view::npos) {
    return MakeError("redis limit id '" + std::string(limit_id) +
                     "' must be 1-256 bytes without '{' or '}'");
  }
  auto call = internal::ScriptFor(spec);
  if (!call) return std::unexpected(call.error());
  return std::unique_ptr<Limiter>(
      std::make_unique<RedisLimiter>(shared_from_this(), spec, options.id, options.fail_open,
                                     std::move(call->params), *call->script));
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
  AppendArgs(cost, /*charge=*/false, args);
  const std::string keys[1] = {RedisKeyFor(options.key_prefix, limit_id_, key)};
  if (auto reply = store_->transport().Eval(internal::kRefundScript, keys, args); !reply) {
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
  AppendArgs(request.cost, /*charge=*/false, args);
  args.push_back(std::to_string(want));
  args.emplace_back(request.holder);
  args.push_back(std::to_string(std::max<int64_t>(1, request.ttl.count() / kNanosPerMicro)));
  std::vector<std::string> keys;
  keys.push_back(redis_key + ":holders");  // after the hash tag: the same slot
  keys.insert(keys.begin(), std::move(redis_key));
  store_->transport().EvalAsync(
      internal::kLeaseScript, std::move(keys), std::move(args),
      [this, grant, want, done = std::move(done)](Result<RedisReply> reply) mutable {
        if (!reply) {
          grant.decision = Failed(grant.decision, reply.error());
          return done(grant);
        }
        const auto& e = reply->elements;
        if (reply->type != RedisReply::Type::kArray || e.size() != 4 ||
            !internal::IsScriptInteger(e[0]) || !ReadDecision(e[1], grant.decision) ||
            !internal::IsScriptInteger(e[2]) || !internal::IsScriptInteger(e[3]) ||
            e[2].integer < 0 || e[2].integer > want) {
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

void RedisLimiter::RefundInBackground(std::string_view key, std::string at_arg, Timestamp now,
                                      int64_t cost) {
  if (cost <= 0 || cost > spec_.Capacity() || key.size() > store_->options().max_key_bytes) return;
  const RedisStoreOptions& options = store_->options();
  std::vector<std::string> args = {NowArg(options, now), std::move(at_arg),
                                   std::to_string(script_id_)};
  AppendArgs(cost, /*charge=*/false, args);
  std::vector<std::string> keys = {RedisKeyFor(options.key_prefix, limit_id_, key)};
  // The store, not this limiter, hears of a failure: the limiter may be gone by then. The
  // store's connections send what is queued before they close.
  store_->transport().EvalAsync(internal::kRefundScript, std::move(keys), std::move(args),
                                [store = store_](Result<RedisReply> reply) {
                                  if (reply) return;
                                  store->CountFailure(internal::IsShortCircuit(reply.error()));
                                  if (!internal::IsConnectionError(reply.error())) {
                                    store->CommandError(reply.error());
                                  }
                                });
}

void RedisLimiter::Reset(std::string_view key) {
  const std::string redis_key = RedisKeyFor(store_->options().key_prefix, limit_id_, key);
  const std::array<std::string_view, 2> del = {"DEL", redis_key};
  if (auto reply = store_->transport().Command(redis_key, del); !reply) {
    Failed(Decision{}, reply.error());
  }
}

namespace {

size_t QuotaChecks(std::span<const LimitCheck> checks) {
  return static_cast<size_t>(
      std::count_if(checks.begin(), checks.end(), [](const LimitCheck& c) { return c.quota; }));
}

}  // namespace

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
    const int slot = cluster ? internal::RedisHashSlot(key) : 0;
    auto group = std::find_if(groups.begin(), groups.end(),
                              [slot](const SlotGroup& g) { return g.slot == slot; });
    if (group == groups.end()) group = groups.insert(groups.end(), SlotGroup{slot, {}});
    group->checks.push_back(
        {i, limiter, std::move(key), checks[i].cost, checks[i].charge, checks[i].quota});
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
    c.limiter->AppendArgs(c.cost, c.charge, args, c.quota);
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
    if (!ok || !c.limiter->Read(reply->elements[1].elements[k], c.cost, c.charge, d)) {
      d = c.limiter->Failed(d,
                            reply ? Error{"redis: unexpected multi-limit reply"} : reply.error());
    } else if (d.allowed && rolled_back && !c.charge) {
      d.remaining = std::min(d.limit, d.remaining + c.cost);
    }
  }
  outcome.admitted = ok && !rolled_back;
  if (outcome.admitted) outcome.at_us = reply->elements[0].integer;
  return outcome;
}

std::vector<std::string> RedisStoreImpl::RefundArgs(const SlotCheck& c, Timestamp now,
                                                    int64_t at_us) const {
  std::vector<std::string> args = {NowArg(options_, now), std::to_string(at_us),
                                   std::to_string(c.limiter->script_id())};
  c.limiter->AppendArgs(c.cost, /*charge=*/false, args);
  return args;
}

void RedisStoreImpl::CountRefund(bool given_back, const SlotCheck& c, Decision& d) {
  if (given_back) {
    d.remaining = std::min(d.limit, d.remaining + c.cost);
    refunds_.fetch_add(1, std::memory_order_relaxed);
  } else {
    refund_failures_.fetch_add(1, std::memory_order_relaxed);
  }
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
    const GroupOutcome outcome =
        ReadGroup(group, transport_->Eval(internal::kMultiScript, keys, args), out);
    if (outcome.admitted) admitted.emplace_back(&group, outcome.at_us);
  }
  if (!RequestRefused(checks, out)) return;

  // Another slot (or a check decided without Redis) refused the request: give back what these
  // admitted, newest first, so that a limit checked twice unwinds in the reverse order (a
  // sliding-log refund can only take the newest entry).
  for (auto group = admitted.rbegin(); group != admitted.rend(); ++group) {
    const auto& checks_of = group->first->checks;
    for (auto c = checks_of.rbegin(); c != checks_of.rend(); ++c) {
      Decision& d = out[c->index];
      if (!d.allowed || d.degraded || c->charge) continue;  // a charge stays taken
      const std::string keys[1] = {c->key};
      CountRefund(
          transport_->Eval(internal::kRefundScript, keys, RefundArgs(*c, now, group->second))
              .has_value(),
          *c, d);
    }
  }
}

// The state of one DecideAllAsync: its groups' replies may come on different connections'
// threads, so it is shared and locked; the last reply (or refund) completes it.
struct RedisStoreImpl::AsyncAll {
  std::shared_ptr<RedisStoreImpl> store;
  Timestamp now;
  std::vector<Decision> out;
  std::vector<SlotGroup> groups;
  DecideAllCallback done;
  std::mutex mu;
  size_t pending = 0;             // group replies still to come
  std::vector<LimitCheck> kinds;  // the checks without their keys: what RequestRefused reads
  std::vector<std::pair<const SlotGroup*, int64_t>> admitted;
  // The admissions to give back, newest first, with their script's now; the next to send.
  std::vector<std::pair<const SlotCheck*, int64_t>> refunds;
  size_t refunded = 0;
};

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
    transport_->EvalAsync(internal::kMultiScript, std::move(keys), std::move(args),
                          [state, &group](Result<RedisReply> reply) {
                            bool last = false;
                            {
                              std::lock_guard<std::mutex> lock(state->mu);
                              const GroupOutcome outcome =
                                  state->store->ReadGroup(group, reply, state->out);
                              if (outcome.admitted)
                                state->admitted.emplace_back(&group, outcome.at_us);
                              last = --state->pending == 0;
                            }
                            if (last) RefundAsync(state);
                          });
  }
}

// After every group answered: done, or first give back what the admitted groups took -- newest
// first and one at a time, as DecideAll does: a limit checked twice unwinds in the reverse order
// (a sliding-log refund can only take the newest entry), and refunds sent together could run in
// any order on different connections.
void RedisStoreImpl::RefundAsync(const std::shared_ptr<AsyncAll>& state) {
  if (RequestRefused(state->kinds, state->out)) {
    for (auto group = state->admitted.rbegin(); group != state->admitted.rend(); ++group) {
      const auto& checks = group->first->checks;
      for (auto c = checks.rbegin(); c != checks.rend(); ++c) {
        const Decision& d = state->out[c->index];
        if (!d.allowed || d.degraded || c->charge) continue;  // a charge stays taken
        state->refunds.push_back({&*c, group->second});
      }
    }
  }
  RefundNext(state);
}

void RedisStoreImpl::RefundNext(const std::shared_ptr<AsyncAll>& state) {
  if (state->refunded == state->refunds.size()) return state->done(state->out);
  const auto [c, at_us] = state->refunds[state->refunded];
  std::vector<std::string> keys = {c->key};
  state->store->transport_->EvalAsync(
      internal::kRefundScript, std::move(keys), state->store->RefundArgs(*c, state->now, at_us),
      [state, c](Result<RedisReply> reply) {
        {
          std::lock_guard<std::mutex> lock(state->mu);
          state->store->CountRefund(reply.has_value(), *c, state->out[c->index]);
          ++state->refunded;
        }
        RefundNext(state);
      });
}

Result<std::shared_ptr<RedisStore>> OpenRedisStore(const RedisStoreOptions& options) {
  if (options.connections < 1 || options.connections > 64) {
    return MakeError("redis connections must be 1-64");
  }
  if (options.command_timeout.count() <= 0 || options.connect_timeout.count() <= 0) {
    return MakeError("redis timeouts must be positive");
  }
  if (options.breaker_failures < 1) return MakeError("breaker_failures must be at least 1");
  internal::RedisEndpoint endpoint;
  endpoint.host = options.host;
  endpoint.port = options.port;
  endpoint.user = options.user;
  endpoint.password = options.password;
  endpoint.db = options.db;
  endpoint.connect_timeout = options.connect_timeout;
  endpoint.command_timeout = options.command_timeout;
  std::vector<internal::RedisEndpoint> seeds;
  for (const std::string& seed : options.cluster_seeds) {
    internal::RedisEndpoint e = endpoint;
    const size_t colon = seed.rfind(':');
    e.host = seed.substr(0, colon);
    e.port = std::stoi(seed.substr(colon + 1));
    e.db = 0;
    seeds.push_back(std::move(e));
  }
  return std::shared_ptr<RedisStore>(
      std::make_shared<RedisStoreImpl>(options, endpoint, std::move(seeds)));
}

Result<std::unique_ptr<Limiter>> MakeRedisLimiter(const LimitSpec& spec,
                                                  const RedisStoreOptions& options) {
  auto store = OpenRedisStore(options);
  if (!store) return std::unexpected(store.error());
  return (*store)->MakeLimiter(spec, options.limit_id, options.fail_open);
}

}  // namespace sluice
