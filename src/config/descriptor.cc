#include "config/descriptor.h"

#include <algorithm>
#include <string>

#include "config/key_escape.h"

namespace sluice::server {
namespace {

// An entry whose rule shares its counter (share_threshold) is keyed by the rule's pattern, with
// its '*' raw: no value, escaped, can be that text.
std::string CounterKey(std::string_view limit_id, std::span<const DescriptorEntry> entries,
                       std::span<const DescriptorTree::SharedValue> shared = {}) {
  std::string key(limit_id);
  key += '#';
  size_t next_shared = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) key += '|';
    AppendEscaped(key, entries[i].key);
    key += '=';
    if (next_shared < shared.size() && shared[next_shared].entry == i) {
      AppendEscapedPattern(key, shared[next_shared++].pattern);
    } else {
      AppendEscaped(key, entries[i].value);
    }
  }
  return key;
}

Result<std::shared_ptr<const Limit>> OverrideLimit(std::string_view domain,
                                                   const LimitOverride& o) {
  if (o.requests_per_unit < 0) {
    return MakeError("limit override: requests_per_unit must not be negative (got " +
                     std::to_string(o.requests_per_unit) + ")");
  }
  auto limit = std::make_shared<Limit>();
  limit->domain = std::string(domain);
  limit->period = o.period;
  limit->requests_per_unit = o.requests_per_unit;
  // Different override rates keep different counters: their algorithm states do not mix.
  limit->id = Escaped(domain) + "|@override=" + std::to_string(o.requests_per_unit) + "/" +
              PeriodName(o.period);
  limit->metric_name = std::string(domain) + ".override";
  limit->origin = "descriptor limit override";
  if (o.requests_per_unit == 0) {
    limit->kind = LimitKind::kBlocked;
    return limit;
  }
  LimitSpec spec;
  spec.limit = o.requests_per_unit;
  spec.period = o.period.length;
  auto valid = ValidateLimitSpec(spec);
  if (!valid) return MakeError("limit override: " + valid.error().message);
  limit->spec = *valid;
  return limit;
}

}  // namespace

std::vector<DescriptorEntry> StripAttributes(const Domain& domain,
                                             std::span<const DescriptorEntry> entries,
                                             std::vector<RequestAttribute>& attributes) {
  std::vector<DescriptorEntry> identity;
  identity.reserve(entries.size());
  for (const DescriptorEntry& e : entries) {
    const auto& keys = domain.attribute_keys;
    if (std::find(keys.begin(), keys.end(), e.key) == keys.end()) {
      identity.push_back(e);
    } else {
      attributes.push_back({std::string(e.key), std::string(e.value)});
    }
  }
  return identity;
}

const std::string* FindAttribute(std::span<const RequestAttribute> attributes,
                                 std::string_view key) {
  for (const RequestAttribute& a : attributes) {
    if (a.key == key) return &a.value;
  }
  return nullptr;
}

Result<MatchResult> Match(const Config& config, std::string_view domain_name,
                          std::span<const DescriptorEntry> entries, const LimitOverride* override) {
  const Domain* domain = config.FindDomain(domain_name);
  if (domain == nullptr) return MakeError("unknown domain '" + std::string(domain_name) + "'");
  return Match(*domain, entries, override);
}

Result<MatchResult> Match(const Domain& domain, std::span<const DescriptorEntry> entries,
                          const LimitOverride* override) {
  MatchResult result;
  std::vector<DescriptorEntry> identity;  // allocates only when the domain strips attributes
  if (!domain.attribute_keys.empty()) {
    identity = StripAttributes(domain, entries, result.attributes);
    entries = identity;
  }
  if (entries.empty()) return result;
  if (override != nullptr) {
    auto owned = OverrideLimit(domain.name, *override);
    if (!owned) return std::unexpected(owned.error());
    result.owned = std::move(*owned);
    result.limit = result.owned.get();
    result.counter_key = CounterKey(result.limit->id, entries);
    return result;
  }
  int32_t index = DescriptorTree::kNoLimit;
  std::vector<DescriptorTree::SharedValue> shared;  // allocates only for share_threshold rules
  if (!domain.plan_key.empty()) {
    for (const DescriptorEntry& e : entries) {
      if (e.key != domain.plan_key) continue;
      const std::string& plan = domain.PlanFor(e.value);
      index = domain.plans.find(plan)->second.Find(entries, &shared);
      if (index != DescriptorTree::kNoLimit) result.plan = plan;
      break;
    }
  }
  if (index == DescriptorTree::kNoLimit) {
    shared.clear();
    index = domain.descriptors.Find(entries, &shared);
  }
  if (index == DescriptorTree::kNoLimit) return result;
  result.limit = &domain.limits[static_cast<size_t>(index)];
  result.counter_key = CounterKey(result.limit->id, entries, shared);
  return result;
}

std::vector<bool> ReplacedLimits(std::span<const Limit* const> limits) {
  std::vector<bool> replaced(limits.size(), false);
  for (size_t i = 0; i < limits.size(); ++i) {
    if (limits[i] == nullptr || limits[i]->name.empty()) continue;
    for (size_t j = 0; j < limits.size() && !replaced[i]; ++j) {
      if (j == i || limits[j] == nullptr) continue;
      for (const std::string& name : limits[j]->replaces) {
        if (name == limits[i]->name) {
          replaced[i] = true;
          break;
        }
      }
    }
  }
  return replaced;
}

}  // namespace sluice::server
