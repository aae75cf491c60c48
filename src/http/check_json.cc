#include "http/check_json.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "config/limit_unit.h"
#include "http/ceil_millis.h"
#include "http/flat_json.h"
#include "sluice/algorithm.h"
#include "sluice/decision.h"
#include "util/json_string.h"

namespace sluice::server {
namespace {

using Node = FlatJson::Node;
using Kind = FlatJson::Kind;

// Names the first field of `object` that is not in `allowed`, or "" if all are known. "First"
// in byte order of the names, as the errors have always named it.
std::string UnknownField(const FlatJson& doc, const Node& object,
                         std::initializer_list<std::string_view> allowed) {
  const std::string* first = nullptr;
  for (const Node* c = doc.First(object); c != nullptr; c = doc.Next(*c)) {
    bool known = false;
    for (std::string_view a : allowed) known = known || c->name == a;
    if (!known && (first == nullptr || c->name < *first)) first = &c->name;
  }
  return first == nullptr ? "" : *first;
}

// Any integer: the range is the service's rule. One beyond int64 (the rules refuse it anyway)
// is kept as the largest int64, so it is refused with the same words as any other out of range.
Result<int64_t> ParseHits(const Node& v, const std::string& where) {
  if (!v.is_number_integer()) return MakeError(where + ": must be an integer");
  if (v.kind == Kind::kUnsigned) {
    return static_cast<int64_t>(
        std::min<uint64_t>(v.unsigned_integer, std::numeric_limits<int64_t>::max()));
  }
  return v.integer;
}

Result<LimitOverride> ParseOverride(const FlatJson& doc, const Node& v, const std::string& where) {
  if (v.kind != Kind::kObject) return MakeError(where + ": must be an object");
  // A per-request limit keeps its own counter per rate; calendar windows are a rule's, whose
  // zone and bounds the operator chose (docs/quotas.md, "Calendar periods").
  for (const char* f : {"calendar", "timezone", "week_start"}) {
    if (doc.Find(v, f) != nullptr) {
      return MakeError(where + "." + f +
                       ": a per-request limit cannot be a calendar window; configure "
                       "calendar on a rule");
    }
  }
  if (auto f = UnknownField(doc, v, {"requests_per_unit", "unit", "period"}); !f.empty()) {
    return MakeError(where + ": unknown field '" + f + "'");
  }
  const Node* rpu = doc.Find(v, "requests_per_unit");
  const Node* unit = doc.Find(v, "unit");
  const Node* period = doc.Find(v, "period");
  if (rpu == nullptr || (unit == nullptr) == (period == nullptr)) {
    return MakeError(where + ": needs requests_per_unit and either unit or period");
  }
  // The field's type: a uint32, as in Envoy's API (whose wire type bounds it the same way).
  if (!rpu->is_number_integer() || (rpu->kind == Kind::kInteger && rpu->integer < 0) ||
      (rpu->kind == Kind::kUnsigned ? rpu->unsigned_integer : static_cast<uint64_t>(rpu->integer)) >
          UINT32_MAX) {
    return MakeError(where + ".requests_per_unit: must be an integer in [0, 4294967295]");
  }
  const int64_t requests =
      rpu->kind == Kind::kUnsigned ? static_cast<int64_t>(rpu->unsigned_integer) : rpu->integer;
  if (period != nullptr) {
    if (period->kind != Kind::kString) return MakeError(where + ".period: must be a string");
    auto parsed = ParsePeriod(period->text);
    if (!parsed) return MakeError(where + ".period: " + parsed.error().message);
    return LimitOverride{requests, *parsed};
  }
  if (unit->kind != Kind::kString) return MakeError(where + ".unit: must be a string");
  const auto parsed = ParseUnit(unit->text);
  if (!parsed) {
    return MakeError(where + ".unit: unknown unit '" + unit->text +
                     "' (second, minute, hour, day, week, month or year)");
  }
  return LimitOverride{requests, LimitPeriod::Of(*parsed)};
}

// The body was bounded before parsing (its bytes by HttpApiOptions::max_body_bytes, its values
// and depth by CheckJsonBounds), so the request built here is too: no need to stop early at a
// count over the rules' bounds, which the service refuses afterwards with its own words.
Result<CheckDescriptor> ParseDescriptor(FlatJson& doc, const Node& v, const std::string& where) {
  if (v.kind != Kind::kObject) return MakeError(where + ": must be an object");
  if (auto f = UnknownField(doc, v, {"entries", "hits", "limit"}); !f.empty()) {
    return MakeError(where + ": unknown field '" + f + "'");
  }
  CheckDescriptor d;
  const Node* entries = doc.Find(v, "entries");
  if (entries == nullptr) return MakeError(where + ": missing 'entries'");
  if (entries->kind != Kind::kArray) return MakeError(where + ".entries: must be an array");
  d.entries.reserve(entries->size);
  size_t i = 0;
  for (const Node* e = doc.First(*entries); e != nullptr; e = doc.Next(*e), ++i) {
    // Built only for an error: the hot path must not format it per entry.
    const auto at = [&] { return where + ".entries[" + std::to_string(i) + "]"; };
    if (e->kind != Kind::kObject) return MakeError(at() + ": must be an object");
    if (auto f = UnknownField(doc, *e, {"key", "value"}); !f.empty()) {
      return MakeError(at() + ": unknown field '" + f + "'");
    }
    const Node* key = doc.Find(*e, "key");
    const Node* value = doc.Find(*e, "value");
    if (key == nullptr) return MakeError(at() + ": missing 'key'");
    if (value == nullptr) return MakeError(at() + ": missing 'value'");
    if (key->kind != Kind::kString) return MakeError(at() + ".key: must be a string");
    if (value->kind != Kind::kString) return MakeError(at() + ".value: must be a string");
    d.entries.emplace_back(doc.Take(*key), doc.Take(*value));
  }
  if (const Node* hits = doc.Find(v, "hits"); hits != nullptr) {
    auto h = ParseHits(*hits, where + ".hits");
    if (!h) return std::unexpected(h.error());
    d.hits = *h;
  }
  if (const Node* limit = doc.Find(v, "limit"); limit != nullptr) {
    auto o = ParseOverride(doc, *limit, where + ".limit");
    if (!o) return std::unexpected(o.error());
    d.limit_override = *o;
  }
  return d;
}

void AppendBool(std::string& out, bool b) { out += b ? "true" : "false"; }

size_t Length(std::string_view literal) { return literal.size(); }

size_t Digits(uint64_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

// The values and the nesting of the largest bounded check (MaxCheckBodyBytes): the root object
// with a domain, charge, hits, priority and the descriptors array; per descriptor its object,
// entries array, hits and a limit object with two members; per entry its object, key and value;
// max_descriptors + 1 descriptors of max_entries entries. Root, descriptors, descriptor, entries,
// entry: five levels.
FlatJson::Bounds CheckJsonBounds(const CheckLimits& limits) {
  const size_t values = 6 + (limits.max_descriptors + 1) * (6 + 3 * limits.max_entries);
  return {.max_depth = 5,
          .max_values = static_cast<uint32_t>(std::min<size_t>(values, UINT32_MAX))};
}

std::string ParseFailure(FlatJson::Error error, const CheckLimits& limits) {
  switch (error) {
    case FlatJson::Error::kTooDeep:
      return "the body nests deeper than a check request can (" +
             std::to_string(CheckJsonBounds(limits).max_depth) + " levels)";
    case FlatJson::Error::kTooManyValues:
      return "the body has more JSON values than a check request can (" +
             std::to_string(CheckJsonBounds(limits).max_values) + ")";
    default:
      return "the body is not valid JSON";
  }
}

}  // namespace

// The longest `period` a client needs to write: 366 days in nanoseconds, "31622400000000000ns".
constexpr size_t kLongestPeriodText = 19;

size_t MaxCheckBodyBytes(const CheckLimits& limits) {
  const size_t hits = Digits(UINT64_MAX);  // the longest integer a client may write
  size_t longest_unit = 0;
  for (Unit u : {Unit::kSecond, Unit::kMinute, Unit::kHour, Unit::kDay, Unit::kWeek, Unit::kMonth,
                 Unit::kYear}) {
    longest_unit = std::max(longest_unit, UnitName(u).size());
  }
  const auto descriptor = [&](size_t key_bytes, size_t value_bytes) {
    const size_t entry = Length(R"({"key":")") + key_bytes + Length(R"(","value":")") +
                         value_bytes + Length(R"("})");
    return Length(R"({"entries":[)") + limits.max_entries * entry + (limits.max_entries - 1) +
           Length(R"(],"hits":)") + hits + Length(R"(,"limit":{"requests_per_unit":)") +
           Digits(UINT32_MAX) + Length(R"(,"period":")") +
           std::max(longest_unit, kLongestPeriodText) + Length(R"("}})");
  };
  // Every count at its bound with one-byte strings, and one more descriptor with every size at
  // its bound.
  const size_t descriptors = limits.max_descriptors * descriptor(1, 1) +
                             descriptor(limits.max_key_bytes, limits.max_value_bytes) +
                             limits.max_descriptors;  // commas
  return Length(R"({"domain":")") + kMaxConfiguredDomainBytes +
         Length(R"(","charge":false,"hits":)") + hits + Length(R"(,"priority":")") +
         kMaxPriorityBytes + Length(R"(","descriptors":[)") + descriptors + Length("]}");
}

