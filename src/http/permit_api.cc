// POST /v1/acquire, /v1/release, /v1/renew: JSON in and out (permit_json.h); every rule is the
// service's (service/permit_rules.h).
#include "http/async_check.h"
#include "http/http_api.h"
#include "http/permit_json.h"

namespace sluice::server {

HttpReply HttpApi::Acquire(const HttpRequestView& request) const {
  auto parsed = AdmittedCheck(request);
  if (!parsed) return std::move(parsed).error();
  // The options outlive every request (the server is stopped before the API goes away); a
  // pointer keeps the callback within std::function's own buffer.
  const HeaderOptions* headers = &options_.headers;
  return AnswerAsync(
      [&](ReplyWith reply) {
        service_->AcquireAsync(*parsed, [reply, headers](Result<AcquireResponse> r) {
          if (!r) return reply(ErrorReply(400, r.error().message));
          HttpReply out;
          out.status = r->check.overall == Code::kOk ? 200 : 429;
          out.body = RenderAcquireResponse(*r);
          out.headers = RateLimitHeaders(r->check, *headers);
          reply(std::move(out));
        });
      },
      request);
}

HttpReply HttpApi::ReleaseOrRenew(const HttpRequestView& request, bool renew) const {
  if (request.body.size() > MaxPermitBodyBytes()) {
    return ErrorReply(
        413, "the body is over the limit of " + std::to_string(MaxPermitBodyBytes()) + " bytes");
  }
  const std::shared_ptr<const ApiTokens> table =
      options_.callers != nullptr ? options_.callers->table() : nullptr;
  const CallerCredentials credentials{BearerToken(request.authorization), request.peer_sans};
  DomainGate may;  // empty: every domain
  if (table != nullptr) {
    auto who = Identify(*table, credentials);
    if (!who) return Refuse(who.error());
    // A permit's slots are confined as a check is (docs/security.md): the same rule, asked by
    // the service of every slot's domain before it touches any. Asked before the service's
    // call returns, so the credentials' views are still the request's.
    may = [&table, &credentials, caller = *who](std::string_view domain) {
      return Authorize(*table, credentials, *caller, domain).has_value();
    };
  }
  auto permit = ParsePermitBody(request.body);
  if (!permit) return ErrorReply(400, permit.error().message);
  return AnswerAsync(
      [&](ReplyWith reply) {
        // Two pointers each: within std::function's own buffer (no allocation per call).
        auto answer = [this, reply](const Result<PermitResult>& r, bool renewed) {
          if (!r) return reply(ErrorReply(400, r.error().message));
          if (r->forbidden) return reply(Refuse(AuthFailure::kDomain));
          HttpReply out;
          out.body = RenderPermitResult(*r, renewed);
          reply(std::move(out));
        };
        if (renew) {
          service_->RenewAsync(*permit, may,
                               [answer](Result<PermitResult> r) { answer(r, /*renewed=*/true); });
        } else {
          service_->ReleaseAsync(
              *permit, may, [answer](Result<PermitResult> r) { answer(r, /*renewed=*/false); });
        }
      },
      request);
}

}  // namespace sluice::server
