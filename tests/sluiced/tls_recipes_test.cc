// docs/security.md's tested recipes, run from the files in examples/tls/ with their addresses
// and certificate paths replaced by the test's (certificates from tests/support/make-test-certs):
// - real nginx (auth_request, proxy_ssl_*) and real Caddy (forward_auth over `transport http
//   { tls ... }`) presenting a client certificate to sluiced's forward-auth endpoint over mTLS,
//   through the harness of forward_auth_proxies_test (forward_auth_proxies.h): the limit holds
//   through them; a proxy with another CA's certificate, with an unlisted SAN, or verifying a
//   server certificate of another name is refused and nothing is counted; a listed SAN whose
//   client may not check the domain gets sluiced's 403 through nginx;
// - Istio's SPIFFE identities: --tls-client-san and `san:` clients let each workload check its
//   own domains only, and a workload of another namespace not at all;
// - Envoy: no Envoy here, so grpc++ is configured from examples/tls/envoy.yaml's `sluiced`
//   cluster and rate limit filter (certificate, CA, SNI, ALPN h2, domain, initial_metadata) and
//   calls ShouldRateLimit over mTLS.
#include <grpcpp/grpcpp.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "sluiced/forward_auth_proxies.h"
#include "support/test_certs.h"
#include "support/tls_test_client.h"

namespace sluice::testing {
namespace {

namespace rls = envoy::service::ratelimit::v3;

constexpr char kEdgeSan[] = "spiffe://cluster.local/ns/edge/sa/envoy";
constexpr char kOtherSan[] = "spiffe://cluster.local/ns/other/sa/intruder";

fs::path Example(const std::string& name) {
  return fs::path(SLUICE_SOURCE_DIR) / "examples/tls" / name;
}

// The value of `series` (name and labels) on sluiced's /metrics, read over TLS without a client
// certificate (the probe exemption) and without verifying the server (some tests serve a
// certificate of another name); -1 when the series is absent or /metrics did not answer.
double Metric(int http_port, const std::string& series) {
  TlsTestClient client(http_port, TlsClientOptions{});
  const auto r = client.Request("GET", "/metrics");
  if (!r) return -1;
  const std::string line = "\n" + series + " ";
  const size_t at = r->body.find(line);
  return at == std::string::npos ? -1 : std::stod(r->body.substr(at + line.size()));
}

// sluiced's forward-auth endpoint with TLS as docs/security.md's recipe starts it, and a proxy
// (nginx or Caddy) running examples/tls/'s recipe with the certificate `proxy_cert_`.
class TlsRecipes : public ForwardAuthProxies {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.ok());
    recipe_dir_ = "examples/tls";
    nginx_recipe_ = "nginx-forward-auth-tls.conf";
    with_http_ = true;  // its /metrics show what was counted
    extra_flags_ = {
        "--tls-cert",       certs_[server_cert_],
        "--tls-key",        certs_[server_key_],
        "--tls-client-ca",  certs_["ca.pem"],
        "--tls-client-san", kEdgeSan,
        "--api-tokens",     tokens_.empty() ? Example("api-tokens.yaml").string() : tokens_};
    extra_flags_.insert(extra_flags_.end(), more_flags_.begin(), more_flags_.end());
    ForwardAuthProxies::SetUp();
  }

  std::string Substitute(std::string text) const override {
    const std::string dir = certs_.dir().string() + "/";
    for (const char* prefix : {"/etc/nginx/sluice/", "/etc/caddy/sluice/"}) {
      const std::string at = prefix;
      if (text.find(at) == std::string::npos) continue;
      text = Replace(text, at + "client.", dir + proxy_cert_ + ".");
      text = Replace(text, at, dir);
    }
    return text;
  }

  double Metric(const std::string& series) const {
    return sluice::testing::Metric(sluiced_->port(), series);
  }
  double Checked() const {
    double sum = 0;
    for (const char* result : {"allowed", "over_limit"}) {
      sum += Metric(std::string("sluice_forward_auth_requests_total{result=\"") + result + "\"}");
    }
    return sum;
  }

