// The batched store: a store in front of another (a Redis store) that decides the limits made
// with `sync: {mode: batched}` (LimiterOptions::sync) on this node, from a local view of each
// key, and sends the hits it admitted to the inner store in batches, Kong's batch-redis way.
//
//   auto redis = OpenRedisStore(*ParseRedisAddress("redis://127.0.0.1:6379"));
//   auto store = OpenBatchedStore(*redis, {.max_bytes = 16 << 20});
//   LimiterOptions o{.id = "api"};
//   o.sync = {.mode = SyncMode::kBatched, .interval = std::chrono::milliseconds(100)};
//   auto limiter = (*store)->MakeLimiter(spec, o);   // decides locally between syncs
//
// Per (limiter, key) a view: the shared state as of the last sync, plus the hits this node took
// since, decided with the pure algorithm (src/core). A key without a view is decided by the inner
// store, exactly, and its answer seeds the view. Every `interval` the node sends each key's
// unsent hits as charges (taken even beyond the limit, into debt, never dropped while the inner
// store can be reached) through the inner store's DecideAll, and reseeds the view from the
// answers; a view not used during an interval is dropped. Limiters of any other sync mode pass
// through to the inner store unchanged. Batched serves the token bucket, GCRA, the leaky-bucket
// meter and the fixed window (their state can be read back from a decision); the sliding windows
// and the shaper are refused. docs/redis.md ("Batched") states the over-admission bound with
// several nodes and what a dead inner store does. Thread-safe.
#ifndef SLUICE_BATCHED_STORE_H_
#define SLUICE_BATCHED_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "sluice/clock.h"
#include "sluice/limit_spec.h"
#include "sluice/scheduler.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice {

struct BatchedStoreOptions {
  // The accounted memory every view may take together (entries, their keys). When it is
  // reached, a key without a view is decided by the inner store and gets none (0: no views;
  // batched limits are then exact). Views unused for an interval are dropped at the next sync.
  size_t max_bytes = size_t{16} << 20;
  // The clock views and syncs read; null: the scheduler's, or (no scheduler either) a
  // MonotonicClock of the store's own.
  std::shared_ptr<const Clock> clock = nullptr;
  // Where the syncs run: the limiters of one interval together, every interval; null: a
  // ThreadScheduler of the store's own on its clock. Tests pass a ManualScheduler and advance it
  // (or call FlushDue or Flush themselves).
  std::shared_ptr<Scheduler> scheduler = nullptr;
};

// What one flush did.
struct BatchedFlush {
  uint64_t keys_sent = 0;      // keys whose hits (or a refresh) were sent
  uint64_t hits_sent = 0;      // hits the inner store took
  uint64_t hits_kept = 0;      // hits it could not take (store unavailable): sent next time
  uint64_t views_dropped = 0;  // views unused since the flush before
};

class BatchedStore : public Store {
 public:
  // Syncs every batched limiter whose interval has passed since its last sync, at `now`.
  virtual BatchedFlush FlushDue(Timestamp now) = 0;
  // Syncs every batched limiter now, due or not (tests drive time with this), and waits for the
  // last sends of batched limiters that went: a limiter sends its unsent hits when it is
  // destroyed, without waiting for the answer (it may go on the inner store's I/O thread); the
  // store's destructor waits for those answers.
  virtual BatchedFlush Flush(Timestamp now) = 0;
};

// Whether `spec` can be decided in batched mode; the error names what cannot.
Result<void> CheckBatchable(const LimitSpec& spec);

Result<std::shared_ptr<BatchedStore>> OpenBatchedStore(std::shared_ptr<Store> inner,
                                                       const BatchedStoreOptions& options = {});

}  // namespace sluice

#endif  // SLUICE_BATCHED_STORE_H_
