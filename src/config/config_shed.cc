// A rate_limit's `shed:` (priority shedding, docs/load-protection.md) and the domain's
// `priority_key`: read, checked, and the key stripped from the descriptors of a domain that
// sheds.
#include <algorithm>
#include <string>

#include "config/config_parse.h"

namespace sluice::server::internal {
namespace {

constexpr size_t kMaxPriorityBytes = 64;

// Priorities are compared as sent: letters, digits, '_', '-', '.'.
bool ValidPriority(std::string_view name) {
  return !name.empty() && name.size() <= kMaxPriorityBytes &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.';
         });
}

Result<ShedLevel> ParseLevel(const std::string& file, const YAML::Node& node) {
  auto fields = Fields::Of(file, node, "a shed level", {"priority", "above"});
  if (!fields) return std::unexpected(fields.error());
  const auto p = fields->Get("priority");
  if (!p) return ErrorAt(file, node, "a shed level needs a 'priority'");
  auto priority = ReadString(file, *p, "priority", kMaxPriorityBytes);
  if (!priority) return std::unexpected(priority.error());
  if (!ValidPriority(*priority)) {
    return ErrorAt(file, *p,
                   "priority '" + *priority + "' must be letters, digits, '_', '-' or '.'");
  }
  if (*priority == kCriticalPriority) {
    return ErrorAt(file, *p,
                   "critical is never shed: it may always take the whole limit; list only the "
                   "priorities to shed");
  }
  ShedLevel level{std::move(*priority), ShedFraction{}};
  if (const auto a = fields->Get("above")) {
    auto text = ReadString(file, *a, "above", kMaxNameBytes);
    if (!text) return std::unexpected(text.error());
    auto above = ParseShedFraction(*text);
    if (!above) return ErrorAt(file, *a, above.error().message);
    level.above = *above;
  }
  return level;
}

}  // namespace

Result<ShedRule> ParseShedLevels(const std::string& file, const YAML::Node& node) {
  if (!node.IsSequence() || node.size() == 0) {
    return ErrorAt(file, node,
                   "shed must be a list of {priority, above} levels, least important first");
  }
  ShedRule rule;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    auto level = ParseLevel(file, item);
    if (!level) return std::unexpected(level.error());
    for (const ShedLevel& earlier : rule.levels) {
      if (earlier.priority == level->priority) {
        return ErrorAt(file, item, "priority '" + level->priority + "' is listed twice");
      }
    }
    if (!rule.levels.empty() && ShedFractionLess(level->above, rule.levels.back().above)) {
      return ErrorAt(file, item,
                     "shed levels go from the least important priority to the most: '" +
                         level->priority + "' has a lower threshold than '" +
                         rule.levels.back().priority + "' before it");
    }
    rule.levels.push_back(std::move(*level));
  }
  if (!ShedFractionLess(rule.levels.front().above, ShedFraction{})) {
    return ErrorAt(file, node, "shed sheds nothing: give at least one priority an 'above' below 1");
  }
  return rule;
}

Result<std::optional<ShedRule>> ParseShed(const std::string& file, const Fields& fields,
                                          const Limit& limit, const std::string& limit_name) {
  const auto node = fields.Get("shed");
  if (!node) return std::optional<ShedRule>();
  const YAML::Node at = fields.KeyOf("shed");
  // Shedding reserves hits of the exact shared count; a leased or batched node admits from what
  // it holds or sees, and a global limit from its region's part: a threshold of either is not
  // one of the limit.
  if (limit.sync.mode != SyncMode::kExact) {
    return ErrorAt(file, at,
                   limit_name +
                       ": shed needs sync: exact (a leased or batched node cannot keep "
                       "a reserve of the shared count)");
  }
  if (limit.regions.global) {
    return ErrorAt(file, at, limit_name + ": shed cannot serve scope: global");
  }
  if (limit.over_limit_hits == OverLimitHits::kCount) {
    return ErrorAt(file, at,
                   limit_name +
                       ": shed has no effect with over_limit_hits: count (every hit is "
                       "charged, whatever its priority)");
  }
  auto rule = ParseShedLevels(file, *node);
  if (!rule) return std::unexpected(rule.error());
  return std::optional<ShedRule>(std::move(*rule));
}

bool SheddingLimit(const Limit& limit) {
  return limit.shed.has_value() || (limit.concurrency && limit.concurrency->shed.has_value());
}

void AddPriorityKeys(std::map<std::string, Domain, std::less<>>& domains) {
  for (auto& [name, domain] : domains) {
    const bool sheds = std::any_of(domain.limits.begin(), domain.limits.end(),
                                   [](const Limit& l) { return SheddingLimit(l); });
    auto& keys = domain.attribute_keys;
    if (sheds && std::find(keys.begin(), keys.end(), domain.priority_key) == keys.end()) {
      keys.push_back(domain.priority_key);
    }
  }
}

}  // namespace sluice::server::internal
