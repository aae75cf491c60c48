// QuotaSync: how the nodes sharing a limit's counters (sluiced processes on one Redis) keep them
// in step -- a limit's `sync:` in the config, LimiterOptions::sync for a store.
#ifndef SLUICE_QUOTA_SYNC_H_
#define SLUICE_QUOTA_SYNC_H_

#include <chrono>
#include <cstdint>

#include "sluice/time.h"

namespace sluice {

struct LimitSpec;

// How the nodes sharing a limit's counters (sluiced processes on one Redis) keep them in step.
// docs/redis.md, "Three ways to share a limit", says what each guarantees and costs.
enum class SyncMode : uint8_t {
  kExact,    // every decision one atomic script in the shared store
  kLeased,   // a node spends units it took from the shared quota beforehand; never over-admits
  kBatched,  // a node decides from the last shared count it saw and sends its hits every
             // `interval`; may over-admit, by at most nodes x rate x interval
};

struct QuotaSync {
  SyncMode mode = SyncMode::kExact;
  Duration lease_ttl = std::chrono::seconds(2);        // kLeased: unspent units go back after it
  Duration interval = std::chrono::milliseconds(100);  // kBatched: how often hits are sent
  bool operator==(const QuotaSync&) const = default;
};

// Whether a limit can be leased or batched: its admissions must be units taken from one count
// (token bucket, GCRA, fixed window, leaky-bucket meter). A sliding window can neither lend hits
// ahead of time nor have its state read back from Redis's answers, and a shaper's delay depends
// on every node's queue; leases and batches are sized by a fixed-length period, which a
// calendar window is not. The one place this rule is decided; each caller words its own error.
bool SharedSyncCanServe(const LimitSpec& spec);

}  // namespace sluice

#endif  // SLUICE_QUOTA_SYNC_H_
