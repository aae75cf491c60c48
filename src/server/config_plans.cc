// A plan file: which identity is on which plan.
//
//   identities:
//     key_live_4f9a: pro
//     key_live_77c1: enterprise
#include <string>

#include "server/config_parse.h"

namespace sluice::server::internal {

Result<void> ParsePlanFile(const std::string& file, const YAML::Node& root, Domain& domain) {
  auto fields = Fields::Of(file, root, "a plan file", {"identities"});
  if (!fields) return std::unexpected(fields.error());
  const auto identities = fields->Get("identities");
  if (!identities) return ErrorAt(file, root, "no 'identities'");
  if (identities->IsNull()) return {};
  if (!identities->IsMap()) {
    return ErrorAt(file, *identities,
                   "identities must map identity values to plan names, not " +
                       std::string(Describe(*identities)));
  }
  if (identities->size() > kMaxIdentities) {
    return ErrorAt(file, *identities,
                   "more than " + std::to_string(kMaxIdentities) + " identities");
  }
  domain.identity_plans.reserve(identities->size());
  for (auto it = identities->begin(); it != identities->end(); ++it) {
    auto identity = ReadString(file, it->first, "identity", kMaxValueBytes);
    if (!identity) return std::unexpected(identity.error());
    auto plan = ReadString(file, it->second, "plan name", kMaxNameBytes);
    if (!plan) return std::unexpected(plan.error());
    if (!domain.plans.contains(*plan)) {
      std::string known;
      for (const auto& [name, tree] : domain.plans) known += (known.empty() ? "" : ", ") + name;
      return ErrorAt(file, it->second,
                     "unknown plan '" + *plan + "' for identity '" + *identity + "' (domain '" +
                         domain.name + "' has: " + known + ")");
    }
    if (!domain.identity_plans.emplace(*identity, std::move(*plan)).second) {
      return ErrorAt(file, it->first, "identity '" + *identity + "' is listed twice");
    }
  }
  return {};
}

}  // namespace sluice::server::internal
