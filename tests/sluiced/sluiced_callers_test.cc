// --api-tokens against the real sluiced: the HTTP API, the forward-auth endpoint and gRPC refuse a
// caller with no credential, an unknown one, or one whose client may not check the domain, and
// count nothing for it (a following allowed request's `remaining` shows the counter untouched);
// SIGHUP reloads the file, keeping the old one when the new one is wrong; the admin read routes
// show a client its own domains; a permit is released or renewed only by a client that may
// check its domain; no token ever reaches the log. Tokens are made by the real
// `sluice token`, as an operator makes them (tests/cli/token_test.py checks its hash).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "support/http_test_client.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"

namespace sluice::testing {
namespace {

using server::test::TempConfigDir;

// Both domains count per user, 10 an hour: no refill during a test. billing also answers the
// forward-auth endpoint, by the X-User header (the same counter as /v1/check's user entry), and
// holds one job in flight at a time (a permit outlives the test: nothing expires on the way).
constexpr char kBilling[] = R"yaml(domain: billing
forward_auth:
  actions:
    - [{header: X-User, key: user}]
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: job
    concurrency: {max_in_flight: 1, permit_ttl: 1h}
)yaml";
constexpr char kSearch[] = R"yaml(domain: search
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10}
)yaml";

struct Token {
  std::string token;
  std::string line;  // "token_sha256: <hex>"
};

// A new token from `sluice token`.
Token MakeToken() {
  Token t;
  FILE* out = popen(SLUICE_BIN " token", "r");
  EXPECT_NE(out, nullptr);
  if (out == nullptr) return t;
  char buf[256];
  std::string text;
  while (fgets(buf, sizeof buf, out) != nullptr) text += buf;
  EXPECT_EQ(pclose(out), 0);
  const size_t nl = text.find('\n');
  t.token = text.substr(0, nl);
  t.line = text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1);
  EXPECT_EQ(t.line.rfind("token_sha256: ", 0), 0u) << text;
  return t;
}

std::string Client(const std::string& name, const std::string& credential_line,
                   const std::string& domains) {
  return "  - name: " + name + "\n    " + credential_line + "\n    domains: " + domains + "\n";
}

class SluicedCallersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() / "config");
    dir_.Write("config/billing.yaml", kBilling);
    dir_.Write("config/search.yaml", kSearch);
    tokens_ = dir_.Write("tokens.yaml", "clients:\n" +
                                            Client("billing-service", billing_.line, "[billing]") +
                                            Client("searcher", search_.line, "[search]") +
                                            Client("ops", ops_.line, "[\"*\"]"));
    sluiced_ = StartSluiced((dir_.path() / "config").string(),
                            {"--api-tokens", tokens_.string(), "--forward-auth", "127.0.0.1:0"});
    ASSERT_GT(sluiced_->port(), 0);
    forward_auth_port_ = sluiced_->ForwardAuthPort();
    ASSERT_GT(forward_auth_port_, 0) << sluiced_->Log();
  }

  // POST /v1/check of one hit for `user` in `domain`, with `headers`.
  std::optional<HttpResponse> Check(const std::string& domain, const std::string& user,
                                    const std::vector<std::string>& headers) {
    HttpClient c(sluiced_->port());
    const std::string body = R"({"domain":")" + domain +
                             R"(","descriptors":[{"entries":[{"key":"user","value":")" + user +
                             R"("}]}]})";
    return c.Request("POST", "/v1/check", body, headers);
  }

  // `remaining` of an allowed check of billing's `user` with the ops token (one more hit).
  int RemainingAfterOneMore(const std::string& user) {
    auto r = Check("billing", user, {"Authorization: Bearer " + ops_.token});
    if (!r || r->status != 200) return -1;
    return nlohmann::json::parse(r->body)["statuses"][0]["remaining"].get<int>();
  }

  std::optional<HttpResponse> ForwardAuth(const std::vector<std::string>& headers) {
    HttpClient c(forward_auth_port_);
    return c.Request("GET", "/orders", "", headers);
  }

  uint64_t AuthFailures(const std::string& reason) {
    HttpClient c(sluiced_->port());
    auto r = c.Request("GET", "/metrics");
    if (!r) return ~uint64_t{0};
    const std::string series = "sluice_check_auth_failures_total{reason=\"" + reason + "\"} ";
    const size_t at = r->body.find(series);
    if (at == std::string::npos) return ~uint64_t{0};
    return std::stoull(r->body.substr(at + series.size()));
  }

  // No token, good or bad, in anything sluiced logged.
  void ExpectNoTokenInLog(const std::vector<std::string>& more = {}) {
    const std::string log = sluiced_->Log();
    std::vector<std::string> tokens = {billing_.token, search_.token, ops_.token};
    tokens.insert(tokens.end(), more.begin(), more.end());
    for (const std::string& t : tokens) {
      EXPECT_EQ(log.find(t), std::string::npos) << "a token is in the log:\n" << log;
    }
  }

  TempConfigDir dir_{"sluiced-callers"};
  const Token billing_ = MakeToken();
  const Token search_ = MakeToken();
  const Token ops_ = MakeToken();
  std::filesystem::path tokens_;
  std::unique_ptr<SluicedProcess> sluiced_;
  int forward_auth_port_ = 0;
};

