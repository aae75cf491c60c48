// Every rule a check request must meet, decided here once, whichever front end it came through:
// what a request must hold (a domain, descriptors, entries, keys), its bounds (CheckLimits), and
// what a domain the config does not have means. The RateLimitService applies them before it
// looks at any limit. The front ends only translate their syntax into a CheckRequest (and
// refuse what does not translate: malformed JSON, a wrong JSON type, an undefined enum value).
//
//   auto admitted = AdmitCheck(request, *config);  // error: the caller's fault (400,
//                                                  // INVALID_ARGUMENT), in its own words
//   if (*admitted == Admission::kLimitNothing) return LimitNothing(request);
//
// The rules are the same for every caller, except where the protocols differ
// (CheckRequest::caller says who asks); each difference is written once, below, with its reason.
#ifndef SLUICE_SERVICE_CHECK_RULES_H_
#define SLUICE_SERVICE_CHECK_RULES_H_

#include "config/config.h"
#include "service/check.h"
#include "sluice/status.h"

namespace sluice::server {

// What a domain the config does not have means.
enum class UnknownDomain {
  kError,         // the request is refused: "unknown domain 'x'"
  kLimitNothing,  // every descriptor is OK, with no limit; nothing is counted
};

// HTTP (and a direct caller): an error, so that a typo in a domain is seen at once rather than
// silently allowing everything. Envoy: nothing is limited, as envoyproxy/ratelimit answers: an
// error would make Envoy either fail every request of a domain rolled out before sluiced's
// config has it (failure_mode_deny: true) or count an error for each one.
UnknownDomain UnknownDomainFor(Caller caller);

// Whether an entry's value may be empty. Envoy's API allows it (a header Envoy found empty);
// the HTTP API has always refused it (docs/server.md: non-empty strings).
bool EmptyValuesAllowed(Caller caller);

// What the service does with a request that meets the rules.
enum class Admission {
  kCheck,         // match its descriptors to limits and decide them
  kLimitNothing,  // answer LimitNothing(request): its domain is unknown, and the caller's
                  // UnknownDomain is kLimitNothing
};

// The rules in their order: first what makes a request one (a domain, at least one descriptor,
// entries in each, non-empty keys, and non-empty values where the caller requires them); then
// the domain; then the bounds (counts, sizes, hits from 0 to max_hits). So a domain sluiced
// does not know limits nothing for Envoy whatever the size of the request, as upstream (which
// has no bounds) would answer it. When a request breaks several rules, the first is named.
// An error's message is in the caller's words: each front end's users keep the messages, and
// the field names, they have always seen (docs/server.md, docs/envoy.md).
Result<Admission> AdmitCheck(const CheckRequest& request, const Config& config,
                             const CheckLimits& limits = kCheckLimits);

// The same rules without the domain's: for what has no config (test doubles of the service).
Result<void> ValidateCheck(const CheckRequest& request, const CheckLimits& limits = kCheckLimits);

// The answer to a request admitted kLimitNothing: overall OK, one status per descriptor, each OK
// with no limit and 0 remaining, no RateLimit headers.
CheckResponse LimitNothing(const CheckRequest& request);

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_CHECK_RULES_H_
