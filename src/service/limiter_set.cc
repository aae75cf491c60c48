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

Result<std::shared_ptr<Limiter>> LimiterSet::Make(Store& store, const Limit& limit, size_t limits,
                                                  bool transient, Timestamp installed) {
  LimiterOptions options;
  options.id = StoreLimitId(limit.id);
  options.fail_open = limit.failure_mode == FailureMode::kOpen;
  options.limits_sharing_memory = limits;
  options.transient = transient;
  options.sync = limit.sync;
  options.region = limit.regions;
  options.spec_generation = ToNanos(installed) / 1000;
  auto made = store.MakeLimiter(limit.spec, options);
  if (!made) return MakeError(limit.origin + ": " + made.error().message);
  return std::shared_ptr<Limiter>(std::move(*made));
}

Result<std::shared_ptr<const LimiterSet>> LimiterSet::Install(std::shared_ptr<const Config> config,
                                                              const LimiterSet* previous,
                                                              Store& store, Timestamp now) {
  auto set = std::make_shared<LimiterSet>();
  set->store_ = &store;
  size_t limited = 0;
  for (const auto& [name, domain] : config->domains()) {
    // A concurrency pool takes a part of the memory store's bound as a limiter does
    // (InstallPools).
    for (const Limit& limit : domain.limits) {
      limited += (limit.kind == LimitKind::kLimited) + limit.concurrency.has_value();
    }
  }
  for (const auto& [name, domain] : config->domains()) {
    for (const Limit& limit : domain.limits) {
      if (limit.kind != LimitKind::kLimited || set->limiters_.contains(limit.id)) continue;
      const Entry* old = nullptr;
      if (previous != nullptr) {
        auto it = previous->limiters_.find(limit.id);
        if (it != previous->limiters_.end()) old = &it->second;
      }
      if (old != nullptr && old->spec == limit.spec && old->failure_mode == limit.failure_mode &&
          old->sync == limit.sync && old->regions == limit.regions) {
        set->limiters_.emplace(limit.id, *old);
        continue;
      }
      auto limiter = Make(store, limit, limited, /*transient=*/false, now);
      if (!limiter) return std::unexpected(limiter.error());
      // Before the set is published, so the new limiter decides nothing before it holds the
      // old counters; the old one decides until then (what it takes after its counters were
      // copied is not carried: docs/quotas.md).
      if (old != nullptr) (*limiter)->TakeOver(*old->limiter, now);
      set->limiters_.emplace(limit.id, Entry{limit.spec, limit.failure_mode, limit.sync,
                                             limit.regions, std::move(*limiter)});
    }
  }
  // Override limits do not depend on the config (their id is the domain and the rate), so
  // their counters carry over whole, in their use order.
  set->max_overrides_ = std::min(kMaxOverrides, store.MaxTransientLimiters());
  if (previous != nullptr) {
    std::lock_guard<std::mutex> lock(previous->overrides_mu_);
    set->overrides_ = previous->overrides_;
    for (auto it = set->overrides_.begin(); it != set->overrides_.end(); ++it) {
      set->override_index_.emplace(it->id, it);
    }
  }
  set->config_ = std::move(config);
  if (auto pools = set->InstallPools(previous, store); !pools) {
    return std::unexpected(pools.error());
  }
  return std::shared_ptr<const LimiterSet>(std::move(set));
}

std::string LimiterSet::PoolStoreId(std::string_view limit_id) {
  return StoreLimitId(std::string(limit_id) + "|@concurrency");
}

Result<void> LimiterSet::InstallPools(const LimiterSet* previous, Store& store) {
  // A pool takes a limiter's part of the memory store's bound, as the limiters do.
  size_t sharing = 0;
  for (const auto& [name, domain] : config_->domains()) {
    for (const Limit& limit : domain.limits) {
      sharing += (limit.kind == LimitKind::kLimited) + limit.concurrency.has_value();
    }
  }
  for (const auto& [name, domain] : config_->domains()) {
    for (const Limit& limit : domain.limits) {
      if (!limit.concurrency || pools_.contains(limit.id)) continue;
      const Pool* old = previous != nullptr ? previous->PoolFor(limit.id) : nullptr;
      Pool pool{&limit, PoolStoreId(limit.id), nullptr};
      // The pool knows nothing of `shed` (each acquire brings its reserve): an edited shed rule
      // keeps the permits held.
      const ConcurrencyLimit* was = old != nullptr ? &*old->limit->concurrency : nullptr;
      if (was != nullptr && was->spec == limit.concurrency->spec &&
          was->failure_mode == limit.concurrency->failure_mode) {
        pool.pool = old->pool;
      } else {
        LimiterOptions options;
        options.id = pool.store_id;
        options.fail_open = limit.concurrency->failure_mode == FailureMode::kOpen;
        options.limits_sharing_memory = sharing;
        auto made = store.MakePermitPool(limit.concurrency->spec, options);
        if (!made) return MakeError(limit.origin + ": concurrency: " + made.error().message);
        pool.pool = std::shared_ptr<PermitPool>(std::move(*made));
      }
      pools_.emplace(limit.id, std::move(pool));
    }
  }
  for (const auto& [id, pool] : pools_) pools_by_store_id_.emplace(pool.store_id, &pool);
  return {};
}

Result<LimiterSet::Found> LimiterSet::For(const Limit& limit) const {
  if (auto it = limiters_.find(limit.id); it != limiters_.end()) {
    return Found{it->second.limiter.get(), nullptr};
  }
  // Not in the config: an override limit.
  std::lock_guard<std::mutex> lock(overrides_mu_);
  if (auto it = override_index_.find(limit.id); it != override_index_.end()) {
    overrides_.splice(overrides_.begin(), overrides_, it->second);  // now the most recent
    return Found{it->second->limiter.get(), it->second->limiter};
  }
  auto limiter = MakeOverride(limit);
  if (!limiter) return std::unexpected(limiter.error());
  overrides_.push_front(Override{limit.id, *limiter});
  override_index_.emplace(limit.id, overrides_.begin());
  return Found{limiter->get(), std::move(*limiter)};
}

Result<std::shared_ptr<Limiter>> LimiterSet::MakeOverride(const Limit& limit) const {
  while (!overrides_.empty() && overrides_.size() >= max_overrides_) DropLeastRecentlyUsed();
  while (true) {
    // An override's rate names its counters: no other spec writes them (generation 0).
    auto limiter = Make(*store_, limit, 1, /*transient=*/true, Timestamp{});
    if (limiter || overrides_.empty()) return limiter;
    // The store may still count a limiter this set dropped (a check in flight holds it, or a
    // set from before a reload does): drop more of the least recently used ones. The rate was
    // validated when the request was matched, so room is what the store lacked.
    DropLeastRecentlyUsed();
  }
}

void LimiterSet::DropLeastRecentlyUsed() const {
  override_index_.erase(overrides_.back().id);
  overrides_.pop_back();
}

size_t LimiterSet::OverrideCount() const {
  std::lock_guard<std::mutex> lock(overrides_mu_);
  return overrides_.size();
}

}  // namespace sluice::server