TEST_F(SluicedCallersTest, HttpRefusesAndCountsNothing) {
  ASSERT_EQ(RemainingAfterOneMore("alice"), 9);
  const std::string wrong = "sluice_not-a-token-of-any-client-0123456789abcdefghijklm";

  auto missing = Check("billing", "alice", {});
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(missing->Header("WWW-Authenticate").value_or("").rfind("Bearer", 0), 0u);
  auto basic = Check("billing", "alice", {"Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l"});
  ASSERT_TRUE(basic.has_value());
  EXPECT_EQ(basic->status, 401);
  auto unknown = Check("billing", "alice", {"Authorization: Bearer " + wrong});
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->status, 401);
  EXPECT_EQ(unknown->Header("WWW-Authenticate").value_or("").rfind("Bearer", 0), 0u);
  EXPECT_EQ(unknown->body.find(wrong), std::string::npos);
  auto other = Check("billing", "alice", {"Authorization: Bearer " + search_.token});
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->status, 403);

  // Four refusals on alice's counter, none counted.
  EXPECT_EQ(RemainingAfterOneMore("alice"), 8);

  auto allowed = Check("billing", "alice", {"Authorization: Bearer " + billing_.token});
  ASSERT_TRUE(allowed.has_value());
  EXPECT_EQ(allowed->status, 200) << allowed->body;
  EXPECT_EQ(nlohmann::json::parse(allowed->body)["statuses"][0]["remaining"], 7);
  auto search = Check("search", "alice", {"Authorization: bearer " + search_.token});
  ASSERT_TRUE(search.has_value());
  EXPECT_EQ(search->status, 200);

  EXPECT_EQ(AuthFailures("missing"), 2u);
  EXPECT_EQ(AuthFailures("unknown"), 1u);
  EXPECT_EQ(AuthFailures("domain"), 1u);
  HttpClient health(sluiced_->port());
  for (const char* open : {"/healthz", "/readyz", "/metrics"}) {
    auto r = health.Request("GET", open);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200) << open;
  }
  ExpectNoTokenInLog({wrong});
}

// The proxy is named by Sluice-Token; the end user's Authorization, which proxies forward, is
// never read as a sluice token.
TEST_F(SluicedCallersTest, ForwardAuthNamesTheProxyBySluiceToken) {
  ASSERT_EQ(RemainingAfterOneMore("bob"), 9);
  const std::string wrong = "sluice_wrong-proxy-token-0123456789abcdefghijklmnopqr";

  auto missing = ForwardAuth({"X-User: bob"});
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(missing->Header("WWW-Authenticate").value_or("").rfind("Bearer", 0), 0u);
  auto users_own = ForwardAuth({"X-User: bob", "Authorization: Bearer " + billing_.token});
  ASSERT_TRUE(users_own.has_value());
  EXPECT_EQ(users_own->status, 401);
  auto unknown = ForwardAuth({"X-User: bob", "Sluice-Token: " + wrong});
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->status, 401);
  auto other = ForwardAuth({"X-User: bob", "Sluice-Token: " + search_.token});
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->status, 403);

  EXPECT_EQ(RemainingAfterOneMore("bob"), 8);
  auto allowed = ForwardAuth({"X-User: bob", "Sluice-Token: " + billing_.token});
  ASSERT_TRUE(allowed.has_value());
  EXPECT_EQ(allowed->status, 200);
  EXPECT_EQ(RemainingAfterOneMore("bob"), 6);  // the forward-auth hit and this one

  EXPECT_EQ(AuthFailures("missing"), 2u);
  EXPECT_EQ(AuthFailures("unknown"), 1u);
  EXPECT_EQ(AuthFailures("domain"), 1u);
  ExpectNoTokenInLog({wrong});
}

