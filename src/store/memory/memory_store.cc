#include "sluice/memory_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/carry_over.h"
#include "sluice/calendar_window.h"
#include "sluice/decide_all.h"
#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"
#include "store/calendar_stats.h"
#include "store/decide_checks.h"
#include "store/memory/key_hash.h"
#include "store/memory/limiter_snapshot.h"
#include "store/memory/memory_shard.h"
#include "store/memory/override_table.h"
#include "store/memory/permit_snapshot.h"
#include "store/memory/permit_table.h"
#include "store/memory/reserving_limiter.h"
#include "store/memory/snapshot_stage.h"

namespace sluice {
namespace {

// The configured limiters of one memory store that are alive, for the store's Stats(), and how
// many transient limiters (LimiterOptions::transient: views of the override table) are, which
// the store's bound counts on.
class LiveLimiters {
 public:
  void Add(const internal::SnapshotLimiter* limiter) {
    std::lock_guard<std::mutex> lock(mu_);
    limiters_.push_back(limiter);
  }
  // Waits while a snapshot is copying this limiter's counters (ForEach), never longer.
  void Remove(const internal::SnapshotLimiter* limiter) {
    std::unique_lock<std::mutex> lock(mu_);
    std::erase(limiters_, limiter);
    saved_.wait(lock, [&] { return in_snapshot_ != limiter; });
  }
  // Takes one of `max` transient places, if one is free (given back by ReleaseTransient when
  // the transient limiter is destroyed or could not be made).
  bool TakeTransient(size_t max) {
    std::lock_guard<std::mutex> lock(mu_);
    if (transient_ >= max) return false;
    ++transient_;
    return true;
  }
  void ReleaseTransient() {
    std::lock_guard<std::mutex> lock(mu_);
    --transient_;
  }
  size_t transient() const {
    std::lock_guard<std::mutex> lock(mu_);
    return transient_;
  }
  StoreStats Sum() const {
    StoreStats total;
    std::lock_guard<std::mutex> lock(mu_);
    for (const internal::SnapshotLimiter* limiter : limiters_) {
      const StoreStats s = limiter->Stats();
      total.keys += s.keys;
      total.bytes += s.bytes;
      total.max_bytes += s.max_bytes;
      total.evictions += s.evictions;
      total.expirations += s.expirations;
      total.evicted_replenished += s.evicted_replenished;
    }
    return total;
  }
  // Calls f(limiter) for each limiter alive when it is reached, one after another (one
  // snapshot at a time). The lock is not held during f: a limiter made or destroyed meanwhile
  // (a reload, a request dropping the last set of an older config) waits only if it is the one
  // f has, for that one's counters.
  template <typename F>
  void ForEach(F&& f) const {
    std::lock_guard<std::mutex> one_snapshot(snapshot_mu_);
    std::vector<const internal::SnapshotLimiter*> listed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      listed = limiters_;
    }
    for (const internal::SnapshotLimiter* limiter : listed) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (std::find(limiters_.begin(), limiters_.end(), limiter) == limiters_.end()) continue;
        in_snapshot_ = limiter;
      }
      f(*limiter);
      {
        std::lock_guard<std::mutex> lock(mu_);
        in_snapshot_ = nullptr;
      }
      saved_.notify_all();
    }
  }

 private:
  mutable std::mutex mu_;
  std::vector<const internal::SnapshotLimiter*> limiters_;
  size_t transient_ = 0;                                            // guarded by mu_
  mutable std::mutex snapshot_mu_;                                  // held by ForEach
  mutable const internal::SnapshotLimiter* in_snapshot_ = nullptr;  // guarded by mu_
  mutable std::condition_variable saved_;  // in_snapshot_ went back to null
};

// Where a limiter belongs: a store (which counts it in its Stats() and its bound) or none.
struct Owner {
  const Store* store = nullptr;
  std::shared_ptr<LiveLimiters> live;
  std::string id;  // LimiterOptions::id: names the limiter's counters in snapshots
};

// A store limiter's counters as their usage (core/carry_over.h), for the limiter that replaces
// it at a reload (Limiter::TakeOver). Every limiter this store makes for the config is one;
// its transient limiters (override_table.h) are not.
class UsageSource {
 public:
  using Counter = std::pair<std::string, internal::Usage>;
  // Each shard's counters as of `now`, one shard at a time (copied under its lock, then handed
  // to `take` outside it, so deciding in the old limiter waits only for the copy).
  virtual void ExportUsage(Timestamp now,
                           const std::function<void(std::vector<Counter>&)>& take) const = 0;

