// Which verified client certificates the gRPC listener lets in, by their subject alternative
// names. A pattern is an exact DNS name ("client.test", compared without regard to ASCII case,
// as DNS names are), an exact URI ("spiffe://cluster.local/ns/edge/sa/envoy", compared byte for
// byte, as SPIFFE IDs are), or "*." and a DNS name: a wildcard for exactly one leftmost label
// ("*.edge.test" lets in "a.edge.test", not "edge.test" nor "a.b.edge.test"), the rule of RFC
// 6125 that clients apply to servers. No other '*' is allowed: a pattern that could be read two
// ways is refused when the options are checked, not guessed at per connection.
//
//   if (auto ok = ValidateSanPattern(p); !ok) return ok.error();
//   if (!SanAllowed(patterns, identity)) refuse();
#ifndef SLUICE_GRPC_SAN_PATTERNS_H_
#define SLUICE_GRPC_SAN_PATTERNS_H_

#include <string>
#include <string_view>
#include <vector>

#include "sluice/status.h"

namespace sluice::server {

// The names a verified client certificate carries (its subjectAltName extension).
struct PeerIdentity {
  std::vector<std::string> dns{};
  std::vector<std::string> uris{};

  bool operator==(const PeerIdentity&) const = default;
};

Result<void> ValidateSanPattern(std::string_view pattern);

// True if one of the identity's names matches one of the patterns (each already validated).
bool SanAllowed(const std::vector<std::string>& patterns, const PeerIdentity& identity);

}  // namespace sluice::server

#endif  // SLUICE_GRPC_SAN_PATTERNS_H_
