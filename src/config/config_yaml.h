// Strict reading of YAML nodes for the config loader: every error is "file:line:col: what".
// Internal to src/config/config_*.cc; the only header that includes yaml-cpp.
#ifndef SLUICE_CONFIG_CONFIG_YAML_H_
#define SLUICE_CONFIG_CONFIG_YAML_H_

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

// Unless `root` is a mapping with `key` at its top, an error that shows nothing of the file's
// content: a file that does not name its own kind (a domain file its `domain`) may be anything a
// path or symlink points at, a secret included, and errors are logged.
Result<void> RequireIdentifyingKey(const std::string& file, const YAML::Node& root,
                                   std::string_view what, std::string_view key);

// For a null item of a list, whose own mark is wherever the next token starts: the error
// names the list's position and the item's number instead.
std::unexpected<Error> EmptyItemError(const std::string& file, const YAML::Node& list, size_t index,
                                      std::string_view what);

// "a mapping", "a list", "a string", "empty": what a node is, for "must be X, not Y".
std::string_view Describe(const YAML::Node& node);

// The whole file (at most max_bytes), or why it cannot be read.
Result<std::string> ReadFileText(const std::string& file, size_t max_bytes);
// Exactly one YAML document; a syntax error carries yaml-cpp's line and column.
Result<YAML::Node> ParseDocument(const std::string& file, const std::string& text);

// Non-fatal findings of a load ("file:line:col: what"), logged by sluiced and printed by
// --check-config: things envoyproxy/ratelimit accepts that have no effect here.
using Warnings = std::vector<std::string>;
void WarnAt(Warnings& warnings, const std::string& file, const YAML::Node& node,
            std::string_view message);

// Every field name envoyproxy/ratelimit accepts. Its check is global (validKeys in
// config_impl.go), not per mapping, so one of these in the wrong mapping loads there and is
// ignored; any other name is a typo.
bool IsUpstreamKey(std::string_view name);

// A mapping's (key, value) pairs with YAML merge keys (`<<: *anchor`, `<<: [*a, *b]`) resolved
// the way yaml.v2 does, since yaml-cpp 0.7 leaves `<<` as an ordinary key: entries apply in
// document order, a later one replacing an earlier one of the same name (so explicit keys
// written after `<<` win over merged ones), and in a list of mappings the earlier mapping
// wins. A name written twice in one mapping is an error ("`noun` 'x' appears twice in `what`").
using Entry = std::pair<YAML::Node, YAML::Node>;
Result<std::vector<Entry>> MappingEntries(const std::string& file, const YAML::Node& map,
                                          std::string_view what, std::string_view noun);

// The fields of one mapping, checked: keys are strings, none repeats, each is allowed. With
// `warnings`, a field envoyproxy/ratelimit knows but that is not `allowed` here is ignored
// with a warning (its value still checked for unknown names, as ratelimit does); without, it
// is an error like any unknown field.
class Fields {
 public:
  static Result<Fields> Of(const std::string& file, const YAML::Node& map, std::string_view what,
                           std::initializer_list<std::string_view> allowed,
                           Warnings* warnings = nullptr);

  // The value of `name`, or nullopt if absent or null: yaml.v2 reads a null as the field's
  // zero value, which everywhere in ratelimit's format means "not given".
  std::optional<YAML::Node> Get(std::string_view name) const;
  // Whether `name` is written at all, even with a null value.
  bool Present(std::string_view name) const;
  // The key node of `name` (for its position); `name` must be present.
  YAML::Node KeyOf(std::string_view name) const;

 private:
  std::vector<Entry> fields_;
};

// A scalar of 1..max_bytes bytes without control characters. `what` names the field.
Result<std::string> ReadString(const std::string& file, const YAML::Node& node,
                               std::string_view what, size_t max_bytes);
// A plain (unquoted) integer in yaml.v2's grammar, which envoyproxy/ratelimit reads with:
// '_' is dropped anywhere, then an optional sign and 0x (hex), 0o or a leading 0 (octal),
// 0b (binary) or decimal. A leading-0 octal ("010" is 8) warns, if `warnings` is given.
Result<int64_t> ReadInt(const std::string& file, const YAML::Node& node, std::string_view what,
                        Warnings* warnings = nullptr);
// A plain YAML 1.1 boolean as yaml.v2 resolves it: true/True/TRUE, yes/Yes/YES, y/Y, on/On/ON
// and their false counterparts (false, no, n, off).
Result<bool> ReadBool(const std::string& file, const YAML::Node& node, std::string_view what);

}  // namespace sluice::server::internal

#endif  // SLUICE_CONFIG_CONFIG_YAML_H_
