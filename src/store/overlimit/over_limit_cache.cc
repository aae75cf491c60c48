// The over-limit cache store (include/sluice/over_limit_cache.h): limiters that wrap the inner
// store's, a RefusalCache they share, and DecideAll that answers a request from memory only
// when every one of its checks is a sure refusal.
#include "sluice/over_limit_cache.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/decision_sources.h"
#include "store/forwarding.h"
#include "store/overlimit/refusal_cache.h"
#include "store/owned_checks.h"

namespace sluice {
namespace {

class CacheStore;

class CachedLimiter final : public internal::ForwardingLimiter {
 public:
  CachedLimiter(std::shared_ptr<CacheStore> store, std::unique_ptr<Limiter> inner, uint64_t serial,
                bool exact);

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override;
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override;
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override;
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override;
  // One by one, each answered from the cache if it can be (Limiter's loop over Decide).
  void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) override {
    Limiter::DecideBatch(requests, out);
  }
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override;
  void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override;
  // Unspent units of a lease go back to the key like a refund: what was known of it may no
  // longer hold. (TakeAsync passes through: a take only makes a refusal surer.)
  void GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) override;
  // The same, answered when the inner store has applied them.
  void RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                  GivenBackCallback done) override;
  void GiveBackThen(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units,
                    GivenBackCallback done) override;
  void Reset(std::string_view key) override;
  // The key's facts go, and answers asked before it are not learnt, as for a reset.
  Result<Adjusted> Adjust(std::string_view key, Timestamp now, const Adjustment& change) override;
  bool served_by_layer() const override { return true; }

  uint64_t serial() const { return serial_; }
  // A sure refusal of `cost` for `key` at `now` from memory, if there is one.
  std::optional<Decision> Find(std::string_view key, Timestamp now, int64_t cost) const;
  // What the inner store answered for (key, cost) at `now`, asked when the store's
  // invalidation count was `generation`: a refusal is remembered, an admission that took
  // quota forgets the key (its facts would no longer be exact).
  void Learn(std::string_view key, Timestamp now, int64_t cost, const Decision& d,
             uint64_t generation, bool learn_refusal = true) const;

 private:
  const std::shared_ptr<CacheStore> store_;
  const uint64_t serial_;  // names its keys in the cache
  const bool fixed_window_;
  // The limit's every decision is the inner store's own (sync: exact). Leased and batched
  // limits decide in a layer below from what one node holds: their refusals are not facts
  // about the shared quota, and they cost Redis nothing to repeat, so none is remembered.
  const bool exact_;
  // A shaper with max_delay also refuses while its queue has room (the wait is too long), and
  // its remaining then grows before the refusal ends: such refusals are not facts to keep.
  const bool bounded_shaper_;
};

