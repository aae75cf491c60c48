// Why a TLS handshake failed, in the few reasons sluice_tls_handshake_errors_total{reason}
// has: a fixed set, so that a client cannot grow the metric.
#ifndef SLUICE_TLS_HANDSHAKE_FAILURE_H_
#define SLUICE_TLS_HANDSHAKE_FAILURE_H_

#include <array>
#include <string_view>

#include "tls/openssl_fwd.h"

namespace sluice::tls {

enum class HandshakeFailure {
  kProtocolVersion,  // "protocol_version": below --tls-min-version (TLS 1.0/1.1, SSLv3)
  kUnknownCa,        // "unknown_ca": a client certificate from another CA (or a client that
                     // does not trust ours and says so)
  kBadCertificate,   // "bad_certificate": a client certificate expired, not yet valid, not
                     // for client use
  kNoCertificate,    // "no_certificate": none sent where one is required
  kSanNotAllowed,    // "san_not_allowed": verified, but no SAN matches --tls-client-san
  kPlaintext,        // "plaintext": not TLS at all (an HTTP request on the TLS port)
  kTimeout,          // "timeout": not done within the handshake timeout
  kClosed,           // "closed": the client went away mid-handshake (a TCP probe)
  kOther,            // "other"
};

inline constexpr std::array<HandshakeFailure, 9> kAllHandshakeFailures = {
    HandshakeFailure::kProtocolVersion,
    HandshakeFailure::kUnknownCa,
    HandshakeFailure::kBadCertificate,
    HandshakeFailure::kNoCertificate,
    HandshakeFailure::kSanNotAllowed,
    HandshakeFailure::kPlaintext,
    HandshakeFailure::kTimeout,
    HandshakeFailure::kClosed,
    HandshakeFailure::kOther};

std::string_view HandshakeFailureName(HandshakeFailure reason);

// The reason for an OpenSSL error code (ERR_get_error(), as Asio's ssl error_category carries
// it) from a failed handshake of `ssl` (whose verify result tells the certificate failures
// apart; may be null).
HandshakeFailure ClassifyHandshakeError(unsigned long openssl_error, const SSL* ssl);

}  // namespace sluice::tls

#endif  // SLUICE_TLS_HANDSHAKE_FAILURE_H_
