// The body of POST /v1/state (an admin credit, debit or remaining: Limiter::Adjust) and its
// answer. Not on the hot path.
//
//   {"credit": 10}   {"debit": 5}   {"remaining": 0}   {"credit": 100, "allow_over_limit": true}
#ifndef SLUICE_HTTP_ADJUST_JSON_H_
#define SLUICE_HTTP_ADJUST_JSON_H_

#include <string>
#include <string_view>

#include "service/rate_limit_service.h"
#include "sluice/adjustment.h"
#include "sluice/status.h"

namespace sluice::server {

struct AdjustBody {
  Adjustment change;
  std::string_view action;  // "credit", "debit" or "remaining"
  std::string change_json;  // the change as the audit log records it: {"credit":10,...}
};

// Exactly one of credit, debit and remaining, a whole number in [0, 2^53]; allow_over_limit a
// boolean (default false). Anything else -- not JSON, another field, two of the three, a
// fraction, a negative or a string -- is an error naming it (400).
Result<AdjustBody> ParseAdjustBody(std::string_view body);

// {"domain","counter_key","action","request_id","before":{GET /v1/state's counter},
//  "after":{the same}}.
std::string RenderCounterChangeJson(std::string_view domain, std::string_view action,
                                    std::string_view request_id, const CounterChange& change);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_ADJUST_JSON_H_
