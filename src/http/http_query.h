// Request targets: the path and the decoded query parameters of "/v1/state?domain=api&k=v".
#ifndef SLUICE_HTTP_HTTP_QUERY_H_
#define SLUICE_HTTP_HTTP_QUERY_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/status.h"

namespace sluice::server {

struct Target {
  std::string_view path;   // before '?'
  std::string_view query;  // after '?', empty when there is none
};
Target SplitTarget(std::string_view target);

// The parameters in order, percent-decoded ('+' is a space, as in HTML forms). A malformed
// escape ("%G1", a lone "%") is an error; a parameter without '=' has an empty value.
Result<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view query);

// The domain and the descriptor entries of an admin query ("domain=api&api_key=k1&path=/x"):
// one counter, found as a check with those entries (GET, POST and DELETE /v1/state).
struct CounterQuery {
  std::string domain;
  std::vector<std::pair<std::string, std::string>> entries;
};
// An error when the query is malformed, names no domain or no entry.
Result<CounterQuery> ParseCounterQuery(std::string_view query);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_HTTP_QUERY_H_
