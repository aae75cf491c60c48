// Strict reading of YAML nodes for the config loader: every error is "file:line:col: what".
// Internal to src/server/config_*.cc; the only header that includes yaml-cpp.
#ifndef SLUICE_SERVER_CONFIG_YAML_H_
#define SLUICE_SERVER_CONFIG_YAML_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/status.h"

namespace sluice::server::internal {

// Limits on what one config may hold (docs/configuration.md, "Limits").
inline constexpr size_t kMaxConfigFileBytes = 16 << 20;
inline constexpr size_t kMaxPlanFileBytes = 64 << 20;
inline constexpr size_t kMaxNameBytes = 256;    // domain, key, rate_limit name, plan name
inline constexpr size_t kMaxValueBytes = 1024;  // descriptor value, plan identity
inline constexpr int kMaxDepth = 16;            // nested descriptor levels
inline constexpr size_t kMaxDescriptorsPerDomain = 100'000;
inline constexpr size_t kMaxIdentities = 1'000'000;
// requests_per_unit travels in Envoy's RateLimit message as a uint32.
inline constexpr int64_t kMaxRequestsPerUnit = 0xffffffffLL;

// "file:line:col" of a node (1-based, as editors count).
std::string Where(const std::string& file, const YAML::Node& node);
std::unexpected<Error> ErrorAt(const std::string& file, const YAML::Node& node,
                               std::string_view message);

// "a mapping", "a list", "a string", "empty": what a node is, for "must be X, not Y".
std::string_view Describe(const YAML::Node& node);

// The whole file (at most max_bytes), or why it cannot be read.
Result<std::string> ReadFileText(const std::string& file, size_t max_bytes);
// Exactly one YAML document; a syntax error carries yaml-cpp's line and column.
Result<YAML::Node> ParseDocument(const std::string& file, const std::string& text);

// The fields of one mapping, checked: keys are strings, none repeats, each is allowed.
// `unsupported` names ratelimit fields sluice knows but does not implement, for a clearer error.
class Fields {
 public:
  static Result<Fields> Of(const std::string& file, const YAML::Node& map, std::string_view what,
                           std::initializer_list<std::string_view> allowed,
                           std::initializer_list<std::string_view> unsupported = {});

  // The value of `name`, or nullopt if absent.
  std::optional<YAML::Node> Get(std::string_view name) const;
  // The key node of `name` (for its position); `name` must be present.
  YAML::Node KeyOf(std::string_view name) const;

 private:
  std::vector<std::pair<YAML::Node, YAML::Node>> fields_;
};

// A scalar of 1..max_bytes bytes without control characters. `what` names the field.
Result<std::string> ReadString(const std::string& file, const YAML::Node& node,
                               std::string_view what, size_t max_bytes);
// A plain (unquoted) decimal integer.
Result<int64_t> ReadInt(const std::string& file, const YAML::Node& node, std::string_view what);
// A plain true/false (also True/TRUE/False/FALSE, the YAML 1.2 core spellings).
Result<bool> ReadBool(const std::string& file, const YAML::Node& node, std::string_view what);

}  // namespace sluice::server::internal

#endif  // SLUICE_SERVER_CONFIG_YAML_H_
