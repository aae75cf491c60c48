// The JSON of the permit routes (POST /v1/acquire, /v1/release, /v1/renew; docs/server.md). An
// acquire's body is a check's (check_json.h); its answer is a check's with the permit added:
//
//   {"overall":"OK","permit":"AQ...","permit_ttl_ms":30000,"delay_ms":0,"statuses":[...]}
//
// A release or renew body is {"permit":"<text>"}, strictly; the answers are
// {"released":true,"degraded":false,"store_time_us":...} and
// {"renewed":true,"permit_ttl_ms":30000,"degraded":false,"store_time_us":...}. An acquire's status
// of a descriptor with a concurrency limit adds "in_flight", "store_time_us" and
// "permit_expires_us" (the store's clock: the invariant's, docs/load-protection.md), and when
// refused "permit_retry_after_ms".
#ifndef SLUICE_HTTP_PERMIT_JSON_H_
#define SLUICE_HTTP_PERMIT_JSON_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "service/rate_limit_service.h"
#include "sluice/status.h"

namespace sluice::server {

// The largest release or renew body accepted: the longest permit with room for whitespace.
size_t MaxPermitBodyBytes();

// The permit of a release or renew body. Its form is the service's to judge (DecodePermit).
Result<std::string> ParsePermitBody(std::string_view body);

// "permit":null and "permit_ttl_ms":null when no descriptor has a concurrency limit (or the
// answer is a refusal): nothing to release.
std::string RenderAcquireResponse(const AcquireResponse& response);

std::string RenderPermitResult(const PermitResult& result, bool renew);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_PERMIT_JSON_H_
