// The forward-auth recipes end to end, with the real proxies from Debian (nginx-light's
// auth_request, caddy's forward_auth) running the exact files in examples/gateways/, in front
// of a `return 204` upstream, with the real sluiced behind them; all on loopback, ports
// picked free. The client connects from 127.0.0.2, the proxies reach sluiced from 127.0.0.1
// (the one trusted proxy), so a spoofed X-Forwarded-For would show as a different identity.
// The limit is 5 per hour (token bucket): it cannot refill during a test.
// ForwardAuthProxiesShaping: a leaky-bucket shaper, whose 200 sluiced holds so that the proxy
// reaches its upstream one release interval after the request before.
#include <arpa/inet.h>
#include <fcntl.h>
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
#include "util/canonical_path.h"

namespace sluice::testing {
namespace {

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

// A port free on loopback now (the proxies need theirs in their config files).
std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `text` with every `from` replaced by `to`; the recipe must contain it.
std::string Replace(std::string text, const std::string& from, const std::string& to) {
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
  std::string Recipe(const char* name) const {
    std::string text = ReadFile(fs::path(SLUICE_SOURCE_DIR) / "examples/gateways" / name);
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
    return Replace(text, ":8080", ":" + std::to_string(port_));
  }

  std::unique_ptr<Proxy> StartNginx() {
    const fs::path prefix = dir_.path() / "nginx";
    fs::create_directories(prefix / "tmp");
    std::ofstream(prefix / "site.conf") << Recipe("nginx-forward-auth.conf");
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
                                      << Recipe("Caddyfile");
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
    EXPECT_TRUE(proxy->WaitUntilServing(port_))
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

TEST_F(ForwardAuthProxies, NginxAuthRequestRecipe) {
  const auto nginx = StartNginx();
  ExpectTheLimitHolds("nginx");
  StopSluiced();
  // The recipe fails open: with sluiced down the app answers, without the fields.
  const auto r = Get(kClient);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 204);
  EXPECT_FALSE(r->Header("RateLimit").has_value());
}

TEST_F(ForwardAuthProxies, CaddyForwardAuthRecipe) {
  const auto caddy = StartCaddy();
  ExpectTheLimitHolds("caddy");
  StopSluiced();
  // forward_auth fails closed: the auth upstream is unreachable, the client gets 502.
  const auto r = Get(kClient);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 502);
}

// The recipes with --api-tokens: the proxy names itself with its own Sluice-Token, set on its
// request to sluiced only (replacing a client's), and the limit holds as without tokens; a
// client's own Sluice-Token and Authorization change nothing.
class ForwardAuthProxiesWithToken : public ForwardAuthProxies {
 protected:
  void SetUp() override {
    proxy_token_ = "sluice_the-proxys-own-token-for-the-recipes-0123456789";
    // The digest by coreutils' sha256sum, independently of sluice.
    FILE* out = popen(("printf %s '" + proxy_token_ + "' | sha256sum").c_str(), "r");
    ASSERT_NE(out, nullptr);
    char hex[65] = {};
    ASSERT_EQ(fread(hex, 1, 64, out), 64u);
    pclose(out);
    const auto tokens = dir_.Write("tokens.yaml", std::string("clients:\n  - name: edge-proxy\n"
                                                              "    token_sha256: ") +
                                                      hex + "\n    domains: [api]\n");
    extra_flags_ = {"--api-tokens", tokens.string()};
    ForwardAuthProxies::SetUp();
  }

