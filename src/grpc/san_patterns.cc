#include "grpc/san_patterns.h"

#include <algorithm>

namespace sluice::server {
namespace {

bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&](char x, char y) { return lower(x) == lower(y); });
}

bool DnsMatches(std::string_view pattern, std::string_view name) {
  if (!pattern.starts_with("*.")) return EqualsIgnoringAsciiCase(pattern, name);
  const std::string_view suffix = pattern.substr(1);  // ".edge.test"
  if (name.size() <= suffix.size()) return false;
  const std::string_view label = name.substr(0, name.size() - suffix.size());
  return label.find('.') == std::string_view::npos &&
         EqualsIgnoringAsciiCase(name.substr(label.size()), suffix);
}

}  // namespace

Result<void> ValidateSanPattern(std::string_view pattern) {
  const std::string quoted = "'" + std::string(pattern) + "'";
  if (pattern.empty()) return MakeError("a client SAN pattern is empty");
  const std::string_view rest = pattern.starts_with("*.") ? pattern.substr(2) : pattern;
  if (rest.find('*') != std::string_view::npos) {
    return MakeError("client SAN pattern " + quoted +
                     ": '*' is allowed only as a whole leftmost DNS label (\"*.example.com\")");
  }
  if (pattern.starts_with("*.") && (rest.empty() || rest.starts_with('.'))) {
    return MakeError("client SAN pattern " + quoted + ": a wildcard needs a name after \"*.\"");
  }
  return {};
}

bool SanAllowed(const std::vector<std::string>& patterns, const PeerIdentity& identity) {
  for (const std::string& p : patterns) {
    if (std::ranges::any_of(identity.dns, [&](const std::string& n) { return DnsMatches(p, n); })) {
      return true;
    }
    if (!p.starts_with("*.") && std::ranges::find(identity.uris, p) != identity.uris.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace sluice::server
