// The HTTP answer to a caller --api-tokens does not let in (service/caller_auth.h): 401 with
// "WWW-Authenticate: Bearer" when it has no credential or one no client has, 403 when its client
// may not check the domain. The body says which, never what was presented.
#ifndef SLUICE_HTTP_CALLER_REFUSAL_H_
#define SLUICE_HTTP_CALLER_REFUSAL_H_

#include <string_view>

#include "http/http_message.h"
#include "metrics/metrics.h"

namespace sluice::server {

enum class RefusalBody {
  kJson,  // {"error":"..."}: the HTTP API
  kText,  // one line of text: the forward-auth endpoint
};

// `credential` names what the caller should send ("an Authorization: Bearer token",
// "a Sluice-Token header"), for the 401's message.
HttpReply CallerRefusal(AuthFailure failure, std::string_view credential, RefusalBody body);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_CALLER_REFUSAL_H_
