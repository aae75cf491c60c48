// The leased layer's /metrics families: per leased limit its leases and the units it holds;
// store-wide the decisions its units answered (sluice_decisions_by_source_total). Internal to
// the leased store.
#ifndef SLUICE_STORE_LEASE_LEASE_STATS_H_
#define SLUICE_STORE_LEASE_LEASE_STATS_H_

#include <cstdint>
#include <span>

#include "sluice/stats_sink.h"
#include "store/lease/lease_book.h"

namespace sluice::internal {

// sluice_lease_events_total{event=taken|returned|expired} and sluice_lease_units_held.
void ReportLeaseCounters(const LeaseCounters& counters, StatsSink& sink,
                         std::span<const StatLabel> limit_labels);

// `local` decisions answered from units held: local, and taken back from what the layer above
// (batched) counted as passed on to Redis.
void ReportLeasedDecisions(uint64_t local, StatsSink& sink);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_LEASE_LEASE_STATS_H_
