// The request a proxy asks the forward-auth endpoint about, read from the proxy's request to it,
// and the descriptors a domain's `forward_auth` actions make of it. Free of networking and of the
// service, so that every header combination is unit-tested.
//
// Where each part comes from (docs/gateways.md), first found wins:
//   method  X-Forwarded-Method (Traefik, Caddy), X-Original-Method (the nginx recipe), the
//           endpoint request's own method (Envoy ext_authz HTTP)
//   uri     X-Forwarded-Uri, X-Original-URI, the endpoint request's own target; its path made
//           canonical with the section's `normalize` options (util/canonical_path.h)
//   host    X-Forwarded-Host, Host; canonical (util/canonical_host.h): lower-cased, without the
//           port or a trailing dot
//   client  the peer's address, unless the peer is in trusted_proxies: then the rightmost
//           X-Forwarded-For address not in trusted_proxies (all of them trusted: the leftmost),
//           so that a client cannot choose its identity by sending the header itself
#ifndef SLUICE_HTTP_FORWARDED_REQUEST_H_
#define SLUICE_HTTP_FORWARDED_REQUEST_H_

#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "config/forward_auth.h"
#include "http/http_message.h"
#include "service/check.h"

namespace sluice::server {

struct ForwardedRequest {
  std::string_view method;
  // The target's canonical path (without the query), or why it has none: a request whose
  // path an action reads is then refused (400), never counted under a spelling of its own.
  std::expected<std::string, std::string> path;
  std::string_view query;     // after '?' up to a '#', undecoded; empty when there is none
  std::string host;           // canonical; empty when the request names none or host_invalid
  bool host_invalid = false;  // a host was named, but it is not a valid name or address
  std::string client;         // canonical IP text; empty when unknown (no peer: unit tests)
};

// Whether one of the actions has an entry of `field`.
bool ActionsRead(const ForwardAuth& config, RequestField field);

// `request` must outlive the result (it holds views into it).
ForwardedRequest DescribeForwarded(const HttpRequestView& request, const ForwardAuth& config);

// One descriptor per action whose entries all have a non-empty value, in the actions' order;
// an action with a missing header, query parameter (or a query that does not decode), host or
// client is skipped. Header values are read from request.header_lines.
std::vector<CheckDescriptor> ForwardedDescriptors(const ForwardedRequest& forwarded,
                                                  const HttpRequestView& request,
                                                  const ForwardAuth& config);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_FORWARDED_REQUEST_H_