class CacheStore final : public internal::ForwardingStore<Store>,
                         public std::enable_shared_from_this<CacheStore> {
 public:
  CacheStore(std::shared_ptr<Store> inner, size_t max_bytes, Duration refusal_trust)
      : ForwardingStore(std::move(inner)), cache_(max_bytes), refusal_trust_(refusal_trust) {}

  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override {
    auto inner = inner_store().MakeLimiter(spec, options);
    if (!inner) return std::unexpected(inner.error());
    return std::make_unique<CachedLimiter>(shared_from_this(), std::move(*inner),
                                           next_serial_.fetch_add(1, std::memory_order_relaxed),
                                           options.sync.mode == SyncMode::kExact);
  }

  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      DecideAllCallback done) override {
    std::vector<Decision> local(checks.size());
    if (AnswerFromCache(checks, now, local)) {
      done(local);
      return;
    }
    const uint64_t generation = this->generation();
    // What the answer's handler reads: the checks with keys of their own.
    auto pending = std::make_shared<internal::OwnedChecks>(checks);
    std::vector<LimitCheck> inner = InnerChecks(checks).checks;
    auto self = shared_from_this();
    inner_store().DecideAllAsync(
        inner, now,
        [self, pending, now, generation, done = std::move(done)](std::span<const Decision> out) {
          self->LearnAll(pending->checks, now, out, generation);
          done(out);
        });
  }

  StoreStats Stats() const override {
    StoreStats s = ForwardingStore::Stats();
    s.over_limit_cache = true;
    s.bytes += cache_.bytes();  // the layers behind it may hold memory of their own
    s.max_bytes += cache_.max_bytes();
    s.evictions += cache_.evictions();
    s.cached_decisions = cached_.load(std::memory_order_relaxed);
    s.forwarded_decisions = forwarded_.load(std::memory_order_relaxed);
    return s;
  }
  // The refusals it answered from memory; what it passed on is counted by the layers behind it.
  void ReportStats(StatsSink& sink) const override {
    ForwardingStore::ReportStats(sink);
    sink.Add(internal::kDecisionsBySource, internal::kSourceCache,
             static_cast<double>(cached_.load(std::memory_order_relaxed)));
  }

  internal::RefusalCache& cache() { return cache_; }
  Duration refusal_trust() const { return refusal_trust_; }
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // After a refund or reset reached the inner store: answers asked before it may describe the
  // key as it was, and must not be remembered.
  void Invalidate() { generation_.fetch_add(1, std::memory_order_acq_rel); }
  void CountCached(size_t n) { cached_.fetch_add(n, std::memory_order_relaxed); }
  void CountForwarded(size_t n) { forwarded_.fetch_add(n, std::memory_order_relaxed); }

 private:
  // The request answered from memory when every check is a decision (no charge) that the cache
  // surely refuses: the request is then refused whatever its quota checks, and took nothing.
  // Anything else -- one check the cache cannot answer, a charge, an invalid check, a check
  // with a reserve (priority shedding: its retry time is not a fact's) -- goes to the inner
  // store whole, which keeps all-or-nothing its job.
  bool AnswerFromCache(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out) {
    if (checks.empty()) return false;
    for (size_t i = 0; i < checks.size(); ++i) {
      const CachedLimiter* mine = Own<CachedLimiter>(checks[i]);
      if (mine == nullptr || checks[i].charge || checks[i].reserve > 0) return false;
      auto refused = mine->Find(checks[i].key, now, checks[i].cost);
      if (!refused) return false;
      out[i] = *refused;
    }
    CountCached(checks.size());
    return true;
  }

  void LearnAll(std::span<const LimitCheck> checks, Timestamp now, std::span<const Decision> out,
                uint64_t generation) {
    CountForwarded(checks.size());
    for (size_t i = 0; i < checks.size(); ++i) {
      const CachedLimiter* mine = Own<CachedLimiter>(checks[i]);
      if (mine == nullptr) continue;
      // A limit and key checked twice in one request: the later check was decided after the
      // earlier one's take, which a refused request gave back. Its refusal may not hold.
      const bool repeated = std::any_of(checks.begin(), checks.end(), [&](const LimitCheck& o) {
        return &o != &checks[i] && o.limiter == checks[i].limiter && o.key == checks[i].key;
      });
      if (checks[i].charge) cache_.Drop(mine->serial(), checks[i].key);  // taken, even refused
      // A refusal taken with a reserve (priority shedding) is no fact about a request with a
      // smaller one -- a critical request passes where a low one was refused -- and facts are
      // kept by cost alone: it is not remembered. Its admissions still drop the key's facts.
      const bool learn_refusal = !repeated && checks[i].reserve <= 0;
      mine->Learn(checks[i].key, now, checks[i].cost, out[i], generation, learn_refusal);
    }
  }

  internal::RefusalCache cache_;
  const Duration refusal_trust_;
  std::atomic<uint64_t> next_serial_{1};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> cached_{0};
  std::atomic<uint64_t> forwarded_{0};
};

CachedLimiter::CachedLimiter(std::shared_ptr<CacheStore> store, std::unique_ptr<Limiter> inner,
                             uint64_t serial, bool exact)
    : ForwardingLimiter(store.get(), std::move(inner)),
      store_(std::move(store)),
      serial_(serial),
      fixed_window_(spec().algorithm == Algorithm::kFixedWindow),
      exact_(exact),
      bounded_shaper_(spec().shaper && spec().HasMaxDelay()) {}

std::optional<Decision> CachedLimiter::Find(std::string_view key, Timestamp now,
                                            int64_t cost) const {
  if (cost < 0) return std::nullopt;  // the inner store says why it is invalid
  return store_->cache().Find(serial_, key, cost, now, fixed_window_, spec().Capacity());
}

void CachedLimiter::Learn(std::string_view key, Timestamp now, int64_t cost, const Decision& d,
                          uint64_t generation, bool learn_refusal) const {
  if (!exact_ || d.degraded || d.reason == DecisionReason::kInvalidRequest) return;
  if (bounded_shaper_ && !d.allowed) return;
  if (d.allowed) {
    if (cost > 0) store_->cache().Drop(serial_, key);
    return;
  }
  if (d.reason != DecisionReason::kOverLimit || !learn_refusal) return;
  // Only a refusal whose remaining cannot change before it ends is exact when answered later
  // (remaining < cost while refused, and it never falls without traffic): c - 1, or 0 for
  // cost 0 in debt. A fixed window's remaining is fixed until its window ends.
  if (!fixed_window_ && d.remaining != std::max<int64_t>(cost - 1, 0)) return;
  if (d.retry_after <= Duration(0) || d.retry_after == kNever) return;
  if (store_->generation() != generation) return;  // a refund or reset came in between
  internal::Refusal fact;
  fact.cost = cost;
  fact.limit = d.limit;
  fact.remaining = d.remaining;
  fact.until = now + d.retry_after;
  // Used for refusal_trust at most (a second by default): quota given back on another node (an
  // admin credit or reset), which this node cannot see, then refuses here for that long, not
  // for the rest of a month.
  fact.expires = now + std::min(d.retry_after, store_->refusal_trust());
  fact.replenished = now + d.reset_after;
  store_->cache().Add(serial_, key, fact, now);
}

