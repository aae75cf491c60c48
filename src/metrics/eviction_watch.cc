#include "metrics/eviction_watch.h"

namespace sluice::server {

std::optional<std::string> EvictionWatch::Observe(uint64_t evictions, Timestamp now) {
  if (evictions <= reported_) return std::nullopt;
  if (last_line_ && now - *last_line_ < interval_) return std::nullopt;
  const uint64_t n = evictions - reported_;
  reported_ = evictions;
  last_line_ = now;
  return "memory store: " + std::to_string(n) + " live counter" + (n == 1 ? "" : "s") +
         " evicted (least recently used) to stay within the memory bound: their keys start "
         "afresh and may be admitted beyond their limits; raise --memory-max-bytes "
         "(sluice_store_evictions_total{reason=\"lru\"})";
}

}  // namespace sluice::server
