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
  if (table != nullptr) {
    const CallerCredentials credentials{BearerToken(request.authorization), request.peer_sans};
    if (auto who = Identify(*table, credentials); !who) return Refuse(who.error());
  }
  auto permit = ParsePermitBody(request.body);
  if (!permit) return ErrorReply(400, permit.error().message);
  return AnswerAsync(
      [&](ReplyWith reply) {
        auto answered = [reply, renew](Result<PermitResult> r) {
          if (!r) return reply(ErrorReply(400, r.error().message));
          HttpReply out;
          out.body = RenderPermitResult(*r, renew);
          reply(std::move(out));
        };
        if (renew) {
          service_->RenewAsync(*permit, std::move(answered));
        } else {
          service_->ReleaseAsync(*permit, std::move(answered));
        }
      },
      request);
}

}  // namespace sluice::server
