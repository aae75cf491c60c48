#include "service/limiter_set.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "sluice/decide_all.h"
#include "sluice/memory_store.h"

namespace sluice::server {
namespace {

// The longest key a request can produce: CheckLimits allows 16 entries of 256 + 1024 bytes,
// escaped (up to 3x).
constexpr size_t kMaxCounterKeyBytes = 65535;  // the memory store's own maximum
constexpr size_t kMinMemoryPerLimit = size_t{4} << 20;

// Redis limit ids go inside a hash tag: no braces, and short. Config ids are escaped text
// (key_escape.h) that may hold braces or be long; those are replaced by a digest.
std::string RedisLimitId(std::string_view id) {
  if (id.size() <= 200 && id.find_first_of("{}") == std::string_view::npos) {
    return std::string(id);
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and nodes
  for (char c : id) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  char digest[24];
  std::snprintf(digest, sizeof digest, "h%016llx", static_cast<unsigned long long>(h));
  return digest;
}

}  // namespace

Result<std::unique_ptr<LimiterFactory>> LimiterFactory::Open(const std::string& store,
                                                             size_t memory_max_bytes,
                                                             int redis_connections,
                                                             int64_t redis_command_timeout_ms) {
  auto factory = std::make_unique<LimiterFactory>();
  factory->memory_max_bytes_ = memory_max_bytes;
  if (store == "memory") return factory;
  auto options = ParseRedisAddress(store);
  if (!options) return std::unexpected(options.error());
  options->connections = redis_connections;
  options->command_timeout = std::chrono::milliseconds(redis_command_timeout_ms);
  options->max_key_bytes = kMaxCounterKeyBytes;
  auto redis = OpenRedisStore(*options);
  if (!redis) return std::unexpected(redis.error());
  factory->redis_ = std::move(*redis);
  return factory;
}

Result<std::shared_ptr<Limiter>> LimiterFactory::Make(const Limit& limit,
                                                      size_t limits_in_config) const {
  const bool fail_open = limit.failure_mode == FailureMode::kOpen;
  Result<std::unique_ptr<Limiter>> made = MakeError("no store");
  if (redis_ != nullptr) {
    made = redis_->MakeLimiter(limit.spec, RedisLimitId(limit.id), fail_open);
  } else {
    MemoryStoreOptions options;
    options.max_bytes =
        std::max(kMinMemoryPerLimit, memory_max_bytes_ / std::max<size_t>(1, limits_in_config));
    options.max_key_bytes = kMaxCounterKeyBytes;
    made = MakeMemoryLimiter(limit.spec, options);
  }
  if (!made) return MakeError(limit.origin + ": " + made.error().message);
  return std::shared_ptr<Limiter>(std::move(*made));
}

void LimiterFactory::DecideAll(std::span<const LimitCheck> checks, Timestamp now,
                               std::span<Decision> out) const {
  if (redis_ != nullptr) {
    redis_->DecideAll(checks, now, out);
  } else {
    sluice::DecideAll(checks, now, out);
  }
}

Result<std::shared_ptr<const LimiterSet>> LimiterSet::Install(std::shared_ptr<const Config> config,
                                                              const LimiterSet* previous,
                                                              const LimiterFactory& factory) {
  auto set = std::make_shared<LimiterSet>();
  set->factory_ = &factory;
  size_t limited = 0;
  for (const auto& [name, domain] : config->domains()) {
    for (const Limit& limit : domain.limits) limited += limit.kind == LimitKind::kLimited;
  }
  for (const auto& [name, domain] : config->domains()) {
    for (const Limit& limit : domain.limits) {
      if (limit.kind != LimitKind::kLimited || set->limiters_.contains(limit.id)) continue;
      if (previous != nullptr) {
        auto old = previous->limiters_.find(limit.id);
        if (old != previous->limiters_.end() && old->second.spec == limit.spec &&
            old->second.failure_mode == limit.failure_mode) {
          set->limiters_.emplace(limit.id, old->second);
          continue;
        }
      }
      auto limiter = factory.Make(limit, limited);
      if (!limiter) return std::unexpected(limiter.error());
      set->limiters_.emplace(limit.id, Entry{limit.spec, limit.failure_mode, std::move(*limiter)});
    }
  }
  // Override limits do not depend on the config (their id is the domain and the rate), so
  // their counters carry over whole.
  if (previous != nullptr) {
    std::lock_guard<std::mutex> lock(previous->overrides_mu_);
    set->overrides_ = previous->overrides_;
  }
  set->config_ = std::move(config);
  return std::shared_ptr<const LimiterSet>(std::move(set));
}

StoreStats LimiterSet::Totals() const {
  StoreStats total;
  for (const auto& [id, entry] : limiters_) {
    const StoreStats s = entry.limiter->Stats();
    total.keys += s.keys;
    total.bytes += s.bytes;
    total.evictions += s.evictions;
    total.expirations += s.expirations;
    total.store_errors += s.store_errors;
    total.short_circuited += s.short_circuited;
  }
  return total;
}

Result<Limiter*> LimiterSet::For(const Limit& limit) const {
  if (auto it = limiters_.find(limit.id); it != limiters_.end()) return it->second.limiter.get();
  // Not in the config: an override limit.
  std::lock_guard<std::mutex> lock(overrides_mu_);
  if (auto it = overrides_.find(limit.id); it != overrides_.end()) {
    return it->second.limiter.get();
  }
  if (overrides_.size() >= kMaxOverrides) {
    return MakeError("too many distinct limit overrides (at most " + std::to_string(kMaxOverrides) +
                     ")");
  }
  auto limiter = factory_->Make(limit, limiters_.size() + 1);
  if (!limiter) return std::unexpected(limiter.error());
  Limiter* raw = limiter->get();
  overrides_.emplace(limit.id, Entry{limit.spec, limit.failure_mode, std::move(*limiter)});
  return raw;
}

}  // namespace sluice::server
