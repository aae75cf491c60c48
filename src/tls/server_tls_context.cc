#include "tls/server_tls_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <ctime>
#include <utility>

#include "tls/san_match.h"
#include "tls/x509_names.h"

namespace sluice::tls {
namespace {

// What the callbacks of one SSL_CTX read: kept in the context's ex_data and freed with it, so
// it lives exactly as long as the last connection made from the context. (Not app_data: Asio's
// ssl::context keeps its own verify callback there.)
struct CtxData {
  std::vector<std::string> client_sans;
  std::string alpn_wire;
};

void FreeCtxData(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<CtxData*>(ptr);
}

int CtxDataIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &FreeCtxData);
  return index;
}

const CtxData* DataOf(const SSL* ssl) {
  return static_cast<const CtxData*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), CtxDataIndex()));
}

// OpenSSL's queued errors as one line (and the queue emptied).
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(e, buffer, sizeof buffer);
    if (!out.empty()) out += "; ";
    out += buffer;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

// The chain has verified up to the leaf (depth 0): its SANs must match --tls-client-san. A
// refusal here fails the handshake with X509_V_ERR_APPLICATION_VERIFICATION as the verify
// result, which handshake_failure.cc reports as san_not_allowed.
int VerifyClient(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok == 0 || X509_STORE_CTX_get_error_depth(store) != 0) return preverify_ok;
  const auto* ssl = static_cast<const SSL*>(
      X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  const CtxData* data = ssl == nullptr ? nullptr : DataOf(ssl);
  if (data == nullptr || data->client_sans.empty()) return 1;
  if (SanAllowed(data->client_sans, DnsAndUriSans(X509_STORE_CTX_get_current_cert(store)))) {
    return 1;
  }
  X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
  return 0;
}

int SelectAlpn(SSL* ssl, const unsigned char** out, unsigned char* out_length,
               const unsigned char* offered, unsigned int offered_length, void*) {
  const CtxData* data = DataOf(ssl);
  if (data == nullptr || data->alpn_wire.empty()) return SSL_TLSEXT_ERR_NOACK;
  unsigned char* selected = nullptr;
  const auto* ours = reinterpret_cast<const unsigned char*>(data->alpn_wire.data());
  if (SSL_select_next_proto(&selected, out_length, ours,
                            static_cast<unsigned int>(data->alpn_wire.size()), offered,
                            offered_length) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

std::string AlpnWire(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const std::string& p : protocols) {
    if (p.empty() || p.size() > 255) continue;
    wire += static_cast<char>(p.size());
    wire += p;
  }
  return wire;
}

// notBefore <= now < notAfter for the leaf the context serves.
Result<int64_t> CheckValidity(SSL_CTX* ctx, const Clock& clock, const std::string& file) {
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert == nullptr) return MakeError(file + ": no certificate");
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(clock.Now().time_since_epoch());
  time_t t = static_cast<time_t>(now.count());
  if (X509_cmp_time(X509_get0_notBefore(cert), &t) > 0) {
    return MakeError(file + ": the certificate is not valid yet");
  }
  if (X509_cmp_time(X509_get0_notAfter(cert), &t) <= 0) {
    return MakeError(file + ": the certificate has expired");
  }
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) {
    return MakeError(file + ": cannot read the certificate's notAfter");
  }
  return static_cast<int64_t>(timegm(&tm));  // ASN.1 times are UTC
}

Result<void> ConfigureClientVerification(SSL_CTX* ctx, const TlsServerSettings& s) {
  if (s.client_ca_file.empty()) return {};
  if (SSL_CTX_load_verify_locations(ctx, s.client_ca_file.c_str(), nullptr) != 1) {
    return MakeError(s.client_ca_file + ": cannot load the client CA: " + OpenSslErrors());
  }
  // The CA names the server sends in its CertificateRequest, so a client with several
  // certificates picks the right one.
  if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(s.client_ca_file.c_str())) {
    SSL_CTX_set_client_CA_list(ctx, names);
  }
  X509_VERIFY_PARAM_set_purpose(SSL_CTX_get0_param(ctx), X509_PURPOSE_SSL_CLIENT);
  int mode = SSL_VERIFY_PEER;
  if (s.require_client_cert) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  SSL_CTX_set_verify(ctx, mode, &VerifyClient);
  return {};
}

}  // namespace