  // A proxy sluiced does not let in: each request gets `status` from the proxy, without the
  // fields (and `body` in its body); sluiced counted the handshake failure as `reason` (if any)
  // and checked nothing. Then
  // the recipe's own proxy, restarted with the right certificate, finds the client's counter
  // untouched.
  void ExpectRefusedAndNothingCounted(const std::function<std::unique_ptr<Proxy>()>& start,
                                      const std::string& cert, int status,
                                      const std::string& reason, const std::string& body = "") {
    proxy_cert_ = cert;
    {
      const auto proxy = start();
      for (int i = 0; i < 3; ++i) {
        const auto r = Get(kClient);
        ASSERT_TRUE(r.has_value()) << cert;
        EXPECT_EQ(r->status, status) << cert << ": " << r->body;
        EXPECT_NE(r->body.find(body), std::string::npos) << cert << ": " << r->body;
        EXPECT_FALSE(r->Header("RateLimit").has_value()) << cert;
      }
      const std::string series =
          "sluice_tls_handshake_errors_total{listener=\"forward_auth\",reason=\"" + reason + "\"}";
      if (!reason.empty()) {
        EXPECT_TRUE(WaitFor([&] { return Metric(series) >= 1; })) << series << sluiced_->Log();
      }
      EXPECT_EQ(Checked(), 0) << cert;
    }
    proxy_cert_ = "client";
    const auto proxy = start();
    const auto r = Get(kClient);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 204) << r->body;
    EXPECT_EQ(r->Header("RateLimit").value_or("<absent>").rfind("\"per_client\";r=4;", 0), 0u)
        << "the refused proxy's requests were counted: " << r->Header("RateLimit").value_or("");
  }

  std::function<std::unique_ptr<Proxy>()> Nginx() {
    return [this] { return StartNginx(); };
  }
  std::function<std::unique_ptr<Proxy>()> Caddy() {
    return [this] { return StartCaddy(); };
  }

  TestCerts certs_;
  std::string server_cert_ = "chain.pem";  // sluiced's pair: the certificate with its chain
  std::string server_key_ = "server.key";
  std::string proxy_cert_ = "client";  // the proxy's client certificate
  std::string tokens_;                 // the --api-tokens file; empty: the recipe's
  std::vector<std::string> more_flags_;
};

TEST_F(TlsRecipes, NginxOverMutualTls) {
  const auto nginx = StartNginx();
  ExpectTheLimitHolds("nginx over mTLS");
  // Every check came over TLS from the listed proxy.
  EXPECT_EQ(Checked(), kLimit + 3 + 1);
}

TEST_F(TlsRecipes, CaddyOverMutualTls) {
  const auto caddy = StartCaddy();
  ExpectTheLimitHolds("caddy over mTLS");
  EXPECT_EQ(Checked(), kLimit + 3 + 1);
}

// nginx's auth_request answers 500 when its subrequest fails (a handshake refused is a 502 to
// it); the recipe's error_page turns that into its fail-closed 503. Caddy's forward_auth
// answers 502 for a handshake sluiced refuses.
TEST_F(TlsRecipes, NginxWithAnotherCasCertificateIsRefused) {
  ExpectRefusedAndNothingCounted(Nginx(), "foreign-client", 503, "unknown_ca");
  const std::string log = ReadFile(dir_.path() / "nginx/error.log");
  EXPECT_NE(log.find("alert unknown ca"), std::string::npos) << log;
}

TEST_F(TlsRecipes, NginxWithAnUnlistedSanIsRefused) {
  ExpectRefusedAndNothingCounted(Nginx(), "other-client", 503, "san_not_allowed");
  const std::string log = ReadFile(dir_.path() / "nginx/error.log");
  EXPECT_NE(log.find("alert handshake failure"), std::string::npos) << log;
}

// Go's TLS client sends a certificate only if its issuer is among the CAs the server names in
// its request (sluiced names its --tls-client-ca): Caddy sends none, the handshake completes
// without a certificate, and sluiced's forward-auth endpoint answers 403 ("a verified TLS client
// certificate is required"), which Caddy passes on.
TEST_F(TlsRecipes, CaddyWithAnotherCasCertificateIsRefused) {
  ExpectRefusedAndNothingCounted(Caddy(), "foreign-client", 403, "",
                                 "a verified TLS client certificate is required");
}

TEST_F(TlsRecipes, CaddyWithAnUnlistedSanIsRefused) {
  ExpectRefusedAndNothingCounted(Caddy(), "other-client", 502, "san_not_allowed");
}

