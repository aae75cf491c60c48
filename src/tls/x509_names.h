// The DNS and URI SANs of a certificate (shared by VerifiedPeerSans and the verify callback).
#ifndef SLUICE_TLS_X509_NAMES_H_
#define SLUICE_TLS_X509_NAMES_H_

#include <openssl/x509.h>

#include <string>
#include <vector>

namespace sluice::tls {

std::vector<std::string> DnsAndUriSans(const X509* cert);

}  // namespace sluice::tls

#endif  // SLUICE_TLS_X509_NAMES_H_
