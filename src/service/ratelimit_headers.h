// The HTTP response fields a gateway forwards to its client, built from a CheckResponse, in one
// of three sets (HeaderSet):
// - kDraft11 (the default, and always the HTTP API's):
//   RateLimit-Policy and RateLimit, Structured Fields lists per draft-ietf-httpapi-ratelimit-
//   headers-11 (one item per matched limit: policy items with q (quota) and w (window seconds),
//   service-limit items with r (remaining) and t (seconds until reset));
//   Retry-After (delay-seconds, rounded up) when the response is over the limit;
//   X-RateLimit-Limit/Remaining/Reset when legacy headers are switched on;
//   Sluice-Soft-Over-Limit: ?1 when a soft limit was over and the carrier sends it.
// - kUpstream: exactly envoyproxy/ratelimit's optional set (LIMIT_RESPONSE_HEADERS_ENABLED):
//   RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset of one status, chosen as it chooses
//   (UpstreamHeaders below), or nothing when no status has a limit. Nothing else, legacy or not.
// - kOff: nothing (envoyproxy/ratelimit's default).
// Decided here only: both front ends copy them, HTTP as response headers, gRPC as
// response_headers_to_add.
#ifndef SLUICE_SERVICE_RATELIMIT_HEADERS_H_
#define SLUICE_SERVICE_RATELIMIT_HEADERS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "service/check.h"

namespace sluice::server {

// The header that marks a response allowed only because its limit is soft: an RFC 8941
// Boolean, present (as ?1) only when some descriptor was over its soft limit.
inline constexpr char kSoftOverLimitHeader[] = "Sluice-Soft-Over-Limit";

enum class HeaderSet { kDraft11, kUpstream, kOff };

// "draft11", "upstream", "off" (--grpc-response-headers); nullopt for anything else.
std::optional<HeaderSet> ParseHeaderSet(std::string_view name);
std::string_view HeaderSetName(HeaderSet set);

struct HeaderOptions {
  HeaderSet set = HeaderSet::kDraft11;
  bool legacy = false;  // kDraft11: also X-RateLimit-Limit / -Remaining / -Reset
  // Also kSoftOverLimitHeader. The HTTP API sends it (docs/server.md); Envoy's answer has never
  // carried it (docs/envoy.md), so the gRPC front end leaves it off.
  bool soft_over_limit = false;
};

std::vector<std::pair<std::string, std::string>> RateLimitHeaders(const CheckResponse& response,
                                                                  const HeaderOptions& options);

// kUpstream's choice, as envoyproxy/ratelimit makes it from the statuses Envoy is sent: among the
// statuses with a current_limit (a counted or blocking limit, not unlimited, not replaced), the
// first with the least limit_remaining (the wire's uint32, so the largest count never counts as
// least); then the last status that is OVER_LIMIT, if one is. Its RateLimit-Limit is the
// limit's requests_per_unit, RateLimit-Remaining its limit_remaining, RateLimit-Reset its
// duration_until_reset in whole seconds, rounded up (upstream sends the same duration in both:
// the end of the limit's window; sluice's is when the limit is fully replenished). Null when no
// status has a current_limit.
const DescriptorStatus* UpstreamHeaderStatus(const CheckResponse& response);

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_RATELIMIT_HEADERS_H_
