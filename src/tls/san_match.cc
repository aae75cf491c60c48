#include "tls/san_match.h"

#include <string>

#include "util/ascii.h"

namespace sluice::tls {
namespace {

bool IsUri(std::string_view s) { return s.find(':') != std::string_view::npos; }

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

bool SanMatches(std::string_view pattern, std::string_view san) {
  if (pattern.empty() || san.empty()) return false;
  if (IsUri(pattern) || IsUri(san)) return pattern == san;  // URIs: exactly
  if (pattern.starts_with("*.")) {
    const std::string_view suffix = pattern.substr(1);  // ".example.com"
    if (san.size() <= suffix.size()) return false;
    const std::string_view label = san.substr(0, san.size() - suffix.size());
    if (label.find('.') != std::string_view::npos || label.find('*') != std::string_view::npos) {
      return false;  // one label only; a wildcard SAN is never matched by a wildcard pattern
    }
    return util::EqualsIgnoreAsciiCase(san.substr(label.size()), suffix);
  }
  return util::EqualsIgnoreAsciiCase(pattern, san);
}

bool SanAllowed(std::span<const std::string> patterns, std::span<const std::string> sans) {
  if (patterns.empty()) return true;
  for (const std::string& pattern : patterns) {
    for (const std::string& san : sans) {
      if (SanMatches(pattern, san)) return true;
    }
  }
  return false;
}

}  // namespace sluice::tls
