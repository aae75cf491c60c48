// sluice_decisions_by_source_total, which several layers report into (sluice/stats_sink.h adds
// up samples of the same series): the over-limit cache its refusals answered from memory, the
// batched layer what its views decided and what it passed on, the leased layer what its units
// decided (counted by the batched layer above it as passed on, so taken back from "redis").
// Internal to the store layers.
#ifndef SLUICE_STORE_DECISION_SOURCES_H_
#define SLUICE_STORE_DECISION_SOURCES_H_

#include <array>

#include "sluice/stats_sink.h"

namespace sluice::internal {

inline constexpr StatFamily kDecisionsBySource{
    "sluice_decisions_by_source_total", StatKind::kCounter,
    "Limit decisions by where they were taken: the over-limit cache (refusals answered from "
    "memory), this node's leases and batched views (local), or Redis."};

inline constexpr std::array<StatLabel, 1> kSourceCache = {{{"source", "cache"}}};
inline constexpr std::array<StatLabel, 1> kSourceLocal = {{{"source", "local"}}};
inline constexpr std::array<StatLabel, 1> kSourceRedis = {{{"source", "redis"}}};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_DECISION_SOURCES_H_
