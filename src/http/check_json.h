// The JSON form of a check (POST /v1/check): the request body into a CheckRequest, strictly,
// and a CheckResponse into the response body. docs/server.md shows both.
//
//   {"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k1"}],"hits":1}],
//    "hits":1}
//
// Strict means: only the fields above (and a descriptor's "limit" override), each of its type
// (strings, arrays, objects, integers; an override's requests_per_unit a uint32, as in Envoy's
// API). That is all the parser refuses, naming the field ("descriptors[0].hits: must be an
// integer"). What the values must be (non-empty, hits not negative) and what happens past the
// bounds (CheckLimits) is the service's rule (service/check_rules.h), which words its errors the
// same way for Caller::kHttpJson, the caller this sets: "descriptors[0].hits: must not be
// negative". A count beyond int64 is read as the largest int64 (over every limit).
#ifndef SLUICE_HTTP_CHECK_JSON_H_
#define SLUICE_HTTP_CHECK_JSON_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "config/config.h"
#include "service/check.h"
#include "sluice/status.h"

namespace sluice::server {

// A body deeper or with more JSON values than the largest bounded request (MaxCheckBodyBytes's)
// is refused as soon as that is known, so that parsing a hostile body costs no more than a
// legitimate one.
Result<CheckRequest> ParseCheckRequest(std::string_view body,
                                       const CheckLimits& limits = kCheckLimits);

// The size of the largest bounded check, written compactly with each string's bytes as
// themselves: max_descriptors descriptors of max_entries one-byte keys and values (every count at
// its bound) plus one descriptor of max_entries entries with max_key_bytes keys and
// max_value_bytes values (every size at its bound), each with the longest hits and a limit
// override, and a domain as long as a config can hold. The default of --http-max-body-bytes: it
// bounds the memory a body takes, and every bound can be reached within it. Escapes and
// whitespace take room inside it, so a client that pretty-prints a request that large must be
// given a larger cap.
size_t MaxCheckBodyBytes(const CheckLimits& limits = kCheckLimits);

// {"overall":"OK"|"OVER_LIMIT","statuses":[...]}, one status per descriptor, in order.
// retry_after_ms is null when the hits can never pass (over the capacity, or a blocking rule).
std::string RenderCheckResponse(const CheckResponse& response);

// {"name":...,"requests_per_unit":...,"unit":...,"algorithm":...,"burst":...}; `null` for a
// null limit. An unlimited or blocked limit has "algorithm":null and "burst":null.
// A calendar rule adds "calendar", "timezone" and, for Sunday weeks, "week_start" after
// "period_s" (which is then the unit's nominal length; docs/quotas.md, "What clients see").
void AppendLimitJson(std::string& out, const Limit* limit);

// ,"calendar":"month","timezone":"Europe/Lisbon"[,"week_start":"sunday"] for a calendar spec;
// nothing for any other.
void AppendCalendarJson(std::string& out, const LimitSpec& spec);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_CHECK_JSON_H_
