#include "service/limiter_set.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

namespace sluice::server {
namespace {

// A store's limit id (LimiterOptions::id) must fit any store: Redis puts it inside a hash tag,
// so no braces, and short. Config ids are escaped text (key_escape.h) that may hold braces or
// be long; those are replaced by a digest.
std::string StoreLimitId(std::string_view id) {
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

Result<std::shared_ptr<Limiter>> LimiterSet::Make(Store& store, const Limit& limit, size_t limits) {
  LimiterOptions options;
  options.id = StoreLimitId(limit.id);
  options.fail_open = limit.failure_mode == FailureMode::kOpen;
  options.limits_sharing_memory = limits;
  auto made = store.MakeLimiter(limit.spec, options);
  if (!made) return MakeError(limit.origin + ": " + made.error().message);
  return std::shared_ptr<Limiter>(std::move(*made));
}

Result<std::shared_ptr<const LimiterSet>> LimiterSet::Install(std::shared_ptr<const Config> config,
                                                              const LimiterSet* previous,
                                                              Store& store) {
  auto set = std::make_shared<LimiterSet>();
  set->store_ = &store;
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
      auto limiter = Make(store, limit, limited);
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
  auto limiter = Make(*store_, limit, limiters_.size() + 1);
  if (!limiter) return std::unexpected(limiter.error());
  Limiter* raw = limiter->get();
  overrides_.emplace(limit.id, Entry{limit.spec, limit.failure_mode, std::move(*limiter)});
  return raw;
}

}  // namespace sluice::server
