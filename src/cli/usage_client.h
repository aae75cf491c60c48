// `sluice recommend --from URL`: reads a running sluiced's per-limit usage,
//   GET /v1/usage?domain=D&limit=NAME   (Authorization: Bearer <admin token>)
//   {"domain", "limit", "period_s", "identities",
//    "percentiles": {"p50", "p90", "p95", "p99", "max"}}   (requests per window)
// over plain HTTP/1.1 on a blocking socket with a deadline, and turns it into a recommendation:
// the distribution is sluiced's, the suggested limit its percentile times the headroom. Without
// the trace there is nothing to replay, so no what-if table and no sub-window burst.
#ifndef SLUICE_CLI_USAGE_CLIENT_H_
#define SLUICE_CLI_USAGE_CLIENT_H_

#include <chrono>
#include <string>

#include "cli/recommend.h"
#include "sluice/status.h"

namespace sluice::cli {

struct UsageQuery {
  std::string url;  // http://host:port (a path prefix is kept)
  std::string admin_token;
  std::string domain;
  std::string limit;
  std::chrono::milliseconds timeout{5000};  // the whole exchange
};

struct Usage {
  std::string domain;
  std::string limit;
  double period_s = 0;
  uint64_t identities = 0;
  PeakDistribution percentiles;
};

// The usage, or an error naming what failed: the URL, the connection, the status (with the
// server's error text), or the field of the JSON that is missing or of the wrong type.
Result<Usage> FetchUsage(const UsageQuery& query);

// Parses /v1/usage's body (exposed for tests).
Result<Usage> ParseUsageJson(std::string_view body);

// The recommendation from a usage: options.percentile must be 50, 90, 95, 99 or 100 (the
// percentiles sluiced reports); burst = limit; no what-if rows.
Result<Recommendation> RecommendFromUsage(const Usage& usage, const RecommendOptions& options);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_USAGE_CLIENT_H_
