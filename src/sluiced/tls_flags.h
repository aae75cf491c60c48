// sluiced's --tls-* flags (each with its SLUICE_* twin) and what they make: the TLS settings of
// the listeners, checked (a certificate without a key is refused here, before anything starts).
#ifndef SLUICE_SLUICED_TLS_FLAGS_H_
#define SLUICE_SLUICED_TLS_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "tls/tls_settings.h"

namespace sluice::server {

// The flags as CLI11 writes them.
struct TlsFlags {
  std::string cert;
  std::string key;
  std::string client_ca;
  std::vector<std::string> client_sans;
  std::string min_version = "1.2";
  int64_t handshake_timeout_ms = 5000;
  bool client_cert_everywhere = false;
  std::string http = "on";
  std::string forward_auth = "on";
  std::string grpc = "on";
};

// Which listeners are TLS and with what.
struct TlsOptions {
  // nullopt: no --tls-cert, every listener plaintext.
  std::optional<tls::TlsServerSettings> server;
  bool http = true;          // --http-tls
  bool forward_auth = true;  // --forward-auth-tls
  bool grpc = true;          // --grpc-tls (wired by the gRPC front end)
  // --tls-client-cert-everywhere: the probes too need a verified client certificate.
  bool client_cert_everywhere = false;
};

void AddTlsFlags(CLI::App& app, TlsFlags& flags);

// The options, or 2 with the message printed when the flags do not go together.
std::expected<TlsOptions, int> TlsOptionsFrom(const TlsFlags& flags);

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_TLS_FLAGS_H_