TEST_F(SluicedCallersTest, SighupReloadsAndKeepsTheOldFileWhenTheNewIsWrong) {
  const Token fresh = MakeToken();
  dir_.Write("tokens.yaml", "clients:\n" + Client("ops", ops_.line, "[\"*\"]") +
                                Client("fresh", fresh.line, "[billing]"));
  sluiced_->Signal(SIGHUP);
  ASSERT_TRUE(sluiced_->WaitForLog("api tokens: reloaded 2 clients")) << sluiced_->Log();
  auto gone = Check("billing", "carol", {"Authorization: Bearer " + billing_.token});
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->status, 401);
  auto added = Check("billing", "carol", {"Authorization: Bearer " + fresh.token});
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(added->status, 200);

  // A digest with a letter too few: the file is refused, the running clients stay.
  std::string bad_line = fresh.line;
  bad_line.pop_back();
  dir_.Write("tokens.yaml", "clients:\n" + Client("fresh", bad_line, "[billing]"));
  sluiced_->Signal(SIGHUP);
  ASSERT_TRUE(sluiced_->WaitForLog("api tokens: reload failed, keeping the running clients"))
      << sluiced_->Log();
  EXPECT_TRUE(sluiced_->WaitForLog("tokens.yaml:3:19: client 'fresh': token_sha256 must be"));
  auto kept = Check("billing", "carol", {"Authorization: Bearer " + ops_.token});
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->status, 200);
  EXPECT_EQ(sluiced_->Log().find(bad_line.substr(14)), std::string::npos);
  ExpectNoTokenInLog({fresh.token});
}

// A client reads its own domains on the admin read routes; DELETE is the admin token's.
TEST_F(SluicedCallersTest, AdminReadsAreConfinedToTheClientsDomains) {
  HttpClient c(sluiced_->port());
  const std::string auth = "Authorization: Bearer " + billing_.token;
  auto limits = c.Request("GET", "/v1/limits", "", {auth});
  ASSERT_TRUE(limits.has_value());
  ASSERT_EQ(limits->status, 200) << limits->body;
  const auto domains = nlohmann::json::parse(limits->body)["domains"];
  ASSERT_EQ(domains.size(), 1u);
  EXPECT_EQ(domains[0]["name"], "billing");
  auto everything = c.Request("GET", "/v1/limits", "", {"Authorization: Bearer " + ops_.token});
  ASSERT_TRUE(everything.has_value());
  EXPECT_EQ(nlohmann::json::parse(everything->body)["domains"].size(), 2u);

  auto own = c.Request("GET", "/v1/state?domain=billing&user=dave", "", {auth});
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->status, 200) << own->body;
  auto others = c.Request("GET", "/v1/state?domain=search&user=dave", "", {auth});
  ASSERT_TRUE(others.has_value());
  EXPECT_EQ(others->status, 403);
  auto top = c.Request("GET", "/v1/top?domain=search", "", {auth});
  ASSERT_TRUE(top.has_value());
  EXPECT_EQ(top->status, 403);
  auto reset = c.Request("DELETE", "/v1/state?domain=billing&user=dave", "", {auth});
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(reset->status, 403);
  auto anonymous = c.Request("GET", "/v1/limits");
  ASSERT_TRUE(anonymous.has_value());
  EXPECT_EQ(anonymous->status, 401);
  ExpectNoTokenInLog();
}

