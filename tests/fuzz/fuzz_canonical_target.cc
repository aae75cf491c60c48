// Fuzz target: canonical request targets and hosts (util/canonical_path.h,
// util/canonical_host.h), what forward-auth makes of the path and host a client writes. The
// first byte chooses the normalize options, the rest is the target (and, as it is, the host).
// Checks, besides "no crash, no UB":
// - an accepted target's path starts with '/', holds no "//", no "." or ".." segment, only
//   bytes a path may hold literally and upper-case escapes of bytes that are not unreserved
//   (with escaped_slashes other than keep, no %2F), and is a fixed point;
// - its query is the input's bytes after the first '?' before the first '#';
// - an accepted host is a fixed point, lower-case, without a trailing dot or a port.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "util/canonical_host.h"
#include "util/canonical_path.h"

namespace {

using sluice::util::PathNormalize;

bool IsUnreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lower-case hex is not canonical
}

PathNormalize Options(uint8_t bits) {
  PathNormalize o;
  o.trailing_slash =
      (bits & 1) ? PathNormalize::TrailingSlash::kStrip : PathNormalize::TrailingSlash::kKeep;
  o.path_params = (bits & 2) ? PathNormalize::PathParams::kStrip : PathNormalize::PathParams::kKeep;
  o.path_case = (bits & 4) ? PathNormalize::PathCase::kLower : PathNormalize::PathCase::kKeep;
  switch ((bits >> 3) % 3) {
    case 0:
      o.escaped_slashes = PathNormalize::EscapedSlashes::kKeep;
      break;
    case 1:
      o.escaped_slashes = PathNormalize::EscapedSlashes::kDecode;
      break;
    default:
      o.escaped_slashes = PathNormalize::EscapedSlashes::kReject;
      break;
  }
  return o;
}

void CheckPath(const std::string& path, const PathNormalize& o) {
  FUZZ_CHECK(path.starts_with('/'));
  FUZZ_CHECK(path.find("//") == std::string::npos);
  FUZZ_CHECK(path.find("/./") == std::string::npos && !path.ends_with("/."));
  FUZZ_CHECK(path.find("/../") == std::string::npos && !path.ends_with("/.."));
  constexpr std::string_view kLiteral = "!$&'()*+,;=:@/";
  for (size_t i = 0; i < path.size(); ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    if (c == '%') {
      FUZZ_CHECK(i + 2 < path.size());
      const int hi = Hex(path[i + 1]);
      const int lo = Hex(path[i + 2]);
      FUZZ_CHECK(hi >= 0 && lo >= 0);
      const int byte = hi * 16 + lo;
      FUZZ_CHECK(byte != 0 && !IsUnreserved(static_cast<unsigned char>(byte)));
      FUZZ_CHECK(byte != '/' || o.escaped_slashes == PathNormalize::EscapedSlashes::kKeep);
      i += 2;
      continue;
    }
    FUZZ_CHECK(IsUnreserved(c) || kLiteral.find(static_cast<char>(c)) != std::string_view::npos);
    FUZZ_CHECK(o.path_case == PathNormalize::PathCase::kKeep || !(c >= 'A' && c <= 'Z'));
    FUZZ_CHECK(o.path_params == PathNormalize::PathParams::kKeep || c != ';');
  }
  FUZZ_CHECK(o.trailing_slash == PathNormalize::TrailingSlash::kKeep || path == "/" ||
             !path.ends_with('/'));
  const auto again = sluice::util::CanonicalPath(path, o);
  FUZZ_CHECK(again.has_value() && *again == path);
}

void CheckHost(std::string_view input) {
  const auto host = sluice::util::CanonicalHost(input);
  if (!host) return;
  FUZZ_CHECK(!host->empty() && !host->ends_with('.'));
  for (char c : *host) FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));
  const auto again = sluice::util::CanonicalHost(*host);
  FUZZ_CHECK(again.has_value() && *again == *host);
  FUZZ_CHECK(host->starts_with('[') || host->find(':') == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const PathNormalize o = Options(data[0]);
  const std::string_view target(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto t = sluice::util::CanonicalTarget(target, o);
  if (t) {
    CheckPath(t->path, o);
    const std::string_view before_fragment = target.substr(0, target.find('#'));
    const size_t question = before_fragment.find('?');
    if (question == std::string_view::npos) {
      FUZZ_CHECK(t->query.empty());
    } else {
      FUZZ_CHECK(t->query == before_fragment.substr(question + 1));
    }
  }
  CheckHost(target);
  return 0;
}
