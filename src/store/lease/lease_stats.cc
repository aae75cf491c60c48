#include "store/lease/lease_stats.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "store/decision_sources.h"

namespace sluice::internal {
namespace {

constexpr StatFamily kLeaseEvents{
    "sluice_lease_events_total", StatKind::kCounter,
    "Leases of sync: leased limits: taken (units granted by Redis), expired (its time ran out "
    "with units unspent), returned (unspent units given back: at expiry, reset, reload or "
    "shutdown)."};
constexpr StatFamily kUnitsHeld{
    "sluice_lease_units_held", StatKind::kGauge,
    "Units of a leased limit's quota this node holds, taken from Redis and not yet spent."};

}  // namespace

void ReportLeaseCounters(const LeaseCounters& counters, StatsSink& sink,
                         std::span<const StatLabel> limit_labels) {
  std::vector<StatLabel> labels(limit_labels.begin(), limit_labels.end());
  labels.push_back({"event", ""});
  const std::pair<std::string_view, const std::atomic<uint64_t>*> events[] = {
      {"taken", &counters.taken}, {"returned", &counters.returned}, {"expired", &counters.expired}};
  for (const auto& [event, n] : events) {
    labels.back().value = event;
    sink.Add(kLeaseEvents, labels, static_cast<double>(n->load(std::memory_order_relaxed)));
  }
  const int64_t held = counters.held.load(std::memory_order_relaxed);
  sink.Add(kUnitsHeld, limit_labels, static_cast<double>(std::max<int64_t>(0, held)));
}

void ReportLeasedDecisions(uint64_t local, StatsSink& sink) {
  sink.Add(kDecisionsBySource, kSourceLocal, static_cast<double>(local));
  sink.Add(kDecisionsBySource, kSourceRedis, -static_cast<double>(local));
}

}  // namespace sluice::internal
