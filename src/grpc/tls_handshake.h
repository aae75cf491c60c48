// The OpenSSL side of the gRPC listener's TLS relay (tls_relay.h): setting up a server
// connection and why a handshake failed; the SAN rule, the certificate's names and the failure
// reasons are src/tls's, shared with the HTTP listeners. Internal to src/grpc.
#ifndef SLUICE_GRPC_TLS_HANDSHAKE_H_
#define SLUICE_GRPC_TLS_HANDSHAKE_H_

#include <openssl/ssl.h>

#include <string>
#include <vector>

#include "tls/handshake_failure.h"

namespace sluice::server {

// What the handshake of one connection checks; outlives its SSL object.
struct HandshakePolicy {
  bool require_client_cert = false;
  const std::vector<std::string>* client_sans = nullptr;  // empty: any verified certificate
  bool san_refused = false;                               // set by the verification
};

// A server-side SSL on `fd` from `ctx`, with the relay's rules (minimum version, no
// renegotiation or compression, client certificates per `policy`). Null on failure.
SSL* NewServerSsl(SSL_CTX* ctx, int fd, int min_version, HandshakePolicy* policy);

// Why the handshake on `ssl` failed (SSL_get_error gave `error`): OpenSSL's error as
// tls::ClassifyHandshakeError reads it for every listener, or what the relay saw itself.
tls::HandshakeFailure FailureOf(SSL* ssl, int error, const HandshakePolicy& policy);

// The connection's negotiated ALPN protocol is h2.
bool NegotiatedH2(SSL* ssl);

}  // namespace sluice::server

#endif  // SLUICE_GRPC_TLS_HANDSHAKE_H_
