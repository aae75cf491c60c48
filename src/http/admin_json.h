// The JSON bodies of the admin API (GET /v1/limits, /v1/state, /v1/top, /v1/usage). Not on the hot
// path.
#ifndef SLUICE_HTTP_ADMIN_JSON_H_
#define SLUICE_HTTP_ADMIN_JSON_H_

#include <string>
#include <string_view>
#include <vector>

#include "config/api_tokens.h"
#include "config/config.h"
#include "metrics/metrics.h"
#include "service/rate_limit_service.h"

namespace sluice::server {

// {"domains":[{"name","origin","plan_key","plan_source","plans":[...],"identities":N,
//  "limits":[{"id","name","plan","metric_name","kind","unit","requests_per_unit","algorithm",
//  "burst","shaper","mode","failure_mode","detailed_metric","replaces","origin"}]}]}.
// Identities (API keys) are counted, never listed: they are often secrets.
// With `client`, only the domains it may check (an --api-tokens client reads its own).
std::string RenderConfigJson(const Config& config, const ApiClient* client = nullptr);

// {"domain","counter_key","limit":{...}|null,"remaining","reset_after_ms"}.
std::string RenderCounterStateJson(std::string_view domain, const CounterState& state);

// {"domain","top":[{"identity","rejected","near_limit","error"}]}.
std::string RenderTopJson(std::string_view domain, const std::vector<HeavyHitter>& top);

// {"domain","limit","period_s","identities","percentiles":{"p50","p90","p95","p99","max"}}:
// `limit` is the limit's name (its metric label when it has none); the percentiles are of the
// identities' peak usage, in requests per window (GET /v1/usage; `sluice recommend --from`
// reads it).
std::string RenderUsageJson(std::string_view domain, std::string_view limit,
                            const UsageReport& report);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_ADMIN_JSON_H_
