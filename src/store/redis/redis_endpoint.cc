#include "store/redis/redis_endpoint.h"

#include "store/redis/redis_tls.h"

namespace sluice::internal {

Result<RedisEndpoint> MakeEndpoint(const RedisStoreOptions& options) {
  RedisEndpoint endpoint;
  endpoint.host = options.host;
  endpoint.port = options.port;
  endpoint.unix_path = options.unix_path;
  endpoint.user = options.user;
  endpoint.password = options.password;
  endpoint.db = options.db;
  endpoint.connect_timeout = options.connect_timeout;
  endpoint.command_timeout = options.command_timeout;
  if (options.tls.enabled) {
    auto tls = RedisTlsContext::Make(options.tls);
    if (!tls) return std::unexpected(tls.error());
    endpoint.tls = std::move(*tls);
    endpoint.tls_name = options.tls.server_name;
  }
  return endpoint;
}

}  // namespace sluice::internal
