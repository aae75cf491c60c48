// Fuzz target: the JSON reader of POST /v1/check (http/flat_json.h) and the body's translation
// into a CheckRequest (http/check_json.h), then the service's rules on it (check_rules.h).
// Checks, besides "no crash, no UB":
// - FlatJson accepts exactly what nlohmann::json accepts, and reads the same value (its header
//   promises this; nlohmann::json is the independent oracle), but for a NUL byte (below);
// - a body ParseCheckRequest accepts is JSON, and written back as JSON (by nlohmann::json, not
//   by sluice) it translates to the same request again;
// - a request the rules admit is within CheckLimits, counted here independently.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "config/limit_unit.h"
#include "fuzz_check.h"
#include "http/check_json.h"
#include "http/flat_json.h"
#include "service/check_rules.h"

namespace {

using sluice::server::CheckRequest;
using sluice::server::FlatJson;

// The document FlatJson read, as nlohmann::json (integers exactly; booleans and floats by kind
// only, since FlatJson keeps no value for them: the API reads neither).
nlohmann::json ToJson(const FlatJson& doc, const FlatJson::Node& node) {
  switch (node.kind) {
    case FlatJson::Kind::kNull:
      return nullptr;
    case FlatJson::Kind::kBool:
      return true;
    case FlatJson::Kind::kInteger:
      return node.integer;
    case FlatJson::Kind::kUnsigned:
      return node.unsigned_integer;
    case FlatJson::Kind::kFloat:
      return 0.5;
    case FlatJson::Kind::kString:
      return node.text;
    case FlatJson::Kind::kArray: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto* c = doc.First(node); c != nullptr; c = doc.Next(*c)) {
        out.push_back(ToJson(doc, *c));
      }
      return out;
    }
    case FlatJson::Kind::kObject: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto* c = doc.First(node); c != nullptr; c = doc.Next(*c)) {
        out[c->name] = ToJson(doc, *c);
      }
      return out;
    }
  }
  return nullptr;
}

// The oracle's value with every boolean and float replaced as ToJson does.
nlohmann::json KindsOnly(const nlohmann::json& j) {
  if (j.is_boolean()) return true;
  if (j.is_number_float()) return 0.5;
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : j) out.push_back(KindsOnly(e));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, value] : j.items()) out[name] = KindsOnly(value);
    return out;
  }
  return j;
}

// How deep a document nests: the recursive helpers above are only used below a bound.
size_t Depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  for (const char c : text) {
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

std::string Render(const CheckRequest& r) {
  nlohmann::json out = {{"domain", r.domain}, {"hits", r.hits}};
  out["descriptors"] = nlohmann::json::array();
  for (const auto& d : r.descriptors) {
    nlohmann::json desc = {{"entries", nlohmann::json::array()}};
    for (const auto& [key, value] : d.entries) {
      desc["entries"].push_back({{"key", key}, {"value", value}});
    }
    if (d.hits) desc["hits"] = *d.hits;
    if (d.limit_override) {
      const sluice::server::LimitPeriod& p = d.limit_override->period;
      desc["limit"] = {{"requests_per_unit", d.limit_override->requests_per_unit}};
      if (p.unit) {
        desc["limit"]["unit"] = std::string(sluice::server::UnitName(*p.unit));
      } else {
        desc["limit"]["period"] = sluice::server::PeriodName(p);
      }
    }
    out["descriptors"].push_back(desc);
  }
  return out.dump();
}

bool Same(const CheckRequest& a, const CheckRequest& b) {
  if (a.domain != b.domain || a.hits != b.hits || a.caller != b.caller ||
      a.descriptors.size() != b.descriptors.size()) {
    return false;
  }
  for (size_t i = 0; i < a.descriptors.size(); ++i) {
    const auto& x = a.descriptors[i];
    const auto& y = b.descriptors[i];
    if (x.entries != y.entries || x.hits != y.hits ||
        x.limit_override.has_value() != y.limit_override.has_value()) {
      return false;
    }
    if (x.limit_override &&
        (x.limit_override->requests_per_unit != y.limit_override->requests_per_unit ||
         x.limit_override->period != y.limit_override->period)) {
      return false;
    }
  }
  return true;
}

// The rules, counted here rather than by the rules' own code: sizes never break one.
bool MeetsTheRules(const CheckRequest& r) {
  if (r.domain.empty() || r.descriptors.empty() || r.hits < 0) return false;
  for (const auto& d : r.descriptors) {
    if (d.entries.empty() || (d.hits && *d.hits < 0)) return false;
    for (const auto& [key, value] : d.entries) {
      if (key.empty() || value.empty()) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);

  FlatJson doc;
  const bool flat_ok = doc.Parse(text);
  const auto oracle = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  // nlohmann::json takes a NUL byte outside a string for the end of the input ("1\0x" is 1);
  // FlatJson refuses it, as RFC 8259 does. With a NUL, FlatJson only must not accept more.
  if (text.find('\0') == std::string_view::npos) {
    FUZZ_CHECK(flat_ok == !oracle.is_discarded());
  } else {
    FUZZ_CHECK(!flat_ok || !oracle.is_discarded());
  }
  if (flat_ok && Depth(text) <= 64) FUZZ_CHECK(ToJson(doc, doc.root()) == KindsOnly(oracle));

  const auto request = sluice::server::ParseCheckRequest(text);
  if (!request) {
    FUZZ_CHECK(!request.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(flat_ok);
  FUZZ_CHECK(request->caller == sluice::server::Caller::kHttpJson);
  const auto again = sluice::server::ParseCheckRequest(Render(*request));
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(Same(*request, *again));

  const auto valid = sluice::server::ValidateCheck(*request);
  FUZZ_CHECK(valid.has_value() == MeetsTheRules(*request));
  return 0;
}
