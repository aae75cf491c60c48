#include "http/admin_json.h"

#include <charconv>
#include <iterator>
#include <utility>

#include "config/limit_unit.h"
#include "http/ceil_millis.h"
#include "http/check_json.h"
#include "sluice/algorithm.h"
#include "util/json_string.h"

namespace sluice::server {
namespace {

std::string_view KindName(LimitKind kind) {
  switch (kind) {
    case LimitKind::kLimited:
      return "limited";
    case LimitKind::kUnlimited:
      return "unlimited";
    case LimitKind::kBlocked:
      return "blocked";
  }
  return "limited";
}

// `,"shed":[...]`, a rate_limit's or a concurrency block's. Thresholds as the exact decimals they
// are, in strings: a JSON number may be read as a float.
void AppendShed(std::string& out, const ShedRule& shed) {
  out += ",\"shed\":[";
  for (size_t i = 0; i < shed.levels.size(); ++i) {
    if (i > 0) out += ',';
    out += '{';
    util::AppendJsonStringMember(out, "priority", shed.levels[i].priority);
    out += ',';
    util::AppendJsonStringMember(out, "above", ShedFractionText(shed.levels[i].above));
    out += '}';
  }
  out += ']';
}

void AppendConfigLimit(std::string& out, const Limit& limit) {
  out += '{';
  util::AppendJsonStringMember(out, "id", limit.id);
  out += ',';
  util::AppendJsonStringMember(out, "name", limit.name);
  out += ',';
  util::AppendJsonStringMember(out, "plan", limit.plan);
  out += ',';
  util::AppendJsonStringMember(out, "metric_name", limit.metric_name);
  out += ',';
  util::AppendJsonStringMember(out, "kind", KindName(limit.kind));
  out += ',';
  if (limit.period.unit) {
    util::AppendJsonStringMember(out, "unit", UnitName(*limit.period.unit));
    out += ',';
  }
  out += "\"period_s\":";
  util::AppendJsonSecondsOfMicros(out, limit.period.length / std::chrono::microseconds(1));
  if (limit.kind == LimitKind::kLimited) AppendCalendarJson(out, limit.spec);
  out += ",\"requests_per_unit\":";
  util::AppendJsonInt(out, limit.requests_per_unit);
  if (limit.kind == LimitKind::kLimited) {
    out += ',';
    util::AppendJsonStringMember(out, "algorithm", AlgorithmName(limit.spec.algorithm));
    out += ",\"burst\":";
    util::AppendJsonInt(out, limit.spec.Capacity());
    out += limit.spec.shaper ? ",\"shaper\":true" : ",\"shaper\":false";
  } else {
    out += ",\"algorithm\":null,\"burst\":null,\"shaper\":false";
  }
  out += ',';
  util::AppendJsonStringMember(out, "mode", ModeName(limit.mode));
  out += ',';
  util::AppendJsonStringMember(out, "failure_mode", FailureModeName(limit.failure_mode));
  out += ',';
  if (limit.over_limit_hits) {
    util::AppendJsonStringMember(out, "over_limit_hits", OverLimitHitsName(*limit.over_limit_hits));
  } else {
    out += "\"over_limit_hits\":null";  // the server's --over-limit-hits
  }
  out += limit.quota_mode ? ",\"quota_mode\":true" : ",\"quota_mode\":false";
  out += limit.detailed_metric ? ",\"detailed_metric\":true" : ",\"detailed_metric\":false";
  if (limit.shed) AppendShed(out, *limit.shed);
  out += ",\"replaces\":[";
  for (size_t i = 0; i < limit.replaces.size(); ++i) {
    if (i > 0) out += ',';
    util::AppendJsonStringOfBytes(out, limit.replaces[i]);
  }
  out += "],";
  util::AppendJsonStringMember(out, "origin", limit.origin);
  if (limit.concurrency) {  // docs/load-protection.md
    out += ",\"concurrency\":{\"max_in_flight\":";
    util::AppendJsonInt(out, limit.concurrency->spec.max_in_flight);
    out += ",\"permit_ttl_ms\":";
    util::AppendJsonInt(out, limit.concurrency->spec.ttl / std::chrono::milliseconds(1));
    out += ',';
    util::AppendJsonStringMember(out, "failure_mode",
                                 FailureModeName(limit.concurrency->failure_mode));
    if (limit.concurrency->shed) AppendShed(out, *limit.concurrency->shed);
    out += '}';
  }
  out += '}';
}

}  // namespace

std::string RenderConfigJson(const Config& config, const ApiClient* client) {
  std::string out = "{\"domains\":[";
  bool first_domain = true;
  for (const auto& [name, domain] : config.domains()) {
    if (client != nullptr && !client->MayCheck(name)) continue;
    if (!first_domain) out += ',';
    first_domain = false;
    out += '{';
    util::AppendJsonStringMember(out, "name", name);
    out += ',';
    util::AppendJsonStringMember(out, "origin", domain.origin);
    out += ',';
    util::AppendJsonStringMember(out, "plan_key", domain.plan_key);
    out += ',';
    util::AppendJsonStringMember(out, "plan_source", domain.plan_source);
    out += ",\"plans\":[";
    bool first_plan = true;
    for (const auto& plan : domain.plans) {
      if (!first_plan) out += ',';
      first_plan = false;
      util::AppendJsonStringOfBytes(out, plan.first);
    }
    out += "],\"identities\":";
    util::AppendJsonInt(out, static_cast<int64_t>(domain.identity_plans.size()));
    out += ",\"limits\":[";
    for (size_t i = 0; i < domain.limits.size(); ++i) {
      if (i > 0) out += ',';
      AppendConfigLimit(out, domain.limits[i]);
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

std::string RenderCounterStateJson(std::string_view domain, const CounterState& state) {
  std::string out = "{";
  util::AppendJsonStringMember(out, "domain", domain);
  out += ',';
  util::AppendJsonStringMember(out, "counter_key", state.counter_key);
  out += ",\"limit\":";
  AppendLimitJson(out, state.limit);
  out += ",\"remaining\":";
  util::AppendJsonInt(out, state.remaining);
  out += ",\"reset_after_ms\":";
  util::AppendJsonInt(out, CeilMillis(state.reset_after));
  out += "}\n";
  return out;
}

std::string RenderTopJson(std::string_view domain, const std::vector<HeavyHitter>& top) {
  std::string out = "{";
  util::AppendJsonStringMember(out, "domain", domain);
  out += ",\"top\":[";
  for (size_t i = 0; i < top.size(); ++i) {
    if (i > 0) out += ',';
    out += '{';
    util::AppendJsonStringMember(out, "identity", top[i].identity);
    out += ",\"rejected\":";
    util::AppendJsonInt(out, static_cast<int64_t>(top[i].rejected));
    out += ",\"near_limit\":";
    util::AppendJsonInt(out, static_cast<int64_t>(top[i].near_limit));
    out += ",\"error\":";
    util::AppendJsonInt(out, static_cast<int64_t>(top[i].error));
    out += '}';
  }
  out += "]}\n";
  return out;
}

std::string RenderUsageJson(std::string_view domain, std::string_view limit,
                            const UsageReport& report) {
  std::string out = "{";
  util::AppendJsonStringMember(out, "domain", domain);
  out += ',';
  util::AppendJsonStringMember(out, "limit", limit);
  out += ",\"period_s\":";
  char buf[32];
  const auto r =
      std::to_chars(buf, buf + sizeof buf, static_cast<double>(report.period.count()) / 1e9);
  out.append(buf, r.ptr);
  out += ",\"identities\":";
  util::AppendJsonInt(out, static_cast<int64_t>(report.identities));
  const std::pair<const char*, int64_t> percentiles[] = {{"p50", report.peaks.p50},
                                                         {"p90", report.peaks.p90},
                                                         {"p95", report.peaks.p95},
                                                         {"p99", report.peaks.p99},
                                                         {"max", report.peaks.max}};
  out += ",\"percentiles\":{";
  for (size_t i = 0; i < std::size(percentiles); ++i) {
    if (i > 0) out += ',';
    out += '"';
    out += percentiles[i].first;
    out += "\":";
    util::AppendJsonInt(out, percentiles[i].second);
  }
  out += "}}\n";
  return out;
}

}  // namespace sluice::server
