// The region layer's /metrics families (docs/regions.md): per leased limit the part its region
// enforces now, the grants it received and the decisions taken while cut off from the global
// store; store-wide the age of the oldest grant. Internal to the region store.
#ifndef SLUICE_STORE_REGION_REGION_STATS_H_
#define SLUICE_STORE_REGION_REGION_STATS_H_

#include <cstdint>
#include <span>

#include "sluice/stats_sink.h"

namespace sluice::internal {

struct RegionLimitCounts {
  int64_t share_units = 0;  // the part in force (a negative one is shown as 0)
  uint64_t global_leases = 0;
  uint64_t cutoff_decisions = 0;
};

void ReportRegionLimit(const RegionLimitCounts& counts, StatsSink& sink,
                       std::span<const StatLabel> limit_labels);

// The seconds since the global store last granted a part, the largest over the leased limits.
void ReportRegionSyncAge(double seconds, StatsSink& sink);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REGION_REGION_STATS_H_