 protected:
  ~UsageSource() = default;
};

template <typename Alg>
class MemoryLimiterOf final : public internal::SnapshotLimiter, public UsageSource {
 public:
  // `fixed_bytes`: what the limiter itself takes besides its shards' tables (counted in its
  // Stats when a store's bound includes it; 0 otherwise).
  MemoryLimiterOf(Alg alg, const LimitSpec& spec, const MemoryStoreOptions& options, size_t shards,
                  uint64_t seed, Owner owner, size_t fixed_bytes)
      : SnapshotLimiter(owner.store),
        live_(std::move(owner.live)),
        id_(std::move(owner.id)),
        fixed_bytes_(fixed_bytes),
        alg_(std::move(alg)),
        spec_(spec),
        max_key_bytes_(options.max_key_bytes),
        seed_(seed),
        shard_mask_(shards - 1),
        shards_(std::make_unique<Shard[]>(shards)) {
    for (size_t i = 0; i < shards; ++i) shards_[i].Init(options.max_bytes / shards);
    if (live_ != nullptr) live_->Add(this);
  }
  ~MemoryLimiterOf() override {
    if (live_ != nullptr) live_->Remove(this);
  }
  MemoryLimiterOf(const MemoryLimiterOf&) = delete;
  MemoryLimiterOf& operator=(const MemoryLimiterOf&) = delete;

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    if (!Valid(key, cost)) return Invalid();
    const uint64_t h = internal::HashKey(key, seed_);
    auto& shard = ShardFor(h);
    shard.Prefetch(static_cast<uint32_t>(h));
    return shard.Decide(alg_, key, static_cast<uint32_t>(h), now, cost);
  }

  // A calendar window decided in the request's zone, its mismatches counted here (only here: a
  // plain Decide is an admin read or a caller that names no zone).
  Decision DecideInZone(std::string_view key, Timestamp now, int64_t cost, bool charge,
                        const CalendarZone& zone) override {
    if constexpr (!kCalendar) {
      return charge ? Charge(key, now, cost) : Decide(key, now, cost);
    } else {
      if (!Valid(key, cost)) return Invalid();
      const CalendarWindow zoned = alg_.InZone(zone, &zone_mismatches_);
      const uint64_t h = internal::HashKey(key, seed_);
      auto& shard = ShardFor(h);
      return charge ? shard.template Decide</*kCharge=*/true>(zoned, key, static_cast<uint32_t>(h),
                                                              now, cost)
                    : shard.Decide(zoned, key, static_cast<uint32_t>(h), now, cost);
    }
  }

  void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const override {
    if constexpr (kCalendar) {
      sink.Add(internal::kCalendarZoneMismatches, limit_labels,
               static_cast<double>(zone_mismatches_.load(std::memory_order_relaxed)));
    }
  }

  // A calendar limit's reserve is decided in the request's zone, as DecideInZone decides.
  Decision DecideReserving(std::string_view key, Timestamp now, int64_t cost, int64_t reserve,
                           const CalendarZone* zone) override {
    if (!Valid(key, cost)) return Invalid();
    const uint64_t h = internal::HashKey(key, seed_);
    if constexpr (kCalendar) {
      if (zone != nullptr) {
        const CalendarWindow zoned = alg_.InZone(*zone, &zone_mismatches_);
        return ShardFor(h).Decide(zoned, key, static_cast<uint32_t>(h), now, cost, reserve);
      }
    }
    return ShardFor(h).Decide(alg_, key, static_cast<uint32_t>(h), now, cost, reserve);
  }

  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    if (!Valid(key, cost)) return Invalid();
    const uint64_t h = internal::HashKey(key, seed_);
    return ShardFor(h).template Decide</*kCharge=*/true>(alg_, key, static_cast<uint32_t>(h), now,
                                                         cost);
  }

  // Hashes and prefetches a group of keys before deciding any, so their cache misses overlap
  // instead of queueing behind each shard lock one by one.
  void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) override {
    constexpr size_t kGroup = 16;
    uint64_t hashes[kGroup];
    for (size_t base = 0; base < requests.size(); base += kGroup) {
      const size_t n = std::min(kGroup, requests.size() - base);
      for (size_t i = 0; i < n; ++i) {
        hashes[i] = internal::HashKey(requests[base + i].key, seed_);
        ShardFor(hashes[i]).Prefetch(static_cast<uint32_t>(hashes[i]));
      }
      for (size_t i = 0; i < n; ++i) {
        const DecideRequest& r = requests[base + i];
        out[base + i] = Valid(r.key, r.cost)
                            ? ShardFor(hashes[i]).Decide(
                                  alg_, r.key, static_cast<uint32_t>(hashes[i]), r.now, r.cost)
                            : Invalid();
      }
    }
  }

  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    if (cost <= 0 || key.size() > max_key_bytes_) return;  // nothing that was admitted
    const uint64_t h = internal::HashKey(key, seed_);
    ShardFor(h).Refund(alg_, key, static_cast<uint32_t>(h), at, now, cost);
  }

  Result<Adjusted> Adjust(std::string_view key, Timestamp now, const Adjustment& change) override {
    if (auto valid = ValidateAdjustment(spec_, change); !valid) {
      return std::unexpected(valid.error());
    }
    if (key.size() > max_key_bytes_) return MakeError("the counter key is over the store's bound");
    const uint64_t h = internal::HashKey(key, seed_);
    return ShardFor(h).Adjust(alg_, key, static_cast<uint32_t>(h), now,
                              StepsOf(change, alg_.capacity()), change.allow_over_limit);
  }

  void Reset(std::string_view key) override {
    if (key.size() > max_key_bytes_) return;
    const uint64_t h = internal::HashKey(key, seed_);
    ShardFor(h).Reset(key, static_cast<uint32_t>(h));
  }

  void TakeOver(Limiter& old, Timestamp now) override {
    // Only a limiter this store made for the config holds counters to take (owner() says whose
    // it is; the cast tells the config's limiters from the transient ones of the same store).
    if (owner() == nullptr || old.owner() != owner() || &old == this) return;
    const auto* source = dynamic_cast<const UsageSource*>(&old);
    if (source == nullptr || CarryOverFor(old.spec(), spec_) == CarryOver::kDrop) return;
    source->ExportUsage(now, [&](std::vector<Counter>& counters) {
      for (Counter& c : counters) {
        auto state = internal::StateFromUsage(alg_, c.second, now);
        if (!state) continue;
        const uint64_t h = internal::HashKey(c.first, seed_);
        ShardFor(h).Adopt(alg_, c.first, static_cast<uint32_t>(h), std::move(*state), now);
      }
    });
  }

  void ExportUsage(Timestamp now,
                   const std::function<void(std::vector<Counter>&)>& take) const override {
    std::vector<Counter> counters;
    for (size_t i = 0; i <= shard_mask_; ++i) {
      counters.clear();
      shards_[i].shard->ForEachCounter([&](std::string_view key, const auto& state) {
        counters.emplace_back(std::string(key), internal::UsageOf(alg_, state, now));
      });
      take(counters);
    }
  }

  size_t Sweep(Timestamp now) override {
    size_t dropped = 0;
    for (size_t i = 0; i <= shard_mask_; ++i) dropped += shards_[i].shard->Sweep(alg_, now);
    return dropped;
  }

  StoreStats Stats() const override {
    StoreStats s;
    for (size_t i = 0; i <= shard_mask_; ++i) shards_[i].shard->AddStats(s);
    s.bytes += fixed_bytes_;
    s.max_bytes += fixed_bytes_;
    return s;
  }

  const LimitSpec& spec() const override { return spec_; }

  const std::string& id() const override { return id_; }

  uint64_t SaveSection(Timestamp now, int64_t to_wall_ns,
                       internal::SnapshotWriter& out) const override {
    return internal::SaveLimitSection(
        id_, spec_, alg_,
        shard_mask_ + 1, [this](size_t i) -> const auto& { return *shards_[i].shard; }, now,
        to_wall_ns, out);
  }

  void RestoreSection(const internal::LimitSection& section, Timestamp now, int64_t to_wall_ns,
                      SnapshotRestored& counts) override {
    internal::RestoreLimitSection(section, alg_, now, to_wall_ns, counts,
                                  [&](std::string_view key, typename Alg::State&& state) {
                                    if (key.size() > max_key_bytes_) return;
                                    const uint64_t h = internal::HashKey(key, seed_);
                                    ShardFor(h).Restore(alg_, key, static_cast<uint32_t>(h),
                                                        std::move(state), now);
                                  });
  }

 private:
  bool Valid(std::string_view key, int64_t cost) const {
    return cost >= 0 && key.size() <= max_key_bytes_;
  }
  Decision Invalid() const { return internal::InvalidRequest(alg_.capacity()); }
  internal::MemoryShard<Alg>& ShardFor(uint64_t h) const {
    return *shards_[(h >> 32) & shard_mask_].shard;
  }

  struct Shard {
    void Init(size_t budget) { shard = std::make_unique<internal::MemoryShard<Alg>>(budget); }
    std::unique_ptr<internal::MemoryShard<Alg>> shard;
  };

 public:
  // An upper bound of what a limiter with `shards` shards takes besides its tables: the limiter,
  // its shard array and each shard, with an allocator header for each allocation.
  static size_t FixedBytes(size_t shards) {
    constexpr size_t kAllocHeader = 16;
    return sizeof(MemoryLimiterOf) + kAllocHeader + shards * sizeof(Shard) + kAllocHeader +
           shards * (sizeof(internal::MemoryShard<Alg>) + kAllocHeader);
  }

 private:
  static constexpr bool kCalendar = std::is_same_v<Alg, CalendarWindow>;

  const std::shared_ptr<LiveLimiters> live_;
  const std::string id_;
  const size_t fixed_bytes_;
  const Alg alg_;
  const LimitSpec spec_;
  const size_t max_key_bytes_;
  const uint64_t seed_;
  const size_t shard_mask_;
  std::unique_ptr<Shard[]> shards_;
  // Calendar windows: requests decided in a window another zone opened.
  mutable std::atomic<uint64_t> zone_mismatches_{0};
};

