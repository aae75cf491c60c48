// ReportStoreStats (sluice/store.h): the families every store has, from its Stats(). The HELP
// texts are /metrics' (the Grafana dashboard and the docs name these series).
#include "sluice/store.h"

namespace sluice {
namespace {

constexpr StatFamily kKeys{"sluice_store_keys", StatKind::kGauge, "Counters held by the store."};
constexpr StatFamily kEvictions{
    "sluice_store_evictions_total", StatKind::kCounter,
    "Counters the store evicted to stay within its memory bound, by reason: replenished "
    "(changed no decision) or lru (a live counter, the least recently used of a sample)."};
constexpr StatFamily kBytes{"sluice_store_bytes", StatKind::kGauge,
                            "Accounted memory the store holds in this process: the memory store's "
                            "counters, or the over-limit cache in front of Redis."};
constexpr StatFamily kMaxBytes{"sluice_store_max_bytes", StatKind::kGauge,
                               "Accounted memory the store may hold in this process."};

}  // namespace

void ReportStoreStats(const StoreStats& stats, StatsSink& sink) {
  sink.Add(kKeys, {}, static_cast<double>(stats.keys));
  // Both reasons always, so that a query on either finds a series before the first eviction.
  const StatLabel replenished[] = {{"reason", "replenished"}};
  const StatLabel lru[] = {{"reason", "lru"}};
  sink.Add(kEvictions, replenished, static_cast<double>(stats.evicted_replenished));
  sink.Add(kEvictions, lru, static_cast<double>(stats.evictions));
  // Only a store with a memory bound (the memory store, or Redis's over-limit cache) accounts
  // its bytes.
  if (stats.max_bytes > 0) {
    sink.Add(kBytes, {}, static_cast<double>(stats.bytes));
    sink.Add(kMaxBytes, {}, static_cast<double>(stats.max_bytes));
  }
}

}  // namespace sluice
