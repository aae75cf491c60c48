#include "sluiced/tls_flags.h"

#include <chrono>
#include <cstdio>

#include "tls/san_match.h"

namespace sluice::server {
namespace {

void AddListenerSwitches(CLI::App& app, TlsFlags& flags) {
  const auto on_off = CLI::IsMember({"on", "off"});
  app.add_option("--http-tls", flags.http,
                 "TLS on the HTTP API when --tls-cert is set: on or off (a loopback sidecar)")
      ->envname("SLUICE_HTTP_TLS")
      ->check(on_off)
      ->capture_default_str();
  app.add_option("--forward-auth-tls", flags.forward_auth,
                 "TLS on the forward-auth endpoint when --tls-cert is set: on or off")
      ->envname("SLUICE_FORWARD_AUTH_TLS")
      ->check(on_off)
      ->capture_default_str();
  app.add_option("--grpc-tls", flags.grpc, "TLS on the gRPC port when --tls-cert is set: on or off")
      ->envname("SLUICE_GRPC_TLS")
      ->check(on_off)
      ->capture_default_str();
}

int Refuse(const char* message) {
  std::fprintf(stderr, "sluiced: %s\n", message);
  return 2;
}

}  // namespace

void AddTlsFlags(CLI::App& app, TlsFlags& flags) {
  app.add_option("--tls-cert", flags.cert,
                 "PEM certificate (its chain after it): TLS on every listener; needs --tls-key; "
                 "reloaded on SIGHUP and when the file changes")
      ->envname("SLUICE_TLS_CERT");
  app.add_option("--tls-key", flags.key, "PEM private key of --tls-cert")
      ->envname("SLUICE_TLS_KEY");
  app.add_option("--tls-client-ca", flags.client_ca,
                 "PEM CA(s) that client certificates must chain to (mTLS): /v1/*, forward-auth "
                 "and gRPC then need one; /healthz, /readyz, /metrics do not")
      ->envname("SLUICE_TLS_CLIENT_CA");
  app.add_option("--tls-client-san", flags.client_sans,
                 "a verified client must have a SAN matching one of these (repeatable; exact DNS "
                 "or URI, or *.domain for one DNS label); the environment takes a comma list")
      ->envname("SLUICE_TLS_CLIENT_SAN")
      ->delimiter(',');
  app.add_option("--tls-min-version", flags.min_version, "lowest TLS version: 1.2 or 1.3")
      ->envname("SLUICE_TLS_MIN_VERSION")
      ->check(CLI::IsMember({"1.2", "1.3"}))
      ->capture_default_str();
  app.add_option("--tls-handshake-timeout-ms", flags.handshake_timeout_ms,
                 "time a client has to finish its TLS handshake")
      ->envname("SLUICE_TLS_HANDSHAKE_TIMEOUT_MS")
      ->check(CLI::Range(int64_t{1}, int64_t{600'000}))
      ->capture_default_str();
  app.add_flag("--tls-client-cert-everywhere", flags.client_cert_everywhere,
               "with --tls-client-ca: /healthz, /readyz and /metrics need a client certificate "
               "too")
      ->envname("SLUICE_TLS_CLIENT_CERT_EVERYWHERE");
  AddListenerSwitches(app, flags);
}

std::expected<TlsOptions, int> TlsOptionsFrom(const TlsFlags& flags) {
  TlsOptions o;
  o.http = flags.http == "on";
  o.forward_auth = flags.forward_auth == "on";
  o.grpc = flags.grpc == "on";
  o.client_cert_everywhere = flags.client_cert_everywhere;
  if (flags.cert.empty() != flags.key.empty()) {
    return std::unexpected(Refuse(flags.cert.empty()
                                      ? "--tls-key (SLUICE_TLS_KEY) needs --tls-cert"
                                      : "--tls-cert (SLUICE_TLS_CERT) needs --tls-key"));
  }
  if (flags.cert.empty()) {
    if (!flags.client_ca.empty() || !flags.client_sans.empty() || flags.client_cert_everywhere) {
      return std::unexpected(
          Refuse("--tls-client-ca, --tls-client-san and --tls-client-cert-everywhere need "
                 "--tls-cert and --tls-key: client certificates come over TLS"));
    }
    return o;
  }
  if (flags.client_ca.empty() && (!flags.client_sans.empty() || flags.client_cert_everywhere)) {
    return std::unexpected(
        Refuse("--tls-client-san and --tls-client-cert-everywhere need --tls-client-ca: only "
               "a verified client certificate names a client"));
  }
  for (const std::string& pattern : flags.client_sans) {
    if (auto ok = tls::ValidateSanPattern(pattern); !ok) {
      return std::unexpected(Refuse(("--tls-client-san: " + ok.error().message).c_str()));
    }
  }
  tls::TlsServerSettings s;
  s.cert_file = flags.cert;
  s.key_file = flags.key;
  s.client_ca_file = flags.client_ca;
  s.client_sans = flags.client_sans;
  s.min_version = *tls::ParseTlsVersion(flags.min_version);  // checked: IsMember
  s.handshake_timeout = std::chrono::milliseconds(flags.handshake_timeout_ms);
  o.server = std::move(s);
  return o;
}

}  // namespace sluice::server
