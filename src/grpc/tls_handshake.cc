#include "grpc/tls_handshake.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "grpc/tls_relay.h"
#include "tls/san_match.h"
#include "tls/x509_names.h"

namespace sluice::server {
namespace {

constexpr unsigned char kH2[] = {2, 'h', '2'};

int SelectH2(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
             unsigned int in_len, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kH2, sizeof kH2, in, in_len) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // the client offers ALPN, but not h2
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// The leaf certificate's names are checked here, during the handshake, so that a client with an
// unlisted name gets an alert rather than a connection that closes later.
int VerifyClient(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok != 1 || X509_STORE_CTX_get_error_depth(store) != 0) return preverify_ok;
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* policy = static_cast<HandshakePolicy*>(SSL_get_app_data(ssl));
  if (policy == nullptr || policy->client_sans == nullptr || policy->client_sans->empty()) {
    return 1;
  }
  if (tls::SanAllowed(*policy->client_sans,
                      tls::DnsAndUriSans(X509_STORE_CTX_get_current_cert(store)))) {
    return 1;
  }
  policy->san_refused = true;
  X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
  return 0;
}

}  // namespace

void UseAlpnH2(ssl_ctx_st* ctx) { SSL_CTX_set_alpn_select_cb(ctx, SelectH2, nullptr); }

SSL* NewServerSsl(SSL_CTX* ctx, int fd, int min_version, HandshakePolicy* policy) {
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return nullptr;
  // The relay's minimum raises the context's, never lowers it (0 there: the lowest built in).
  const int wanted = min_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION;
  if (SSL_set_fd(ssl, fd) != 1 || (SSL_CTX_get_min_proto_version(ctx) < wanted &&
                                   SSL_set_min_proto_version(ssl, wanted) != 1)) {
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  // An unexpected EOF (a FIN without close_notify) ends the client's direction like a
  // close_notify: HTTP/2 frames its own messages, so a truncation cannot pass for a whole one.
  SSL_set_options(ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                           SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                        SSL_MODE_RELEASE_BUFFERS);
  // Read what the socket holds in one read() rather than a record header and its body apart.
  SSL_set_read_ahead(ssl, 1);
  SSL_set_app_data(ssl, policy);
  if (policy->require_client_cert) {
    SSL_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, VerifyClient);
  } else {
    SSL_set_verify(ssl, SSL_VERIFY_NONE, nullptr);
  }
  return ssl;
}

tls::HandshakeFailure FailureOf(SSL* ssl, int error, const HandshakePolicy& policy) {
  using tls::HandshakeFailure;
  if (policy.san_refused) return HandshakeFailure::kSanNotAllowed;
  const HandshakeFailure classified = tls::ClassifyHandshakeError(ERR_peek_error(), ssl);
  if (classified != HandshakeFailure::kOther) return classified;
  if (policy.require_client_cert && SSL_get_verify_result(ssl) != X509_V_OK) {
    return HandshakeFailure::kBadCertificate;
  }
  if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN)
    return HandshakeFailure::kClosed;
  return HandshakeFailure::kOther;
}

bool NegotiatedH2(SSL* ssl) {
  const unsigned char* alpn = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl, &alpn, &len);
  return len == 2 && alpn[0] == 'h' && alpn[1] == '2';
}

}  // namespace sluice::server
