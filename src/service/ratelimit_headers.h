// The HTTP response fields a gateway forwards to its client, built from a CheckResponse:
//   RateLimit-Policy and RateLimit, Structured Fields lists per draft-ietf-httpapi-ratelimit-
//   headers-11 (one item per matched limit: policy items with q (quota) and w (window seconds),
//   service-limit items with r (remaining) and t (seconds until reset));
//   Retry-After (delay-seconds, rounded up) when the response is over the limit;
//   X-RateLimit-Limit/Remaining/Reset when legacy headers are switched on.
// Both front ends use it: HTTP as response headers, gRPC as response_headers_to_add.
#ifndef SLUICE_SERVICE_RATELIMIT_HEADERS_H_
#define SLUICE_SERVICE_RATELIMIT_HEADERS_H_

#include <string>
#include <utility>
#include <vector>

#include "service/check.h"

namespace sluice::server {

struct HeaderOptions {
  bool legacy = false;  // also X-RateLimit-Limit / -Remaining / -Reset
};

std::vector<std::pair<std::string, std::string>> RateLimitHeaders(const CheckResponse& response,
                                                                  const HeaderOptions& options);

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_RATELIMIT_HEADERS_H_
