// The check API's JSON (docs/server.md, "POST /v1/check"), both ways, for the client.
#ifndef SLUICE_CLIENT_CHECK_CODEC_H_
#define SLUICE_CLIENT_CHECK_CODEC_H_

#include <string>
#include <string_view>

#include "sluice/client/client.h"
#include "sluice/status.h"

namespace sluice::client {

std::string EncodeCheckRequest(const CheckRequest& request);

// The answer's body (200 or 429) as a CheckResponse from sluiced; an error when it is not one.
Result<CheckResponse> DecodeCheckAnswer(std::string_view body);

// The permit API (docs/load-protection.md). An acquire's answer is a check's (above) with
// "permit" (a string, or null: nothing held) and "permit_ttl_ms".
struct AcquiredPermit {
  std::string token;  // "" when null
  Duration ttl{0};
};
Result<AcquiredPermit> DecodeAcquirePermit(std::string_view body);
std::string EncodePermitBody(const std::string& token);
// A release's "released" or a renew's "renewed" (`field`), and a renew's "permit_ttl_ms".
struct PermitOutcome {
  bool done = false;
  Duration ttl{0};
};
Result<PermitOutcome> DecodePermitOutcome(std::string_view body, const char* field);

// The "error" of a 4xx body, or the body itself when it has none.
std::string DecodeErrorMessage(std::string_view body);

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_CHECK_CODEC_H_
