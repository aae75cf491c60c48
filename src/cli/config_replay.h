// `sluice replay --config`: a trace of /v1/check bodies, one JSONL line each,
//   {"t_ms": 1700000000000, "check": {"domain": "api", "descriptors": [...]}}
// decided by the very service sluiced runs (the config's matching, modes, plans and limits, on
// the memory store, at each line's time), and reported per limit: checks, hits, admitted,
// refused, shadow refusals, identities (counter keys) seen and refused. It also keeps each
// limit's traffic by identity, which `sluice recommend --config` calculates from.
#ifndef SLUICE_CLI_CONFIG_REPLAY_H_
#define SLUICE_CLI_CONFIG_REPLAY_H_

#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "cli/recommend.h"
#include "config/config.h"
#include "sluice/status.h"

namespace sluice::cli {

inline constexpr size_t kMaxCheckLineBytes = 1 << 20;

// One configured limit's share of the replay. The request counts are descriptor checks that
// matched the limit (a request with two descriptors on one limit is two checks).
struct LimitReplay {
  const server::Limit* limit = nullptr;  // kept alive by ConfigReplay::config
  uint64_t checks = 0;
  uint64_t hits = 0;
  uint64_t admitted = 0;         // allowed by this limit (soft and shadow refusals included)
  uint64_t over_limit = 0;       // refused by this limit in enforce mode
  uint64_t shadow_over = 0;      // would have been refused: shadow mode
  uint64_t soft_over = 0;        // over in soft mode: allowed, flagged
  uint64_t degraded = 0;         // decided by failure_mode (cannot happen on the memory store)
  uint64_t identities_over = 0;  // identities that went over it at least once (any mode)
  TrafficByIdentity traffic;     // every check offered to the limit, by counter key
};

struct ConfigReplay {
  std::shared_ptr<const server::Config> config;
  uint64_t lines = 0;
  uint64_t requests_ok = 0;
  uint64_t requests_over = 0;
  uint64_t override_checks = 0;     // descriptors with a request-supplied limit: not per limit
  std::vector<LimitReplay> limits;  // limits that matched at least once, by domain and id
};

enum class ConfigReplayOutput { kNone, kJsonl, kSummary };

// Replays `in` through `config`. kJsonl writes {"t_ms", "response": <the /v1/check answer>} per
// line as it goes; kSummary writes SummaryJson at the end. A malformed line, a line earlier than
// the one before, or a check the service refuses stops the replay with "line N: ...".
Result<ConfigReplay> ReplayConfig(std::shared_ptr<const server::Config> config, std::FILE* in,
                                  ConfigReplayOutput output, std::FILE* out);

// {"lines", "requests_ok", "requests_over", "override_checks", "limits": [{"domain", "name",
// "metric", "spec", "mode", "checks", "hits", "admitted", "over_limit", "shadow_over_limit",
// "soft_over_limit", "identities", "identities_over"}]}.
nlohmann::ordered_json SummaryJson(const ConfigReplay& replay);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_CONFIG_REPLAY_H_
