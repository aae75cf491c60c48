// The memory store's override counters (LimiterOptions::transient: Envoy's per-request `limit`
// overrides). Every override rate keeps its counters in one table, keyed by (rate, key), inside
// the overrides' part of the store's bound, with the shard's eviction (a replenished counter
// first, which changes no decision; else the least recently used of a sample). A transient
// limiter is a view of one rate into this table: dropping the view forgets no counter, and a
// rate's counters do not go when other rates come, only when the table's memory is full.
// Internal to the memory store.
#ifndef SLUICE_STORE_MEMORY_OVERRIDE_TABLE_H_
#define SLUICE_STORE_MEMORY_OVERRIDE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <variant>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/memory_store.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"
#include "store/memory/key_hash.h"
#include "store/memory/memory_shard.h"
#include "store/memory/snapshot_format.h"

namespace sluice::internal {

// An override counter: its algorithm's state, and when it is replenished, so that the table
// tells replenished counters from live ones without knowing their rates (ReplenishedAt is a
// function of the state, which changes only through the rate's own calls below).
struct OverrideState {
  std::variant<TokenBucket::State, LeakyBucket::State, FixedWindow::State, SlidingWindowLog::State,
               SlidingWindowCounter::State, Gcra::State, WideTokenBucket::State,
               WideLeakyBucket::State>
      inner;
  Timestamp replenished_at{};
};

// One rate's algorithm, deciding on the counters of its keys (the transient limiter).
class OverrideRate {
 public:
  virtual OverrideState Initial(Timestamp now) const = 0;
  virtual Decision Decide(OverrideState& state, Timestamp now, int64_t cost,
                          int64_t reserve) const = 0;
  virtual Decision Charge(OverrideState& state, Timestamp now, int64_t cost) const = 0;
  virtual void Refund(OverrideState& state, Timestamp at, Timestamp now, int64_t cost) const = 0;

 protected:
  ~OverrideRate() = default;
};

// What the table's shards take as their algorithm: the rate of the call at hand. Calls that only
// ask whether counters are replenished (eviction, sweeps) need no rate.
class OverrideAlg {
 public:
  using State = OverrideState;
  explicit OverrideAlg(const OverrideRate* rate) : rate_(rate) {}
  State Initial(Timestamp now) const { return rate_->Initial(now); }
  Decision Decide(State& s, Timestamp now, int64_t cost, int64_t reserve = 0) const {
    return rate_->Decide(s, now, cost, reserve);
  }
  Decision Charge(State& s, Timestamp now, int64_t cost) const {
    return rate_->Charge(s, now, cost);
  }
  void Refund(State& s, Timestamp at, Timestamp now, int64_t cost) const {
    rate_->Refund(s, at, now, cost);
  }
  Timestamp ReplenishedAt(const State& s) const { return s.replenished_at; }
  static size_t HeapBytes(const State& s) {
    const auto* log = std::get_if<SlidingWindowLog::State>(&s.inner);
    return log == nullptr ? 0 : SlidingWindowLog::HeapBytes(*log);
  }

 private:
  const OverrideRate* rate_;
};

class OverrideTable {
 public:
  // A table within `max_bytes`, its own fixed parts included, in up to `shards` shards (fewer if
  // the bound is small); an error if the bound is too small for one.
  static Result<std::shared_ptr<OverrideTable>> Make(size_t max_bytes, size_t shards,
                                                     uint64_t seed);

  // `key` is the table's: the rate's prefix, then the caller's key.
  template <bool kCharge = false>
  Decision Decide(const OverrideRate& rate, std::string_view key, Timestamp now, int64_t cost,
                  int64_t reserve = 0) {
    const uint64_t h = HashKey(key, seed_);
    Shard& shard = ShardFor(h);
    shard.Prefetch(static_cast<uint32_t>(h));
    return shard.template Decide<kCharge>(OverrideAlg(&rate), key, static_cast<uint32_t>(h), now,
                                          cost, reserve);
  }
  void Refund(const OverrideRate& rate, std::string_view key, Timestamp at, Timestamp now,
              int64_t cost) {
    const uint64_t h = HashKey(key, seed_);
    ShardFor(h).Refund(OverrideAlg(&rate), key, static_cast<uint32_t>(h), at, now, cost);
  }
  void Reset(std::string_view key) {
    const uint64_t h = HashKey(key, seed_);
    ShardFor(h).Reset(key, static_cast<uint32_t>(h));
  }
  size_t Sweep(Timestamp now);
  // Counters, bytes (tables and fixed parts), the bound, evictions by reason, expirations.
  void AddStats(StoreStats& s) const;
  // Snapshots (snapshot_format.h): writes the overrides' section, every counter live at `now`
  // (returns how many); and puts a saved section's counters back.
  uint64_t SaveSection(Timestamp now, int64_t to_wall_ns, SnapshotWriter& out) const;
  void RestoreSection(uint64_t count, std::string_view counters, Timestamp now, int64_t to_wall_ns,
                      SnapshotRestored& counts);
  // What one shard may hold: a counter's largest state must fit in it a few times over.
  size_t shard_budget() const { return shard_budget_; }

  using Shard = MemoryShard<OverrideAlg>;
  OverrideTable(size_t shards, size_t shard_budget, size_t fixed_bytes, uint64_t seed);

 private:
  Shard& ShardFor(uint64_t h) const { return *shards_[(h >> 32) & shard_mask_]; }

  const uint64_t seed_;
  const size_t shard_mask_;
  const size_t shard_budget_;
  const size_t fixed_bytes_;
  std::unique_ptr<std::unique_ptr<Shard>[]> shards_;
};

// A transient limiter of `spec` (validated by the caller's store) deciding in `table`, for the
// store `owner`; `on_destroy` runs when it is destroyed (the store counts its views). Its
// Stats() are the whole table's, which every transient limiter of the store shares.
Result<std::unique_ptr<MemoryLimiter>> MakeOverrideLimiter(const LimitSpec& spec,
                                                           std::shared_ptr<OverrideTable> table,
                                                           size_t max_key_bytes, const Store* owner,
                                                           std::function<void()> on_destroy);

// An upper bound of what one transient limiter takes besides its counters: the store keeps this
// much per limiter it may make out of the overrides' part.
inline constexpr size_t kOverrideLimiterBytes = 512;

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_OVERRIDE_TABLE_H_
