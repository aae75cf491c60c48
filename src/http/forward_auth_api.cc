#include "http/forward_auth_api.h"

#include <string>
#include <utility>

#include "http/caller_refusal.h"
#include "http/forwarded_request.h"
#include "http/http_headers.h"

namespace sluice::server {
namespace {

constexpr std::string_view kText = "text/plain; charset=utf-8";

// The domain serving this request, or why there is none.
Result<const Domain*> ChooseDomain(const Config& config, const HttpRequestView& request) {
  if (const auto named = FindHeader(request.header_lines, kSluiceDomainHeader)) {
    const Domain* d = config.FindDomain(*named);
    if (d == nullptr || !d->forward_auth) {
      return MakeError("Sluice-Domain: no domain '" + std::string(*named) +
                       "' with a forward_auth section");
    }
    return d;
  }
  const Domain* found = nullptr;
  for (const auto& [name, domain] : config.domains()) {
    if (!domain.forward_auth) continue;
    if (found != nullptr) {
      return MakeError(
          "several domains have a forward_auth section: the proxy must name one in a "
          "Sluice-Domain header");
    }
    found = &domain;
  }
  if (found == nullptr) return MakeError("no domain of the config has a forward_auth section");
  return found;
}

// "per_ip" (its name), else its metric key.
std::string LimitLabel(const Limit& limit) {
  return limit.name.empty() ? limit.metric_name : limit.name;
}

// The one line a rejected client reads: which limit, and when to come back.
std::string RejectionText(const CheckResponse& response,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string text = "Too many requests";
  for (const DescriptorStatus& s : response.statuses) {
    if (s.code != Code::kOverLimit || s.limit == nullptr) continue;
    text += ": over the rate limit '" + LimitLabel(*s.limit) + "' (" +
            std::to_string(s.limit->requests_per_unit) + " per " + PeriodName(s.limit->period) +
            ")";
    break;
  }
  for (const auto& [name, value] : headers) {
    if (name == "Retry-After") text += "; retry in " + value + " s";
  }
  return text + ".\n";
}

}  // namespace

ForwardAuthApi::ForwardAuthApi(RateLimitService* service, Metrics* metrics,
                               ForwardAuthOptions options)
    : service_(service), metrics_(metrics), options_(std::move(options)) {
  options_.headers.soft_over_limit = true;
}

HttpReply ForwardAuthApi::BadRequest(std::string message) const {
  metrics_->RecordForwardAuth(ForwardAuthResult::kBadRequest);
  HttpReply reply;
  reply.status = 400;
  reply.content_type = kText;
  reply.body = "sluice forward-auth: " + std::move(message) + "\n";
  return reply;
}

HttpReply ForwardAuthApi::Refuse(AuthFailure failure) const {
  options_.callers->CountRefusal(failure);
  return CallerRefusal(failure, "a Sluice-Token header", RefusalBody::kText);
}

HttpReply ForwardAuthApi::Handle(const HttpRequestView& request) const {
  // One snapshot of --api-tokens for the request: the proxy is identified first, and let in
  // for the domain before anything is counted.
  const std::shared_ptr<const ApiTokens> table =
      options_.callers != nullptr ? options_.callers->table() : nullptr;
  const CallerCredentials credentials{FindHeader(request.header_lines, kSluiceTokenHeader),
                                      request.peer_sans};
  const ApiClient* caller = nullptr;
  if (table != nullptr) {
    auto who = Identify(*table, credentials);
    if (!who) return Refuse(who.error());
    caller = *who;
  }
  const std::shared_ptr<const Config> config = service_->config();
  if (!config) return BadRequest("no config loaded");
  const auto domain = ChooseDomain(*config, request);
  if (!domain) return BadRequest(domain.error().message);
  if (caller != nullptr) {
    if (auto ok = Authorize(*table, credentials, *caller, (*domain)->name); !ok) {
      return Refuse(ok.error());
    }
  }
  const ForwardAuth& fa = *(*domain)->forward_auth;
  const ForwardedRequest forwarded = DescribeForwarded(request, fa);
  // A path that has no canonical form cannot be counted as the path it names: refused, so that
  // a spelling never buys a fresh allowance. Where no action reads the path it is not judged.
  if (!forwarded.path && ActionsRead(fa, RequestField::kPath)) {
    return BadRequest("no canonical path: " + forwarded.path.error());
  }
  if (forwarded.host_invalid && ActionsRead(fa, RequestField::kHost)) {
    metrics_->RecordForwardAuthInvalidHost();
  }
  CheckRequest check;
  check.descriptors = ForwardedDescriptors(forwarded, request, fa);
  if (check.descriptors.empty()) {
    metrics_->RecordForwardAuth(ForwardAuthResult::kNoDescriptor);
    HttpReply reply;
    reply.content_type = kText;
    return reply;
  }
  check.domain = (*domain)->name;
  check.caller = Caller::kHttpJson;
  return AnswerCheck(*service_, check, request, *this);
}

HttpReply ForwardAuthApi::Reply(const Result<CheckResponse>& response,
                                std::chrono::steady_clock::time_point asked) const {
  if (!response) return BadRequest(response.error().message);
  HttpReply reply;
  reply.content_type = kText;
  reply.headers = RateLimitHeaders(*response, options_.headers);
  if (response->overall == Code::kOk) {
    metrics_->RecordForwardAuth(ForwardAuthResult::kAllowed);
    // A shaper's delay: the 200 goes out that long after the check was asked, held by the HTTP
    // server on a timer (no thread waits), so that the proxy, which forwards the request when
    // the answer comes, passes requests on spaced 1/r apart as nginx limit_req without nodelay
    // does. A wait beyond max_delay was already refused (429, at once).
    if (response->delay > Duration(0)) {
      reply.send_at =
          asked + std::chrono::duration_cast<std::chrono::steady_clock::duration>(response->delay);
    }
    return reply;
  }
  metrics_->RecordForwardAuth(ForwardAuthResult::kOverLimit);
  reply.status = 429;
  reply.body = RejectionText(*response, reply.headers);
  return reply;
}

}  // namespace sluice::server