  void ExpectTokenedLimitHolds(const std::string& proxy) {
    // A client's own credentials: replaced (Sluice-Token) or not read (Authorization).
    for (int i = 0; i < kLimit; ++i) {
      HttpClient client(port_, kClient);
      const auto r =
          client.Request("GET", "/orders", "",
                         {"Sluice-Token: sluice_a-clients-guess", "Authorization: Bearer x"});
      ASSERT_TRUE(r.has_value()) << proxy;
      EXPECT_EQ(r->status, 204) << proxy << " request " << i << ": " << r->body;
    }
    const auto over = Get(kClient);
    ASSERT_TRUE(over.has_value());
    EXPECT_EQ(over->status, 429) << proxy;
    EXPECT_EQ(sluiced_->Log().find(proxy_token_), std::string::npos) << sluiced_->Log();
  }
};

TEST_F(ForwardAuthProxiesWithToken, NginxSendsItsSluiceToken) {
  const auto nginx = StartNginx();
  ExpectTokenedLimitHolds("nginx");
}

TEST_F(ForwardAuthProxiesWithToken, CaddySendsItsSluiceToken) {
  const auto caddy = StartCaddy();
  ExpectTokenedLimitHolds("caddy");
}

// Every client is one identity on a shaper of 20/s (one release every 50 ms) that refuses waits
// over 1 s. The `slow` one (1/s, waits up to 10 s) applies when the request has X-Slow.
constexpr char kShapingConfig[] = R"yaml(
domain: api
forward_auth:
  trusted_proxies: [127.0.0.1/32]
  actions:
    - [remote_address]
    - [{header: X-Slow, key: slow}]
descriptors:
  - key: remote_address
    rate_limit: {name: paced, unit: second, requests_per_unit: 20, algorithm: leaky_bucket,
                 burst: 40, shaper: true, max_delay: 1s}
  - key: slow
    rate_limit: {name: slow, unit: second, requests_per_unit: 1, algorithm: leaky_bucket,
                 burst: 10, shaper: true, max_delay: 10s}
)yaml";

// The nginx recipe with sluiced's forward-auth on a Unix socket (`server unix:/path;` in the
// upstream) and `unix` as the one trusted proxy: nginx's X-Forwarded-For names each client, and
// a client's own entries still cannot choose its identity.
class ForwardAuthProxiesUnix : public ForwardAuthProxies {
 protected:
  ForwardAuthProxiesUnix() {
    config_yaml_ = Replace(kConfig, "trusted_proxies: [127.0.0.1/32]", "trusted_proxies: [unix]");
    forward_auth_unix_ = true;
  }
};

TEST_F(ForwardAuthProxiesUnix, NginxOverAUnixSocket) {
  const auto nginx = StartNginx();
  ExpectTheLimitHolds("nginx over a unix socket");
}

class ForwardAuthProxiesShaping : public ForwardAuthProxies {
 protected:
  ForwardAuthProxiesShaping() {
    config_yaml_ = kShapingConfig;
    with_http_ = true;
  }

  // Waits until sluiced has allowed `count` forward-auth checks (its /metrics says so).
  bool WaitForAllowed(int count) const {
    const std::string series =
        "sluice_forward_auth_requests_total{result=\"allowed\"} " + std::to_string(count) + "\n";
    return WaitFor([&] {
      HttpClient c(sluiced_->port());
      const auto r = c.Request("GET", "/metrics");
      return r && r->body.find(series) != std::string::npos;
    });
  }