// A permit's slots are confined as a check is: a client of another domain can neither release
// nor renew it (403, counted as a domain refusal, and the slot stays held), a client of every
// domain can, and its own client can.
TEST_F(SluicedCallersTest, PermitsAreConfinedToTheClientsDomains) {
  HttpClient c(sluiced_->port());
  const std::string billing = "Authorization: Bearer " + billing_.token;
  const std::string search = "Authorization: Bearer " + search_.token;
  const std::string ops = "Authorization: Bearer " + ops_.token;
  const std::string acquire =
      R"({"domain":"billing","descriptors":[{"entries":[{"key":"job","value":"nightly"}]}]})";
  auto acquired = c.Request("POST", "/v1/acquire", acquire, {billing});
  ASSERT_TRUE(acquired.has_value());
  ASSERT_EQ(acquired->status, 200) << acquired->body;
  const std::string permit = nlohmann::json::parse(acquired->body)["permit"].get<std::string>();
  ASSERT_FALSE(permit.empty());
  const std::string body = nlohmann::json{{"permit", permit}}.dump();

  for (const char* route : {"/v1/release", "/v1/renew"}) {
    auto refused = c.Request("POST", route, body, {search});
    ASSERT_TRUE(refused.has_value());
    EXPECT_EQ(refused->status, 403) << route << ": " << refused->body;
    EXPECT_EQ(refused->body.find("released"), std::string::npos) << refused->body;
    EXPECT_EQ(refused->body.find("renewed"), std::string::npos) << refused->body;
  }
  EXPECT_EQ(AuthFailures("domain"), 2u);
  // Still held: the one slot is taken.
  auto full = c.Request("POST", "/v1/acquire", acquire, {billing});
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->status, 429) << full->body;

  // A client of every domain renews it; its own client releases it.
  auto renewed = c.Request("POST", "/v1/renew", body, {ops});
  ASSERT_TRUE(renewed.has_value());
  ASSERT_EQ(renewed->status, 200) << renewed->body;
  EXPECT_EQ(nlohmann::json::parse(renewed->body)["renewed"], true) << renewed->body;
  auto released = c.Request("POST", "/v1/release", body, {billing});
  ASSERT_TRUE(released.has_value());
  ASSERT_EQ(released->status, 200) << released->body;
  EXPECT_EQ(nlohmann::json::parse(released->body)["released"], true) << released->body;

  // And a client of every domain releases one too.
  auto again = c.Request("POST", "/v1/acquire", acquire, {billing});
  ASSERT_TRUE(again.has_value());
  ASSERT_EQ(again->status, 200) << again->body;
  const std::string second =
      nlohmann::json{{"permit", nlohmann::json::parse(again->body)["permit"]}}.dump();
  auto by_ops = c.Request("POST", "/v1/release", second, {ops});
  ASSERT_TRUE(by_ops.has_value());
  ASSERT_EQ(by_ops->status, 200) << by_ops->body;
  EXPECT_EQ(nlohmann::json::parse(by_ops->body)["released"], true) << by_ops->body;
  EXPECT_EQ(AuthFailures("domain"), 2u);
  ExpectNoTokenInLog();
}

TEST(SluicedCallersStart, AWrongFileStopsTheStart) {
  TempConfigDir dir("sluiced-callers-start");
  const auto config = dir.Write("billing.yaml", kBilling);
  const auto tokens =
      dir.Write("tokens.yaml", "clients:\n  - name: a\n    san: x\n    domains: []\n");
  SluicedProcess p({"--config", config.string(), "--http", "127.0.0.1:0", "--grpc", "off",
                    "--api-tokens", tokens.string()},
                   /*wait_for_http=*/false);
  EXPECT_EQ(p.WaitExit(), 1);
  EXPECT_NE(p.Log().find("cannot load --api-tokens: " + tokens.string() +
                         ":4:14: client 'a': domains is empty"),
            std::string::npos)
      << p.Log();
}

