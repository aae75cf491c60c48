// RefusalCache: the over-limit cache's memory -- per (limiter, key), the refusals the inner store
// gave, as facts "cost c is refused until T_c" -- with a byte bound kept by sampled-LRU eviction.
// Internal to the over-limit cache (over_limit_cache.h says what may be answered from it).
#ifndef SLUICE_STORE_OVERLIMIT_REFUSAL_CACHE_H_
#define SLUICE_STORE_OVERLIMIT_REFUSAL_CACHE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sluice/decision.h"
#include "sluice/time.h"

namespace sluice::internal {

// One refusal the inner store gave: a request of `cost` is refused until `until`, and the key
// then had `remaining` and was replenished at `replenished` (absolute, so later answers are
// the same instants measured from their own now).
struct Refusal {
  int64_t cost = 0;
  int64_t limit = 0;
  int64_t remaining = 0;
  Timestamp until;  // refused until then: the answer's retry_after
  Timestamp replenished;
  Timestamp expires;  // answered from memory until then (OverLimitCacheOptions::refusal_trust)
};

class RefusalCache {
 public:
  static constexpr size_t kFactsPerKey = 4;  // distinct costs remembered per key
  static constexpr size_t kShards = 16;
  static constexpr size_t kSampled = 5;  // entries compared per eviction
  static constexpr size_t kLeastBytes = 4096;

  explicit RefusalCache(size_t max_bytes);

  // The refusal to answer `cost` with at `now`, if one applies: a fact for exactly `cost`
  // (fixed window: for a cost from the fact's up to `capacity`) that still holds at `now`.
  std::optional<Decision> Find(uint64_t limiter, std::string_view key, int64_t cost, Timestamp now,
                               bool fixed_window, int64_t capacity);
  // Remembers a refusal (replacing one for the same cost; when full, the fact that ends first).
  void Add(uint64_t limiter, std::string_view key, const Refusal& fact, Timestamp now);
  // Forgets every fact about the key.
  void Drop(uint64_t limiter, std::string_view key);

  size_t bytes() const;
  size_t max_bytes() const { return shard_max_bytes_ * kShards; }
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  size_t entries() const;

 private:
  struct Entry {
    std::array<Refusal, kFactsPerKey> facts;
    uint8_t count = 0;
    uint64_t used = 0;  // the shard's tick when last found or added: the LRU order
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, Entry> map;
    size_t bytes = 0;
    uint64_t tick = 0;
    uint64_t rng = 0x9e3779b97f4a7c15u;  // xorshift state for sampling
  };

  static std::string MapKey(uint64_t limiter, std::string_view key);
  static size_t EntryBytes(const std::string& map_key);
  Shard& ShardFor(const std::string& map_key);
  // Drops sampled least recently used entries of `shard` (lock held) until `need` more bytes fit.
  void MakeRoom(Shard& shard, size_t need, Timestamp now);

  const size_t shard_max_bytes_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_OVERLIMIT_REFUSAL_CACHE_H_