Result<CheckRequest> ParseCheckRequest(std::string_view body, const CheckLimits& limits) {
  FlatJson doc;
  if (!doc.Parse(body, CheckJsonBounds(limits)))
    return MakeError(ParseFailure(doc.error(), limits));
  const Node& root = doc.root();
  if (root.kind != Kind::kObject) return MakeError("the body must be a JSON object");
  if (auto f = UnknownField(doc, root, {"domain", "descriptors", "hits", "charge", "priority"});
      !f.empty()) {
    return MakeError("unknown field '" + f + "'");
  }
  CheckRequest request;
  request.caller = Caller::kHttpJson;
  const Node* domain = doc.Find(root, "domain");
  if (domain == nullptr) return MakeError("missing 'domain'");
  if (domain->kind != Kind::kString) return MakeError("domain: must be a string");
  request.domain = domain->text;

  const Node* descriptors = doc.Find(root, "descriptors");
  if (descriptors == nullptr) return MakeError("missing 'descriptors'");
  if (descriptors->kind != Kind::kArray) return MakeError("descriptors: must be an array");
  if (const Node* hits = doc.Find(root, "hits"); hits != nullptr) {
    auto h = ParseHits(*hits, "hits");
    if (!h) return std::unexpected(h.error());
    request.hits = *h;
  }
  if (const Node* charge = doc.Find(root, "charge"); charge != nullptr) {
    if (charge->kind != Kind::kBool) return MakeError("charge: must be true or false");
    request.charge = charge->integer == 1;
  }
  if (const Node* priority = doc.Find(root, "priority"); priority != nullptr) {
    if (priority->kind != Kind::kString) return MakeError("priority: must be a string");
    if (priority->text.size() > kMaxPriorityBytes) {
      return MakeError("priority: longer than " + std::to_string(kMaxPriorityBytes) + " bytes");
    }
    request.priority = priority->text;
  }
  request.descriptors.reserve(descriptors->size);
  size_t i = 0;
  for (const Node* d = doc.First(*descriptors); d != nullptr; d = doc.Next(*d), ++i) {
    auto parsed = ParseDescriptor(doc, *d, "descriptors[" + std::to_string(i) + "]");
    if (!parsed) return std::unexpected(parsed.error());
    request.descriptors.push_back(std::move(*parsed));
  }
  return request;
}

