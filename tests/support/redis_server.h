// Starts a real redis-server on a free loopback port for the duration of a test binary, and
// stops it at the end -- also if the test process dies (the server gets SIGTERM when its parent
// goes away). No persistence, no config file. In TLS mode (RedisServer::Tls) it listens on a TLS
// port only, with certificates from tests/support/make-test-certs.
#ifndef SLUICE_TESTS_SUPPORT_REDIS_SERVER_H_
#define SLUICE_TESTS_SUPPORT_REDIS_SERVER_H_

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "store/redis/redis_client.h"
#include "store/redis/redis_endpoint.h"
#include "store/redis/redis_tls.h"
#include "support/ports.h"

namespace sluice::testing {

class RedisServer {
 public:
  // TLS only (--port 0 --tls-port): `cert`.pem/.key from `dir` (made by make-test-certs), ca.pem
  // for client certificates, which are required with auth_clients.
  struct Tls {
    std::string dir;
    std::string cert = "server";
    bool auth_clients = false;
  };

  // extra_args: more redis-server options, e.g. {"--requirepass", "secret"}.
  explicit RedisServer(std::vector<std::string> extra_args = {}, std::optional<Tls> tls = {})
      : extra_args_(std::move(extra_args)), tls_(std::move(tls)) {
    // A free port can be taken by someone else before redis binds it: try a few. A cluster
    // node's port leaves room for its bus (FreeClusterPort).
    const bool cluster =
        std::find(extra_args_.begin(), extra_args_.end(), "--cluster-enabled") != extra_args_.end();
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (TryStart(cluster ? FreeClusterPort() : FreePort())) return;
    }
    throw std::runtime_error("redis-server did not start on port " + std::to_string(port_) +
                             " (is it installed? run scripts/install-deps)");
  }
  ~RedisServer() { Stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }

  // An endpoint for this server's own checks: over TLS when it is in TLS mode (with the client
  // certificate, verifying nothing: it only asks whether the server is up).
  internal::RedisEndpoint Endpoint(std::chrono::milliseconds timeout) const {
    internal::RedisEndpoint e;
    e.port = port_;
    e.connect_timeout = timeout;
    e.command_timeout = timeout;
    if (tls_) {
      auto context = internal::RedisTlsContext::Make({.enabled = true,
                                                      .ca_file = tls_->dir + "/ca.pem",
                                                      .cert_file = tls_->dir + "/client.pem",
                                                      .key_file = tls_->dir + "/client.key",
                                                      .insecure_skip_verify = true});
      if (context) e.tls = std::move(*context);
    }
    return e;
  }

  // Starts it again on the same port (after Stop): an empty server, as after a crash.
  bool Restart() {
    Stop();
    for (int attempt = 0; attempt < 20; ++attempt) {  // the old socket may linger briefly
      if (TryStart(port_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // A hung server: the kernel still accepts connections, nothing answers.
  void Pause() { kill(pid_, SIGSTOP); }
  void Resume() { kill(pid_, SIGCONT); }

  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGCONT);
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  bool TryStart(int on_port) {
    port_ = on_port;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      const std::string port = std::to_string(port_);
      std::vector<std::string> listen = {"--port", port};
      if (tls_) {
        listen = {"--port",
                  "0",
                  "--tls-port",
                  port,
                  "--tls-cert-file",
                  tls_->dir + "/" + tls_->cert + ".pem",
                  "--tls-key-file",
                  tls_->dir + "/" + tls_->cert + ".key",
                  "--tls-ca-cert-file",
                  tls_->dir + "/ca.pem",
                  "--tls-auth-clients",
                  tls_->auth_clients ? "yes" : "no"};
      }
      std::vector<const char*> argv = {"redis-server"};
      for (const std::string& a : listen) argv.push_back(a.c_str());
      for (const char* a :
           {"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
            "--loglevel", "warning", "--enable-debug-command", "yes"}) {
        argv.push_back(a);
      }
      for (const std::string& a : extra_args_) argv.push_back(a.c_str());
      argv.push_back(nullptr);
      execvp("redis-server", const_cast<char* const*>(argv.data()));
      _exit(127);  // not installed: scripts/install-deps installs redis-server
    }
    for (int i = 0; i < 200; ++i) {  // up to 10 s
      auto c = internal::RedisClient::Connect(Endpoint(std::chrono::milliseconds(500)));
      if (c) {
        // With a password set, PING answers NOAUTH: the server is up all the same.
        auto pong = (*c)->Command({"PING"});
        if (pong || pong.error().message.find("NOAUTH") != std::string::npos) return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;  // exited: port taken, or no redis-server
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Stop();
    return false;
  }

  std::vector<std::string> extra_args_;
  std::optional<Tls> tls_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// One redis-server for the whole test executable, started by the first test that asks for it
// (tests that share it use key prefixes of their own, or flush it).
inline RedisServer& SharedRedisServer() {
  static RedisServer server;
  return server;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_REDIS_SERVER_H_
