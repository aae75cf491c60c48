// Decides when to log the store's evictions of live counters (StoreStats::evictions, /metrics'
// sluice_store_evictions_total{reason="lru"}): each one can admit a request its limit would have
// refused, so they are worth a log line, but a store under pressure evicts thousands a second.
// The first eviction is reported at once; later ones at most once an interval, as one line with
// how many there were since the last. Not thread-safe: one caller polls it (sluiced's timer).
#ifndef SLUICE_METRICS_EVICTION_WATCH_H_
#define SLUICE_METRICS_EVICTION_WATCH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "sluice/time.h"

namespace sluice::server {

class EvictionWatch {
 public:
  // `evictions_at_start`: the store's count when watching begins (not reported).
  EvictionWatch(Duration interval, uint64_t evictions_at_start)
      : interval_(interval), reported_(evictions_at_start) {}

  // The line to log for the store's eviction count `evictions` at `now`, if one is due.
  std::optional<std::string> Observe(uint64_t evictions, Timestamp now);

 private:
  const Duration interval_;
  uint64_t reported_;                   // evictions already reported
  std::optional<Timestamp> last_line_;  // when the last line was due
};

}  // namespace sluice::server

#endif  // SLUICE_METRICS_EVICTION_WATCH_H_
