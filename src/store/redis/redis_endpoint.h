// Where one Redis connection goes and how: address, credentials, database, timeouts, and TLS.
// Internal: the store's options (include/sluice/redis_store.h) become one of these per server.
#ifndef SLUICE_STORE_REDIS_REDIS_ENDPOINT_H_
#define SLUICE_STORE_REDIS_REDIS_ENDPOINT_H_

#include <chrono>
#include <memory>
#include <string>

#include "sluice/redis_store.h"
#include "sluice/status.h"

namespace sluice::internal {

class RedisTlsContext;

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string unix_path;  // non-empty: connect to this Unix socket (host and port unused)
  std::string user;       // ACL user; empty: AUTH <password> (when a password is set)
  std::string password;
  int db = 0;
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds command_timeout{50};
  std::chrono::milliseconds min_backoff{25};
  std::chrono::milliseconds max_backoff{2000};
  // rediss://: the store's TLS settings, shared by all its connections; null: plaintext.
  std::shared_ptr<const RedisTlsContext> tls;
  // The name the server's certificate must carry (and the SNI sent); empty: `host`. Set for a
  // cluster's nodes named by IP (RedisTlsOptions::server_name, or the seed's host name).
  std::string tls_name;

  std::string Name() const {
    return unix_path.empty() ? host + ":" + std::to_string(port) : "unix:" + unix_path;
  }
};

// The endpoint of `options`' server (host, port, credentials, db, timeouts), with its TLS
// context when options.tls.enabled: an error if a CA, certificate or key file cannot be used.
Result<RedisEndpoint> MakeEndpoint(const RedisStoreOptions& options);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_ENDPOINT_H_