void AppendCalendarJson(std::string& out, const LimitSpec& spec) {
  if (!spec.IsCalendar()) return;
  out += ",\"calendar\":";
  util::AppendJsonStringOfBytes(out, CalendarUnitName(spec.calendar.unit));
  out += ",\"timezone\":";
  util::AppendJsonStringOfBytes(out, spec.calendar.timezone);
  if (spec.calendar.week_starts_sunday) out += ",\"week_start\":\"sunday\"";
}

void AppendLimitJson(std::string& out, const Limit* limit) {
  if (limit == nullptr) {
    out += "null";
    return;
  }
  out += "{\"name\":";
  util::AppendJsonStringOfBytes(out, limit->name);
  out += ",\"requests_per_unit\":";
  util::AppendJsonInt(out, limit->requests_per_unit);
  if (limit->period.unit) {
    out += ",\"unit\":";
    util::AppendJsonStringOfBytes(out, UnitName(*limit->period.unit));
  }
  out += ",\"period_s\":";
  util::AppendJsonSecondsOfMicros(out, limit->period.length / std::chrono::microseconds(1));
  if (limit->kind == LimitKind::kLimited) AppendCalendarJson(out, limit->spec);
  if (limit->kind == LimitKind::kLimited) {
    out += ",\"algorithm\":";
    util::AppendJsonStringOfBytes(out, AlgorithmName(limit->spec.algorithm));
    out += ",\"burst\":";
    util::AppendJsonInt(out, limit->spec.Capacity());
  } else {
    out += ",\"algorithm\":null,\"burst\":null";
  }
  if (limit->concurrency) {
    out += ",\"concurrency\":{\"max_in_flight\":";
    util::AppendJsonInt(out, limit->concurrency->spec.max_in_flight);
    out += ",\"permit_ttl_ms\":";
    util::AppendJsonInt(out, CeilMillis(limit->concurrency->spec.ttl));
    out += '}';
  }
  out += '}';
}

