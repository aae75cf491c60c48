// The batched layer's /metrics families: where its decisions were taken
// (sluice_decisions_by_source_total), the hits it has not yet sent, and its over-admission,
// store-wide and per batched limit.
#include <mutex>

#include "store/batched/batched_limiter.h"
#include "store/batched/batched_store_impl.h"
#include "store/decision_sources.h"

namespace sluice::internal {
namespace {

constexpr StatFamily kPendingHits{
    "sluice_batched_pending_hits", StatKind::kGauge,
    "Hits batched limits took on this node and have not yet sent to Redis."};
constexpr StatFamily kOverAdmitted{
    "sluice_batched_over_admitted_hits_total", StatKind::kCounter,
    "Hits batched limits admitted on this node that its syncs found the shared quota had no "
    "room for (bucket algorithms): their over-admission."};
constexpr StatFamily kLimitOverAdmitted{
    "sluice_batched_limit_over_admitted_hits_total", StatKind::kCounter,
    "sluice_batched_over_admitted_hits_total for each batched limit of the running config."};

}  // namespace

void BatchedLimiter::ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const {
  ForwardingLimiter::ReportStats(sink, limit_labels);
  sink.Add(kLimitOverAdmitted, limit_labels, static_cast<double>(table_->over_admitted()));
}

// Every decision of this layer is either its views' (local) or passed on; of those passed on,
// the layers behind it take back what they answered themselves (the leased layer's units).
void BatchedStoreImpl::ReportStats(StatsSink& sink) const {
  ForwardingStore::ReportStats(sink);
  sink.Add(kDecisionsBySource, kSourceLocal,
           static_cast<double>(local_.load(std::memory_order_relaxed)));
  sink.Add(kDecisionsBySource, kSourceRedis,
           static_cast<double>(forwarded_.load(std::memory_order_relaxed)));
  uint64_t pending = 0;
  uint64_t over_admitted = retired_over_admitted_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(registry_mu_);
    for (const auto& t : tables_) {
      pending += t->pending_hits();
      over_admitted += t->over_admitted();
    }
  }
  sink.Add(kPendingHits, {}, static_cast<double>(pending));
  sink.Add(kOverAdmitted, {}, static_cast<double>(over_admitted));
}

}  // namespace sluice::internal
