// The embedded memory store: the default backend.
//
// A hash map from key to algorithm state, split into independently locked shards so threads
// working on different keys rarely meet. It holds a memory bound: when a new key would exceed
// max_bytes, a counter near the new key's slot is evicted -- the least recently used of a
// small sample (sampled LRU). Evicting a key treats it as fresh on its next request (for an
// attacker rotating keys that is no gain: each new key is a fresh allowance anyway), while keys
// in regular use keep their state.
//
// Counters that are fully replenished are indistinguishable from fresh ones and are dropped
// without affecting any decision: opportunistically when new keys arrive, and by Sweep().
// Keys are hashed with a per-store random seed, so crafted collisions cannot be precomputed.
#ifndef SLUICE_MEMORY_STORE_H_
#define SLUICE_MEMORY_STORE_H_

#include <cstddef>
#include <memory>

#include "sluice/limiter.h"
#include "sluice/status.h"

namespace sluice {

struct MemoryStoreOptions {
  size_t max_bytes = size_t{256} << 20;  // accounted memory bound for this limiter's counters
  size_t shards = 64;                    // rounded up to a power of two
  size_t max_key_bytes = 4096;           // longer keys get kInvalidRequest
  uint64_t hash_seed = 0;                // 0: random per store
};

Result<std::unique_ptr<Limiter>> MakeMemoryLimiter(const LimitSpec& spec,
                                                   const MemoryStoreOptions& options = {});

}  // namespace sluice

#endif  // SLUICE_MEMORY_STORE_H_
