// `sluice simulate overload`'s flags and what it runs (cli/overload.h has the simulation).
#ifndef SLUICE_CLI_OVERLOAD_COMMAND_H_
#define SLUICE_CLI_OVERLOAD_COMMAND_H_

#include <string>
#include <vector>

#include "cli/overload.h"

namespace CLI {
class App;
}

namespace sluice::cli {

struct OverloadFlags {
  OverloadOptions options;
  std::vector<std::string> policies;
  std::string service = "10ms", spike_start = "10s", spike_length = "10s", duration = "30s",
              deadline = "200ms";
  std::string output = "text";
};

// Adds the `overload` subcommand to `simulate` and returns it.
CLI::App* AddOverloadCommand(CLI::App& simulate, OverloadFlags& flags);

// The exit code: 0, 1 (the output could not be written) or 2 (bad flags).
int RunOverload(OverloadFlags flags);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_OVERLOAD_COMMAND_H_
