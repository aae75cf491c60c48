#include "tls/peer_sans.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls/x509_names.h"

namespace sluice::tls {

std::vector<std::string> DnsAndUriSans(const X509* cert) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type != GEN_DNS && name->type != GEN_URI) continue;
    const ASN1_IA5STRING* s = name->d.ia5;  // both are IA5Strings
    const auto* data = reinterpret_cast<const char*>(ASN1_STRING_get0_data(s));
    const auto length = static_cast<size_t>(ASN1_STRING_length(s));
    // An embedded NUL would let "a.test\0.evil" pass for "a.test": such a name names nobody.
    const std::string value(data, length);
    if (value.find('\0') == std::string::npos) out.push_back(value);
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::vector<std::string> VerifiedPeerSans(const SSL* ssl) {
  if (ssl == nullptr) return {};
  const X509* peer = SSL_get0_peer_certificate(ssl);
  if (peer == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return {};
  return DnsAndUriSans(peer);
}

}  // namespace sluice::tls
