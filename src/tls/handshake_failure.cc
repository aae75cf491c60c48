#include "tls/handshake_failure.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

namespace sluice::tls {
namespace {

HandshakeFailure FromVerifyResult(long result) {
  switch (result) {
    case X509_V_ERR_APPLICATION_VERIFICATION:  // set by the SAN check (server_tls_context.cc)
      return HandshakeFailure::kSanNotAllowed;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return HandshakeFailure::kUnknownCa;
    default:
      return HandshakeFailure::kBadCertificate;
  }
}

}  // namespace

std::string_view HandshakeFailureName(HandshakeFailure reason) {
  switch (reason) {
    case HandshakeFailure::kProtocolVersion:
      return "protocol_version";
    case HandshakeFailure::kUnknownCa:
      return "unknown_ca";
    case HandshakeFailure::kBadCertificate:
      return "bad_certificate";
    case HandshakeFailure::kNoCertificate:
      return "no_certificate";
    case HandshakeFailure::kSanNotAllowed:
      return "san_not_allowed";
    case HandshakeFailure::kPlaintext:
      return "plaintext";
    case HandshakeFailure::kTimeout:
      return "timeout";
    case HandshakeFailure::kClosed:
      return "closed";
    case HandshakeFailure::kOther:
      return "other";
  }
  return "other";
}

HandshakeFailure ClassifyHandshakeError(unsigned long openssl_error, const SSL* ssl) {
  if (ERR_GET_LIB(openssl_error) != ERR_LIB_SSL) return HandshakeFailure::kOther;
  switch (ERR_GET_REASON(openssl_error)) {
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_WRONG_VERSION_NUMBER:  // the first bytes are no TLS record
      return HandshakeFailure::kPlaintext;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      return HandshakeFailure::kProtocolVersion;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
      return HandshakeFailure::kNoCertificate;
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      return HandshakeFailure::kUnknownCa;
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return ssl == nullptr ? HandshakeFailure::kBadCertificate
                            : FromVerifyResult(SSL_get_verify_result(ssl));
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
      return HandshakeFailure::kClosed;
    default:
      return HandshakeFailure::kOther;
  }
}

}  // namespace sluice::tls
