#include "server/check_json.h"

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "server/json_text.h"
#include "server/limit_unit.h"
#include "sluice/algorithm.h"
#include "sluice/decision.h"

namespace sluice::server {
namespace {

using Json = nlohmann::json;

// Names the first field of `object` that is not in `allowed`, or "" if all are known.
std::string UnknownField(const Json& object, std::initializer_list<std::string_view> allowed) {
  for (const auto& [name, value] : object.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || name == a;
    if (!known) return name;
  }
  return "";
}

Result<int64_t> ParseHits(const Json& v, const std::string& where, const CheckLimits& limits) {
  if (!v.is_number_integer()) return MakeError(where + ": must be an integer");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(limits.max_hits)
                             : (v.get<int64_t>() < 0 || v.get<int64_t>() > limits.max_hits)) {
    return MakeError(where + ": must be between 0 and " + std::to_string(limits.max_hits));
  }
  return v.get<int64_t>();
}

Result<std::string> ParseBoundedString(const Json& v, const std::string& where, size_t max_bytes) {
  if (!v.is_string()) return MakeError(where + ": must be a string");
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty()) return MakeError(where + ": must not be empty");
  if (s.size() > max_bytes) {
    return MakeError(where + ": " + std::to_string(s.size()) + " bytes, over the " +
                     std::to_string(max_bytes) + "-byte limit");
  }
  return s;
}

Result<LimitOverride> ParseOverride(const Json& v, const std::string& where) {
  if (!v.is_object()) return MakeError(where + ": must be an object");
  if (auto f = UnknownField(v, {"requests_per_unit", "unit"}); !f.empty()) {
    return MakeError(where + ": unknown field '" + f + "'");
  }
  const auto rpu = v.find("requests_per_unit");
  const auto unit = v.find("unit");
  if (rpu == v.end() || unit == v.end()) {
    return MakeError(where + ": needs requests_per_unit and unit");
  }
  if (!rpu->is_number_integer() || (!rpu->is_number_unsigned() && rpu->get<int64_t>() < 0) ||
      rpu->get<uint64_t>() > UINT32_MAX) {
    return MakeError(where + ".requests_per_unit: must be an integer in [0, 4294967295]");
  }
  if (!unit->is_string()) return MakeError(where + ".unit: must be a string");
  const auto parsed = ParseUnit(unit->get_ref<const std::string&>());
  if (!parsed) {
    return MakeError(where + ".unit: unknown unit '" + unit->get<std::string>() +
                     "' (second, minute, hour, day, week, month or year)");
  }
  return LimitOverride{rpu->get<int64_t>(), *parsed};
}

Result<CheckDescriptor> ParseDescriptor(const Json& v, const std::string& where,
                                        const CheckLimits& limits) {
  if (!v.is_object()) return MakeError(where + ": must be an object");
  if (auto f = UnknownField(v, {"entries", "hits", "limit"}); !f.empty()) {
    return MakeError(where + ": unknown field '" + f + "'");
  }
  CheckDescriptor d;
  const auto entries = v.find("entries");
  if (entries == v.end()) return MakeError(where + ": missing 'entries'");
  if (!entries->is_array()) return MakeError(where + ".entries: must be an array");
  if (entries->empty()) return MakeError(where + ".entries: must not be empty");
  if (entries->size() > limits.max_entries) {
    return MakeError(where + ".entries: " + std::to_string(entries->size()) +
                     " entries, over the limit of " + std::to_string(limits.max_entries));
  }
  d.entries.reserve(entries->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    const Json& e = (*entries)[i];
    const std::string at = where + ".entries[" + std::to_string(i) + "]";
    if (!e.is_object()) return MakeError(at + ": must be an object");
    if (auto f = UnknownField(e, {"key", "value"}); !f.empty()) {
      return MakeError(at + ": unknown field '" + f + "'");
    }
    const auto key = e.find("key");
    const auto value = e.find("value");
    if (key == e.end()) return MakeError(at + ": missing 'key'");
    if (value == e.end()) return MakeError(at + ": missing 'value'");
    auto k = ParseBoundedString(*key, at + ".key", limits.max_key_bytes);
    if (!k) return std::unexpected(k.error());
    auto val = ParseBoundedString(*value, at + ".value", limits.max_value_bytes);
    if (!val) return std::unexpected(val.error());
    d.entries.emplace_back(std::move(*k), std::move(*val));
  }
  if (const auto hits = v.find("hits"); hits != v.end()) {
    auto h = ParseHits(*hits, where + ".hits", limits);
    if (!h) return std::unexpected(h.error());
    d.hits = *h;
  }
  if (const auto limit = v.find("limit"); limit != v.end()) {
    auto o = ParseOverride(*limit, where + ".limit");
    if (!o) return std::unexpected(o.error());
    d.limit_override = *o;
  }
  return d;
}

