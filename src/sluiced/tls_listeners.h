// The listeners' TLS in sluiced: the contexts made from --tls-* (one for the HTTP API and the
// forward-auth endpoint, ALPN http/1.1; one for gRPC, ALPN h2), their reload on SIGHUP and when
// the files change, and their metrics:
//   sluice_tls_handshake_errors_total{listener,reason}   tls/handshake_failure.h's reasons
//   sluice_tls_certificate_expiry_seconds{listener}      the served certificate's notAfter
// A listener without TLS has no series.
#ifndef SLUICE_SLUICED_TLS_LISTENERS_H_
#define SLUICE_SLUICED_TLS_LISTENERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "http/http_server.h"
#include "sluice/clock.h"
#include "sluice/stats_sink.h"
#include "sluice/status.h"
#include "sluiced/tls_flags.h"
#include "tls/file_watcher.h"
#include "tls/handshake_failure.h"
#include "tls/server_tls_context.h"

namespace sluice::server {

enum class TlsListener { kHttp, kForwardAuth, kGrpc };

class TlsListeners {
 public:
  // Loads the pair (a bad one is the error) for each listener that is on (`http`, ...: its
  // address is set) and TLS; starts watching the files.
  static Result<std::unique_ptr<TlsListeners>> Start(const TlsOptions& options, bool http,
                                                     bool forward_auth, bool grpc,
                                                     const Clock& clock);
  ~TlsListeners();

  // Sets the TLS of an HTTP listener (nothing when it is plaintext).
  void Apply(TlsListener listener, HttpServerOptions& options);
  // gRPC's context (null: plaintext), for the gRPC front end to serve with; its metrics are
  // reported from this call on, so that a gRPC port not (yet) serving TLS shows no TLS series.
  std::shared_ptr<tls::ServerTlsContext> TakeGrpc() {
    grpc_taken_ = grpc_ != nullptr;
    return grpc_;
  }
  // Where a listener reports a failed handshake.
  std::function<void(tls::HandshakeFailure)> FailureRecorder(TlsListener listener);

  // SIGHUP and the watcher: each context loads the files again; a bad pair keeps the running
  // one and is logged.
  void Reload();

  void ReportStats(StatsSink& sink) const;

 private:
  explicit TlsListeners(const TlsOptions& options) : options_(options) {}
  std::shared_ptr<tls::ServerTlsContext> For(TlsListener listener) const;

  const TlsOptions options_;
  std::shared_ptr<tls::ServerTlsContext> http_;  // the HTTP API's and forward-auth's
  std::shared_ptr<tls::ServerTlsContext> grpc_;
  bool http_on_ = false;
  bool forward_auth_on_ = false;
  std::atomic<bool> grpc_taken_{false};
  std::array<std::array<std::atomic<uint64_t>, tls::kAllHandshakeFailures.size()>, 3> failures_{};
  std::unique_ptr<tls::FileWatcher> watcher_;  // last: stopped first
};

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_TLS_LISTENERS_H_