// sluiced serving a certificate for another name (wrong.test, from the same CA): the proxies'
// verification of `sluice.test` fails, they send nothing, sluiced checks nothing.
class TlsRecipesWrongName : public TlsRecipes {
 protected:
  TlsRecipesWrongName() {
    server_cert_ = "wrongname.pem";
    server_key_ = "wrongname.key";
  }
};

TEST_F(TlsRecipesWrongName, NginxRefusesTheServerCertificate) {
  const auto nginx = StartNginx();
  const auto r = Get(kClient);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_TRUE(WaitFor([&] {
    return ReadFile(dir_.path() / "nginx/error.log")
               .find("upstream SSL certificate does not match \"sluice.test\"") !=
           std::string::npos;
  })) << ReadFile(dir_.path() / "nginx/error.log");
  EXPECT_EQ(Checked(), 0);
}

TEST_F(TlsRecipesWrongName, CaddyRefusesTheServerCertificate) {
  const auto caddy = StartCaddy();
  const auto r = Get(kClient);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 502) << r->body;
  EXPECT_TRUE(WaitFor([&] {
    return ReadFile(dir_.path() / "caddy/out.log")
               .find("certificate is valid for wrong.test, not sluice.test") != std::string::npos;
  })) << ReadFile(dir_.path() / "caddy/out.log");
  EXPECT_EQ(Checked(), 0);
}

// A proxy whose SAN passes --tls-client-san but whose client in --api-tokens may check another
// domain only: sluiced answers 403, which auth_request passes to the client as it is.
class TlsRecipesOtherDomain : public TlsRecipes {
 protected:
  void SetUp() override {
    tokens_ = dir_.Write("tokens.yaml", ReadFile(Example("api-tokens.yaml")) +
                                            "  - name: other-team\n    san: " + kOtherSan +
                                            "\n    domains: [billing]\n")
                  .string();
    more_flags_ = {"--tls-client-san", kOtherSan};
    TlsRecipes::SetUp();
  }
};

TEST_F(TlsRecipesOtherDomain, NginxPassesSluicedsForbidden) {
  proxy_cert_ = "other-client";
  const auto nginx = StartNginx();
  for (int i = 0; i < 3; ++i) {
    const auto r = Get(kClient);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 403) << r->body;
  }
  EXPECT_EQ(Metric("sluice_check_auth_failures_total{reason=\"domain\"}"), 3);
  EXPECT_EQ(Checked(), 0);
}

// Istio: every workload's certificate carries spiffe://cluster.local/ns/NS/sa/SA. sluiced lists
// the two workloads it serves, exactly, and the token file confines each to its domains.
constexpr char kIstioApi[] =
    "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: "
    "10}\n";
constexpr char kIstioBilling[] =
    "domain: billing\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, "
    "requests_per_unit: 10}\n";

class IstioSpiffeSans : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.ok());
    fs::create_directories(dir_.path() / "config");
    dir_.Write("config/api.yaml", kIstioApi);
    dir_.Write("config/billing.yaml", kIstioBilling);
    sluiced_ = StartSluiced((dir_.path() / "config").string(),
                            {"--tls-cert", certs_["chain.pem"], "--tls-key", certs_["server.key"],
                             "--tls-client-ca", certs_["ca.pem"], "--tls-client-san", kEdgeSan,
                             "--tls-client-san", "spiffe://cluster.local/ns/billing/sa/billing-api",
                             "--api-tokens", Example("istio-api-tokens.yaml").string()});
    ASSERT_GT(sluiced_->port(), 0);
  }

  // POST /v1/check of one hit for user u in `domain` as the workload `cert`: the status and
  // `remaining`, or nullopt when the connection was refused.
  std::optional<std::pair<int, int>> Check(const std::string& cert, const std::string& domain) {
    TlsTestClient client(sluiced_->port(), ClientOf(certs_, cert));
    const auto r =
        client.Request("POST", "/v1/check",
                       R"({"domain":")" + domain +
                           R"(","descriptors":[{"entries":[{"key":"user","value":"u"}]}]})");
    if (!r) return std::nullopt;
    int remaining = -1;
    if (r->status == 200) {
      remaining = nlohmann::json::parse(r->body)["statuses"][0]["remaining"].get<int>();
    }
    return std::pair{r->status, remaining};
  }

  server::test::TempConfigDir dir_{"istio-sans"};
  TestCerts certs_;
  std::unique_ptr<SluicedProcess> sluiced_;
};

