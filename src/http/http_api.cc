#include "http/http_api.h"

#include <charconv>
#include <string_view>
#include <utility>
#include <vector>

#include "http/admin_json.h"
#include "http/async_check.h"
#include "http/caller_refusal.h"
#include "http/check_json.h"
#include "http/http_query.h"
#include "util/ascii.h"

namespace sluice::server {
namespace {

// Compares in time independent of where the strings differ, so that response timing does not
// reveal how much of a guessed admin token is right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

HttpReply JsonReply(int status, std::string body) {
  HttpReply reply;
  reply.status = status;
  reply.body = std::move(body);
  return reply;
}

HttpReply MethodNotAllowed(std::string_view allow) {
  HttpReply reply = ErrorReply(405, "method not allowed; use " + std::string(allow));
  reply.headers.emplace_back("Allow", std::string(allow));
  return reply;
}

// An --api-tokens client reading a domain it may not check.
HttpReply NotYourDomain() { return ErrorReply(403, "this client may not read that domain"); }

}  // namespace

HttpApi::HttpApi(RateLimitService* service, Metrics* metrics, HttpApiOptions options)
    : service_(service), metrics_(metrics), options_(std::move(options)) {
  options_.headers.soft_over_limit = true;
}

HttpReply HttpApi::Handle(const HttpRequestView& request) const {
  const std::string_view path = SplitTarget(request.target).path;
  const std::string_view method = request.method;
  // Every GET route answers HEAD too (RFC 9110 9.3.2: the server sends the headers without the
  // body, http_server.h).
  const bool get = method == "GET" || method == "HEAD";

  if (path == "/v1/check") {
    if (method != "POST") return MethodNotAllowed("POST");
    return Check(request);
  }
  if (path == "/v1/acquire" || path == "/v1/release" || path == "/v1/renew") {
    if (method != "POST") return MethodNotAllowed("POST");
    if (path == "/v1/acquire") return Acquire(request);
    return ReleaseOrRenew(request, path == "/v1/renew");
  }
  if (path == "/healthz") {
    if (!get) return MethodNotAllowed("GET, HEAD");
    return JsonReply(200, "{\"status\":\"ok\"}\n");
  }
  if (path == "/readyz") {
    if (!get) return MethodNotAllowed("GET, HEAD");
    return service_->Ready() ? JsonReply(200, "{\"status\":\"ready\"}\n")
                             : JsonReply(503, "{\"status\":\"not ready\"}\n");
  }
  if (path == "/metrics") {
    if (!get) return MethodNotAllowed("GET, HEAD");
    HttpReply reply;
    reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
    reply.body = metrics_->Render();
    return reply;
  }
  if (path == "/v1/limits" || path == "/v1/state" || path == "/v1/top" || path == "/v1/usage") {
    return Admin(request, path);
  }
  return ErrorReply(404, "no such route: " + std::string(path));
}

HttpReply HttpApi::Admin(const HttpRequestView& request, std::string_view path) const {
  const std::string_view method = request.method;
  const bool get = method == "GET" || method == "HEAD";
  const std::shared_ptr<const ApiTokens> table =
      options_.callers != nullptr ? options_.callers->table() : nullptr;
  if (options_.admin_token.empty() && table == nullptr) {
    return ErrorReply(404, "the admin API is disabled: start sluiced with --admin-token");
  }
  const ApiClient* client = nullptr;  // the admin: every domain
  if (options_.admin_token.empty() || !Authorized(request)) {
    const CallerCredentials credentials{BearerToken(request.authorization), request.peer_sans};
    auto who =
        table != nullptr ? Identify(*table, credentials) : std::unexpected(AuthFailure::kUnknown);
    if (!who) {
      HttpReply reply = ErrorReply(401, "admin API: missing or wrong bearer token");
      reply.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"sluiced admin\"");
      return reply;
    }
    client = *who;
  }
  if (path == "/v1/state") {
    const bool write = method == "DELETE" || method == "POST";
    if (write && client != nullptr && !client->admin) {
      return ErrorReply(
          403, std::string(method) + " /v1/state takes the admin token or an admin: true client's");
    }
    if (get) return State(request, /*reset=*/false, client);
    if (method == "DELETE") return ResetCounter(request, client);
    if (method == "POST") return AdjustCounter(request, client);
    return MethodNotAllowed("GET, HEAD, POST, DELETE");
  }
  if (!get) return MethodNotAllowed("GET, HEAD");
  if (path == "/v1/usage") return Usage(request, client);
  return path == "/v1/limits" ? Limits(client) : Top(request, client);
}

bool HttpApi::Authorized(const HttpRequestView& request) const {
  constexpr std::string_view kScheme = "Bearer ";
  const std::string_view auth = request.authorization;
  if (auth.size() <= kScheme.size() ||
      !util::EqualsIgnoreAsciiCase(auth.substr(0, kScheme.size()), kScheme)) {
    return false;
  }
  return ConstantTimeEquals(auth.substr(kScheme.size()), options_.admin_token);
}

HttpReply HttpApi::Refuse(AuthFailure failure) const {
  options_.callers->CountRefusal(failure);
  return CallerRefusal(failure, "an Authorization: Bearer token", RefusalBody::kJson);
}

