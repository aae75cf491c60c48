// Which verified clients a listener lets in (--tls-client-san): a pattern is an exact SAN (a DNS
// name, compared without regard to ASCII case, or a URI such as
// spiffe://cluster.local/ns/edge/sa/envoy, compared exactly) or "*.example.com", a DNS wildcard
// standing for exactly one leftmost label (a.example.com, not example.com nor a.b.example.com),
// as RFC 6125 matches server names. No other '*' is allowed: a pattern that could be read two
// ways is refused when the settings are checked (ValidateSanPattern), not guessed at per
// connection. One rule for every listener (HTTP, forward-auth and gRPC).
#ifndef SLUICE_TLS_SAN_MATCH_H_
#define SLUICE_TLS_SAN_MATCH_H_

#include <span>
#include <string>
#include <string_view>

#include "sluice/status.h"

namespace sluice::tls {

// True when one of `sans` matches one of `patterns`; an empty `patterns` allows any SAN list
// (even an empty one).
bool SanAllowed(std::span<const std::string> patterns, std::span<const std::string> sans);

// An error naming the pattern when it is empty or has a '*' other than a whole leftmost label.
Result<void> ValidateSanPattern(std::string_view pattern);

// One pattern against one SAN.
bool SanMatches(std::string_view pattern, std::string_view san);

}  // namespace sluice::tls

#endif  // SLUICE_TLS_SAN_MATCH_H_