// A store's limiter (owner.store set) gets options.max_bytes for everything it holds, its own
// fixed parts included, and as many of options.shards as that allows. A limiter of its own
// gets options.max_bytes for its tables and exactly options.shards.
template <typename Alg>
Result<std::unique_ptr<MemoryLimiter>> Make(const LimitSpec& spec,
                                            const MemoryStoreOptions& options, size_t shards,
                                            uint64_t seed, Owner owner) {
  auto alg = Alg::Create(spec);
  if (!alg) return std::unexpected(alg.error());
  const size_t need = internal::MemoryShard<Alg>::MinBudget(*alg);
  size_t fixed = 0;
  size_t tables = options.max_bytes;
  if (owner.store != nullptr) {
    const auto fits = [&](size_t n) {
      const size_t f = MemoryLimiterOf<Alg>::FixedBytes(n);
      return options.max_bytes > f && (options.max_bytes - f) / n >= need;
    };
    while (shards > 1 && !fits(shards)) shards /= 2;
    if (!fits(shards)) {
      return MakeError("the memory store's bound leaves " + std::to_string(options.max_bytes) +
                       " bytes for " + DescribeLimitSpec(spec) + ", which needs at least " +
                       std::to_string(MemoryLimiterOf<Alg>::FixedBytes(1) + need) +
                       " (raise the memory bound, e.g. --memory-max-bytes, or use fewer limits)");
    }
    fixed = MemoryLimiterOf<Alg>::FixedBytes(shards);
    tables = options.max_bytes - fixed;
  }
  if (tables / shards < need) {
    return MakeError("memory store max_bytes " + std::to_string(options.max_bytes) +
                     " is too small for " + std::to_string(shards) + " shards of " +
                     DescribeLimitSpec(spec) + ": each shard needs at least " +
                     std::to_string(need) + " bytes (raise max_bytes or lower shards)");
  }
  MemoryStoreOptions sized = options;
  sized.max_bytes = tables;
  return std::unique_ptr<MemoryLimiter>(std::make_unique<MemoryLimiterOf<Alg>>(
      std::move(*alg), spec, sized, shards, seed, std::move(owner), fixed));
}

