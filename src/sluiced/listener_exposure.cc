#include "sluiced/listener_exposure.h"

#include <arpa/inet.h>

#include <optional>

#include "util/listen_address.h"

namespace sluice::server {

bool IsLoopbackAddress(std::string_view address) {
  const auto split = util::SplitListenAddress(address);
  if (!split) return true;  // not an IP listener
  // A Unix socket is reached only from this machine, by whom its mode and group let in.
  if (split->is_unix()) return true;
  unsigned char bytes[16] = {};
  if (!split->v6 && inet_pton(AF_INET, split->host.c_str(), bytes) == 1) return bytes[0] == 127;
  if (split->v6 && inet_pton(AF_INET6, split->host.c_str(), bytes) == 1) {
    static constexpr unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    for (size_t i = 0; i < sizeof bytes; ++i) {
      if (bytes[i] != kLoopback[i]) return false;
    }
    return true;
  }
  return false;  // 0.0.0.0, ::, a host name: reachable beyond this machine
}

bool ListenerIsProtected(const Settings& settings, ListenerKind listener) {
  if (!settings.api_tokens.empty()) return true;
  if (!settings.tls.server) return false;
  switch (listener) {
    case ListenerKind::kHttp:
      return settings.tls.http;
    case ListenerKind::kForwardAuth:
      return settings.tls.forward_auth;
    case ListenerKind::kGrpc:
      return settings.tls.grpc;
  }
  return false;
}

std::vector<std::string> UnprotectedListenerWarnings(const Settings& settings) {
  struct Listener {
    ListenerKind kind;
    const char* name;
    const std::optional<std::string>& address;
  };
  const Listener listeners[] = {{ListenerKind::kHttp, "http", settings.http},
                                {ListenerKind::kForwardAuth, "forward-auth", settings.forward_auth},
                                {ListenerKind::kGrpc, "grpc", settings.grpc}};
  std::vector<std::string> warnings;
  for (const Listener& l : listeners) {
    if (!l.address || IsLoopbackAddress(*l.address) || ListenerIsProtected(settings, l.kind)) {
      continue;
    }
    warnings.push_back(std::string(l.name) + ": listening on " + *l.address +
                       ", beyond loopback, with neither TLS nor --api-tokens: anyone who can "
                       "reach it can spend or read any domain's quota (docs/security.md)");
  }
  return warnings;
}

}  // namespace sluice::server