  // `count` requests at once, each from a thread of its own; when each response came.
  static std::vector<std::chrono::steady_clock::time_point> Concurrently(
      int count, const std::function<std::optional<HttpResponse>()>& request) {
    std::vector<std::chrono::steady_clock::time_point> at(static_cast<size_t>(count));
    std::vector<int> status(static_cast<size_t>(count), 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < count; ++i) {
      threads.emplace_back([&, i] {
        const auto r = request();
        at[static_cast<size_t>(i)] = std::chrono::steady_clock::now();
        status[static_cast<size_t>(i)] = r ? r->status : -1;
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < count; ++i) EXPECT_EQ(status[static_cast<size_t>(i)], 204) << i;
    std::sort(at.begin(), at.end());
    return at;
  }
};

// nginx auth_request forwards a request when sluiced's 200 comes: ten at once reach the
// upstream (a `return 204`, whose answer is the moment it was reached, give or take a loopback
// hop) one release interval apart. The held ones are due k intervals after the first was
// checked; the first, not held, goes its way at once but its answer may take longer (nginx's
// first connections), so the schedule is read from the second: the k-th comes k - 1 intervals
// after it. Tolerance: 5 ms early, 60 ms late (two proxies' hops and ten client threads on a
// shared 2-core machine). And the last cannot come before 9 intervals from the start.
TEST_F(ForwardAuthProxiesShaping, NginxPassesShapedRequestsOnOneIntervalApart) {
  const auto nginx = StartNginx();
  constexpr int kClients = 10;
  constexpr auto kInterval = std::chrono::milliseconds(50);
  const auto start = std::chrono::steady_clock::now();
  const auto at = Concurrently(kClients, [this] { return Get(kClient); });
  EXPECT_GE(at[kClients - 1] - start, (kClients - 1) * kInterval);
  EXPECT_LE(at[1] - at[0], kInterval + std::chrono::milliseconds(60));
  for (int k = 2; k < kClients; ++k) {
    const auto off = at[static_cast<size_t>(k)] - at[1] - (k - 1) * kInterval;
    EXPECT_GE(off, -std::chrono::milliseconds(5)) << "response " << k;
    EXPECT_LE(off, std::chrono::milliseconds(60)) << "response " << k;
  }
}

// SIGTERM with answers held (up to 9 s on the slow shaper): sluiced sends them at once, 200
// (their requests were admitted), and exits within the moment that takes.
TEST_F(ForwardAuthProxiesShaping, SigtermSendsHeldAnswersAtOnce) {
  constexpr int kHeld = 5;
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < kHeld; ++i) {
    clients.push_back(std::make_unique<HttpClient>(forward_auth_port_));
    ASSERT_TRUE(clients.back()->Send(HttpClient::Format("GET", "/", "", {"X-Slow: 1"})));
  }
  // The first is answered at once; the others are held (1, 2, 3, 4 s).
  ASSERT_TRUE(WaitForAllowed(kHeld));
  const auto first = clients[0]->Read(std::chrono::seconds(2));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->status, 200);
  const auto signalled = std::chrono::steady_clock::now();
  sluiced_->Signal(SIGTERM);
  for (int i = 1; i < kHeld; ++i) {
    const auto r = clients[static_cast<size_t>(i)]->Read(std::chrono::seconds(3));
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->status, 200) << i;
    // The 1 s hold can come due about when the signal lands (slow under a sanitizer): sent at
    // its own time it is an ordinary answer. Every later one must be the shutdown's.
    if (i > 1) {
      EXPECT_EQ(r->Header("Connection"), "close") << i;
    }
    clients[static_cast<size_t>(i)].reset();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::milliseconds(900))
      << "the 4 s hold was not waited for";
  clients.clear();
  EXPECT_EQ(sluiced_->WaitExit(std::chrono::seconds(5)), 0) << sluiced_->Log();
}

// Issue 29 through the real proxies: a limit of 3 on the path /v1/search for each client. Each
// spelling of that path is sent by a client of its own after three plain /v1/search requests,
// and must be refused as the 4th: counted against the one limit. The upstream records what the
// proxy let through; none of it may be /v1/search beyond the three per client, whatever
// spelling it arrived in (read canonically, as an application that normalises paths reads it).
constexpr char kPathConfig[] = R"yaml(
domain: api
forward_auth:
  trusted_proxies: [127.0.0.1/32]
  actions:
    - [remote_address, path]
descriptors:
  - key: remote_address
    descriptors:
      - key: path
        value: /v1/search
        rate_limit: {name: search, unit: hour, requests_per_unit: 3}
)yaml";

constexpr const char* kSpellings[] = {
    "/v1/%73earch", "/v1//search",        "/v1/./search",       "/v1/../v1/search", "//v1/search",
    "/v1/search#f", "http://h/v1/search", "/v1/%73%65arch?q=1", "/v1/x/../search",  "/v1/search"};

class ForwardAuthProxiesCanonical : public ForwardAuthProxies {
 protected:
  ForwardAuthProxiesCanonical() {
    config_yaml_ = kPathConfig;
    record_upstream_ = true;
  }

  static std::optional<HttpResponse> GetAs(int port, const std::string& client,
                                           const std::string& target) {
    HttpClient c(port, client.c_str());
    return c.Request("GET", target);
  }

  // How many of the upstream's requests an application that normalises paths reads as
  // /v1/search (with the trailing slash its router may also fold).
  int ServedAsSearch() const {
    int n = 0;
    const util::PathNormalize loose{.trailing_slash = util::PathNormalize::TrailingSlash::kStrip};
    for (const std::string& target : recorder_->served()) {
      const auto t = util::CanonicalTarget(target, loose);
      if (t && t->path == "/v1/search") ++n;
    }
    return n;
  }

