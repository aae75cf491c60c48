// The few JSON writing helpers the HTTP API needs on its hot path (a check response is
// rendered per request; nlohmann::json would allocate a tree for it). Parsing: flat_json.h.
#ifndef SLUICE_HTTP_JSON_TEXT_H_
#define SLUICE_HTTP_JSON_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/time.h"

namespace sluice::server {

// Appends `s` as a JSON string literal, quotes included (RFC 8259). Bytes that are not valid
// UTF-8 become U+FFFD, so the output is always valid JSON whatever a counter key holds.
void AppendJsonString(std::string& out, std::string_view s);

void AppendJsonInt(std::string& out, int64_t v);

// Whole milliseconds, rounded up (a client that waits this long is not early); negative is 0.
int64_t CeilMillis(Duration d);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_JSON_TEXT_H_
