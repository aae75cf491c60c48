#include "tls/tls_settings.h"

namespace sluice::tls {

Result<TlsVersion> ParseTlsVersion(std::string_view text) {
  if (text == "1.2") return TlsVersion::k1_2;
  if (text == "1.3") return TlsVersion::k1_3;
  return MakeError("bad TLS version '" + std::string(text) + "': expected 1.2 or 1.3");
}

std::string_view TlsVersionName(TlsVersion version) {
  return version == TlsVersion::k1_3 ? "1.3" : "1.2";
}

}  // namespace sluice::tls
