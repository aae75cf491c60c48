// sluiced's gRPC front end twice in one process, for the gRPC-over-TLS figures
// (scripts/run-grpc-tls-bench): the same RateLimitService (memory store, a config file) behind
// a plaintext GrpcServer, a TLS one (tls_relay.h) and one with gRPC's own TLS
// (GrpcServerOptions::native_tls), and a TLS one whose relay hands gRPC a loopback TCP
// connection instead of a socket pair (TlsRelayOptions::tcp_pair), so that one load driver can
// alternate between them with everything else equal. sluiced's own TLS flags are wired elsewhere;
// this measures the same GrpcServer code.
//
//   grpc_tls_server --config examples/sluice.yaml --cert server.pem --key server.key
//                   --ports-file FILE [--threads 2] [--relay-threads 1]
//
// Writes "PLAIN_PORT TLS_PORT NATIVE_TLS_PORT TCP_PAIR_TLS_PORT" to --ports-file once both listen;
// runs until SIGTERM or SIGINT.
#include <openssl/ssl.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "config/config.h"
#include "grpc/grpc_server.h"
#include "metrics/metrics.h"
#include "service/rate_limit_service.h"
#include "sluice/clock.h"
#include "sluice/open_store.h"

namespace {

struct Options {
  std::string config, cert, key, ports_file;
  int threads = 2;
  int relay_threads = 1;
};

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "grpc_tls_server: %s\n", message.c_str());
  std::exit(1);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--config")
      o.config = v;
    else if (a == "--cert")
      o.cert = v;
    else if (a == "--key")
      o.key = v;
    else if (a == "--ports-file")
      o.ports_file = v;
    else if (a == "--threads")
      o.threads = std::atoi(v.c_str());
    else if (a == "--relay-threads")
      o.relay_threads = std::atoi(v.c_str());
    else
      Fail("unknown argument " + a);
  }
  if (o.config.empty() || o.cert.empty() || o.key.empty() || o.ports_file.empty()) {
    Fail("usage: --config F --cert F --key F --ports-file F [--threads N] [--relay-threads N]");
  }
  return o;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::shared_ptr<ssl_ctx_st> ServerContext(const Options& o) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx.get(), o.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    Fail("cannot load " + o.cert + " / " + o.key);
  }
  sluice::server::UseAlpnH2(ctx.get());
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice;
  using namespace sluice::server;
  const Options o = Parse(argc, argv);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread: sigwait below takes them

  auto config = LoadConfig(o.config);
  if (!config) Fail(config.error().message);
  auto store = OpenStore("memory");
  if (!store) Fail(store.error().message);
  MonotonicClock clock;
  Metrics metrics;
  ServiceOptions service_options;
  service_options.clock = &clock;
  auto service = RateLimitService::Create(*config, std::move(*store), service_options, &metrics);
  if (!service) Fail(service.error().message);

  GrpcServerOptions plain{.address = "127.0.0.1:0", .threads = o.threads};
  GrpcServerOptions tls = plain;
  tls.tls = TlsRelayOptions{.context = [ctx = ServerContext(o)] { return ctx; },
                            .threads = o.relay_threads};
  GrpcServerOptions tcp_pair = tls;
  tcp_pair.tls->tcp_pair = true;
  GrpcServerOptions native = plain;
  native.native_tls = GrpcServerOptions::NativeTls{ReadFile(o.cert), ReadFile(o.key)};
  auto plain_server = GrpcServer::Start(plain, **service);
  if (!plain_server) Fail(plain_server.error().message);
  auto tls_server = GrpcServer::Start(tls, **service);
  if (!tls_server) Fail(tls_server.error().message);
  auto tcp_pair_server = GrpcServer::Start(tcp_pair, **service);
  if (!tcp_pair_server) Fail(tcp_pair_server.error().message);
  auto native_server = GrpcServer::Start(native, **service);
  if (!native_server) Fail(native_server.error().message);
  {
    std::ofstream ports(o.ports_file + ".tmp");
    ports << (*plain_server)->port() << ' ' << (*tls_server)->port() << ' '
          << (*native_server)->port() << ' ' << (*tcp_pair_server)->port() << '\n';
  }
  std::rename((o.ports_file + ".tmp").c_str(), o.ports_file.c_str());

  sigdelset(&stop, SIGPIPE);
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  (*native_server)->Shutdown();
  (*tcp_pair_server)->Shutdown();
  (*tls_server)->Shutdown();
  (*plain_server)->Shutdown();
  return 0;
}
