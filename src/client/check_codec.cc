#include "client/check_codec.h"

#include <nlohmann/json.hpp>

namespace sluice::client {

using Json = nlohmann::json;

namespace {
Result<CheckResponse> DecodeStatuses(const Json& json);
}  // namespace

std::string EncodeCheckRequest(const CheckRequest& request) {
  Json body = {{"domain", request.domain}, {"hits", request.hits}};
  Json& descriptors = body["descriptors"] = Json::array();
  for (const Descriptor& d : request.descriptors) {
    Json entries = Json::array();
    for (const Entry& e : d.entries) entries.push_back({{"key", e.key}, {"value", e.value}});
    Json descriptor = {{"entries", std::move(entries)}};
    if (d.hits) descriptor["hits"] = *d.hits;
    descriptors.push_back(std::move(descriptor));
  }
  if (request.charge) body["charge"] = true;
  // Invalid UTF-8 in a key or value is replaced, not thrown: sluiced would refuse it anyway.
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<CheckResponse> DecodeCheckAnswer(std::string_view body) {
  const Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("overall") || !json.contains("statuses") ||
      !json["statuses"].is_array() || !json["overall"].is_string()) {
    return MakeError("the answer is not a check answer");
  }
  // value() throws on a field of the wrong type; an answer that is not sluiced's is an error
  // value like any other.
  try {
    return DecodeStatuses(json);
  } catch (const Json::exception&) {
    return MakeError("the answer is not a check answer");
  }
}

namespace {
Result<CheckResponse> DecodeStatuses(const Json& json) {
  CheckResponse out;
  out.allowed = json["overall"] == "OK";
  bool never = false;
  Duration longest{0};
  for (const Json& s : json["statuses"]) {
    if (!s.is_object()) return MakeError("the answer is not a check answer");
    LimitStatus status;
    status.over_limit = s.value("code", "") == "OVER_LIMIT";
    if (s.contains("limit") && s["limit"].is_object()) {
      status.limit_name = s["limit"].value("name", "");
    }
    status.remaining = s.value("remaining", int64_t{0});
    status.reset_after = std::chrono::milliseconds(s.value("reset_after_ms", int64_t{0}));
    const auto retry = s.find("retry_after_ms");
    if (retry != s.end() && retry->is_number_integer()) {
      status.retry_after = std::chrono::milliseconds(retry->get<int64_t>());
    }
    if (status.over_limit) {
      if (!status.retry_after)
        never = true;
      else
        longest = std::max(longest, *status.retry_after);
    }
    out.statuses.push_back(std::move(status));
  }
  if (!out.allowed && !never) out.retry_after = longest;
  return out;
}
}  // namespace

Result<AcquiredPermit> DecodeAcquirePermit(std::string_view body) {
  const Json json = Json::parse(body, nullptr, false);
  if (!json.is_object()) return MakeError("the answer is not an acquire answer");
  AcquiredPermit out;
  const auto permit = json.find("permit");
  const auto ttl = json.find("permit_ttl_ms");
  if (permit == json.end() || permit->is_null()) return out;
  if (!permit->is_string() || ttl == json.end() || !ttl->is_number_integer()) {
    return MakeError("the answer is not an acquire answer");
  }
  out.token = permit->get<std::string>();
  out.ttl = std::chrono::milliseconds(ttl->get<int64_t>());
  return out;
}

std::string EncodePermitBody(const std::string& token) { return Json{{"permit", token}}.dump(); }

Result<PermitOutcome> DecodePermitOutcome(std::string_view body, const char* field) {
  const Json json = Json::parse(body, nullptr, false);
  const auto done = json.is_object() ? json.find(field) : json.end();
  if (done == json.end() || !done->is_boolean()) return MakeError("not a permit answer");
  PermitOutcome out;
  out.done = done->get<bool>();
  const auto ttl = json.find("permit_ttl_ms");
  if (ttl != json.end() && ttl->is_number_integer()) {
    out.ttl = std::chrono::milliseconds(ttl->get<int64_t>());
  }
  return out;
}

std::string DecodeErrorMessage(std::string_view body) {
  const Json json = Json::parse(body, nullptr, false);
  if (json.is_object() && json.contains("error") && json["error"].is_string()) {
    return json["error"].get<std::string>();
  }
  return std::string(body.substr(0, 200));
}

}  // namespace sluice::client
