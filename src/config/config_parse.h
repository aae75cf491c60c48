// From parsed YAML to a Domain. Internal to the config loader (config_load.cc).
#ifndef SLUICE_CONFIG_CONFIG_PARSE_H_
#define SLUICE_CONFIG_CONFIG_PARSE_H_

#include <optional>
#include <string>
#include <string_view>

#include "config/config.h"
#include "config/config_yaml.h"
#include "sluice/status.h"

namespace sluice::server::internal {

// A domain file's content, checked, without its plan file. `plan_source_node` is set when the
// domain names one, so the loader can read it and report errors at that line.
struct ParsedDomain {
  Domain domain;
  std::string plan_source;  // the text after "file:", relative to the config file
  YAML::Node plan_source_node;
};
// Findings that do not fail the load go to `warnings`.
// A rule without `algorithm` gets default_algorithm (LoadOptions).
Result<ParsedDomain> ParseDomain(const std::string& file, const YAML::Node& root,
                                 Warnings& warnings,
                                 Algorithm default_algorithm = Algorithm::kTokenBucket);

// The `forward_auth:` section of a domain file (config/forward_auth.h).
Result<ForwardAuth> ParseForwardAuth(const std::string& file, const YAML::Node& node);

// The plan_source path in `root`, if root is a mapping that has a well-formed one; used to
// tell plan files apart from domain files in a directory. Errors are left to ParseDomain.
std::optional<std::string> PeekPlanSource(const YAML::Node& root);

// Reads `identities:` from a plan file into domain.identity_plans; every plan it names must be
// one of domain.plans.
Result<void> ParsePlanFile(const std::string& file, const YAML::Node& root, Domain& domain);

// A rate_limit's `scope` and `regions` fields (either may be absent), for a limit whose spec is
// parsed; `limit_name` names it in errors. The region is not known yet: ApplyRegion follows.
Result<RegionScope> ParseRegionScope(const std::string& file,
                                     const std::optional<YAML::Node>& scope,
                                     const std::optional<YAML::Node>& regions, const Limit& limit,
                                     const std::string& limit_name, Warnings& warnings);

// A rate_limit's `calendar: day|week|month|year`, `timezone:` (an IANA name, default UTC) and
// `week_start: monday|sunday`; nullopt without `calendar`. Refuses `calendar` beside `unit` or
// `period`, the other two without it, and a zone the system tzdata does not know.
Result<std::optional<CalendarSpec>> ParseCalendar(const std::string& file, const Fields& fields);
// A calendar rate_limit's `timezone_from` (the descriptor key naming the request's zone), or ""
// when it has none.
Result<std::string> ParseTimezoneFrom(const std::string& file, const Fields& fields);
// Adds every rule's timezone_from to the domain's attribute_keys (once each).
void AddZoneAttributeKeys(Domain& domain);

// The ratelimit unit a calendar rule reports where only a unit fits (the gRPC answer's unit,
// `unit` in JSON): day, week, month, year. Its length is the nominal one (a month 30 days).
Unit CalendarReportUnit(CalendarUnit unit);

// A descriptor's `concurrency: {max_in_flight, permit_ttl[, failure_mode]}`; `inherited` is the
// failure mode of the descriptor's rate_limit, if it has one (the block's own wins). Refuses
// `sync` other than exact and `scope` other than region.
Result<ConcurrencyLimit> ParseConcurrency(const std::string& file, const YAML::Node& node,
                                          std::optional<FailureMode> inherited);

// Whether `name` can be a region's name (letters, digits, '_', '-', '.'; 1 to 64 bytes).
bool IsRegionName(std::string_view name);

// A `shed:` list (core/shed.h) by itself, for any limit that sheds (a rate_limit's, a
// concurrency limit's): refused when empty, with a priority listed twice or named critical,
// thresholds out of (0, 1] or decreasing, or none below 1. The limit's own restrictions are the
// caller's.
Result<ShedRule> ParseShedLevels(const std::string& file, const YAML::Node& node);

// A rate_limit's `shed:` levels (core/shed.h), for a limit whose sync, scope and
// over_limit_hits are parsed: nullopt without one; refused with sync leased or batched, scope
// global or over_limit_hits count, a priority listed twice or named critical, thresholds out of
// (0, 1] or decreasing, or none below 1.
Result<std::optional<ShedRule>> ParseShed(const std::string& file, const Fields& fields,
                                          const Limit& limit, const std::string& limit_name);

// The limit has a shed rule, in its rate_limit or its concurrency block.
bool SheddingLimit(const Limit& limit);

// After every file is loaded and merged: a domain with a shed rule strips its priority_key
// from its descriptors (Domain::attribute_keys); one without keeps matching on it.
void AddPriorityKeys(std::map<std::string, Domain, std::less<>>& domains);

// This node's region for a limit of scope global: refused without a region, with one its shares
// do not list, or leased without a global store; otherwise the limit's spec becomes the
// region's static part, and regions.global_spec keeps the whole.
Result<void> ApplyRegion(Limit& limit, const RegionOptions& options);

}  // namespace sluice::server::internal

#endif  // SLUICE_CONFIG_CONFIG_PARSE_H_
