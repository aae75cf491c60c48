// A domain's `forward_auth:` section: which descriptors a request seen by the forward-auth
// endpoint makes (http/forward_auth_api.h), modelled on Envoy's route `rate_limits` actions, and
// which peers may say who the client is. docs/gateways.md is the reference.
//
//   forward_auth:
//     trusted_proxies: [127.0.0.1/32, 10.0.0.0/8, "::1", unix]   # unix: a Unix-socket peer
//     actions:                        # one descriptor per line, entries in order
//       - [remote_address]
//       - [{header: X-Api-Key, key: api_key}, path, method]
//       - [{query: tenant, key: tenant}, {generic_key: search}]
//     normalize:                      # what the path entry is made of (util/canonical_path.h)
//       trailing_slash: keep          # keep | strip
//       path_params: keep             # keep | strip
//       path_case: keep               # keep | lower
//       escaped_slashes: keep         # keep | decode | reject
#ifndef SLUICE_CONFIG_FORWARD_AUTH_H_
#define SLUICE_CONFIG_FORWARD_AUTH_H_

#include <string>
#include <vector>

#include "util/canonical_path.h"
#include "util/ip_network.h"

namespace sluice::server {

// Where one descriptor entry's value comes from.
enum class RequestField {
  kRemoteAddress,  // the client's address (X-Forwarded-For through trusted proxies only)
  kMethod,         // the original request's method
  kHost,           // its host (X-Forwarded-Host, else Host), canonical (util/canonical_host.h)
  kPath,           // its path, canonical (util/canonical_path.h), without the query string
  kHeader,         // a request header's value (the first field of that name)
  kQuery,          // a query parameter's value, percent-decoded
  kGenericKey,     // a constant (Envoy's generic_key)
};

struct ForwardAuthEntry {
  RequestField field = RequestField::kRemoteAddress;
  std::string key;    // the descriptor key: "remote_address", "method", "host", "path", or given
  std::string name;   // kHeader: the header's name; kQuery: the parameter's
  std::string value;  // kGenericKey: the constant
};

// A request makes one descriptor per action whose every entry has a value: an action with a
// header or query parameter the request lacks makes none (as Envoy skips a rate_limits action
// whose request_headers entry is missing).
struct ForwardAuthAction {
  std::vector<ForwardAuthEntry> entries;
};

struct ForwardAuth {
  std::vector<util::IpNetwork> trusted_proxies;  // may be empty: X-Forwarded-For is never read
  // `unix` in trusted_proxies: a peer on a Unix-socket listener may say who the client is
  // (HttpRequestView::peer kUnixPeer). Off, X-Forwarded-For from such a peer is never read.
  bool trust_unix = false;
  std::vector<ForwardAuthAction> actions;
  util::PathNormalize normalize;  // the options of the path's canonical form
  std::string origin;             // "file:line:col" of `forward_auth:`
};

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_FORWARD_AUTH_H_
