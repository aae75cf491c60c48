// What a TLS listener is configured with (sluiced's --tls-* flags), without any OpenSSL type.
#ifndef SLUICE_TLS_TLS_SETTINGS_H_
#define SLUICE_TLS_TLS_SETTINGS_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/status.h"

namespace sluice::tls {

enum class TlsVersion { k1_2, k1_3 };

// "1.2" or "1.3".
Result<TlsVersion> ParseTlsVersion(std::string_view text);
std::string_view TlsVersionName(TlsVersion version);

struct TlsServerSettings {
  std::string cert_file;  // PEM: the leaf first, then its chain
  std::string key_file;   // PEM
  // Empty: clients are not asked for a certificate. Else they are asked, and a certificate they
  // send must chain to one of these CAs (PEM, several allowed).
  std::string client_ca_file;
  // With client_ca_file: a verified client certificate must have a SAN matching one of these
  // (san_match.h); empty lets every verified client in.
  std::vector<std::string> client_sans;
  // With client_ca_file: a client without a certificate fails the handshake. Off (the HTTP
  // listeners): it gets in, and the server decides per request (probes need no certificate).
  bool require_client_cert = false;
  TlsVersion min_version = TlsVersion::k1_2;
  std::chrono::milliseconds handshake_timeout{5000};
};

}  // namespace sluice::tls

#endif  // SLUICE_TLS_TLS_SETTINGS_H_
