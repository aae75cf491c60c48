#include "store/region/region_stats.h"

#include <algorithm>

namespace sluice::internal {
namespace {

constexpr StatFamily kShareUnits{
    "sluice_region_share_units", StatKind::kGauge,
    "The part of a scope: global limit this node's region enforces now (requests per unit), "
    "leased from the global store."};
constexpr StatFamily kGlobalLeases{
    "sluice_region_global_leases_total", StatKind::kCounter,
    "Grants of a region's part this node received from the global store."};
constexpr StatFamily kCutoffDecisions{
    "sluice_region_cutoff_decisions_total", StatKind::kCounter,
    "Decisions taken while this node's last exchange with the global store had failed (on its "
    "last grant, then its static share)."};
constexpr StatFamily kSyncAge{
    "sluice_region_global_sync_age_seconds", StatKind::kGauge,
    "Seconds since the global store last granted a part (the oldest over the leased limits)."};

}  // namespace

void ReportRegionLimit(const RegionLimitCounts& counts, StatsSink& sink,
                       std::span<const StatLabel> limit_labels) {
  sink.Add(kShareUnits, limit_labels,
           static_cast<double>(std::max<int64_t>(0, counts.share_units)));
  sink.Add(kGlobalLeases, limit_labels, static_cast<double>(counts.global_leases));
  sink.Add(kCutoffDecisions, limit_labels, static_cast<double>(counts.cutoff_decisions));
}

void ReportRegionSyncAge(double seconds, StatsSink& sink) { sink.Add(kSyncAge, {}, seconds); }

}  // namespace sluice::internal
