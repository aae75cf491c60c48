// The harness of the forward-auth recipe tests (forward_auth_proxies_test.cc, tls_recipes_test.cc):
// a recipe file from examples/ with its addresses replaced by a test's, the real nginx or caddy
// running it in front of a `return 204` upstream, and the real sluiced behind them; all on
// loopback, ports picked free. The client connects from 127.0.0.2, the proxies reach sluiced
// from 127.0.0.1 (the one trusted proxy), so a spoofed X-Forwarded-For would show as a
// different identity. The limit is 5 per hour (token bucket): it cannot refill during a test.
#ifndef SLUICE_TESTS_SLUICED_FORWARD_AUTH_PROXIES_H_
#define SLUICE_TESTS_SLUICED_FORWARD_AUTH_PROXIES_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/http_test_client.h"
#include "support/ports.h"
#include "support/recording_upstream.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"
#include "support/wait_for.h"

namespace sluice::testing {

namespace fs = std::filesystem;

constexpr int kLimit = 5;
constexpr char kClient[] = "127.0.0.2";
constexpr char kOtherClient[] = "127.0.0.3";

constexpr char kConfig[] = R"yaml(
domain: api
forward_auth:
  trusted_proxies: [127.0.0.1/32]
  actions:
    - [remote_address]
descriptors:
  - key: remote_address
    rate_limit: {name: per_client, unit: hour, requests_per_unit: 5}
)yaml";

