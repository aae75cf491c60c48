// The HTTP response fields a gateway forwards to its client, built from a CheckResponse:
//   RateLimit-Policy and RateLimit, Structured Fields lists per draft-ietf-httpapi-ratelimit-
//   headers-11 (one item per matched limit: policy items with q (quota) and w (window seconds),
//   service-limit items with r (remaining) and t (seconds until reset));
//   Retry-After (delay-seconds, rounded up) when the response is over the limit;
//   X-RateLimit-Limit/Remaining/Reset when legacy headers are switched on;
//   Sluice-Soft-Over-Limit: ?1 when a soft limit was over and the carrier sends it.
// Decided here only: both front ends copy them, HTTP as response headers, gRPC as
// response_headers_to_add.
#ifndef SLUICE_SERVICE_RATELIMIT_HEADERS_H_
#define SLUICE_SERVICE_RATELIMIT_HEADERS_H_

#include <string>
#include <utility>
#include <vector>

#include "service/check.h"

namespace sluice::server {

// The header that marks a response allowed only because its limit is soft: an RFC 8941
// Boolean, present (as ?1) only when some descriptor was over its soft limit.
inline constexpr char kSoftOverLimitHeader[] = "Sluice-Soft-Over-Limit";

struct HeaderOptions {
  bool legacy = false;  // also X-RateLimit-Limit / -Remaining / -Reset
  // Also kSoftOverLimitHeader. The HTTP API sends it (docs/server.md); Envoy's answer has never
  // carried it (docs/envoy.md), so the gRPC front end leaves it off.
  bool soft_over_limit = false;
};

std::vector<std::pair<std::string, std::string>> RateLimitHeaders(const CheckResponse& response,
                                                                  const HeaderOptions& options);

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_RATELIMIT_HEADERS_H_
