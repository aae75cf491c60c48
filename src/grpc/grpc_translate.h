// Between Envoy's rate limit messages and sluiced's CheckRequest/CheckResponse. Pure functions,
// separate from the server so that the rules can be read (and tested) in one place. Internal to
// the gRPC front end: it includes generated protobuf headers, so only grpc_*.cc and tests use it.
#ifndef SLUICE_GRPC_GRPC_TRANSLATE_H_
#define SLUICE_GRPC_GRPC_TRANSLATE_H_

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "service/check.h"
#include "service/ratelimit_headers.h"
#include "sluice/status.h"

namespace sluice::server {

// Envoy's request as a CheckRequest from Caller::kEnvoy. Only what does not translate is
// refused here: an override unit Envoy's enum does not define. The rules Envoy's API states as
// validation annotations (a non-empty domain, at least one descriptor, an entry per descriptor,
// non-empty keys), the bounds (long values counted by digest, descriptors past the bounds
// answered unchecked) and what an unknown domain means are the service's
// (service/check_rules.h). Hits follow Envoy: a request hits_addend of 0 (proto3's "unset")
// means 1, any other uint32 is itself; a descriptor's own hits_addend, when present, replaces it
// for that descriptor (an explicit 0 stays 0; beyond int64 it is read as the largest int64,
// over every limit). An error is the caller's fault: INVALID_ARGUMENT.
Result<CheckRequest> FromEnvoyRequest(const envoy::service::ratelimit::v3::RateLimitRequest& in);

// The decision as Envoy's response: overall_code, one DescriptorStatus per descriptor in order,
// and the RateLimit headers (RateLimitHeaders()) in response_headers_to_add. As in
// envoyproxy/ratelimit, a descriptor no rule matched has no current_limit and 0 remaining, and
// an unlimited one no current_limit and the largest remaining (UINT32_MAX); one dropped by
// another limit's `replaces` is reported like a descriptor no rule matched.
void ToEnvoyResponse(const CheckResponse& in, const HeaderOptions& headers,
                     envoy::service::ratelimit::v3::RateLimitResponse* out);

}  // namespace sluice::server

#endif  // SLUICE_GRPC_GRPC_TRANSLATE_H_