// The whole file; empty if it cannot be read.
inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `text` with every `from` replaced by `to`; the recipe must contain it.
inline std::string Replace(std::string text, const std::string& from, const std::string& to) {
  EXPECT_NE(text.find(from), std::string::npos) << "the recipe no longer says " << from;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// A proxy process: started with its output in a file, killed (and reaped) at the end; it dies
// with the test process too.
class Proxy {
 public:
  Proxy(std::vector<std::string> argv, std::vector<std::string> env, const fs::path& log) {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
  }
  ~Proxy() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Whether it answers HTTP on `port` within the deadline (it may take a moment to bind).
  bool WaitUntilServing(int port) const {
    bool exited = false;
    return WaitFor(
               [&] {
                 exited = exited || waitpid(pid_, nullptr, WNOHANG) == pid_;
                 return exited || HttpClient(port, kOtherClient).connected();
               },
               std::chrono::seconds(15)) &&
           !exited;
  }

 private:
  pid_t pid_ = -1;
};

class ForwardAuthProxies : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto config = dir_.Write("api.yaml", config_yaml_);
    const std::string forward_auth =
        forward_auth_unix_ ? "unix:" + (dir_.path() / "fa.sock").string() : "127.0.0.1:0";
    std::vector<std::string> args = {
        "--config", config.string(), "--http",         with_http_ ? "127.0.0.1:0" : "off",
        "--grpc",   "off",           "--forward-auth", forward_auth};
    args.insert(args.end(), extra_flags_.begin(), extra_flags_.end());
    sluiced_ = std::make_unique<SluicedProcess>(args, /*wait_for_http=*/with_http_);
    if (forward_auth_unix_) {
      ASSERT_TRUE(sluiced_->WaitForLog("forward-auth: listening on unix:")) << sluiced_->Log();
    } else {
      forward_auth_port_ = sluiced_->ForwardAuthPort();
      ASSERT_GT(forward_auth_port_, 0) << sluiced_->Log();
    }
    port_ = FreePort();
    if (record_upstream_) {
      recorder_ = std::make_unique<RecordingUpstream>();
      upstream_port_ = recorder_->port();
      ASSERT_GT(upstream_port_, 0);
    } else {
      upstream_port_ = FreePort();
    }
  }

  // The recipe file with its addresses replaced by this test's.
  std::string Recipe(const std::string& name) const {
    std::string text = ReadFile(fs::path(SLUICE_SOURCE_DIR) / recipe_dir_ / name);
    text = Replace(text, "127.0.0.1:8082",
                   forward_auth_unix_ ? "unix:" + (dir_.path() / "fa.sock").string()
                                      : "127.0.0.1:" + std::to_string(forward_auth_port_));
    text = Replace(text, "127.0.0.1:8000", "127.0.0.1:" + std::to_string(upstream_port_));
    if (!proxy_token_.empty()) {
      // The proxy's Sluice-Token on its request to sluiced only, as docs/security.md says.
      text = std::string_view(name) == "Caddyfile"
                 ? Replace(text, "\t\t\turi /\n",
                           "\t\t\turi /\n\t\t\theader_up Sluice-Token " + proxy_token_ + "\n")
                 : Replace(text, "proxy_pass http://sluice_forward_auth;\n",
                           "proxy_pass http://sluice_forward_auth;\n        proxy_set_header "
                           "Sluice-Token \"" +
                               proxy_token_ + "\";\n");
    }
    return Substitute(Replace(text, ":8080", ":" + std::to_string(port_)));
  }
  // What a fixture replaces in its recipes beyond the addresses (certificate paths).
  virtual std::string Substitute(std::string text) const { return text; }

  std::unique_ptr<Proxy> StartNginx() {
    const fs::path prefix = dir_.path() / "nginx";
    fs::create_directories(prefix / "tmp");
    std::ofstream(prefix / "site.conf") << Recipe(nginx_recipe_);
    const std::string p = prefix.string();
    std::ofstream(prefix / "nginx.conf")
        << "daemon off;\nmaster_process off;\nworker_processes 1;\npid " << p << "/nginx.pid;\n"
        << "error_log " << p << "/error.log warn;\nevents { worker_connections 256; }\n"
        << "http {\n  access_log off;\n"
        << "  client_body_temp_path " << p << "/tmp/body;\n  proxy_temp_path " << p
        << "/tmp/proxy;\n  fastcgi_temp_path " << p << "/tmp/fastcgi;\n  uwsgi_temp_path " << p
        << "/tmp/uwsgi;\n  scgi_temp_path " << p << "/tmp/scgi;\n"
        << "  include " << p << "/site.conf;\n";
    if (!recorder_) {
      std::ofstream(prefix / "nginx.conf", std::ios::app)
          << "  server { listen 127.0.0.1:" << upstream_port_ << "; location / { return 204; } }\n";
    }
    std::ofstream(prefix / "nginx.conf", std::ios::app) << "}\n";
    auto proxy = std::make_unique<Proxy>(
        std::vector<std::string>{"nginx", "-p", p, "-c", p + "/nginx.conf", "-e", p + "/error.log"},
        std::vector<std::string>{}, prefix / "out.log");
    EXPECT_TRUE(proxy->WaitUntilServing(port_))
        << ReadFile(prefix / "out.log") << ReadFile(prefix / "error.log")
        << "(is nginx-light installed? scripts/install-deps)";
    return proxy;
  }

  // Caddy with no admin endpoint, no automatic HTTPS, and its data and config under the test's
  // directory: it reaches no network and writes nothing outside it.
  std::unique_ptr<Proxy> StartCaddy() {
    const fs::path home = dir_.path() / "caddy";
    fs::create_directories(home);
    std::ofstream(home / "Caddyfile") << "{\n\tadmin off\n\tauto_https off\n}\n\n"
                                      << Recipe(caddy_recipe_);
    if (!recorder_) {
      std::ofstream(home / "Caddyfile", std::ios::app)
          << "\nhttp://:" << upstream_port_ << " {\n\tbind 127.0.0.1\n\trespond 204\n}\n";
    }
    env_ = {"HOME=" + home.string(), "XDG_DATA_HOME=" + (home / "data").string(),
            "XDG_CONFIG_HOME=" + (home / "config").string()};
    auto proxy = std::make_unique<Proxy>(
        std::vector<std::string>{"caddy", "run", "--config", (home / "Caddyfile").string(),
                                 "--adapter", "caddyfile"},
        env_, home / "out.log");
    // Caddy starts its sites one after the other: the upstream's too before the first request.
    EXPECT_TRUE(proxy->WaitUntilServing(port_) &&
                (recorder_ != nullptr || proxy->WaitUntilServing(upstream_port_)))
        << ReadFile(home / "out.log") << "(is caddy installed? scripts/install-deps)";
    return proxy;
  }

  std::optional<HttpResponse> Get(const char* from, const std::string& spoofed = "") const {
    return GetFrom(port_, from, spoofed);
  }
  static std::optional<HttpResponse> GetFrom(int port, const char* from,
                                             const std::string& spoofed = "") {
    HttpClient client(port, from);
    std::vector<std::string> headers;
    if (!spoofed.empty()) headers.push_back("X-Forwarded-For: " + spoofed);
    return client.Request("GET", "/orders?page=2", "", headers);
  }

  // The limit through the proxy: exactly kLimit allowed with the fields, whatever the client
  // claims to be, then 429 with Retry-After and the fields; another client is another identity.
  void ExpectTheLimitHolds(const std::string& proxy) {
    for (int i = 0; i < kLimit + 3; ++i) {
      const auto r = Get(kClient, "198.51.100." + std::to_string(i));  // a new lie each time
      ASSERT_TRUE(r.has_value()) << proxy << " request " << i;
      const auto policy = r->Header("RateLimit-Policy");
      const auto current = r->Header("RateLimit");
      EXPECT_EQ(policy.value_or("<absent>"), "\"per_client\";q=5;w=3600") << proxy << " " << i;
      if (i < kLimit) {
        EXPECT_EQ(r->status, 204) << proxy << " request " << i << ": " << r->body;
        EXPECT_TRUE(current && current->starts_with(
                                   "\"per_client\";r=" + std::to_string(kLimit - 1 - i) + ";"))
            << proxy << " request " << i << ": " << current.value_or("<absent>");
        continue;
      }
      EXPECT_EQ(r->status, 429) << proxy << " request " << i;
      EXPECT_TRUE(current && current->starts_with("\"per_client\";r=0;"))
          << proxy << ": " << current.value_or("<absent>");
      // Token bucket, 5 per hour: one more hit in 720 s, minus the moments the test has taken.
      const int retry = std::stoi(r->Header("Retry-After").value_or("0"));
      EXPECT_GE(retry, 700) << proxy;
      EXPECT_LE(retry, 720) << proxy;
      EXPECT_NE(r->body.find("Too many requests"), std::string::npos) << proxy << r->body;
    }
    const auto other = Get(kOtherClient);
    ASSERT_TRUE(other.has_value());
    EXPECT_EQ(other->status, 204) << proxy << ": another client has a bucket of its own";
  }

  // sluiced gone (killed, reaped): what the recipe says the proxy does.
  void StopSluiced() {
    sluiced_->Signal(SIGKILL);
    ASSERT_NE(sluiced_->WaitExit(), -1);
  }

  std::string recipe_dir_ = "examples/gateways";  // under the source tree
  std::string nginx_recipe_ = "nginx-forward-auth.conf";
  std::string caddy_recipe_ = "Caddyfile";
  std::string config_yaml_ = kConfig;
  bool with_http_ = false;                // the HTTP API too (its /metrics), on a port of its own
  std::vector<std::string> extra_flags_;  // more of sluiced's flags
  std::string proxy_token_;               // the recipes send it as Sluice-Token
  bool forward_auth_unix_ = false;        // forward-auth on a Unix socket (nginx: server unix:...)
  bool record_upstream_ = false;  // the upstream is a RecordingUpstream, not the proxy's own
  std::unique_ptr<RecordingUpstream> recorder_;
  server::test::TempConfigDir dir_{"fauth-proxies"};
  std::unique_ptr<SluicedProcess> sluiced_;
  std::vector<std::string> env_;  // the proxy's environment (putenv keeps pointers)
  int forward_auth_port_ = 0;
  int port_ = 0;
  int upstream_port_ = 0;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SLUICED_FORWARD_AUTH_PROXIES_H_