Result<void> CheckOptions(const MemoryStoreOptions& options) {
  if (options.shards == 0 || options.shards > (size_t{1} << 16)) {
    return MakeError("memory store shards must be between 1 and 65536");
  }
  if (options.max_key_bytes == 0 || options.max_key_bytes > 65535) {
    return MakeError("memory store max_key_bytes must be between 1 and 65535");
  }
  return {};
}

Result<std::unique_ptr<MemoryLimiter>> MakeOwnedLimiter(const LimitSpec& spec,
                                                        const MemoryStoreOptions& options,
                                                        Owner owner) {
  if (auto valid = CheckOptions(options); !valid) return std::unexpected(valid.error());
  const size_t shards = std::bit_ceil(options.shards);
  uint64_t seed = options.hash_seed;
  if (seed == 0) {
    std::random_device rd;
    seed = (uint64_t{rd()} << 32) ^ rd() ^ 1;
  }
  // A wide spec's buckets keep 128-bit states (8 bytes more a key); every other spec keeps the
  // 64-bit ones (NeedsWideArithmetic, docs/algorithms.md "The exact range").
  const bool wide = NeedsWideArithmetic(spec);
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
      if (wide) return Make<WideTokenBucket>(spec, options, shards, seed, std::move(owner));
      return Make<TokenBucket>(spec, options, shards, seed, std::move(owner));
    case Algorithm::kLeakyBucket:
      if (wide) return Make<WideLeakyBucket>(spec, options, shards, seed, std::move(owner));
      return Make<LeakyBucket>(spec, options, shards, seed, std::move(owner));
    case Algorithm::kFixedWindow:
      // A calendar window records its bounds; the plain window keeps its 16-byte state.
      if (spec.IsCalendar()) {
        return Make<CalendarWindow>(spec, options, shards, seed, std::move(owner));
      }
      return Make<FixedWindow>(spec, options, shards, seed, std::move(owner));
    case Algorithm::kSlidingWindowLog:
      return Make<SlidingWindowLog>(spec, options, shards, seed, std::move(owner));
    case Algorithm::kSlidingWindowCounter:
      return Make<SlidingWindowCounter>(spec, options, shards, seed, std::move(owner));
    case Algorithm::kGcra:
      return Make<Gcra>(spec, options, shards, seed, std::move(owner));
  }
  return MakeError("unknown algorithm");
}

