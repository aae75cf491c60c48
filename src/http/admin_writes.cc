// The admin API's writes (POST and DELETE /v1/state), each recorded in the audit log
// (--audit-log, service/audit_log.h) before it happens: an "intent" line names the client, the
// counter and the change; if it cannot be written the write is refused (503) and never happens.
// A "done" line with the counter before and after follows. docs/quotas.md, "Credits, debits and
// the audit log", states the guarantee.
#include <random>
#include <string>
#include <utility>

#include "http/adjust_json.h"
#include "http/ceil_millis.h"
#include "http/http_api.h"
#include "http/http_headers.h"
#include "http/http_query.h"

namespace sluice::server {
namespace {

constexpr size_t kMaxRequestIdBytes = 128;

// A caller's X-Request-Id when it is a plain token (letters, digits, - _ . :), else a new one:
// 16 random bytes in hex.
std::string RequestIdOf(const HttpRequestView& request) {
  if (auto given = FindHeader(request.header_lines, "X-Request-Id");
      given && !given->empty() && given->size() <= kMaxRequestIdBytes) {
    bool plain = true;
    for (char c : *given) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == ':';
      plain = plain && ok;
    }
    if (plain) return std::string(*given);
  }
  std::random_device random;
  std::string id;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = random();
    for (int shift = 28; shift >= 0; shift -= 4) id += kHex[(word >> shift) & 0xf];
  }
  return id;
}

AuditCounter AuditCounterOf(const CounterState& s) {
  return AuditCounter{s.remaining, CeilMillis(s.reset_after)};
}

HttpReply WithRequestId(HttpReply reply, const std::string& id) {
  reply.headers.emplace_back("X-Request-Id", id);
  return reply;
}

}  // namespace

std::string_view HttpApi::ClientName(const ApiClient* client) {
  return client != nullptr ? std::string_view(client->name) : std::string_view("admin-token");
}

Result<void> HttpApi::Audit(const AuditEntry& entry) const {
  if (options_.audit == nullptr) return {};
  return options_.audit->Append(AuditLine(entry));
}

Timestamp HttpApi::AuditNow() const {
  return options_.clock != nullptr ? options_.clock->Now() : own_clock_.Now();
}

HttpReply HttpApi::AdjustCounter(const HttpRequestView& request, const ApiClient* client) const {
  const std::string request_id = RequestIdOf(request);
  auto q = ParseCounterQuery(SplitTarget(request.target).query);
  if (!q) return WithRequestId(ErrorReply(400, q.error().message), request_id);
  if (client != nullptr && !client->MayCheck(q->domain)) {
    return WithRequestId(ErrorReply(403, "this client may not change that domain"), request_id);
  }
  auto body = ParseAdjustBody(request.body);
  if (!body) return WithRequestId(ErrorReply(400, body.error().message), request_id);
  AuditEntry entry{.time = AuditNow(),
                   .client = ClientName(client),
                   .action = body->action,
                   .domain = q->domain,
                   .request_id = request_id,
                   .phase = "intent",
                   .change = body->change_json};
  std::string counter_key;  // the service's copy goes with its answer: kept for the lines
  auto changed = service_->Adjust(q->domain, q->entries, body->change,
                                  [&](const std::string& key) -> Result<void> {
                                    counter_key = key;
                                    entry.counter_key = counter_key;
                                    return Audit(entry);
                                  });
  if (!changed) {
    const int status = changed.error().unavailable ? 503 : 400;
    return WithRequestId(ErrorReply(status, changed.error().message), request_id);
  }
  entry.time = AuditNow();
  entry.phase = "done";
  entry.before = AuditCounterOf(changed->before);
  entry.after = AuditCounterOf(changed->after);
  HttpReply reply;
  reply.body = RenderCounterChangeJson(q->domain, body->action, request_id, *changed);
  // The change is made: only its outcome line is missing. Said, not hidden.
  if (!Audit(entry)) reply.headers.emplace_back("Warning", "199 - \"audit: outcome not logged\"");
  return WithRequestId(std::move(reply), request_id);
}

HttpReply HttpApi::ResetCounter(const HttpRequestView& request, const ApiClient* client) const {
  const std::string request_id = RequestIdOf(request);
  auto q = ParseCounterQuery(SplitTarget(request.target).query);
  if (!q) return WithRequestId(ErrorReply(400, q.error().message), request_id);
  if (client != nullptr && !client->MayCheck(q->domain)) {
    return WithRequestId(ErrorReply(403, "this client may not change that domain"), request_id);
  }
  // Read just before: a reset has no store step that reads and forgets at once.
  auto before = service_->State(q->domain, q->entries);
  if (!before) return WithRequestId(ErrorReply(400, before.error().message), request_id);
  AuditEntry entry{.time = AuditNow(),
                   .client = ClientName(client),
                   .action = "reset",
                   .domain = q->domain,
                   .counter_key = before->counter_key,
                   .request_id = request_id,
                   .phase = "intent",
                   .before = AuditCounterOf(*before)};
  if (auto ok = Audit(entry); !ok) {
    return WithRequestId(ErrorReply(503, "the audit log cannot be written, so nothing was reset: " +
                                             ok.error().message),
                         request_id);
  }
  if (auto r = service_->Reset(q->domain, q->entries); !r) {
    return WithRequestId(ErrorReply(400, r.error().message), request_id);
  }
  HttpReply reply;
  reply.body = "{\"reset\":true}\n";
  entry.time = AuditNow();
  entry.phase = "done";
  if (auto after = service_->State(q->domain, q->entries)) entry.after = AuditCounterOf(*after);
  if (!Audit(entry)) reply.headers.emplace_back("Warning", "199 - \"audit: outcome not logged\"");
  return WithRequestId(std::move(reply), request_id);
}

}  // namespace sluice::server
