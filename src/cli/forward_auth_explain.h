// `sluice forward-auth explain`: what the forward-auth endpoint makes of one request under a
// config, without running sluiced: the domain, the canonical path and host, the query, the
// client, and each descriptor the actions make (or why the request is refused), so that an
// operator can check the section's `normalize` options against the router in front of it.
//
//   sluice forward-auth explain --config examples/sluice.yaml --uri '/v1//%73earch;a'
//       --host Api.Example. --header 'X-Api-Key: k1'        (one command line)
#ifndef SLUICE_CLI_FORWARD_AUTH_EXPLAIN_H_
#define SLUICE_CLI_FORWARD_AUTH_EXPLAIN_H_

#include <string>
#include <vector>

#include "config/config.h"
#include "sluice/status.h"

namespace sluice::cli {

struct ExplainRequest {
  std::string domain = {};  // empty: the one domain with a forward_auth section
  std::string uri = {};     // the original request target, as X-Forwarded-Uri would carry it
  std::string host = {};    // empty: none
  std::string method = "GET";
  std::string peer = {};                  // the proxy's address; empty: no remote_address
  std::vector<std::string> headers = {};  // "Name: value"
};

// The report, a few lines of text; an error for a request that cannot be described (no such
// domain, a header without ':').
Result<std::string> ExplainForwardAuth(const server::Config& config, const ExplainRequest& request);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_FORWARD_AUTH_EXPLAIN_H_
