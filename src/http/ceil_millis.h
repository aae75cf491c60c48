// Waits as the HTTP API shows them: reset_after_ms, retry_after_ms, Retry-After.
#ifndef SLUICE_HTTP_CEIL_MILLIS_H_
#define SLUICE_HTTP_CEIL_MILLIS_H_

#include <cstdint>

#include "sluice/time.h"

namespace sluice::server {

// Whole milliseconds, rounded up (a client that waits this long is not early); negative is 0.
inline int64_t CeilMillis(Duration d) {
  const int64_t ns = d.count();
  if (ns <= 0) return 0;
  return ns / 1'000'000 + (ns % 1'000'000 != 0 ? 1 : 0);
}

}  // namespace sluice::server

#endif  // SLUICE_HTTP_CEIL_MILLIS_H_
