// sluiced: the rate limit server. Loads the config, starts the service, the HTTP API and the
// Envoy gRPC front end, then waits for signals: SIGHUP reloads the config, SIGTERM/SIGINT stop
// gracefully. docs/server.md is the manual. The flags are read in flags.cc, the server is
// started, reloaded and stopped in server.cc.
#include <cstdio>

#include "sluiced/flags.h"
#include "sluiced/log_setup.h"
#include "sluiced/server.h"

int main(int argc, char** argv) {
  using namespace sluice::server;
  auto settings = ParseFlags(argc, argv);
  if (!settings) return settings.error();
  if (auto r = SetupLogging(settings->log_level, settings->log_format); !r) {
    std::fprintf(stderr, "sluiced: %s\n", r.error().message.c_str());
    return 2;
  }
  if (settings->check_config) return CheckConfig(*settings);
  return Run(*settings);
}