TEST_F(IstioSpiffeSans, EachWorkloadChecksItsOwnDomainsOnly) {
  EXPECT_EQ(Check("client", "api"), (std::pair{200, 9}));  // edge: every domain
  EXPECT_EQ(Check("client", "billing"), (std::pair{200, 9}));
  EXPECT_EQ(Check("billing-client", "billing"), (std::pair{200, 8}));
  EXPECT_EQ(Check("billing-client", "api"), (std::pair{403, -1}));  // not billing's domain
  // A workload of another namespace, and the edge's SPIFFE ID from another CA: refused at the
  // handshake, before a byte of HTTP.
  EXPECT_EQ(Check("other-client", "api"), std::nullopt);
  EXPECT_EQ(Check("foreign-client", "api"), std::nullopt);
  // Nothing was counted for the refused ones.
  EXPECT_EQ(Check("client", "api"), (std::pair{200, 8}));
  EXPECT_EQ(
      Metric(sluiced_->port(),
             "sluice_tls_handshake_errors_total{listener=\"http\",reason=\"san_not_allowed\"}"),
      1);
}

// The `sluiced` cluster and the rate limit filter of examples/tls/envoy.yaml, as grpc++ options.
struct EnvoyRecipe {
  std::string sni;
  std::string san;            // match_typed_subject_alt_names' one exact DNS name
  std::string cert, key, ca;  // file names (base names: the test's certificates stand in)
  std::vector<std::string> alpn;
  bool http2 = false;
  std::string domain;
  std::vector<std::pair<std::string, std::string>> metadata;  // initial_metadata
};

YAML::Node Named(const YAML::Node& list, const std::string& name) {
  for (const YAML::Node& item : list) {
    if (item["name"].as<std::string>() == name) return item;
  }
  ADD_FAILURE() << "envoy.yaml has no " << name;
  return YAML::Node();
}

EnvoyRecipe ReadEnvoyRecipe() {
  const YAML::Node root = YAML::LoadFile(Example("envoy.yaml").string());
  const YAML::Node cluster = Named(root["static_resources"]["clusters"], "sluiced");
  const YAML::Node tls = cluster["transport_socket"]["typed_config"];
  const YAML::Node common = tls["common_tls_context"];
  const YAML::Node pair = common["tls_certificates"][0];
  const YAML::Node validation = common["validation_context"];
  const auto base = [](const YAML::Node& file) {
    return fs::path(file["filename"].as<std::string>()).filename().string();
  };
  EnvoyRecipe r;
  EXPECT_EQ(cluster["transport_socket"]["name"].as<std::string>(), "envoy.transport_sockets.tls");
  r.sni = tls["sni"].as<std::string>();
  r.cert = base(pair["certificate_chain"]);
  r.key = base(pair["private_key"]);
  r.ca = base(validation["trusted_ca"]);
  EXPECT_EQ(validation["match_typed_subject_alt_names"].size(), 1u);
  EXPECT_EQ(validation["match_typed_subject_alt_names"][0]["san_type"].as<std::string>(), "DNS");
  r.san = validation["match_typed_subject_alt_names"][0]["matcher"]["exact"].as<std::string>();
  r.alpn = common["alpn_protocols"].as<std::vector<std::string>>();
  r.http2 = cluster["typed_extension_protocol_options"]
                   ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
                   ["explicit_http_config"]["http2_protocol_options"]
                       .IsDefined();
  const YAML::Node hcm =
      root["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
  const YAML::Node filter = Named(hcm["http_filters"], "envoy.filters.http.ratelimit");
  const YAML::Node service = filter["typed_config"]["rate_limit_service"]["grpc_service"];
  EXPECT_EQ(service["envoy_grpc"]["cluster_name"].as<std::string>(), "sluiced");
  r.domain = filter["typed_config"]["domain"].as<std::string>();
  for (const YAML::Node& m : service["initial_metadata"]) {
    r.metadata.emplace_back(m["key"].as<std::string>(), m["value"].as<std::string>());
  }
  return r;
}

class EnvoyRecipeOverGrpc : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.ok());
    recipe_ = ReadEnvoyRecipe();
    // What Envoy does that grpc++ does too: HTTP/2 with ALPN h2, the SNI sent, the server's
    // certificate checked for one name. Envoy checks the SAN matcher's name, grpc++ the SNI's;
    // the recipe makes them one.
    ASSERT_TRUE(recipe_.http2);
    ASSERT_EQ(recipe_.alpn, std::vector<std::string>{"h2"});
    ASSERT_EQ(recipe_.san, recipe_.sni);
    config_ = dir_.Write("api.yaml", kConfig).string();
  }

  std::unique_ptr<SluicedProcess> Start(const std::string& server_cert,
                                        const std::string& server_key) {
    auto sluiced = StartSluiced(
        config_, {"--grpc", "127.0.0.1:0", "--tls-cert", certs_[server_cert], "--tls-key",
                  certs_[server_key], "--tls-client-ca", certs_["ca.pem"], "--tls-client-san",
                  kEdgeSan, "--api-tokens", Example("api-tokens.yaml").string()});
    EXPECT_GT(sluiced->GrpcPort(), 0) << sluiced->Log();
    return sluiced;
  }

  // One ShouldRateLimit for remote_address 192.0.2.1 (what the recipe's action sends) as the
  // recipe's cluster calls it, presenting `cert` (the recipe's own unless given).
  grpc::Status Call(int port, rls::RateLimitResponse* response, const std::string& cert = {}) {
    const std::string c = cert.empty() ? recipe_.cert : cert + ".pem";
    const std::string k = cert.empty() ? recipe_.key : cert + ".key";
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(certs_[recipe_.ca]);
    ssl.pem_cert_chain = ReadFile(certs_[c]);
    ssl.pem_private_key = ReadFile(certs_[k]);
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetSslTargetNameOverride(recipe_.sni);
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                             grpc::SslCredentials(ssl), args);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    for (const auto& [key, value] : recipe_.metadata) ctx.AddMetadata(key, value);
    rls::RateLimitRequest request;
    request.set_domain(recipe_.domain);
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("remote_address");
    entry->set_value("192.0.2.1");
    return rls::RateLimitService::NewStub(channel)->ShouldRateLimit(&ctx, request, response);
  }

  server::test::TempConfigDir dir_{"envoy-recipe"};
  TestCerts certs_;
  EnvoyRecipe recipe_;
  std::string config_;
};

