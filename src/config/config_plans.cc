// A plan file: which identity is on which plan.
//
//   identities:
//     key_live_4f9a: pro
//     key_live_77c1: enterprise
//     key_live_9d02: {plan: pro, timezone: Asia/Tokyo}   # the zone of its calendar limits
#include <string>

#include "config/config_parse.h"

namespace sluice::server::internal {
namespace {

constexpr size_t kMaxZoneBytes = 128;

// An identity's entry in the long form, {plan: NAME, timezone: ZONE}: the plan's node, and
// the zone (validated) into `zone`.
Result<YAML::Node> ReadPlanEntry(const std::string& file, const YAML::Node& entry,
                                 const std::string& identity, std::string& zone) {
  auto fields = Fields::Of(file, entry, "an identity", {"plan", "timezone"});
  if (!fields) return std::unexpected(fields.error());
  const auto plan = fields->Get("plan");
  if (!plan) return ErrorAt(file, entry, "identity '" + identity + "' has no plan");
  if (const auto z = fields->Get("timezone")) {
    auto name = ReadString(file, *z, "timezone", kMaxZoneBytes);
    if (!name) return std::unexpected(name.error());
    if (auto known = ValidateTimeZone(*name); !known) {
      return ErrorAt(file, *z,
                     "timezone of identity '" + identity + "': " + known.error().message +
                         "; expected an IANA name such as Europe/Lisbon or UTC");
    }
    zone = std::move(*name);
  }
  return *plan;
}

}  // namespace

Result<void> ParsePlanFile(const std::string& file, const YAML::Node& root, Domain& domain) {
  if (auto ok = RequireIdentifyingKey(file, root, "a plan file", "identities"); !ok) return ok;
  auto fields = Fields::Of(file, root, "a plan file", {"identities"});
  if (!fields) return std::unexpected(fields.error());
  if (!fields->Present("identities")) return ErrorAt(file, root, "no 'identities'");
  const auto identities = fields->Get("identities");
  if (!identities) return {};
  if (!identities->IsMap()) {
    return ErrorAt(file, *identities,
                   "identities must map identity values to plan names, not " +
                       std::string(Describe(*identities)));
  }
  if (identities->size() > kMaxIdentities) {
    return ErrorAt(file, *identities,
                   "more than " + std::to_string(kMaxIdentities) + " identities");
  }
  // A repeated identity is refused by MappingEntries; one from a merge (<<) replaces.
  auto entries = MappingEntries(file, *identities, "identities", "identity");
  if (!entries) return std::unexpected(entries.error());
  if (entries->size() > kMaxIdentities) {
    return ErrorAt(file, *identities,
                   "more than " + std::to_string(kMaxIdentities) + " identities");
  }
  domain.identity_plans.reserve(entries->size());
  for (const auto& [identity_node, entry_node] : *entries) {
    auto identity = ReadString(file, identity_node, "identity", kMaxValueBytes);
    if (!identity) return std::unexpected(identity.error());
    std::string zone;
    YAML::Node plan_node = entry_node;
    if (entry_node.IsMap()) {
      auto plan = ReadPlanEntry(file, entry_node, *identity, zone);
      if (!plan) return std::unexpected(plan.error());
      plan_node = *plan;
    }
    // A null plan's own mark is the next line's; the identity is where it is missing.
    if (plan_node.IsNull()) {
      return ErrorAt(file, identity_node, "identity '" + *identity + "' has no plan");
    }
    auto plan = ReadString(file, plan_node, "plan name", kMaxNameBytes);
    if (!plan) return std::unexpected(plan.error());
    if (!domain.plans.contains(*plan)) {
      std::string known;
      for (const auto& [name, tree] : domain.plans) known += (known.empty() ? "" : ", ") + name;
      return ErrorAt(file, plan_node,
                     "unknown plan '" + *plan + "' for identity '" + *identity + "' (domain '" +
                         domain.name + "' has: " + known + ")");
    }
    if (!zone.empty()) domain.identity_zones.emplace(*identity, std::move(zone));
    domain.identity_plans.emplace(std::move(*identity), std::move(*plan));
  }
  return {};
}

}  // namespace sluice::server::internal