// gRPC through the real sluiced: the token in "authorization" metadata, as Envoy's
// initial_metadata sends it; a refused call leaves the counter as it was.
TEST(SluicedCallersGrpc, MetadataTokens) {
  namespace rls = envoy::service::ratelimit::v3;
  TempConfigDir dir("sluiced-callers-grpc");
  const auto config = dir.Write("billing.yaml", kBilling);
  const Token billing = MakeToken();
  const auto tokens =
      dir.Write("tokens.yaml", "clients:\n" + Client("billing-service", billing.line, "[billing]"));
  auto sluiced =
      StartSluiced(config.string(), {"--grpc", "127.0.0.1:0", "--api-tokens", tokens.string()});
  const int port = sluiced->GrpcPort();
  ASSERT_GT(port, 0) << sluiced->Log();
  auto stub = rls::RateLimitService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  const auto call = [&](const std::string& domain, const std::string& authorization,
                        rls::RateLimitResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    rls::RateLimitRequest request;
    request.set_domain(domain);
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value("erin");
    return stub->ShouldRateLimit(&ctx, request, response);
  };
  rls::RateLimitResponse response;
  const std::string bearer = "Bearer " + billing.token;
  ASSERT_TRUE(call("billing", bearer, &response).ok());
  EXPECT_EQ(response.statuses(0).limit_remaining(), 9u);
  EXPECT_EQ(call("billing", "", &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("billing", "Bearer sluice_wrong", &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("search", bearer, &response).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(call("billing", bearer, &response).ok());
  EXPECT_EQ(response.statuses(0).limit_remaining(), 8u);  // the three refusals counted nothing
  EXPECT_EQ(sluiced->Log().find(billing.token), std::string::npos);
}

// --check-config reads the token file too.
TEST(SluicedCallersStart, CheckConfigReadsTheTokenFile) {
  TempConfigDir dir("sluiced-callers-check");
  const auto config = dir.Write("billing.yaml", kBilling);
  const auto good = dir.Write("good.yaml", "clients:\n  - {name: a, san: x, domains: [billing]}\n");
  const auto bad = dir.Write("bad.yaml", "clients:\n  - {name: a, san: x}\n");
  SluicedProcess ok({"--config", config.string(), "--check-config", "--api-tokens", good.string()},
                    /*wait_for_http=*/false);
  EXPECT_EQ(ok.WaitExit(), 0) << ok.Log();
  SluicedProcess refused(
      {"--config", config.string(), "--check-config", "--api-tokens", bad.string()},
      /*wait_for_http=*/false);
  EXPECT_EQ(refused.WaitExit(), 1);
  EXPECT_NE(refused.Log().find("--api-tokens: " + bad.string() + ":2:5: client 'a' needs domains"),
            std::string::npos)
      << refused.Log();
}

// A listener beyond loopback with nothing to identify callers is warned about; with tokens, or
// on loopback, it is not.
TEST(SluicedCallersStart, WarnsAboutAnOpenListenerBeyondLoopback) {
  TempConfigDir dir("sluiced-callers-warn");
  const auto config = dir.Write("billing.yaml", kBilling);
  const Token t = MakeToken();
  const auto tokens = dir.Write("tokens.yaml", "clients:\n" + Client("a", t.line, "[billing]"));
  constexpr std::string_view kWarning = "http: listening on 0.0.0.0:0, beyond loopback";
  {
    SluicedProcess open({"--config", config.string(), "--http", "0.0.0.0:0", "--grpc", "off"},
                        /*wait_for_http=*/false);
    ASSERT_TRUE(open.WaitForLog("http: listening on 0.0.0.0:")) << open.Log();
    EXPECT_NE(open.Log().find(kWarning), std::string::npos) << open.Log();
  }
  SluicedProcess with_tokens({"--config", config.string(), "--http", "0.0.0.0:0", "--grpc", "off",
                              "--api-tokens", tokens.string()},
                             /*wait_for_http=*/false);
  ASSERT_TRUE(with_tokens.WaitForLog("http: listening on 0.0.0.0:")) << with_tokens.Log();
  EXPECT_EQ(with_tokens.Log().find("beyond loopback"), std::string::npos) << with_tokens.Log();
  auto loopback = StartSluiced(config.string());
  EXPECT_EQ(loopback->Log().find("beyond loopback"), std::string::npos);
}

}  // namespace
}  // namespace sluice::testing
