#include "http/permit_json.h"

#include "http/ceil_millis.h"
#include "http/check_json.h"
#include "http/flat_json.h"
#include "service/permit_token.h"
#include "util/json_string.h"

namespace sluice::server {

size_t MaxPermitBodyBytes() { return kMaxPermitBytes + 256; }

Result<std::string> ParsePermitBody(std::string_view body) {
  FlatJson doc;
  if (!doc.Parse(body, {.max_depth = 2, .max_values = 8})) {
    return MakeError("the body is not a JSON object {\"permit\": \"...\"}");
  }
  const FlatJson::Node& root = doc.root();
  if (root.kind != FlatJson::Kind::kObject) return MakeError("the body must be a JSON object");
  for (const FlatJson::Node* c = doc.First(root); c != nullptr; c = doc.Next(*c)) {
    if (c->name != "permit") return MakeError("unknown field '" + c->name + "'");
  }
  const FlatJson::Node* permit = doc.Find(root, "permit");
  if (permit == nullptr) return MakeError("missing 'permit'");
  if (permit->kind != FlatJson::Kind::kString) return MakeError("permit: must be a string");
  return permit->text;
}

std::string RenderAcquireResponse(const AcquireResponse& response) {
  std::string check = RenderCheckResponse(response.check);
  std::string fields = ",\"permit\":";
  if (response.permit.empty()) {
    fields += "null,\"permit_ttl_ms\":null";
  } else {
    util::AppendJsonStringOfBytes(fields, response.permit);
    fields += ",\"permit_ttl_ms\":";
    util::AppendJsonInt(fields, CeilMillis(response.permit_ttl));
  }
  // After "overall", so that it reads first as in a check.
  const size_t at = check.find(",\"delay_ms\"");
  check.insert(at == std::string::npos ? 1 : at, fields);
  return check;
}

std::string RenderPermitResult(const PermitResult& result, bool renew) {
  std::string out;
  out.reserve(128);  // over the longest answer (two 20-digit numbers): one allocation
  out += renew ? "{\"renewed\":" : "{\"released\":";
  out += result.done ? "true" : "false";
  if (renew) {
    out += ",\"permit_ttl_ms\":";
    if (result.done) {
      util::AppendJsonInt(out, CeilMillis(result.permit_ttl));
    } else {
      out += "null";
    }
  }
  out += ",\"degraded\":";
  out += result.degraded ? "true" : "false";
  out += ",\"store_time_us\":";
  util::AppendJsonInt(out, result.store_time_us);
  out += "}\n";
  return out;
}

}  // namespace sluice::server
