// sluiced's command line: the CLI11 schema (every flag with its SLUICE_* environment twin),
// parsed and checked once into Settings, whose values are typed (durations, byte counts, enums)
// so that nothing downstream parses a flag's text again. docs/server.md lists the flags.
//
//   auto settings = ParseFlags(argc, argv);
//   if (!settings) return settings.error();  // --help (0) or a bad flag, already printed
#ifndef SLUICE_SLUICED_FLAGS_H_
#define SLUICE_SLUICED_FLAGS_H_

#include <expected>
#include <optional>
#include <string>

#include "config/config.h"
#include "grpc/grpc_server.h"
#include "http/http_server.h"
#include "metrics/usage_views.h"
#include "service/ratelimit_headers.h"
#include "sluice/open_store.h"
#include "sluiced/tls_flags.h"

namespace sluice::server {

struct Settings {
  std::string config;  // --config: a YAML file or a directory
  LoadOptions load;    // how the config is read: defaults, merging, this node's region
  bool check_config = false;
  std::string log_level;
  std::string log_format;

  // The listeners' addresses; nullopt: off.
  std::optional<std::string> http;
  std::optional<std::string> forward_auth;
  std::optional<std::string> grpc;
  // The HTTP API's and the forward-auth endpoint's bounds and timeouts (all but the address).
  HttpServerOptions listener;
  // The gRPC front end's (all but the address), its response headers included.
  GrpcServerOptions grpc_options;
  HeaderOptions headers;  // the HTTP API's and forward-auth's: --legacy-headers
  std::string admin_token;
  // --api-tokens: the file of the clients that may check, and which domains (config/
  // api_tokens.h); empty: off, anyone may check any domain.
  std::string api_tokens;
  int threads = 1;
  TlsOptions tls;  // --tls-*: which listeners are TLS, with what

  // The store: its address as given ("memory", "redis://...", "redis+cluster://..."), and its
  // settings with the memory budget already shared out (ComputeMemoryBudget in flags.cc). The
  // hooks and the clock are the server's to set.
  std::string store;
  bool memory_store = true;
  OpenStoreOptions store_options;
  OverLimitHits over_limit_hits = OverLimitHits::kDrop;
  // --state-dir: where the memory store's counters are kept across restarts (empty: nowhere),
  // written every --snapshot-interval (sluiced/snapshotter.h).
  std::string state_dir;
  Duration snapshot_interval = std::chrono::seconds(10);

  // The per-client usage views; nullopt: --usage-tracking off. The clock is the server's to set.
  std::optional<UsageOptions> usage;
  std::string usage_period;  // as given, for the log line
  double near_limit_ratio = 0.9;
};

// The settings argv and the environment give, or the exit code when there is nothing to run,
// its message already printed: CLI11's (0 after --help, its own code for a flag it refuses), or
// 2 when flags that are each valid do not go together.
std::expected<Settings, int> ParseFlags(int argc, char** argv);

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_FLAGS_H_
