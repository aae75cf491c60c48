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
#include <string>
#include <string_view>

#include "sluice/limiter.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice {

struct MemoryStoreOptions {
  // The accounted memory bound: for MakeMemoryLimiter, this limiter's counters; for
  // OpenMemoryStore, everything its limiters hold (see OpenMemoryStore).
  size_t max_bytes = size_t{256} << 20;
  size_t shards = 64;           // per limiter; rounded up to a power of two
  size_t max_key_bytes = 4096;  // longer keys get kInvalidRequest
  uint64_t hash_seed = 0;       // 0: random per limiter
};

// A limiter of the memory store: a Limiter that can also be swept.
class MemoryLimiter : public Limiter {
 public:
  // Drops every counter that is fully replenished at `now`; returns how many. Never needed for
  // correctness or the memory bound (new keys drop replenished ones near them); it gives memory
  // back sooner.
  virtual size_t Sweep(Timestamp now) = 0;

 protected:
  using Limiter::Limiter;
};

// One limiter with a memory store of its own (the CLI's replay, benchmarks, embedding).
Result<std::unique_ptr<MemoryLimiter>> MakeMemoryLimiter(const LimitSpec& spec,
                                                         const MemoryStoreOptions& options = {});

// A memory store for many limits, whose limiters together never hold more than max_bytes:
// counters, tables, long keys and logs, and each limiter's fixed parts (its shards).
//  - A quarter of max_bytes is kept for transient limiters (LimiterOptions::transient: Envoy's
//    per-request overrides). Their counters live in one table keyed by (rate, key) within that
//    quarter, evicting there as a limiter's table does (a replenished counter first, else the
//    least recently used of a sample): a rate's counters are kept while there is room, whatever
//    other rates come and go. A transient limiter is a view of its rate into that table, so
//    destroying it forgets no counter; its Stats() are the whole table's. Up to
//    kTransientLimiters views (fewer for a small bound: MaxTransientLimiters()) are alive at
//    once, each taking a fixed part of the quarter; one beyond them is refused until one goes.
//  - The rest is shared by the other limiters: each gets 1/limits_sharing_memory of it. A limiter
//    whose part is too small for its shards gets fewer shards; one too small for a single shard
//    is refused with an error that names the bound.
//  - A concurrency limit (MakePermitPool) takes a limiter's part, and holds its permits in it:
//    a key exists only while it holds live permits, so there is nothing to evict, and an acquire
//    that would exceed the part is refused (PermitAnswer::full) rather than drop a live permit.
//    A pool made under the LimiterOptions::id of a pool alive takes that pool's permits (the
//    old one hands its calls on to it), which then count against the new spec.
// Every limiter holds its part as the bound of its own table (evicting there, as in
// MakeMemoryLimiter), so no limiter can take another's memory. While a reload replaces a
// limit, the old limiter and the new one both hold a part until the old one is destroyed.
// DecideAll is sluice::DecideAll (decide_all.h): a rejected request's admissions are refunded
// at once. DecideAllAsync answers on the caller's thread before it returns. Always ready.
inline constexpr size_t kTransientLimiters = 1024;
Result<std::shared_ptr<Store>> OpenMemoryStore(const MemoryStoreOptions& options = {});

// Counters that survive a restart (docs/quotas.md): a memory store's live counters as the bytes
// of a snapshot file, and such bytes given to a new store. sluiced's --state-dir writes and
// reads the file; a snapshot holds each configured limit's counters under its
// LimiterOptions::id with the spec they were counted under, the overrides' counters, and each
// concurrency limit's live permits under its pool's id (held again, whatever the limit's
// numbers now, until their saved expiry).
//
// Times: a store's instants are its clock's; `to_wall` is what turns one into the wall-clock
// instant, system_clock::now() - clock.Now() (zero for a clock that is the wall clock). Save
// adds the saving process's, Load subtracts the loading process's.
struct SnapshotSaved {
  uint64_t counters = 0;  // live counters written (overrides included)
  uint64_t limits = 0;    // limiters they belong to (the overrides' table counted as one)
  uint64_t permits = 0;   // live concurrency permits written (MakePermitPool's pools)
};
struct SnapshotLoaded {
  // Empty when the whole file was read; else why it stopped (corrupt, truncated, a format
  // version this build does not read): what came before that point was still taken.
  std::string error;
  uint64_t counters = 0;  // live counters read, waiting for their limits
  uint64_t expired = 0;   // read but replenished by now: left out
};
struct SnapshotRestored {
  uint64_t restored = 0;      // counters now in their limiters again
  uint64_t expired = 0;       // replenished before their limiter was made
  uint64_t rule_changed = 0;  // their limit's spec changed meaning (docs/quotas.md): dropped
  uint64_t unmatched = 0;     // no limiter with their id was made: dropped
  // Concurrency permits held again by the pool of their id (MakePermitPool), each until its
  // saved expiry; and those dropped: expired by then, no room in the pool's bytes, or no pool
  // of their id was made.
  uint64_t permits = 0;
  uint64_t permits_dropped = 0;
};
class MemorySnapshots {
 public:
  virtual ~MemorySnapshots() = default;
  // Every counter live at `now`, as a snapshot file. Each shard's lock is held only while its
  // counters are copied out, one shard at a time; decisions on other shards go on meanwhile.
  virtual std::string Save(Timestamp now, Duration to_wall, SnapshotSaved* saved = nullptr) = 0;
  // Reads a snapshot into this store, before its limiters are made: the overrides' counters at
  // once, the configured limits' as MakeLimiter makes a limiter of their id, the permits' as
  // MakePermitPool makes a pool of theirs.
  virtual SnapshotLoaded Load(std::string_view bytes, Timestamp now, Duration to_wall) = 0;
  // Ends the restore: the counters no limiter took are dropped. Returns what became of them.
  virtual SnapshotRestored FinishRestore() = 0;
};
// The snapshots of a memory store OpenMemoryStore made; null for any other store.
MemorySnapshots* SnapshotsOf(Store& store);

}  // namespace sluice

#endif  // SLUICE_MEMORY_STORE_H_
