// Finding request header fields in the header lines the parser checked (HttpRequestView::
// header_lines: "Name: value\r\n" each, names tokens, values without control characters). The
// HTTP API reads only Authorization, which the parser picks out; the forward-auth endpoint reads
// the fields a proxy forwards, a handful per request, so a scan costs less than an index.
#ifndef SLUICE_HTTP_HTTP_HEADERS_H_
#define SLUICE_HTTP_HTTP_HEADERS_H_

#include <optional>
#include <string>
#include <string_view>

namespace sluice::server {

// The value of the first field named `name` (case-insensitive), without surrounding
// whitespace; nullopt when there is none. An empty value is an empty string.
std::optional<std::string_view> FindHeader(std::string_view header_lines, std::string_view name);

// Every field named `name` combined as one value, in order, joined by ", " (RFC 9110 5.3: a
// list-based field sent on several lines means the same as one line); nullopt when there is
// none. For X-Forwarded-For, which each proxy may append as a line of its own.
std::optional<std::string> CombinedHeader(std::string_view header_lines, std::string_view name);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_HTTP_HEADERS_H_