void AppendBool(std::string& out, bool b) { out += b ? "true" : "false"; }

}  // namespace

Result<CheckRequest> ParseCheckRequest(std::string_view body, const CheckLimits& limits) {
  // No exceptions: a parse error is a discarded value.
  const Json doc = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return MakeError("the body is not valid JSON");
  if (!doc.is_object()) return MakeError("the body must be a JSON object");
  if (auto f = UnknownField(doc, {"domain", "descriptors", "hits"}); !f.empty()) {
    return MakeError("unknown field '" + f + "'");
  }
  CheckRequest request;
  const auto domain = doc.find("domain");
  if (domain == doc.end()) return MakeError("missing 'domain'");
  if (!domain->is_string()) return MakeError("domain: must be a string");
  request.domain = domain->get<std::string>();
  if (request.domain.empty()) return MakeError("domain: must not be empty");

  const auto descriptors = doc.find("descriptors");
  if (descriptors == doc.end()) return MakeError("missing 'descriptors'");
  if (!descriptors->is_array()) return MakeError("descriptors: must be an array");
  if (descriptors->empty()) return MakeError("descriptors: must not be empty");
  if (descriptors->size() > limits.max_descriptors) {
    return MakeError("descriptors: " + std::to_string(descriptors->size()) +
                     " descriptors, over the limit of " + std::to_string(limits.max_descriptors));
  }
  if (const auto hits = doc.find("hits"); hits != doc.end()) {
    auto h = ParseHits(*hits, "hits", limits);
    if (!h) return std::unexpected(h.error());
    request.hits = *h;
  }
  request.descriptors.reserve(descriptors->size());
  for (size_t i = 0; i < descriptors->size(); ++i) {
    auto d = ParseDescriptor((*descriptors)[i], "descriptors[" + std::to_string(i) + "]", limits);
    if (!d) return std::unexpected(d.error());
    request.descriptors.push_back(std::move(*d));
  }
  return request;
}

void AppendLimitJson(std::string& out, const Limit* limit) {
  if (limit == nullptr) {
    out += "null";
    return;
  }
  out += "{\"name\":";
  AppendJsonString(out, limit->name);
  out += ",\"requests_per_unit\":";
  AppendJsonInt(out, limit->requests_per_unit);
  out += ",\"unit\":";
  AppendJsonString(out, UnitName(limit->unit));
  if (limit->kind == LimitKind::kLimited) {
    out += ",\"algorithm\":";
    AppendJsonString(out, AlgorithmName(limit->spec.algorithm));
    out += ",\"burst\":";
    AppendJsonInt(out, limit->spec.Capacity());
  } else {
    out += ",\"algorithm\":null,\"burst\":null";
  }
  out += '}';
}

std::string RenderCheckResponse(const CheckResponse& response) {
  std::string out;
  out.reserve(64 + 280 * response.statuses.size());
  out += "{\"overall\":";
  out += response.overall == Code::kOk ? "\"OK\"" : "\"OVER_LIMIT\"";
  out += ",\"statuses\":[";
  bool first = true;
  for (const DescriptorStatus& s : response.statuses) {
    if (!first) out += ',';
    first = false;
    out += "{\"code\":";
    out += s.code == Code::kOk ? "\"OK\"" : "\"OVER_LIMIT\"";
    out += ",\"limit\":";
    AppendLimitJson(out, s.limit);
    out += ",\"remaining\":";
    AppendJsonInt(out, s.remaining);
    out += ",\"reset_after_ms\":";
    AppendJsonInt(out, CeilMillis(s.reset_after));
    out += ",\"retry_after_ms\":";
    if (s.retry_after == kNever) {
      out += "null";  // these hits can never pass this limit (more than its capacity, blocked)
    } else {
      AppendJsonInt(out, CeilMillis(s.retry_after));
    }
    out += ",\"mode\":";
    AppendJsonString(out, ModeName(s.mode));
    out += ",\"soft_over_limit\":";
    AppendBool(out, s.soft_over_limit);
    out += ",\"shadow_over_limit\":";
    AppendBool(out, s.shadow_over_limit);
    out += ",\"degraded\":";
    AppendBool(out, s.degraded);
    out += ",\"replaced\":";
    AppendBool(out, s.replaced);
    out += '}';
  }
  out += "]}\n";
  return out;
}

}  // namespace sluice::server
