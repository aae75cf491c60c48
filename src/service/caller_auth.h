// Who may check what (--api-tokens, docs/security.md "Caller identity"): the one place that
// decides, for every front end, whether a caller is let in to check a domain. A front end
// gathers the caller's credentials -- a bearer token it was sent, the SANs of the client
// certificate its TLS layer verified -- and asks, with one snapshot of the table:
//
//   const auto table = identity.table();                 // nullptr: --api-tokens is off
//   auto who = Identify(*table, credentials);           // before reading the request
//   if (!who) return Refuse(who.error());               // kMissing or kUnknown: 401
//   ...                                                  // parse: now the domain is known
//   if (auto ok = Authorize(*table, credentials, **who, domain); !ok)
//     return Refuse(ok.error());                         // kDomain: 403
//
// and counts the refusal (CallerIdentity::CountRefusal) before it checks anything, so that a
// caller not let in spends no one's quota. A token is looked up by its SHA-256 (never compared
// as a string) and is never logged, counted by value, or quoted in an error.
#ifndef SLUICE_SERVICE_CALLER_AUTH_H_
#define SLUICE_SERVICE_CALLER_AUTH_H_

#include <atomic>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "config/api_tokens.h"
#include "metrics/metrics.h"

namespace sluice::server {

struct CallerCredentials {
  std::optional<std::string_view> bearer_token;  // as presented (not yet checked)
  std::span<const std::string> verified_sans;    // the connection's client certificate's
};

// The token of an "Authorization: Bearer <token>" value (the scheme in any case, RFC 9110
// 11.1), or nullopt when the value is empty or of another scheme. An empty token after the
// scheme is returned empty: a credential that is present but matches no client.
std::optional<std::string_view> BearerToken(std::string_view authorization);

// SHA-256 of a presented token.
TokenDigest DigestOfToken(std::string_view token);

// The client the credentials name, before the domain is known: a presented token decides alone
// (unknown if no client has it, even when a SAN would match); without one, the first verified
// SAN listed. kMissing when there is no credential at all, kUnknown when none is listed.
std::expected<const ApiClient*, AuthFailure> Identify(const ApiTokens& table,
                                                      const CallerCredentials& credentials);

// Whether the credentials name a client that may check `domain`: its name, or why not. A
// certificate with several listed SANs is let in when any of their clients may check it.
std::expected<std::string_view, AuthFailure> Authorize(const ApiTokens& table,
                                                       const CallerCredentials& credentials,
                                                       std::string_view domain);
// The same for the client Identify named from these credentials and this table: the token is
// not hashed again (a hash per request is most of what identity costs, BENCHMARKS.md).
std::expected<std::string_view, AuthFailure> Authorize(const ApiTokens& table,
                                                       const CallerCredentials& credentials,
                                                       const ApiClient& identified,
                                                       std::string_view domain);

// The table in force, replaced whole on SIGHUP while front ends read it (each request takes
// one snapshot), and the count of refusals. Thread-safe.
class CallerIdentity {
 public:
  // `metrics` (may be null) must outlive it.
  CallerIdentity(std::shared_ptr<const ApiTokens> table, Metrics* metrics)
      : table_(std::move(table)), metrics_(metrics) {}

  std::shared_ptr<const ApiTokens> table() const { return table_.load(std::memory_order_acquire); }
  void Replace(std::shared_ptr<const ApiTokens> table) {
    table_.store(std::move(table), std::memory_order_release);
  }

  // A front end refused a check for `failure` (sluice_check_auth_failures_total).
  void CountRefusal(AuthFailure failure) const {
    if (metrics_ != nullptr) metrics_->RecordAuthFailure(failure);
  }

 private:
  std::atomic<std::shared_ptr<const ApiTokens>> table_;
  Metrics* metrics_;
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_CALLER_AUTH_H_