std::expected<CheckRequest, HttpReply> HttpApi::AdmittedCheck(
    const HttpRequestView& request) const {
  if (request.body.size() > options_.max_body_bytes) {
    return std::unexpected(ErrorReply(413, "the body is over the limit of " +
                                               std::to_string(options_.max_body_bytes) + " bytes"));
  }
  const std::shared_ptr<const ApiTokens> table =
      options_.callers != nullptr ? options_.callers->table() : nullptr;
  const CallerCredentials credentials{BearerToken(request.authorization), request.peer_sans};
  const ApiClient* caller = nullptr;
  if (table != nullptr) {
    auto who = Identify(*table, credentials);
    if (!who) return std::unexpected(Refuse(who.error()));
    caller = *who;
  }
  auto parsed = ParseCheckRequest(request.body);
  if (!parsed) return std::unexpected(ErrorReply(400, parsed.error().message));
  if (caller != nullptr) {
    if (auto ok = Authorize(*table, credentials, *caller, parsed->domain); !ok) {
      return std::unexpected(Refuse(ok.error()));
    }
  }
  return std::move(*parsed);
}

HttpReply HttpApi::Check(const HttpRequestView& request) const {
  auto check = AdmittedCheck(request);
  if (!check) return std::move(check).error();
  return AnswerCheck(*service_, *check, request, *this);
}

// The body and the status are HTTP's; the headers are the service's (ratelimit_headers.h).
// Answered at once, whatever the delay: the caller of /v1/check is the one that waits, by
// delay_ms, before it sends its request on (holding the answer would only add the wait twice).
HttpReply HttpApi::Reply(const Result<CheckResponse>& response,
                         std::chrono::steady_clock::time_point /*asked*/) const {
  if (!response) return ErrorReply(400, response.error().message);
  HttpReply reply;
  reply.status = response->overall == Code::kOk ? 200 : 429;
  reply.body = RenderCheckResponse(*response);
  reply.headers = RateLimitHeaders(*response, options_.headers);
  return reply;
}

HttpReply HttpApi::Limits(const ApiClient* client) const {
  const auto config = service_->config();
  if (!config) return ErrorReply(503, "no config loaded");
  return JsonReply(200, RenderConfigJson(*config, client));
}

HttpReply HttpApi::State(const HttpRequestView& request, bool reset,
                         const ApiClient* client) const {
  auto q = ParseCounterQuery(SplitTarget(request.target).query);
  if (!q) return ErrorReply(400, q.error().message);
  if (client != nullptr && !client->MayCheck(q->domain)) return NotYourDomain();
  if (reset) {
    auto r = service_->Reset(q->domain, q->entries);
    if (!r) return ErrorReply(400, r.error().message);
    std::string body = "{\"reset\":true}\n";
    return JsonReply(200, std::move(body));
  }
  auto state = service_->State(q->domain, q->entries);
  if (!state) return ErrorReply(400, state.error().message);
  return JsonReply(200, RenderCounterStateJson(q->domain, *state));
}

HttpReply HttpApi::Top(const HttpRequestView& request, const ApiClient* client) const {
  auto params = ParseQuery(SplitTarget(request.target).query);
  if (!params) return ErrorReply(400, params.error().message);
  std::string domain;
  size_t n = 20;
  for (const auto& [key, value] : *params) {
    if (key == "domain") {
      domain = value;
    } else if (key == "n") {
      const auto r = std::from_chars(value.data(), value.data() + value.size(), n);
      if (r.ec != std::errc() || r.ptr != value.data() + value.size() || n == 0 ||
          n > options_.max_top) {
        return ErrorReply(400,
                          "n: must be an integer in [1, " + std::to_string(options_.max_top) + "]");
      }
    } else {
      return ErrorReply(400, "unknown parameter '" + key + "' (domain, n)");
    }
  }
  if (domain.empty()) return ErrorReply(400, "the query needs domain=<domain>");
  if (client != nullptr && !client->MayCheck(domain)) return NotYourDomain();
  if (const auto config = service_->config(); config && !config->FindDomain(domain)) {
    return ErrorReply(400, "unknown domain '" + domain + "'");
  }
  return JsonReply(200, RenderTopJson(domain, metrics_->Top(domain, n)));
}

// The limit is named by its `name` or its metric label, as the config lists them.
HttpReply HttpApi::Usage(const HttpRequestView& request, const ApiClient* client) const {
  if (options_.usage == nullptr) {
    return ErrorReply(404, "usage tracking is off: start sluiced with --usage-tracking on");
  }
  auto params = ParseQuery(SplitTarget(request.target).query);
  if (!params) return ErrorReply(400, params.error().message);
  std::string domain;
  std::string limit;
  for (const auto& [key, value] : *params) {
    if (key == "domain") {
      domain = value;
    } else if (key == "limit") {
      limit = value;
    } else {
      return ErrorReply(400, "unknown parameter '" + key + "' (domain, limit)");
    }
  }
  if (domain.empty() || limit.empty()) {
    return ErrorReply(400, "the query needs domain=<domain>&limit=<limit name>");
  }
  if (client != nullptr && !client->MayCheck(domain)) return NotYourDomain();
  const auto config = service_->config();
  if (!config) return ErrorReply(503, "no config loaded");
  const Domain* d = config->FindDomain(domain);
  if (d == nullptr) return ErrorReply(400, "unknown domain '" + domain + "'");
  const Limit* found = nullptr;
  for (const Limit& l : d->limits) {
    if (l.kind == LimitKind::kLimited && (l.name == limit || l.metric_name == limit)) {
      found = &l;
      break;
    }
  }
  if (found == nullptr) {
    return ErrorReply(400, "domain '" + domain + "' has no counted limit named '" + limit + "'");
  }
  auto report = options_.usage->Report(domain, found->metric_name);
  if (!report) return ErrorReply(503, report.error().message);
  return JsonReply(
      200,
      RenderUsageJson(domain, found->name.empty() ? found->metric_name : found->name, *report));
}

}  // namespace sluice::server
