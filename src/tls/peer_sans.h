// The identity of a TLS connection's client: the SANs of the certificate it sent, once verified.
#ifndef SLUICE_TLS_PEER_SANS_H_
#define SLUICE_TLS_PEER_SANS_H_

#include <string>
#include <vector>

#include "tls/openssl_fwd.h"

namespace sluice::tls {

// The DNS and URI SANs of the client certificate of `ssl`, after a completed handshake; empty
// when the client sent none or it did not verify (only a verified certificate names anyone).
std::vector<std::string> VerifiedPeerSans(const SSL* ssl);

}  // namespace sluice::tls

#endif  // SLUICE_TLS_PEER_SANS_H_