ServerTlsContext::ServerTlsContext(TlsServerSettings settings, const std::vector<std::string>& alpn,
                                   const Clock& clock)
    : settings_(std::move(settings)), alpn_wire_(AlpnWire(alpn)), clock_(clock) {}

Result<std::unique_ptr<ServerTlsContext>> ServerTlsContext::Create(TlsServerSettings settings,
                                                                   std::vector<std::string> alpn,
                                                                   const Clock& clock) {
  if (settings.cert_file.empty() || settings.key_file.empty()) {
    return MakeError("TLS needs both a certificate and a key file");
  }
  std::unique_ptr<ServerTlsContext> tls(
      new ServerTlsContext(std::move(settings), std::move(alpn), clock));
  if (auto r = tls->Reload(); !r) return std::unexpected(r.error());
  return tls;
}

Result<ServerTlsContext::Loaded> ServerTlsContext::Load() const {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
  if (!ctx) return MakeError("cannot make a TLS context: " + OpenSslErrors());
  SSL_CTX* c = ctx.get();
  auto* data = new CtxData{settings_.client_sans, alpn_wire_};
  SSL_CTX_set_ex_data(c, CtxDataIndex(), data);  // freed with the context from here on
  const int min = settings_.min_version == TlsVersion::k1_3 ? TLS1_3_VERSION : TLS1_2_VERSION;
  SSL_CTX_set_min_proto_version(c, min);
  SSL_CTX_set_options(
      c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);  // idle keep-alive connections hold no buffers
  // Sessions resume only within the context that made them: a reload (new keys) starts afresh.
  static constexpr unsigned char kSessionContext[] = "sluice";
  SSL_CTX_set_session_id_context(c, kSessionContext, sizeof kSessionContext - 1);
  if (SSL_CTX_use_certificate_chain_file(c, settings_.cert_file.c_str()) != 1) {
    return MakeError(settings_.cert_file + ": cannot load the certificate: " + OpenSslErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(c, settings_.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return MakeError(settings_.key_file + ": the key does not match the certificate " +
                       settings_.cert_file);
    }
    return MakeError(settings_.key_file + ": cannot load the key: " + OpenSslErrors());
  }
  if (SSL_CTX_check_private_key(c) != 1) {
    return MakeError(settings_.key_file + ": the key does not match the certificate " +
                     settings_.cert_file);
  }
  auto not_after = CheckValidity(c, clock_, settings_.cert_file);
  if (!not_after) return std::unexpected(not_after.error());
  if (auto r = ConfigureClientVerification(c, settings_); !r) return std::unexpected(r.error());
  if (!alpn_wire_.empty()) SSL_CTX_set_alpn_select_cb(c, &SelectAlpn, nullptr);
  return Loaded{std::move(ctx), *not_after};
}

std::shared_ptr<SSL_CTX> ServerTlsContext::Current() const {
  std::lock_guard lock(mu_);
  return current_.ctx;
}

Result<void> ServerTlsContext::Reload() {
  std::lock_guard reload_lock(reload_mu_);
  auto loaded = Load();
  if (!loaded) return std::unexpected(loaded.error());
  std::lock_guard lock(mu_);
  current_ = std::move(*loaded);
  ++generation_;
  return {};
}

int64_t ServerTlsContext::ExpirySeconds() const {
  std::lock_guard lock(mu_);
  return current_.not_after;
}

uint64_t ServerTlsContext::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

}  // namespace sluice::tls
