// A TLS listener's OpenSSL context, reloadable: the certificate pair, client verification and
// ALPN of one listener (or of several that share the settings).
//
//   auto tls = ServerTlsContext::Create(settings, {"http/1.1"}, clock);
//   std::shared_ptr<SSL_CTX> ctx = (*tls)->Current();  // for each new connection
//   if (auto r = (*tls)->Reload(); !r) log(r.error().message);  // the old pair stays
//
// The context is TLS 1.2 or later (settings.min_version), without renegotiation or compression,
// with OpenSSL's default ciphers. With settings.client_ca_file a client is asked for a
// certificate (SSL_VERIFY_PEER): one it sends must chain to the CA, be valid now and for client
// use, and have a SAN matching settings.client_sans (else the handshake fails, as
// san_not_allowed); one it does not send fails the handshake only with require_client_cert.
// ALPN: the first of the listener's protocols the client also offers; a client that offers ALPN
// but none of them is refused (no_application_protocol), as nginx does. A client that offers
// none gets the listener's protocol anyway.
//
// Thread-safe. Connections keep the context they started with (a shared_ptr): a reload changes
// only the ones that come after it.
#ifndef SLUICE_TLS_SERVER_TLS_CONTEXT_H_
#define SLUICE_TLS_SERVER_TLS_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sluice/clock.h"
#include "sluice/status.h"
#include "tls/openssl_fwd.h"
#include "tls/tls_settings.h"

namespace sluice::tls {

class ServerTlsContext {
 public:
  // Loads the pair; an unreadable file, a key that does not match the certificate, or a
  // certificate expired or not yet valid (by `clock`) is an error. `clock` must outlive this.
  static Result<std::unique_ptr<ServerTlsContext>> Create(TlsServerSettings settings,
                                                          std::vector<std::string> alpn,
                                                          const Clock& clock);

  // The context for a new connection.
  std::shared_ptr<SSL_CTX> Current() const;

  // Loads the files again; on success new connections get the new pair. On failure (the same
  // as Create's) the current one stays and the error says why.
  Result<void> Reload();

  // The current certificate's notAfter, in seconds since the Unix epoch.
  int64_t ExpirySeconds() const;

  // Successful loads so far (1 after Create).
  uint64_t generation() const;

  const TlsServerSettings& settings() const { return settings_; }

 private:
  struct Loaded {
    std::shared_ptr<SSL_CTX> ctx;
    int64_t not_after = 0;
  };
  ServerTlsContext(TlsServerSettings settings, const std::vector<std::string>& alpn,
                   const Clock& clock);
  Result<Loaded> Load() const;

  const TlsServerSettings settings_;
  const std::string alpn_wire_;  // ALPN's wire format: each protocol after its length byte
  const Clock& clock_;
  mutable std::mutex mu_;
  Loaded current_;           // under mu_
  uint64_t generation_ = 0;  // under mu_
  std::mutex reload_mu_;     // one Reload at a time (SIGHUP and the watcher may race)
};

}  // namespace sluice::tls

#endif  // SLUICE_TLS_SERVER_TLS_CONTEXT_H_
