// From parsed YAML to a Domain. Internal to the config loader (config_load.cc).
#ifndef SLUICE_CONFIG_CONFIG_PARSE_H_
#define SLUICE_CONFIG_CONFIG_PARSE_H_

#include <string>

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

}  // namespace sluice::server::internal

#endif  // SLUICE_CONFIG_CONFIG_PARSE_H_
