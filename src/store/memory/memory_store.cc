#include "sluice/memory_store.h"

#include <algorithm>
#include <bit>
#include <random>
#include <utility>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"
#include "store/memory/key_hash.h"
#include "store/memory/memory_shard.h"

namespace sluice {
namespace {

template <typename Alg>
class MemoryLimiter final : public Limiter {
 public:
  MemoryLimiter(Alg alg, const LimitSpec& spec, const MemoryStoreOptions& options, size_t shards,
                uint64_t seed)
      : alg_(std::move(alg)),
        spec_(spec),
        max_key_bytes_(options.max_key_bytes),
        seed_(seed),
        shard_mask_(shards - 1),
        shards_(std::make_unique<Shard[]>(shards)) {
    for (size_t i = 0; i < shards; ++i) shards_[i].Init(options.max_bytes / shards);
  }

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    if (!Valid(key, cost)) return Invalid();
    const uint64_t h = internal::HashKey(key, seed_);
    auto& shard = ShardFor(h);
    shard.Prefetch(static_cast<uint32_t>(h));
    return shard.Decide(alg_, key, static_cast<uint32_t>(h), now, cost);
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

  void Reset(std::string_view key) override {
    if (key.size() > max_key_bytes_) return;
    const uint64_t h = internal::HashKey(key, seed_);
    ShardFor(h).Reset(key, static_cast<uint32_t>(h));
  }

  size_t Sweep(Timestamp now) override {
    size_t dropped = 0;
    for (size_t i = 0; i <= shard_mask_; ++i) dropped += shards_[i].shard->Sweep(alg_, now);
    return dropped;
  }

  StoreStats Stats() const override {
    StoreStats s;
    for (size_t i = 0; i <= shard_mask_; ++i) shards_[i].shard->AddStats(s);
    return s;
  }

  const LimitSpec& spec() const override { return spec_; }

 private:
  bool Valid(std::string_view key, int64_t cost) const {
    return cost >= 0 && key.size() <= max_key_bytes_;
  }
  Decision Invalid() const {
    Decision d;
    d.reason = DecisionReason::kInvalidRequest;
    d.limit = alg_.capacity();
    d.retry_after = kNever;
    return d;
  }
  internal::MemoryShard<Alg>& ShardFor(uint64_t h) const {
    return *shards_[(h >> 32) & shard_mask_].shard;
  }

  struct Shard {
    void Init(size_t budget) { shard = std::make_unique<internal::MemoryShard<Alg>>(budget); }
    std::unique_ptr<internal::MemoryShard<Alg>> shard;
  };

  const Alg alg_;
  const LimitSpec spec_;
  const size_t max_key_bytes_;
  const uint64_t seed_;
  const size_t shard_mask_;
  std::unique_ptr<Shard[]> shards_;
};

template <typename Alg>
Result<std::unique_ptr<Limiter>> Make(const LimitSpec& spec, const MemoryStoreOptions& options,
                                      size_t shards, uint64_t seed) {
  auto alg = Alg::Create(spec);
  if (!alg) return std::unexpected(alg.error());
  const size_t per_shard = options.max_bytes / shards;
  if (const size_t need = internal::MemoryShard<Alg>::MinBudget(*alg); per_shard < need) {
    return MakeError("memory store max_bytes " + std::to_string(options.max_bytes) +
                     " is too small for " + std::to_string(shards) + " shards of " +
                     DescribeLimitSpec(spec) + ": each shard needs at least " +
                     std::to_string(need) + " bytes (raise max_bytes or lower shards)");
  }
  return std::unique_ptr<Limiter>(
      std::make_unique<MemoryLimiter<Alg>>(std::move(*alg), spec, options, shards, seed));
}

}  // namespace

Result<std::unique_ptr<Limiter>> MakeMemoryLimiter(const LimitSpec& spec,
                                                   const MemoryStoreOptions& options) {
  if (options.shards == 0 || options.shards > (size_t{1} << 16)) {
    return MakeError("memory store shards must be between 1 and 65536");
  }
  if (options.max_key_bytes == 0 || options.max_key_bytes > 65535) {
    return MakeError("memory store max_key_bytes must be between 1 and 65535");
  }
  const size_t shards = std::bit_ceil(options.shards);
  uint64_t seed = options.hash_seed;
  if (seed == 0) {
    std::random_device rd;
    seed = (uint64_t{rd()} << 32) ^ rd() ^ 1;
  }
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
      return Make<TokenBucket>(spec, options, shards, seed);
    case Algorithm::kLeakyBucket:
      return Make<LeakyBucket>(spec, options, shards, seed);
    case Algorithm::kFixedWindow:
      return Make<FixedWindow>(spec, options, shards, seed);
    case Algorithm::kSlidingWindowLog:
      return Make<SlidingWindowLog>(spec, options, shards, seed);
    case Algorithm::kSlidingWindowCounter:
      return Make<SlidingWindowCounter>(spec, options, shards, seed);
    case Algorithm::kGcra:
      return Make<Gcra>(spec, options, shards, seed);
  }
  return MakeError("unknown algorithm");
}

}  // namespace sluice