class MemoryStore final : public Store, public MemorySnapshots {
 public:
  // The split of the bound is in memory_store.h (OpenMemoryStore).
  explicit MemoryStore(const MemoryStoreOptions& options) : options_(options) {
    const size_t part = options_.max_bytes / 4;
    // The transient limiters' own bytes are kept out of the part, at most half of it.
    max_transient_ = std::min(kTransientLimiters, part / 2 / internal::kOverrideLimiterBytes);
    transient_reserve_ = max_transient_ * internal::kOverrideLimiterBytes;
    uint64_t seed = options_.hash_seed;
    if (seed == 0) {
      std::random_device rd;
      seed = (uint64_t{rd()} << 32) ^ rd() ^ 1;
    }
    auto table = internal::OverrideTable::Make(part - transient_reserve_, options_.shards, seed);
    if (table) {
      overrides_ = std::move(*table);
    } else {
      overrides_error_ = table.error().message;
    }
  }

  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& limiter) override {
    if (limiter.transient) return MakeTransient(spec);
    MemoryStoreOptions options = options_;
    options.max_bytes = (options_.max_bytes - options_.max_bytes / 4) /
                        std::max<size_t>(1, limiter.limits_sharing_memory);
    auto made = MakeOwnedLimiter(spec, options, Owner{this, live_, limiter.id});
    if (!made) return std::unexpected(made.error());
    stage_.Restore(static_cast<internal::SnapshotLimiter&>(**made));
    return std::unique_ptr<Limiter>(std::move(*made));
  }

  size_t MaxTransientLimiters() const override { return max_transient_; }

  // A concurrency limit takes a limiter's part of the bound (memory_store.h), counted in Stats.
  Result<std::unique_ptr<PermitPool>> MakePermitPool(const PermitSpec& spec,
                                                     const LimiterOptions& limiter) override {
    const size_t part = (options_.max_bytes - options_.max_bytes / 4) /
                        std::max<size_t>(1, limiter.limits_sharing_memory);
    // A pool of an id already in use (a reload that changed the limit's numbers) takes the
    // permits held under the old one, as Redis's new pool reads the same keys (permit_table.h).
    return internal::MakeMemoryPermitPool(
        spec, part, options_.shards, options_.max_key_bytes, limiter.id, permits_,
        [&](internal::PermitTable& table) { stage_.RestorePermits(limiter.id, table); });
  }

  void DecideAll(std::span<const LimitCheck> checks, Timestamp now,
                 std::span<Decision> out) override {
    const auto foreign = [this](const LimitCheck& c) {
      return c.limiter != nullptr && c.limiter->owner() != this;
    };
    if (std::none_of(checks.begin(), checks.end(), foreign)) {
      return DecideOwn(checks, now, out);
    }
    // Another store's limiter: decided as a null one (kInvalidRequest), rejecting the request.
    std::vector<LimitCheck> own(checks.begin(), checks.end());
    for (LimitCheck& c : own) {
      if (foreign(c)) c.limiter = nullptr;
    }
    DecideOwn(own, now, out);
  }

  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      DecideAllCallback done) override {
    constexpr size_t kOnStack = 16;
    if (checks.size() <= kOnStack) {
      std::array<Decision, kOnStack> out;
      DecideAll(checks, now, out);
      return done(std::span<const Decision>(out.data(), checks.size()));
    }
    std::vector<Decision> out(checks.size());
    DecideAll(checks, now, out);
    done(out);
  }

  bool Ready() override { return true; }

  // sluice::DecideAll, with each reserve decided atomically with its cost: every limiter this
  // store makes (configured and transient) is a ReservingLimiter, and `checks` holds only this
  // store's limiters (or null ones, which DecideChecks answers itself).
  static void DecideOwn(std::span<const LimitCheck> checks, Timestamp now,
                        std::span<Decision> out) {
    internal::DecideChecks(checks, now, out, [now](const LimitCheck& c) {
      return static_cast<internal::ReservingLimiter*>(c.limiter)->DecideReserving(
          c.key, now, c.cost, c.reserve, c.zone);
    });
  }

  std::string Save(Timestamp now, Duration to_wall, SnapshotSaved* saved) override {
    std::string out;
    internal::SnapshotWriter writer(out, ToNanos(now + to_wall));
    SnapshotSaved counts;
    live_->ForEach([&](const internal::SnapshotLimiter& limiter) {
      counts.counters += limiter.SaveSection(now, to_wall.count(), writer);
      ++counts.limits;
    });
    if (overrides_ != nullptr) {
      counts.counters += overrides_->SaveSection(now, to_wall.count(), writer);
      ++counts.limits;
    }
    permits_->ForEach([&](const std::string& id, const internal::PermitTable& table) {
      if (id.empty()) return;  // no pool of a new process could be told it is this one
      counts.permits += internal::SavePermitSection(id, table, now, to_wall.count(), writer);
    });
    writer.Finish();
    if (saved != nullptr) *saved = counts;
    return out;
  }

  SnapshotLoaded Load(std::string_view bytes, Timestamp now, Duration to_wall) override {
    return stage_.Load(std::string(bytes), now, to_wall.count(), overrides_.get());
  }

  SnapshotRestored FinishRestore() override { return stage_.Finish(); }

  // The override table is counted once here: its views (the transient limiters) are not in
  // live_, and each reports the whole table.
  StoreStats Stats() const override {
    StoreStats s = live_->Sum();
    if (overrides_ != nullptr) overrides_->AddStats(s);
    s.bytes += live_->transient() * internal::kOverrideLimiterBytes;
    s.max_bytes += transient_reserve_;
    permits_->AddStats(s);
    return s;
  }

 private:
  Result<std::unique_ptr<Limiter>> MakeTransient(const LimitSpec& spec) {
    if (overrides_ == nullptr) return MakeError(overrides_error_);
    if (!live_->TakeTransient(max_transient_)) {
      return MakeError("the memory store holds " + std::to_string(max_transient_) +
                       " limit overrides already: drop one first");
    }
    auto made = internal::MakeOverrideLimiter(spec, overrides_, options_.max_key_bytes, this,
                                              [live = live_] { live->ReleaseTransient(); });
    if (!made) {
      live_->ReleaseTransient();
      return std::unexpected(made.error());
    }
    return std::unique_ptr<Limiter>(std::move(*made));
  }

  const MemoryStoreOptions options_;
  const std::shared_ptr<LiveLimiters> live_ = std::make_shared<LiveLimiters>();
  const std::shared_ptr<internal::LivePermitTables> permits_ =
      std::make_shared<internal::LivePermitTables>();
  size_t max_transient_ = 0;      // transient limiters (views of overrides_) alive at once
  size_t transient_reserve_ = 0;  // their bytes, kept out of the overrides' part
  std::shared_ptr<internal::OverrideTable> overrides_;  // null if the bound is too small
  std::string overrides_error_;
  internal::SnapshotStage stage_;  // a loaded snapshot's counters waiting for their limiters
};

}  // namespace

Result<std::unique_ptr<MemoryLimiter>> MakeMemoryLimiter(const LimitSpec& spec,
                                                         const MemoryStoreOptions& options) {
  return MakeOwnedLimiter(spec, options, Owner{});
}

MemorySnapshots* SnapshotsOf(Store& store) { return dynamic_cast<MemorySnapshots*>(&store); }

Result<std::shared_ptr<Store>> OpenMemoryStore(const MemoryStoreOptions& options) {
  if (auto valid = CheckOptions(options); !valid) return std::unexpected(valid.error());
  return std::shared_ptr<Store>(std::make_shared<MemoryStore>(options));
}

}  // namespace sluice