Decision CachedLimiter::Decide(std::string_view key, Timestamp now, int64_t cost) {
  if (auto refused = Find(key, now, cost)) {
    store_->CountCached(1);
    return *refused;
  }
  const uint64_t generation = store_->generation();
  const Decision d = inner()->Decide(key, now, cost);
  store_->CountForwarded(1);
  Learn(key, now, cost, d, generation);
  return d;
}

void CachedLimiter::DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                                DecisionCallback done) {
  if (auto refused = Find(key, now, cost)) {
    store_->CountCached(1);
    done(*refused);
    return;
  }
  const uint64_t generation = store_->generation();
  inner()->DecideAsync(key, now, cost,
                       [this, owned = std::string(key), now, cost, generation,
                        done = std::move(done)](const Decision& d) {
                         store_->CountForwarded(1);
                         Learn(owned, now, cost, d, generation);
                         done(d);
                       });
}

// A charge is never answered here: it is counted by the inner store, into debt if need be. Its
// answer is about the key after the charge, so a refused one is a fact like any refusal.
Decision CachedLimiter::Charge(std::string_view key, Timestamp now, int64_t cost) {
  const uint64_t generation = store_->generation();
  const Decision d = inner()->Charge(key, now, cost);
  store_->CountForwarded(1);
  store_->cache().Drop(serial_, key);  // the key took more: what was known is not exact
  Learn(key, now, cost, d, generation);
  return d;
}

void CachedLimiter::ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                                DecisionCallback done) {
  const uint64_t generation = store_->generation();
  inner()->ChargeAsync(key, now, cost,
                       [this, owned = std::string(key), now, cost, generation,
                        done = std::move(done)](const Decision& d) {
                         store_->CountForwarded(1);
                         store_->cache().Drop(serial_, owned);
                         Learn(owned, now, cost, d, generation);
                         done(d);
                       });
}

// The inner store first, then the cache: an answer asked before the give-back is not
// remembered (the generation moved), and one asked after it sees it.
void CachedLimiter::Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) {
  inner()->Refund(key, at, now, cost);
  store_->Invalidate();
  store_->cache().Drop(serial_, key);
}

void CachedLimiter::RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) {
  inner()->RefundAsync(key, at, now, cost);
  store_->Invalidate();
  store_->cache().Drop(serial_, key);
}

void CachedLimiter::GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) {
  inner()->GiveBack(key, stamp_us, now, units);
  store_->Invalidate();
  store_->cache().Drop(serial_, key);
}

void CachedLimiter::RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                               GivenBackCallback done) {
  inner()->RefundThen(key, at, now, cost, std::move(done));
  store_->Invalidate();
  store_->cache().Drop(serial_, key);
}

void CachedLimiter::GiveBackThen(std::string_view key, int64_t stamp_us, Timestamp now,
                                 int64_t units, GivenBackCallback done) {
  inner()->GiveBackThen(key, stamp_us, now, units, std::move(done));
  store_->Invalidate();
  store_->cache().Drop(serial_, key);
}

void CachedLimiter::Reset(std::string_view key) {
  inner()->Reset(key);
  store_->Invalidate();
  store_->cache().Drop(serial_, key);
}

Result<Adjusted> CachedLimiter::Adjust(std::string_view key, Timestamp now,
                                       const Adjustment& change) {
  auto adjusted = inner()->Adjust(key, now, change);
  store_->Invalidate();
  store_->cache().Drop(serial_, key);
  return adjusted;
}

}  // namespace

Result<std::shared_ptr<Store>> OpenOverLimitCache(std::shared_ptr<Store> inner,
                                                  const OverLimitCacheOptions& options) {
  if (inner == nullptr) return std::unexpected(Error{"over-limit cache: no store to wrap"});
  if (options.max_bytes < internal::RefusalCache::kLeastBytes) {
    return std::unexpected(Error{"over-limit cache: max_bytes below the least, 4096"});
  }
  if (options.refusal_trust < std::chrono::milliseconds(1)) {
    return std::unexpected(Error{"over-limit cache: refusal_trust below the least, 1ms"});
  }
  return std::make_shared<CacheStore>(std::move(inner), options.max_bytes, options.refusal_trust);
}

}  // namespace sluice
