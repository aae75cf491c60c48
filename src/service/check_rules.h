// Every rule a check request must meet, decided here once, whichever front end it came through:
// what a request must hold (a domain, descriptors, entries, keys, hits not negative), what a
// domain the config does not have means, and what the service does past its bounds
// (CheckLimits). The RateLimitService applies them before it looks at any limit. The front ends
// only translate their syntax into a CheckRequest (and refuse what does not translate: malformed
// JSON, a wrong JSON type, an undefined enum value).
//
//   auto admitted = AdmitCheck(request, *config);  // error: the caller's fault (400,
//                                                  // INVALID_ARGUMENT), in its own words
//   if (*admitted == Admission::kLimitNothing) return LimitNothing(request);
//   if (UncheckedReason(request, i) != Unchecked::kNo) ...  // descriptor i: OK, no limit
//
// The bounds never fail a call: envoyproxy/ratelimit has none, and an error makes Envoy skip
// every limit in the call (or fail the request), so a request past one is answered and what can
// be limited in it is: descriptors past max_descriptors and a descriptor past max_entries or
// max_key_bytes are answered as descriptors no rule matches (OK, no limit); a value past
// max_value_bytes and a counter key past max_counter_key_bytes are counted under their SHA-256.
//
// The rules are the same for every caller, except where the protocols differ
// (CheckRequest::caller says who asks); each difference is written once, below, with its reason.
#ifndef SLUICE_SERVICE_CHECK_RULES_H_
#define SLUICE_SERVICE_CHECK_RULES_H_

#include <cstdint>
#include <string>
#include <string_view>

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
// entries in each, non-empty keys, non-empty values where the caller requires them, hits not
// negative), then the domain. When a request breaks several rules, the first is named. An
// error's message is in the caller's words: each front end's users keep the messages, and the
// field names, they have always seen (docs/server.md, docs/envoy.md). The bounds are not rules:
// see UncheckedReason.
Result<Admission> AdmitCheck(const CheckRequest& request, const Config& config);
// The same with the request's domain already looked up (config.FindDomain(request.domain), null
// for one the config does not have), for a caller that needs it after: one lookup per request.
Result<Admission> AdmitCheck(const CheckRequest& request, const Domain* domain);

// The same rules without the domain's: for what has no config (test doubles of the service).
Result<void> ValidateCheck(const CheckRequest& request);

// Whether the service checks descriptor `index` of an admitted request, and if not, why. An
// unchecked descriptor is answered as one no rule matches: OK, no limit, 0 remaining. Past
// max_descriptors the request's descriptors are not looked at (a later one is no more important
// than an earlier one, and checking them all would let one call cost the store without bound).
// A descriptor with more entries or a longer key than the bounds cannot be matched by prefix:
// rather than count it under a truncated identity (merging distinct clients), it is not counted.
// No config key is longer than 256 bytes (docs/configuration.md), so a longer key matches no
// configured rule anyway; only a `limit` override on such a descriptor goes unenforced.
enum class Unchecked : uint8_t {
  kNo,                  // checked
  kPastMaxDescriptors,  // index >= max_descriptors
  kTooManyEntries,      // more than max_entries entries
  kKeyTooLong,          // a key longer than max_key_bytes
  // Its limit's concurrency (not its rate limit, which is checked): only POST /v1/acquire takes
  // a permit, since only its caller can give it back (service/permit_rules.h).
  kConcurrency,
};
Unchecked UncheckedReason(const CheckRequest& request, size_t index,
                          const CheckLimits& limits = kCheckLimits);
// "descriptors", "entries", "key": the reason's label in metrics and logs.
std::string_view UncheckedName(Unchecked reason);

// The value an entry is matched and counted by: `value` itself, or, over max_value_bytes,
// kLongValuePrefix + its SHA-256 in lower-case hex written into `digest` (returned as a view of
// it). Values come from the client's request (a path, a header): a long one still has its own
// counter, and every sluiced sharing a Redis derives the same key. A cryptographic digest, not a
// seeded hash: a client must not be able to make its value collide with another's.
inline constexpr char kLongValuePrefix[] = "sha256:";
std::string_view CountedValue(std::string_view value, std::string& digest,
                              const CheckLimits& limits = kCheckLimits);

// `counter_key` (limit id '#' identity) itself, or, over max_counter_key_bytes, the limit id, '#'
// and kLongValuePrefix + the SHA-256 of the identity: still one counter per identity, within
// what the stores accept.
std::string BoundedCounterKey(std::string counter_key, const CheckLimits& limits = kCheckLimits);

// The answer to a request admitted kLimitNothing: overall OK, one status per descriptor, each OK
// with no limit and 0 remaining, no RateLimit headers.
CheckResponse LimitNothing(const CheckRequest& request);

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_CHECK_RULES_H_
