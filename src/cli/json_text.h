// Minimal JSON text helpers for the hot output path (nlohmann::json is used where speed does not
// matter). Input strings must be valid UTF-8; the trace reader guarantees it for keys.
#ifndef SLUICE_CLI_JSON_TEXT_H_
#define SLUICE_CLI_JSON_TEXT_H_

#include <string>
#include <string_view>

namespace sluice::cli {

// Appends `s` as a JSON string literal, quotes included (RFC 8259 escaping).
void AppendJsonString(std::string& out, std::string_view s);

bool IsValidUtf8(std::string_view s);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_JSON_TEXT_H_
