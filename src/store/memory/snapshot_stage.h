// A loaded snapshot waiting for its limiters: a memory store reads the file before the service
// makes its limiters, and each limiter made with a saved id takes its counters from here.
// Internal to the memory store. Thread-safe.
#ifndef SLUICE_STORE_MEMORY_SNAPSHOT_STAGE_H_
#define SLUICE_STORE_MEMORY_SNAPSHOT_STAGE_H_

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/memory_store.h"
#include "store/memory/limiter_snapshot.h"
#include "store/memory/override_table.h"
#include "store/memory/permit_table.h"

namespace sluice::internal {

class SnapshotStage {
 public:
  // Reads `bytes` (kept until Finish): the overrides' counters go into `overrides` (if any)
  // at once, the limits' sections wait for Restore.
  SnapshotLoaded Load(std::string bytes, Timestamp now, int64_t to_wall_ns,
                      OverrideTable* overrides);
  // Gives `limiter` the counters saved under its id, when its spec keeps their meaning.
  void Restore(SnapshotLimiter& limiter);
  // Gives a new pool's `table` the permits saved under its pool id, whatever its spec.
  void RestorePermits(std::string_view id, PermitTable& table);
  // Drops what no limiter took; what became of every counter loaded.
  SnapshotRestored Finish();

 private:
  std::mutex mu_;
  std::string bytes_;
  std::multimap<std::string, LimitSection, std::less<>> sections_;
  std::multimap<std::string, PermitSection, std::less<>> permits_;
  Timestamp now_{};
  int64_t to_wall_ns_ = 0;
  SnapshotRestored counts_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_SNAPSHOT_STAGE_H_
