#include "util/ip_network.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace sluice::util {
namespace {

constexpr std::array<uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// inet_pton of exactly `text` (it needs a terminated string; addresses are short).
std::optional<IpAddress> ParseBare(std::string_view text) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpAddress ip;
  if (inet_pton(AF_INET, buf, ip.bytes.data()) == 1) return ip;
  if (inet_pton(AF_INET6, buf, ip.bytes.data()) != 1) return std::nullopt;
  ip.v6 = true;
  if (std::memcmp(ip.bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size()) == 0) {
    IpAddress v4;
    std::memcpy(v4.bytes.data(), ip.bytes.data() + 12, 4);
    return v4;
  }
  return ip;
}

bool IsPort(std::string_view text) {
  unsigned port = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), port);
  return !text.empty() && r.ec == std::errc() && r.ptr == text.data() + text.size() &&
         port <= 65535;
}

}  // namespace

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN];
  if (inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf) == nullptr) return {};
  return buf;
}

std::optional<IpAddress> ParseIpAddress(std::string_view text) {
  if (auto ip = ParseBare(text)) return ip;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && !(rest.starts_with(':') && IsPort(rest.substr(1)))) return std::nullopt;
    auto ip = ParseBare(text.substr(1, close - 1));
    if (!ip || !ip->v6) return std::nullopt;
    return ip;
  }
  // "a.b.c.d:port": one colon only (more would be IPv6, which needs brackets with a port).
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  if (!IsPort(text.substr(colon + 1))) return std::nullopt;
  auto ip = ParseBare(text.substr(0, colon));
  if (!ip || ip->v6) return std::nullopt;
  return ip;
}

bool IpNetwork::Contains(const IpAddress& ip) const {
  if (ip.v6 != base.v6) return false;
  int bits = prefix;
  for (size_t i = 0; bits > 0; ++i, bits -= 8) {
    const auto mask = static_cast<uint8_t>(bits >= 8 ? 0xff : 0xff << (8 - bits));
    if ((ip.bytes[i] & mask) != base.bytes[i]) return false;
  }
  return true;
}

std::expected<IpNetwork, std::string> ParseIpNetwork(std::string_view text) {
  const size_t slash = text.find('/');
  const auto ip = ParseBare(text.substr(0, slash));
  if (!ip) return std::unexpected("not an IP address or CIDR block (e.g. 10.0.0.0/8, ::1/128)");
  IpNetwork net{*ip, ip->v6 ? 128 : 32};
  if (slash != std::string_view::npos) {
    const std::string_view p = text.substr(slash + 1);
    int prefix = -1;
    const auto r = std::from_chars(p.data(), p.data() + p.size(), prefix);
    if (p.empty() || r.ec != std::errc() || r.ptr != p.data() + p.size() || prefix < 0 ||
        prefix > net.prefix) {
      return std::unexpected("the prefix length after '/' must be 0 to " +
                             std::to_string(net.prefix));
    }
    net.prefix = prefix;
  }
  IpAddress masked = net.base;
  for (int i = 0; i < 16; ++i) {
    const int bits = net.prefix - 8 * i;
    const uint8_t keep =
        bits >= 8 ? 0xff : (bits <= 0 ? 0 : static_cast<uint8_t>(0xff << (8 - bits)));
    masked.bytes[i] &= keep;
  }
  if (masked != net.base) {
    return std::unexpected("host bits are set after the prefix (the block is " + masked.ToString() +
                           "/" + std::to_string(net.prefix) + ")");
  }
  return net;
}

}  // namespace sluice::util
