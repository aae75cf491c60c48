// What sluiced logs about a config it loaded, at start and on each reload: the config's own
// warnings, flags or settings that have no effect with it, and domains a reload drops.
#ifndef SLUICE_SLUICED_CONFIG_REPORT_H_
#define SLUICE_SLUICED_CONFIG_REPORT_H_

#include <string>

#include "config/config.h"

namespace sluice::server {

// "2 domains, 9 limits": the count sluiced logs on loading.
std::string Summary(const Config& config);

// The config's own warnings, and one line when limits ask for a sync mode the store cannot give.
void LogWarnings(const Config& config, bool memory_store);

// Whether --region and --global-store are used by the config's limits.
void LogRegionFlags(const Config& config, const RegionOptions& flags);

// One warning per domain `before` had and `after` lacks.
void WarnRemovedDomains(const Config& before, const Config& after);

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_CONFIG_REPORT_H_
