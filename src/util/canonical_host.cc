#include "util/canonical_host.h"

#include "util/ascii.h"
#include "util/ip_network.h"

namespace sluice::util {
namespace {

constexpr size_t kMaxName = 253;
constexpr size_t kMaxLabel = 63;

bool IsDigits(std::string_view s) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool IsLabelByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::expected<std::string, std::string> Invalid(std::string_view why) {
  return std::unexpected(std::string(why));
}

// "[v6]" or "[v6]:port".
std::expected<std::string, std::string> Bracketed(std::string_view host) {
  const size_t close = host.find(']');
  if (close == std::string_view::npos) return Invalid("an IPv6 literal without its ']'");
  const std::string_view port = host.substr(close + 1);
  if (!port.empty() && !(port.starts_with(':') && IsDigits(port.substr(1)))) {
    return Invalid("what follows an IPv6 literal is not a port");
  }
  const auto ip = ParseIpAddress(host.substr(0, close + 1));
  if (!ip) return Invalid("not an IPv6 address in brackets");
  return ip->v6 ? "[" + ip->ToString() + "]" : ip->ToString();
}

}  // namespace

std::expected<std::string, std::string> CanonicalHost(std::string_view host) {
  if (host.empty()) return Invalid("no host");
  if (host.starts_with('[')) return Bracketed(host);
  // A bare IPv6 address (some proxies write X-Forwarded-Host so): its colons are not a port's.
  if (host.find(':') != host.rfind(':')) {
    const auto ip = ParseIpAddress(host);
    if (!ip || !ip->v6) return Invalid("more than one ':' and not an IPv6 address");
    return "[" + ip->ToString() + "]";
  }
  if (const size_t colon = host.find(':'); colon != std::string_view::npos) {
    if (!IsDigits(host.substr(colon + 1))) return Invalid("the port is not a number");
    host = host.substr(0, colon);
  }
  if (host.ends_with('.')) host.remove_suffix(1);  // the root label: "a.example." is "a.example"
  if (host.empty() || host.size() > kMaxName) return Invalid("not a host name of 1 to 253 bytes");
  std::string out;
  out.reserve(host.size());
  size_t label = 0;
  for (char c : host) {
    c = ToLowerAscii(c);
    if (c == '.') {
      if (label == 0) return Invalid("an empty label in the host name");
      label = 0;
    } else if (!IsLabelByte(c) || ++label > kMaxLabel) {
      return Invalid("not a host name (letters, digits, '-', '_', labels of up to 63 bytes)");
    }
    out += c;
  }
  if (label == 0) return Invalid("an empty label in the host name");
  return out;
}

}  // namespace sluice::util
