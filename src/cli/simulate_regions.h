// `sluice simulate regions`: admitted against nominal per region over time, for a limit of
// scope global shared by three regions, in static and in leased mode (docs/regions.md). A model,
// not the servers: each step is one refresh and one window; a region's leased part for the next
// step comes from AllocateRegions over the demand each region saw in this one, granted in turn
// never above what the other regions hold (as the global store's script grants).
#ifndef SLUICE_CLI_SIMULATE_REGIONS_H_
#define SLUICE_CLI_SIMULATE_REGIONS_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace sluice::cli {

struct SimulateRegionsFlags {
  std::string workload = "both";  // skewed (90/5/5), shifting (the load moves us -> eu -> ap)
  int64_t limit = 1000;           // per window, across the regions
  int steps = 18;                 // windows (= refreshes) simulated
};

// Prints one table per workload; returns a process exit code (2: bad flags).
int RunSimulateRegions(const SimulateRegionsFlags& flags, std::FILE* out);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_SIMULATE_REGIONS_H_
