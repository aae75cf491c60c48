#include "util/canonical_path.h"

#include <vector>

namespace sluice::util {
namespace {

using Options = PathNormalize;

constexpr bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// RFC 3986 2.3: encoded or not, these are the same character.
constexpr bool IsUnreserved(char c) {
  return IsAlpha(c) || IsDigit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

// What a path may hold literally (RFC 3986 3.3 pchar and '/'), '%' aside. sub-delims, ':' and
// '@' keep their own spelling: "%3B" and ";" may mean different things to a router.
constexpr bool IsPathLiteral(char c) {
  constexpr std::string_view kOther = "!$&'()*+,;=:@/";
  return IsUnreserved(c) || kOther.find(c) != std::string_view::npos;
}

int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendEscape(std::string& out, unsigned char byte) {
  constexpr std::string_view kHex = "0123456789ABCDEF";
  out += '%';
  out += kHex[byte >> 4];
  out += kHex[byte & 0xf];
}

// For an error's text: a client's bytes quoted, those that are not printable ASCII as \xNN.
std::string Quoted(std::string_view s) {
  constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string out = "'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  return out + "'";
}

// Step 2: every byte in one spelling, '%' only as the start of an upper-case escape.
std::expected<std::string, std::string> NormalizeEscapes(std::string_view path,
                                                         Options::EscapedSlashes slashes) {
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '\0') return std::unexpected("the path holds a NUL byte");
    if (c != '%') {
      if (IsPathLiteral(c)) {
        out += c;
      } else {
        AppendEscape(out, static_cast<unsigned char>(c));
      }
      continue;
    }
    const int hi = i + 1 < path.size() ? HexValue(path[i + 1]) : -1;
    const int lo = i + 2 < path.size() ? HexValue(path[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return std::unexpected("bad percent-escape " + Quoted(path.substr(i, 3)) +
                             " in the path (a '%' must be followed by two hex digits)");
    }
    const auto byte = static_cast<unsigned char>(hi * 16 + lo);
    i += 2;
    if (byte == 0) return std::unexpected("the path holds an escaped NUL (%00)");
    if (byte == '/') {
      if (slashes == Options::EscapedSlashes::kReject) {
        return std::unexpected(
            "the path holds an escaped slash (%2F), refused by "
            "forward_auth.normalize.escaped_slashes: reject");
      }
      if (slashes == Options::EscapedSlashes::kDecode) {
        out += '/';
        continue;
      }
    }
    if (IsUnreserved(static_cast<char>(byte))) {
      out += static_cast<char>(byte);
    } else {
      AppendEscape(out, byte);
    }
  }
  return out;
}

void LowerLiterals(std::string& segment) {
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] == '%') {
      i += 2;  // an escape's hex digits stay upper-case
    } else if (segment[i] >= 'A' && segment[i] <= 'Z') {
      segment[i] = static_cast<char>(segment[i] + ('a' - 'A'));
    }
  }
}

// Steps 3 to 6 on a path of normalised escapes starting with '/'.
std::string Segments(std::string_view path, const Options& options) {
  std::vector<std::string> kept;
  bool trailing = false;  // whether the result ends with '/' after its last segment
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const bool last = end == path.size();
    std::string_view segment = path.substr(start, end - start);
    start = end + 1;
    if (options.path_params == Options::PathParams::kStrip) {
      segment = segment.substr(0, segment.find(';'));  // as Tomcat: "..;x" is ".."
    }
    trailing = last;
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();  // at the root it stays at the root
      continue;
    }
    trailing = false;
    kept.emplace_back(segment);
  }
  if (options.trailing_slash == Options::TrailingSlash::kStrip) trailing = false;
  std::string out;
  out.reserve(path.size());
  for (std::string& segment : kept) {
    if (options.path_case == Options::PathCase::kLower) LowerLiterals(segment);
    out += '/';
    out += segment;
  }
  if (out.empty() || trailing) out += '/';
  return out;
}

// The length of an absolute-form target's "scheme://authority", or 0 when it is not one
// (RFC 3986 3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )).
size_t SchemeAndAuthority(std::string_view target) {
  if (target.empty() || !IsAlpha(target[0])) return 0;
  size_t i = 1;
  while (i < target.size() && (IsAlpha(target[i]) || IsDigit(target[i]) || target[i] == '+' ||
                               target[i] == '-' || target[i] == '.')) {
    ++i;
  }
  if (target.substr(i, 3) != "://") return 0;
  const size_t end = target.find_first_of("/?", i + 3);
  return end == std::string_view::npos ? target.size() : end;
}

}  // namespace

std::expected<std::string, std::string> CanonicalPath(std::string_view path,
                                                      const PathNormalize& options) {
  if (!path.starts_with('/')) return std::unexpected("the path does not start with '/'");
  auto escaped = NormalizeEscapes(path, options.escaped_slashes);
  if (!escaped) return std::unexpected(escaped.error());
  return Segments(*escaped, options);
}

std::expected<CanonicalRequestTarget, std::string> CanonicalTarget(std::string_view target,
                                                                   const PathNormalize& options) {
  target = target.substr(0, target.find('#'));  // a fragment is the client's own business
  if (!target.starts_with('/')) {
    const size_t authority = SchemeAndAuthority(target);
    if (authority == 0) {
      return std::unexpected("the target " + Quoted(target.substr(0, 64)) +
                             " is neither a path (/...) nor an absolute URI (http://host/...)");
    }
    target.remove_prefix(authority);
  }
  const size_t question = target.find('?');
  CanonicalRequestTarget out;
  if (question != std::string_view::npos) out.query = target.substr(question + 1);
  std::string_view path = target.substr(0, question);
  if (path.empty()) path = "/";  // "http://h" and "http://h?q" name the root
  auto canonical = CanonicalPath(path, options);
  if (!canonical) return std::unexpected(canonical.error());
  out.path = std::move(*canonical);
  return out;
}

}  // namespace sluice::util
