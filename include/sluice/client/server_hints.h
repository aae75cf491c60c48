// Reading what an HTTP server says about its rate limits: Retry-After (RFC 9110 §10.2.3), the
// RateLimit and RateLimit-Policy fields (draft-ietf-httpapi-ratelimit-headers-11, RFC 9651
// Structured Fields), and the legacy families met in the wild (X-RateLimit-* and the earlier
// drafts' RateLimit-Limit/-Remaining/-Reset).
//
//   std::vector<client::Header> headers = {{"Retry-After", "120"}, {"RateLimit", "..."}};
//   client::ServerHints hints = client::ReadServerHints(headers, clock.Now());
//   if (hints.retry_after) wait at least hints.retry_after->wait;
//
// Everything here is untrusted input: a value that does not parse is ignored (as if absent),
// never guessed at, and no wait read from a server is longer than HintLimits::max_wait (a
// server, a proxy or an attacker saying "Retry-After: 99999999" must not park a client for
// years). Pure functions: no clock is read, `now` is a parameter (for HTTP-dates and epoch
// resets).
#ifndef SLUICE_CLIENT_SERVER_HINTS_H_
#define SLUICE_CLIENT_SERVER_HINTS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/time.h"

namespace sluice::client {

struct Header {
  std::string_view name;   // matched case-insensitively; a name given twice is combined as one
  std::string_view value;  // list, the values joined by ", " (RFC 9110 §5.3)
};

struct HintLimits {
  // The longest wait any field may ask for; longer ones are clamped to it (and say so).
  Duration max_wait = std::chrono::minutes(5);
};

// A wait a server asked for, never negative and at most HintLimits::max_wait.
struct Wait {
  Duration wait{0};
  bool clamped = false;  // the server asked for longer than max_wait
};

// Retry-After: delay-seconds ("120") or an HTTP-date (IMF-fixdate, and the obsolete RFC 850 and
// asctime forms RFC 9110 requires recipients to accept). A date in the past is a wait of 0.
// nullopt for anything else: negative, fractional, signed, empty, garbage, an invalid date.
std::optional<Wait> ParseRetryAfter(std::string_view value, Timestamp now,
                                    const HintLimits& limits = {});

// One quota policy (RateLimit-Policy: "name";q=100;w=60). The legacy fields give one unnamed
// policy ("") with no window.
struct QuotaPolicy {
  std::string name;
  int64_t quota = 0;               // q: units per window
  std::optional<Duration> window;  // w: the window, when the server said
};

// A policy's current state (RateLimit: "name";r=50;t=30).
struct QuotaState {
  std::string name;
  int64_t remaining = 0;      // r: units left now
  std::optional<Wait> reset;  // t: until the quota is replenished, when the server said
};

// RateLimit-Policy. Each list member names a policy (a String) with an Integer q >= 0; members
// without one are skipped, unknown parameters are ignored; a field that is not a valid
// Structured Fields list is ignored whole, as RFC 9651 §4.2 requires.
std::vector<QuotaPolicy> ParseRateLimitPolicy(std::string_view value);
// RateLimit: each member needs an Integer r >= 0; t (Integer >= 0) is optional.
std::vector<QuotaState> ParseRateLimit(std::string_view value, const HintLimits& limits = {});

// A legacy Reset value: delta-seconds, or (GitHub's form) a Unix time in seconds. Values above
// kEpochResetThreshold (ten years of seconds, which no delta means) are read as Unix times;
// their wait is measured from `now`.
inline constexpr int64_t kEpochResetThreshold = int64_t{10} * 365 * 24 * 3600;
std::optional<Wait> ParseLegacyReset(std::string_view value, Timestamp now,
                                     const HintLimits& limits = {});

// Everything a response's headers say. The draft-11 fields win over the legacy ones: when a
// response carries RateLimit or RateLimit-Policy, the X-RateLimit-* and RateLimit-Limit/...
// fields are not read.
struct ServerHints {
  std::optional<Wait> retry_after;
  std::vector<QuotaPolicy> policies;
  std::vector<QuotaState> states;
};
ServerHints ReadServerHints(std::span<const Header> headers, Timestamp now,
                            const HintLimits& limits = {});

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_SERVER_HINTS_H_