  // `own`: the one spelling the proxy itself makes another path of (nullptr: none); it must
  // reach the upstream as `own_served`, which no application reads as /v1/search.
  void ExpectEverySpellingCountsAgainstTheOneLimit(const std::string& proxy,
                                                   const char* own = nullptr,
                                                   const char* own_served = nullptr) {
    int clients = 0;
    for (const char* spelling : kSpellings) {
      const std::string client = "127.0.1." + std::to_string(++clients);
      for (int i = 0; i < 3; ++i) {
        const auto r = GetAs(port_, client, "/v1/search");
        ASSERT_TRUE(r.has_value()) << proxy;
        ASSERT_EQ(r->status, 204) << proxy << " " << client << " request " << i;
      }
      const auto r = GetAs(port_, client, spelling);
      ASSERT_TRUE(r.has_value()) << proxy << " " << spelling;
      if (own != nullptr && std::string_view(spelling) == own) {
        EXPECT_EQ(r->status, 204) << proxy << ": " << spelling;
        EXPECT_EQ(recorder_->served().back(), own_served) << proxy;
        continue;
      }
      EXPECT_EQ(r->status, 429) << proxy << ": " << spelling << " escaped the limit: " << r->body;
    }
    // Another path is not the limited one.
    for (int i = 0; i < 5; ++i) {
      const auto r = GetAs(port_, "127.0.2.1", "/v1/searchx");
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->status, 204) << proxy;
    }
    EXPECT_EQ(ServedAsSearch(), 3 * clients) << proxy << " served more than the limit";
    const auto served = recorder_->served();
    EXPECT_EQ(std::count(served.begin(), served.end(), "/v1/searchx"), 5) << proxy;
  }

  // A path with no canonical form never reaches the application unlimited: refused by the
  // proxy itself or by sluice.
  void ExpectUncanonicalPathsAreRefused(const std::string& proxy) {
    const size_t before = recorder_->served().size();
    for (const char* bad : {"/v1/%zzsearch", "/v1/search%", "/v1/%00search"}) {
      const auto r = GetAs(port_, "127.0.3.1", bad);
      ASSERT_TRUE(r.has_value()) << proxy << " " << bad;
      EXPECT_EQ(r->status, 400) << proxy << ": " << bad << ": " << r->body;
    }
    EXPECT_EQ(recorder_->served().size(), before) << proxy << " let a bad path through";
  }
};

TEST_F(ForwardAuthProxiesCanonical, NginxCountsEverySpellingAgainstTheOneLimit) {
  const auto nginx = StartNginx();
  ExpectEverySpellingCountsAgainstTheOneLimit("nginx");
  ExpectUncanonicalPathsAreRefused("nginx");
}

TEST_F(ForwardAuthProxiesCanonical, CaddyCountsEverySpellingAgainstTheOneLimit) {
  const auto caddy = StartCaddy();
  // Go's HTTP server reads a '#' in a request line as part of the path, and Caddy sends it on
  // escaped: to the application behind it "/v1/search#f" is not /v1/search.
  ExpectEverySpellingCountsAgainstTheOneLimit("caddy", "/v1/search#f", "/v1/search%23f");
  ExpectUncanonicalPathsAreRefused("caddy");
}

// docs/gateways.md shows the recipes as they are tested.
TEST(ForwardAuthDocs, GatewaysMdHoldsTheTestedRecipesVerbatim) {
  const std::string doc = ReadFile(fs::path(SLUICE_SOURCE_DIR) / "docs/gateways.md");
  for (const char* name : {"nginx-forward-auth.conf", "Caddyfile"}) {
    const std::string recipe = ReadFile(fs::path(SLUICE_SOURCE_DIR) / "examples/gateways" / name);
    ASSERT_FALSE(recipe.empty()) << name;
    EXPECT_NE(doc.find(recipe), std::string::npos)
        << "docs/gateways.md does not hold examples/gateways/" << name << " as it is";
  }
}

}  // namespace
}  // namespace sluice::testing
