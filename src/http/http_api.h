// sluiced's HTTP API as a function from request to reply, free of networking so that every
// route, status and header can be unit-tested; http_server.h carries it over HTTP/1.1.
//
//   HttpApi api(service, &metrics, {.admin_token = "s3cret"});
//   HttpReply r = api.Handle({"POST", "/v1/check", "", body});   // 200, 400, 413 or 429
//
// Routes (docs/server.md has examples):
//   POST   /v1/check            the check; 200 allowed, 429 over an enforced limit, 400 bad
//   POST   /v1/acquire          a check that also takes concurrency slots: 200 with a permit,
//                               429, 400 (permit_api.cc; docs/load-protection.md)
//   POST   /v1/release          {"permit":"..."}: 200 {"released":bool}, 400 malformed
//   POST   /v1/renew            {"permit":"..."}: 200 {"renewed":bool,...}, 400 malformed
//   GET    /healthz             200 while the process runs
//   GET    /readyz              200 when the service is ready (config loaded, store answers)
//   GET    /metrics             Prometheus text format 0.0.4
//   admin, with "Authorization: Bearer <admin_token>" (401 otherwise; 404 when no token is set
//   and --api-tokens is off); with --api-tokens, a client's own credential reads the GET
//   routes for the domains it may check (403 for others; /v1/limits lists only those), and
//   POST and DELETE stay the admin token's and `admin: true` clients':
//   GET    /v1/limits           the loaded config
//   GET    /v1/state?domain=D&k1=v1&k2=v2   one counter, found as a check with entries k1=v1,k2=v2
//   POST   /v1/state?...        {"credit": N}, {"debit": N} or {"remaining": N}: change it,
//                               answering it before and after (admin_writes.cc)
//   DELETE /v1/state?...        forget that counter
//   GET    /v1/top?domain=D&n=20           the identities most often rejected or near a limit
//   GET    /v1/usage?domain=D&limit=NAME   a limit's per-client usage over the usage period
// Unknown paths are 404, known paths with another method 405 (with Allow).
//
// A check asks the service with CheckAsync. An answer that comes before CheckAsync returns (the
// memory store) is Handle's reply; a later one (Redis, from the store's I/O thread) is sent
// through the request's HttpDeferral, or waited for when there is none.
//
// With --api-tokens (callers), POST /v1/check needs "Authorization: Bearer <token>" (or a
// verified client certificate listed by SAN) of a client that may check the request's domain:
// 401 (WWW-Authenticate: Bearer) or 403 otherwise, before anything is counted.
//
// Thread-safe: Handle() may run on every server thread at once.
#ifndef SLUICE_HTTP_HTTP_API_H_
#define SLUICE_HTTP_HTTP_API_H_

#include <cstddef>
#include <expected>
#include <string>

#include "http/async_check.h"
#include "http/check_json.h"
#include "http/http_message.h"
#include "metrics/metrics.h"
#include "service/audit_log.h"
#include "service/caller_auth.h"
#include "service/check.h"
#include "service/rate_limit_service.h"
#include "service/ratelimit_headers.h"
#include "sluice/clock.h"

namespace sluice::server {

struct HttpApiOptions {
  std::string admin_token;  // empty: the admin routes are disabled (404)
  HeaderOptions headers;    // the API sets soft_over_limit: its answers carry that header
  // The largest POST /v1/check body accepted; larger ones get 413. By default the largest a
  // valid check can be (check_json.h).
  size_t max_body_bytes = MaxCheckBodyBytes();
  size_t max_top = 1000;  // the largest n /v1/top accepts
  // GET /v1/usage reads them; nullptr: usage tracking is off (the route answers 404 saying so).
  const UsageViews* usage = nullptr;
  // --api-tokens: who may check which domain; nullptr: anyone may check any (as without it).
  // Must outlive the HttpApi.
  const CallerIdentity* callers = nullptr;
  // --audit-log: every admin write is recorded there first (admin_writes.cc); nullptr: none is.
  // Must outlive the HttpApi.
  AuditLog* audit = nullptr;
  const Clock* clock = nullptr;  // the audit lines' time; nullptr: a MonotonicClock of its own
};

class HttpApi final : private CheckReplier {
 public:
  // `service` and `metrics` must outlive the HttpApi.
  HttpApi(RateLimitService* service, Metrics* metrics, HttpApiOptions options);

  HttpReply Handle(const HttpRequestView& request) const;

 private:
  HttpReply Check(const HttpRequestView& request) const;
  // A /v1/check body (also /v1/acquire's) from a caller let in for its domain: the check, or the
  // reply refusing it (413, 400, 401/403). One snapshot of --api-tokens per request; the caller
  // is identified before its body is read, and let in for the domain before anything is counted.
  std::expected<CheckRequest, HttpReply> AdmittedCheck(const HttpRequestView& request) const;
  // The permit routes (permit_api.cc). Acquire is let in as a check is; release and renew, with
  // --api-tokens, for a known client allowed every domain the permit's slots are in (403 else).
  HttpReply Acquire(const HttpRequestView& request) const;
  HttpReply ReleaseOrRenew(const HttpRequestView& request, bool renew) const;
  HttpReply Refuse(AuthFailure failure) const;  // counted
  HttpReply Reply(const Result<CheckResponse>& response,
                  std::chrono::steady_clock::time_point asked) const override;  // CheckReplier
  // The admin routes; `client` non-null: a client of --api-tokens, confined to its domains.
  HttpReply Admin(const HttpRequestView& request, std::string_view path) const;
  HttpReply Limits(const ApiClient* client) const;
  HttpReply State(const HttpRequestView& request, bool reset, const ApiClient* client) const;
  // The admin writes (admin_writes.cc), audited: POST and DELETE /v1/state.
  HttpReply AdjustCounter(const HttpRequestView& request, const ApiClient* client) const;
  HttpReply ResetCounter(const HttpRequestView& request, const ApiClient* client) const;
  Result<void> Audit(const AuditEntry& entry) const;
  Timestamp AuditNow() const;
  static std::string_view ClientName(const ApiClient* client);
  HttpReply Top(const HttpRequestView& request, const ApiClient* client) const;
  HttpReply Usage(const HttpRequestView& request, const ApiClient* client) const;
  bool Authorized(const HttpRequestView& request) const;

  RateLimitService* service_;
  Metrics* metrics_;
  HttpApiOptions options_;
  MonotonicClock own_clock_;
};

}  // namespace sluice::server

#endif  // SLUICE_HTTP_HTTP_API_H_
