#include "sluiced/config_report.h"

#include <spdlog/spdlog.h>

#include <string>

#include "sluice/quota_sync.h"
#include "sluice/region_scope.h"

namespace sluice::server {

std::string Summary(const Config& config) {
  return std::to_string(config.domains().size()) + " domains, " +
         std::to_string(config.limit_count()) + " limits";
}

// The config's own warnings, and one line when limits ask for a sync mode the store cannot give:
// the memory store is one process's, so there is nothing to share and every limit is exact.
void LogWarnings(const Config& config, bool memory_store) {
  for (const std::string& w : config.warnings()) spdlog::warn("config: {}", w);
  if (!memory_store) return;
  size_t shared = 0;
  for (const auto& [name, domain] : config.domains()) {
    for (const Limit& limit : domain.limits) {
      shared += limit.sync.mode != SyncMode::kExact;
    }
  }
  if (shared > 0) {
    spdlog::info(
        "config: {} limits set sync: leased or batched, which has no effect with --store memory "
        "(one process's counters are exact already)",
        shared);
  }
}

// --region and --global-store are accepted without a limit that uses them (a reload may add
// one), but say so: a flag that does nothing yet must not look as if it did.
void LogRegionFlags(const Config& config, const RegionOptions& flags) {
  if (flags.region.empty()) return;
  size_t global = 0, leased = 0;
  for (const auto& [name, domain] : config.domains()) {
    for (const Limit& limit : domain.limits) {
      global += limit.regions.global;
      leased += limit.regions.global && limit.regions.mode == RegionMode::kLeased;
    }
  }
  if (global == 0) {
    spdlog::warn(
        "--region {}: no limit has scope: global; every limit holds per store (the flag takes "
        "effect when a config with one is loaded)",
        flags.region);
  } else if (flags.global_store && leased == 0) {
    spdlog::warn(
        "--global-store: no limit has regions mode leased; the global store is not contacted "
        "(static shares need none)");
  } else {
    spdlog::info("region {}: {} limits of scope global, {} of them leased from the global store",
                 flags.region, global, leased);
  }
}

// A domain the new config lacks was being answered until now; from here on its checks are those
// of an unknown domain (400 over HTTP, OK and unlimited over gRPC, as Envoy expects). A domain
// file lost to a bad deploy must not vanish as quietly as "1 domains".
void WarnRemovedDomains(const Config& before, const Config& after) {
  for (const auto& [name, domain] : before.domains()) {
    if (after.domains().contains(name)) continue;
    spdlog::warn(
        "reload removes domain '{}' (was {}): its checks are now unknown-domain answers, 400 over "
        "HTTP and OK, unlimited, over gRPC",
        name, domain.origin);
  }
}

}  // namespace sluice::server