std::string RenderCheckResponse(const CheckResponse& response) {
  std::string out;
  out.reserve(64 + 280 * response.statuses.size());
  out += "{\"overall\":";
  out += response.overall == Code::kOk ? "\"OK\"" : "\"OVER_LIMIT\"";
  out += ",\"delay_ms\":";
  util::AppendJsonInt(out, CeilMillis(response.delay));
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
    util::AppendJsonInt(out, s.remaining);
    out += ",\"reset_after_ms\":";
    util::AppendJsonInt(out, CeilMillis(s.reset_after));
    out += ",\"retry_after_ms\":";
    if (s.retry_after == kNever) {
      out += "null";  // these hits can never pass this limit (more than its capacity, blocked)
    } else {
      util::AppendJsonInt(out, CeilMillis(s.retry_after));
    }
    out += ",\"mode\":";
    util::AppendJsonStringOfBytes(out, ModeName(s.mode));
    out += ",\"soft_over_limit\":";
    AppendBool(out, s.soft_over_limit);
    out += ",\"shadow_over_limit\":";
    AppendBool(out, s.shadow_over_limit);
    out += ",\"degraded\":";
    AppendBool(out, s.degraded);
    out += ",\"replaced\":";
    AppendBool(out, s.replaced);
    if (s.slot) {  // an acquire's concurrency slot (permit_json.h)
      out += ",\"in_flight\":";
      util::AppendJsonInt(out, s.in_flight);
      out += ",\"store_time_us\":";
      util::AppendJsonInt(out, s.slot_store_time_us);
      out += ",\"permit_expires_us\":";
      util::AppendJsonInt(out, s.slot_expires_us);
      if (s.slot_refused) {
        out += ",\"permit_retry_after_ms\":";
        if (s.slot_retry_after == kNever) {
          out += "null";  // its priority's reserve is every slot: never granted
        } else {
          util::AppendJsonInt(out, CeilMillis(s.slot_retry_after));
        }
      }
    }
    out += '}';
  }
  out += "]}\n";
  return out;
}

}  // namespace sluice::server
