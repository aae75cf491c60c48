#include "sluiced/tls_listeners.h"

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

namespace sluice::server {
namespace {

constexpr StatFamily kHandshakeErrors{"sluice_tls_handshake_errors_total", StatKind::kCounter,
                                      "TLS handshakes that failed, by listener and reason."};
constexpr StatFamily kExpiry{"sluice_tls_certificate_expiry_seconds", StatKind::kGauge,
                             "The served certificate's notAfter, in seconds since the epoch."};

std::string_view ListenerName(TlsListener listener) {
  switch (listener) {
    case TlsListener::kHttp:
      return "http";
    case TlsListener::kForwardAuth:
      return "forward_auth";
    case TlsListener::kGrpc:
      return "grpc";
  }
  return "http";
}

constexpr std::array<TlsListener, 3> kListeners = {TlsListener::kHttp, TlsListener::kForwardAuth,
                                                   TlsListener::kGrpc};

}  // namespace

Result<std::unique_ptr<TlsListeners>> TlsListeners::Start(const TlsOptions& options, bool http,
                                                          bool forward_auth, bool grpc,
                                                          const Clock& clock) {
  std::unique_ptr<TlsListeners> t(new TlsListeners(options));
  if (!options.server) return t;
  const tls::TlsServerSettings& s = *options.server;
  t->http_on_ = http && options.http;
  t->forward_auth_on_ = forward_auth && options.forward_auth;
  if (t->http_on_ || t->forward_auth_on_) {
    auto ctx = tls::ServerTlsContext::Create(s, {"http/1.1"}, clock);
    if (!ctx) return MakeError("tls: " + ctx.error().message);
    t->http_ = std::move(*ctx);
  }
  if (grpc && options.grpc) {
    // gRPC has no probes that come without a certificate (grpc.health.v1 is a call like any).
    tls::TlsServerSettings g = s;
    g.require_client_cert = !s.client_ca_file.empty();
    auto ctx = tls::ServerTlsContext::Create(std::move(g), {"h2"}, clock);
    if (!ctx) return MakeError("tls: " + ctx.error().message);
    t->grpc_ = std::move(*ctx);
  }
  std::vector<std::string> files = {s.cert_file, s.key_file};
  if (!s.client_ca_file.empty()) files.push_back(s.client_ca_file);
  t->watcher_ = std::make_unique<tls::FileWatcher>(std::move(files), std::chrono::seconds(1),
                                                   [raw = t.get()] { raw->Reload(); });
  const auto& served = t->http_ ? t->http_ : t->grpc_;
  spdlog::info("tls: {} (TLS {}+, client certificates {}), expires at {} (unix seconds)",
               s.cert_file, tls::TlsVersionName(s.min_version),
               s.client_ca_file.empty() ? "not asked" : "verified against " + s.client_ca_file,
               served ? served->ExpirySeconds() : 0);
  return t;
}

TlsListeners::~TlsListeners() {
  if (watcher_) watcher_->Stop();
}

std::shared_ptr<tls::ServerTlsContext> TlsListeners::For(TlsListener listener) const {
  switch (listener) {
    case TlsListener::kHttp:
      return http_on_ ? http_ : nullptr;
    case TlsListener::kForwardAuth:
      return forward_auth_on_ ? http_ : nullptr;
    case TlsListener::kGrpc:
      return grpc_taken_ ? grpc_ : nullptr;
  }
  return nullptr;
}

void TlsListeners::Apply(TlsListener listener, HttpServerOptions& options) {
  options.tls = For(listener);
  if (!options.tls) return;
  options.on_tls_failure = FailureRecorder(listener);
  using ClientCert = HttpServerOptions::ClientCert;
  if (options.tls->settings().client_ca_file.empty()) {
    options.client_cert = ClientCert::kNone;
  } else if (listener == TlsListener::kForwardAuth || options_.client_cert_everywhere) {
    options.client_cert = ClientCert::kEverywhere;  // every forward-auth path is a check
  } else {
    options.client_cert = ClientCert::kExceptProbes;
  }
}

std::function<void(tls::HandshakeFailure)> TlsListeners::FailureRecorder(TlsListener listener) {
  auto& row = failures_[static_cast<size_t>(listener)];
  return [&row](tls::HandshakeFailure reason) {
    row[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  };
}

void TlsListeners::Reload() {
  for (const auto& [ctx, name] : {std::pair{http_, "http"}, std::pair{grpc_, "grpc"}}) {
    if (!ctx) continue;
    const uint64_t before = ctx->generation();
    if (auto r = ctx->Reload(); !r) {
      spdlog::error("tls: reload failed, keeping the running certificate ({}): {}", name,
                    r.error().message);
      continue;
    }
    if (ctx->generation() != before) {
      spdlog::info("tls: reloaded {} ({}), expires at {} (unix seconds)", ctx->settings().cert_file,
                   name, ctx->ExpirySeconds());
    }
  }
}

void TlsListeners::ReportStats(StatsSink& sink) const {
  for (const TlsListener listener : kListeners) {
    const std::shared_ptr<tls::ServerTlsContext> ctx = For(listener);
    if (!ctx) continue;
    const StatLabel l{"listener", ListenerName(listener)};
    const StatLabel expiry_labels[] = {l};
    sink.Add(kExpiry, expiry_labels, static_cast<double>(ctx->ExpirySeconds()));
    const auto& row = failures_[static_cast<size_t>(listener)];
    for (const tls::HandshakeFailure reason : tls::kAllHandshakeFailures) {
      const StatLabel labels[] = {l, {"reason", tls::HandshakeFailureName(reason)}};
      sink.Add(kHandshakeErrors, labels,
               static_cast<double>(row[static_cast<size_t>(reason)].load()));
    }
  }
}

}  // namespace sluice::server