TEST_F(EnvoyRecipeOverGrpc, TheClusterCallsShouldRateLimitOverMutualTls) {
  const auto sluiced = Start("chain.pem", "server.key");
  const int port = sluiced->GrpcPort();
  ASSERT_GT(port, 0);
  rls::RateLimitResponse response;
  // Refused at the handshake (UNAVAILABLE to the caller): an unlisted SAN, another CA. Nothing
  // counted: the recipe's own client then has the whole limit.
  EXPECT_EQ(Call(port, &response, "other-client").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call(port, &response, "foreign-client").error_code(), grpc::StatusCode::UNAVAILABLE);
  for (int i = 0; i < kLimit + 1; ++i) {
    const grpc::Status status = Call(port, &response);
    ASSERT_TRUE(status.ok()) << i << ": " << status.error_message();
    EXPECT_EQ(response.overall_code(),
              i < kLimit ? rls::RateLimitResponse::OK : rls::RateLimitResponse::OVER_LIMIT)
        << i;
    ASSERT_EQ(response.statuses_size(), 1);
    EXPECT_EQ(response.statuses(0).limit_remaining(),
              static_cast<uint32_t>(std::max(0, kLimit - 1 - i)));
  }
}

TEST_F(EnvoyRecipeOverGrpc, AServerCertificateOfAnotherNameIsRefused) {
  const auto sluiced = Start("wrongname.pem", "wrongname.key");
  const int port = sluiced->GrpcPort();
  ASSERT_GT(port, 0);
  rls::RateLimitResponse response;
  EXPECT_EQ(Call(port, &response).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// docs/security.md shows the recipes as they are tested.
TEST(TlsRecipesDocs, SecurityMdHoldsTheTestedRecipesVerbatim) {
  const std::string doc = ReadFile(fs::path(SLUICE_SOURCE_DIR) / "docs/security.md");
  for (const char* name : {"nginx-forward-auth-tls.conf", "Caddyfile", "api-tokens.yaml",
                           "envoy.yaml", "istio-api-tokens.yaml"}) {
    const std::string recipe = ReadFile(Example(name));
    ASSERT_FALSE(recipe.empty()) << name;
    EXPECT_NE(doc.find(recipe), std::string::npos)
        << "docs/security.md does not hold examples/tls/" << name << " as it is";
  }
}

}  // namespace
}  // namespace sluice::testing
