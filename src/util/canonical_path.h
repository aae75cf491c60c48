// The canonical path of an HTTP request target, so that a limit keyed on a path cannot be
// stepped around by spelling the same path another way (`/v1/%73earch`, `/v1//search`,
// `/v1/./search`, `http://h/v1/search`). docs/gateways.md says what each step matches in nginx,
// Envoy and application routers.
//
//   auto t = CanonicalTarget("/v1/a/../%73earch?q=1#f", {});
//   // t->path == "/v1/search", t->query == "q=1"
//
// Always, in this order (RFC 3986):
//   1. the fragment (from '#') is removed; an absolute-form target's scheme and authority too;
//   2. percent-encodings of unreserved characters are decoded, the others upper-cased (6.2.2.1,
//      6.2.2.2), and every byte a path may not hold literally is percent-encoded, so that raw
//      and encoded spellings of one byte are one spelling;
//   3. (path_params: strip) each segment's ";params" are removed;
//   4. repeated slashes are merged and dot segments removed (5.2.4): `..` never climbs above the
//      root, it stays there, as RFC 3986 5.4.2 and Envoy's normalize_path do;
//   5. (path_case: lower) ASCII letters are lower-cased (escapes stay upper-case);
//   6. (trailing_slash: strip) a trailing slash is removed, but for the path "/".
// The result is a fixed point: canonicalising it again gives it back.
#ifndef SLUICE_UTIL_CANONICAL_PATH_H_
#define SLUICE_UTIL_CANONICAL_PATH_H_

#include <expected>
#include <string>
#include <string_view>

namespace sluice::util {

// The options routers disagree on (forward_auth.normalize); each default keeps the path as RFC
// 3986 says it is.
struct PathNormalize {
  enum class TrailingSlash { kKeep, kStrip };
  enum class PathParams { kKeep, kStrip };
  enum class PathCase { kKeep, kLower };
  enum class EscapedSlashes { kKeep, kDecode, kReject };  // %2F and %2f

  TrailingSlash trailing_slash = TrailingSlash::kKeep;
  PathParams path_params = PathParams::kKeep;
  PathCase path_case = PathCase::kKeep;
  EscapedSlashes escaped_slashes = EscapedSlashes::kKeep;

  bool operator==(const PathNormalize&) const = default;
};

struct CanonicalRequestTarget {
  std::string path;        // starts with '/'
  std::string_view query;  // after '?', up to a '#', as sent (a view into the target)
};

// The target's canonical path and its query; or why it has none (a bad '%' escape, a NUL, an
// escaped slash with escaped_slashes: reject, a target that is neither "/..." nor
// "scheme://authority..."), as one sentence for a 400's body.
std::expected<CanonicalRequestTarget, std::string> CanonicalTarget(std::string_view target,
                                                                   const PathNormalize& options);

// The same for a path alone (no query or fragment is looked for): `path` must start with '/'.
std::expected<std::string, std::string> CanonicalPath(std::string_view path,
                                                      const PathNormalize& options);

}  // namespace sluice::util

#endif  // SLUICE_UTIL_CANONICAL_PATH_H_
