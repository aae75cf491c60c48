// The forward-auth endpoint (sluiced --forward-auth): every request to it, whatever its method
// and path, asks "may the request this describes pass?" for a proxy (nginx auth_request, Caddy
// forward_auth, Traefik ForwardAuth, Envoy ext_authz HTTP). A function from request to reply,
// like the HTTP API, carried by the same HttpServer. docs/gateways.md has the recipes.
//
//   ForwardAuthApi fa(service, &metrics, {.headers = {.legacy = true}});
//   HttpReply r = fa.Handle(view);   // 200, 429, or 400
//
// - The domain: the one whose file declares `forward_auth`; with several, the request's
//   Sluice-Domain header names it (400 when it is missing or names another).
// - Its actions make the descriptors (http/forwarded_request.h), checked with one hit.
// - 200: allowed, with the RateLimit fields (service/ratelimit_headers.h), an empty body.
//   A request that makes no descriptor is 200 with no fields, counted as no_descriptor.
// - 429: over a limit: Retry-After, the same fields, and a one-line text body saying which
//   limit and when to come back.
// - 400: what cannot be checked, with a one-line text body. A proxy treats it as an error
//   (nginx: 500 to the client), which is meant: it is a configuration mistake. Also a request
//   whose path an action reads but that has no canonical form (a bad '%' escape, a NUL).
// - A host that is no valid name or address makes no host entry; where an action reads the
//   host it is counted in sluice_forward_auth_invalid_host_total.
//
// - With --api-tokens (callers): the *proxy* is the caller, named by a Sluice-Token header (never
//   by Authorization, which is the end user's and which proxies forward) or a verified client
//   certificate listed by SAN; 401 without one or with one no client has, 403 when its client
//   may not check the domain, before anything is counted.
//
// Thread-safe: Handle() may run on every server thread at once.
#ifndef SLUICE_HTTP_FORWARD_AUTH_API_H_
#define SLUICE_HTTP_FORWARD_AUTH_API_H_

#include "http/async_check.h"
#include "http/http_message.h"
#include "metrics/metrics.h"
#include "service/caller_auth.h"
#include "service/rate_limit_service.h"
#include "service/ratelimit_headers.h"

namespace sluice::server {

// The header that names the domain when several declare forward_auth.
inline constexpr char kSluiceDomainHeader[] = "Sluice-Domain";
// The header that carries the proxy's own token (--api-tokens).
inline constexpr char kSluiceTokenHeader[] = "Sluice-Token";

struct ForwardAuthOptions {
  HeaderOptions headers;  // draft11 (legacy with --legacy-headers); soft_over_limit is set
  // --api-tokens: which proxy may check which domain; nullptr: any (as without it). Must
  // outlive the ForwardAuthApi.
  const CallerIdentity* callers = nullptr;
};

class ForwardAuthApi final : private CheckReplier {
 public:
  // `service` and `metrics` must outlive the ForwardAuthApi.
  ForwardAuthApi(RateLimitService* service, Metrics* metrics, ForwardAuthOptions options);

  HttpReply Handle(const HttpRequestView& request) const;

 private:
  HttpReply Reply(const Result<CheckResponse>& response,
                  std::chrono::steady_clock::time_point asked) const override;  // CheckReplier
  HttpReply BadRequest(std::string message) const;
  HttpReply Refuse(AuthFailure failure) const;  // counted

  RateLimitService* service_;
  Metrics* metrics_;
  ForwardAuthOptions options_;
};

}  // namespace sluice::server

#endif  // SLUICE_HTTP_FORWARD_AUTH_API_H_
