// The canonical text of an HTTP host (Host or X-Forwarded-Host), so that a limit keyed on the
// host cannot be stepped around by spelling it another way (`Shaped.Example:443`,
// `shaped.example.`, `[2001:DB8:0::1]`).
//
//   CanonicalHost("Shaped.Example.:8443")   // "shaped.example"
//   CanonicalHost("[2001:DB8:0::1]:443")    // "[2001:db8::1]"
//   CanonicalHost("bad host")               // an error: not a name or an address
//
// A name: lower-cased, the port and one trailing dot removed; its labels of letters, digits,
// '-' and '_' (names in the wild hold '_', DNS does not forbid it), 1 to 63 bytes each, 253 in
// all. An IPv6 literal: in brackets, in its canonical text (RFC 5952), also when sent bare, as
// some proxies write X-Forwarded-Host. Anything else is an error (an IPv4-mapped literal too:
// "[::ffff:10.0.0.1]" would be a second spelling of 10.0.0.1, and no client needs it).
#ifndef SLUICE_UTIL_CANONICAL_HOST_H_
#define SLUICE_UTIL_CANONICAL_HOST_H_

#include <expected>
#include <string>
#include <string_view>

namespace sluice::util {

std::expected<std::string, std::string> CanonicalHost(std::string_view host);

}  // namespace sluice::util

#endif  // SLUICE_UTIL_CANONICAL_HOST_H_
