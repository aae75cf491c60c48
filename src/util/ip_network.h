// IP addresses and networks (CIDR blocks) as forward-auth reads them: a proxy's address and the
// entries of X-Forwarded-For compared with `trusted_proxies`. IPv4 and IPv6; an IPv4-mapped IPv6
// address ("::ffff:10.0.0.1") is the IPv4 address it maps, so one IPv4 block covers both ways a
// dual-stack socket may show a client.
//
//   auto net = ParseIpNetwork("10.0.0.0/8");        // or "2001:db8::/32", or "127.0.0.1" (/32)
//   auto ip = ParseIpAddress("10.1.2.3");
//   if (net && ip && net->Contains(*ip)) ...
#ifndef SLUICE_UTIL_IP_NETWORK_H_
#define SLUICE_UTIL_IP_NETWORK_H_

#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::util {

struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 uses the first 4
  std::string ToString() const;     // the canonical text (inet_ntop)
  bool operator==(const IpAddress&) const = default;
};

// "192.0.2.1" or "2001:db8::1"; also "[2001:db8::1]", and with a port ("192.0.2.1:4711",
// "[2001:db8::1]:4711"), as some proxies write X-Forwarded-For. Nullopt for anything else.
std::optional<IpAddress> ParseIpAddress(std::string_view text);

struct IpNetwork {
  IpAddress base;  // the host bits cleared
  int prefix = 0;  // 0..32 or 0..128
  bool Contains(const IpAddress& ip) const;
};

// "10.0.0.0/8", "2001:db8::/32", or an address alone (a /32 or /128). Host bits set in the
// address ("10.0.0.1/8") are an error: the block would not say what the writer meant. The
// error says what is wrong; the caller names where.
std::expected<IpNetwork, std::string> ParseIpNetwork(std::string_view text);

}  // namespace sluice::util

#endif  // SLUICE_UTIL_IP_NETWORK_H_
