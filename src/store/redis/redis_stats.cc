// The Redis store's own /metrics families: whether its servers may evict sluice's counters.
#include "store/redis/redis_store_impl.h"

namespace sluice::internal {
namespace {

constexpr StatFamily kEvictionUnsafe{
    "sluice_store_redis_eviction_unsafe", StatKind::kGauge,
    "1 when a Redis server's maxmemory-policy can evict sluice's counters (maxmemory set, "
    "policy not noeviction): limits may over-admit."};
constexpr StatFamily kEvictedKeys{
    "sluice_store_redis_evicted_keys_total", StatKind::kCounter,
    "Keys Redis evicted (INFO evicted_keys growth; every key of the server)."};

}  // namespace

// Shown only when the store watches eviction: otherwise it knows nothing of it.
void RedisStoreImpl::ReportStats(StatsSink& sink) const {
  const EvictionState e = transport_->Eviction();
  if (!e.watched) return;
  sink.Add(kEvictionUnsafe, {}, e.unsafe ? 1 : 0);
  sink.Add(kEvictedKeys, {}, static_cast<double>(e.evicted));
}

}  // namespace sluice::internal
