// sluiced end to end: the real binary, started as a process on a port of its own with a temp
// config, talked to over plain sockets. Covers the check API and its JSON, the RateLimit
// headers' exact syntax, 429 and Retry-After, shadow and soft modes, plans, SIGHUP reload
// (valid and invalid), admin auth, every bad input, slow and surplus clients, keep-alive and
// pipelining, SIGTERM, --check-config, and the Redis store.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "grpc/raw_http2.h"
#include "store/redis/redis_client.h"
#include "support/http_test_client.h"
#include "support/redis_server.h"
#include "support/sluiced_process.h"

namespace sluice::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kConfig[] = R"(domain: test
plan_key: api_key
plan_source: file:plans.yaml
plans:
  default:
    - key: api_key
      rate_limit: {name: plan_default, unit: minute, requests_per_unit: 1}
  gold:
    - key: api_key
      rate_limit: {name: plan_gold, unit: minute, requests_per_unit: 5}
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 3}
  - key: shadowed
    shadow_mode: true
    rate_limit: {name: shadow_limit, unit: minute, requests_per_unit: 1}
  - key: softy
    rate_limit: {name: soft_limit, unit: minute, requests_per_unit: 1, mode: soft}
)";

constexpr char kPlans[] = "identities:\n  gold_key: gold\n";

// A temp config directory: test.yaml (the domain) and plans.yaml.
class ConfigDir {
 public:
  ConfigDir() {
    char tmpl[] = "/tmp/sluiced-e2e-XXXXXX";
    dir_ = mkdtemp(tmpl);
    Write("plans.yaml", kPlans);
    Write("test.yaml", kConfig);
  }
  ~ConfigDir() { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
  }
  std::string file() const { return (dir_ / "test.yaml").string(); }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

std::string CheckBody(const std::vector<std::vector<std::pair<std::string, std::string>>>& ds,
                      const std::string& domain = "test") {
  Json body = {{"domain", domain}, {"descriptors", Json::array()}};
  for (const auto& d : ds) {
    Json entries = Json::array();
    for (const auto& [k, v] : d) entries.push_back({{"key", k}, {"value", v}});
    body["descriptors"].push_back({{"entries", entries}});
  }
  return body.dump();
}

std::string One(const std::string& key, const std::string& value) {
  return CheckBody({{{key, value}}});
}

// An RFC 8941 List of Items, each a String or Token with Integer parameters: the shape of
// RateLimit-Policy and RateLimit. nullopt when `field` is not exactly that syntax.
struct SfItem {
  std::string value;
  std::map<std::string, int64_t> params;
};
std::optional<std::vector<SfItem>> ParseSfList(std::string_view s) {
  std::vector<SfItem> items;
  size_t i = 0;
  const auto is_digit = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
  for (;;) {
    SfItem item;
    if (i < s.size() && s[i] == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
        if (i >= s.size() || s[i] < 0x20 || s[i] > 0x7e) return std::nullopt;
        item.value += s[i];
      }
      if (i >= s.size()) return std::nullopt;
      ++i;
    } else if (i < s.size() && (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '*')) {
      while (i < s.size() &&
             (std::isalnum(static_cast<unsigned char>(s[i])) ||
              std::string_view(":/!#$%&'*+-.^_`|~").find(s[i]) != std::string_view::npos)) {
        item.value += s[i++];
      }
    } else {
      return std::nullopt;
    }
    while (i < s.size() && s[i] == ';') {
      ++i;
      std::string key;
      while (i < s.size() && ((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_' || s[i] == '-' ||
                              (!key.empty() && is_digit(i)))) {
        key += s[i++];
      }
      if (key.empty() || i >= s.size() || s[i] != '=' || !is_digit(i + 1)) return std::nullopt;
      ++i;
      int64_t v = 0;
      int digits = 0;
      while (is_digit(i)) {
        v = v * 10 + (s[i++] - '0');
        if (++digits > 15) return std::nullopt;
      }
      item.params[key] = v;
    }
    items.push_back(std::move(item));
    if (i == s.size()) return items;
    if (s[i] != ',') return std::nullopt;
    ++i;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
}

class SluicedTest : public ::testing::Test {
 protected:
  // Starts sluiced on the temp config with `extra` flags.
  std::unique_ptr<SluicedProcess> Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--threads", "2"});
    return StartSluiced(config_.file(), extra);
  }

  static HttpResponse Post(int port, const std::string& body,
                           const std::vector<std::string>& headers = {}) {
    HttpClient c(port);
    auto r = c.Request("POST", "/v1/check", body, headers);
    EXPECT_TRUE(r.has_value());
    return r.value_or(HttpResponse{});
  }
  static HttpResponse Get(int port, const std::string& target,
                          const std::vector<std::string>& headers = {},
                          const std::string& method = "GET") {
    HttpClient c(port);
    auto r = c.Request(method, target, "", headers);
    EXPECT_TRUE(r.has_value());
    return r.value_or(HttpResponse{});
  }
  static Json Parse(const HttpResponse& r) {
    Json j = Json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }

  ConfigDir config_;
};

TEST_F(SluicedTest, CheckAnswersJsonAndRateLimitHeaders) {
  auto sluiced = Start();
  const HttpResponse r = Post(sluiced->port(), One("user", "alice"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("Content-Type"), "application/json");
  const Json j = Parse(r);
  EXPECT_EQ(j["overall"], "OK");
  ASSERT_EQ(j["statuses"].size(), 1u);
  const Json& s = j["statuses"][0];
  EXPECT_EQ(s["code"], "OK");
  EXPECT_EQ(s["limit"]["name"], "per_user");
  EXPECT_EQ(s["limit"]["requests_per_unit"], 3);
  EXPECT_EQ(s["limit"]["unit"], "minute");
  EXPECT_EQ(s["limit"]["algorithm"], "token_bucket");
  EXPECT_EQ(s["limit"]["burst"], 3);
  EXPECT_EQ(s["remaining"], 2);
  EXPECT_GT(s["reset_after_ms"].get<int64_t>(), 0);
  EXPECT_LE(s["reset_after_ms"].get<int64_t>(), 60'000);
  EXPECT_EQ(s["retry_after_ms"], 0);
  EXPECT_EQ(s["mode"], "enforce");
  EXPECT_EQ(s["soft_over_limit"], false);
  EXPECT_FALSE(r.Header("Retry-After").has_value());

  // RateLimit-Policy: "per_user";q=3;w=60 and RateLimit: "per_user";r=2;t=<1..60>, as RFC 8941
  // lists of items.
  ASSERT_TRUE(r.Header("RateLimit-Policy").has_value());
  ASSERT_TRUE(r.Header("RateLimit").has_value());
  const auto policy = ParseSfList(*r.Header("RateLimit-Policy"));
  const auto current = ParseSfList(*r.Header("RateLimit"));
  ASSERT_TRUE(policy.has_value()) << *r.Header("RateLimit-Policy");
  ASSERT_TRUE(current.has_value()) << *r.Header("RateLimit");
  ASSERT_EQ(policy->size(), 1u);
  EXPECT_EQ((*policy)[0].value, "per_user");
  EXPECT_EQ((*policy)[0].params, (std::map<std::string, int64_t>{{"q", 3}, {"w", 60}}));
  ASSERT_EQ(current->size(), 1u);
  EXPECT_EQ((*current)[0].value, "per_user");
  EXPECT_EQ((*current)[0].params.at("r"), 2);
  EXPECT_GE((*current)[0].params.at("t"), 1);
  EXPECT_LE((*current)[0].params.at("t"), 60);
  EXPECT_EQ((*current)[0].params.size(), 2u);

  // No rule matches: allowed, limit null, no headers about it.
  const HttpResponse none = Post(sluiced->port(), One("nobody", "x"));
  EXPECT_EQ(none.status, 200);
  EXPECT_TRUE(Parse(none)["statuses"][0]["limit"].is_null());
}

TEST_F(SluicedTest, OverTheLimitIs429WithRetryAfterAndTakesNoOtherQuota) {
  auto sluiced = Start();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Post(sluiced->port(), One("user", "bob")).status, 200);
  const HttpResponse over = Post(sluiced->port(), One("user", "bob"));
  ASSERT_EQ(over.status, 429) << over.body;
  const Json j = Parse(over);
  EXPECT_EQ(j["overall"], "OVER_LIMIT");
  EXPECT_EQ(j["statuses"][0]["code"], "OVER_LIMIT");
  EXPECT_EQ(j["statuses"][0]["remaining"], 0);
  // 3 per minute: one hit back in 20 s. Retry-After is delay-seconds: digits only.
  ASSERT_TRUE(over.Header("Retry-After").has_value());
  const std::string retry = *over.Header("Retry-After");
  EXPECT_EQ(retry.find_first_not_of("0123456789"), std::string::npos) << retry;
  EXPECT_GE(std::stoi(retry), 19);
  EXPECT_LE(std::stoi(retry), 20);
  EXPECT_GE(j["statuses"][0]["retry_after_ms"].get<int64_t>(), 19'000);

  // bob is over; carol is checked in the same request: the request is rejected and takes
  // none of carol's quota.
  const HttpResponse both =
      Post(sluiced->port(), CheckBody({{{"user", "carol"}}, {{"user", "bob"}}}));
  EXPECT_EQ(both.status, 429);
  const HttpResponse carol = Post(sluiced->port(), One("user", "carol"));
  EXPECT_EQ(Parse(carol)["statuses"][0]["remaining"], 2) << carol.body;
}

TEST_F(SluicedTest, ShadowModeAllowsAndSoftModeFlags) {
  auto sluiced = Start();
  EXPECT_EQ(Post(sluiced->port(), One("shadowed", "s")).status, 200);
  const HttpResponse shadow = Post(sluiced->port(), One("shadowed", "s"));
  EXPECT_EQ(shadow.status, 200) << shadow.body;
  const Json js = Parse(shadow);
  EXPECT_EQ(js["overall"], "OK");
  EXPECT_EQ(js["statuses"][0]["mode"], "shadow");
  EXPECT_EQ(js["statuses"][0]["shadow_over_limit"], true);
  EXPECT_FALSE(shadow.Header("Retry-After").has_value());
  EXPECT_FALSE(shadow.Header("Sluice-Soft-Over-Limit").has_value());

  const HttpResponse first = Post(sluiced->port(), One("softy", "s"));
  EXPECT_FALSE(first.Header("Sluice-Soft-Over-Limit").has_value());
  const HttpResponse soft = Post(sluiced->port(), One("softy", "s"));
  EXPECT_EQ(soft.status, 200) << soft.body;
  const Json jf = Parse(soft);
  EXPECT_EQ(jf["statuses"][0]["mode"], "soft");
  EXPECT_EQ(jf["statuses"][0]["soft_over_limit"], true);
  EXPECT_EQ(soft.Header("Sluice-Soft-Over-Limit"), "?1");
  EXPECT_FALSE(soft.Header("Retry-After").has_value());
}

TEST_F(SluicedTest, PlansGiveEachIdentityItsLimit) {
  auto sluiced = Start();
  const Json gold = Parse(Post(sluiced->port(), One("api_key", "gold_key")));
  EXPECT_EQ(gold["statuses"][0]["limit"]["name"], "plan_gold");
  EXPECT_EQ(gold["statuses"][0]["remaining"], 4);
  const Json unknown = Parse(Post(sluiced->port(), One("api_key", "who_knows")));
  EXPECT_EQ(unknown["statuses"][0]["limit"]["name"], "plan_default");
  EXPECT_EQ(Post(sluiced->port(), One("api_key", "who_knows")).status, 429);
  EXPECT_EQ(Post(sluiced->port(), One("api_key", "gold_key")).status, 200);
}

TEST_F(SluicedTest, SighupReloadsAValidConfigAndKeepsTheOldOnAnError) {
  auto sluiced = Start({"--admin-token", "t"});
  EXPECT_TRUE(Parse(Post(sluiced->port(), One("team", "a")))["statuses"][0]["limit"].is_null());

  config_.Write("test.yaml", std::string(kConfig) + R"(  - key: team
    rate_limit: {name: per_team, unit: hour, requests_per_unit: 1}
)");
  sluiced->Signal(SIGHUP);
  ASSERT_TRUE(sluiced->WaitForLog("config reloaded")) << sluiced->Log();
  EXPECT_EQ(Parse(Post(sluiced->port(), One("team", "a")))["statuses"][0]["limit"]["name"],
            "per_team");
  EXPECT_EQ(Post(sluiced->port(), One("team", "a")).status, 429);

  config_.Write("test.yaml",
                "domain: test\ndescriptors:\n  - key: x\n    rate_limit: {unit: sec}\n");
  sluiced->Signal(SIGHUP);
  ASSERT_TRUE(sluiced->WaitForLog("reload failed")) << sluiced->Log();
  EXPECT_NE(sluiced->Log().find("test.yaml:"), std::string::npos) << "the error names the file";
  EXPECT_EQ(Post(sluiced->port(), One("team", "a")).status, 429) << "old config still serves";
  EXPECT_EQ(Parse(Post(sluiced->port(), One("user", "u")))["statuses"][0]["limit"]["name"],
            "per_user");
  const std::string metrics = Get(sluiced->port(), "/metrics").body;
  EXPECT_NE(metrics.find("sluice_config_reloads_total{result=\"success\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_config_reloads_total{result=\"failure\"} 1"), std::string::npos);
}

TEST_F(SluicedTest, AReloadSaysWhatItSkipsAndDropsAndNeverBlocksShutdown) {
  config_.Write("other.yaml",
                "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, "
                "requests_per_unit: 1}\n");
  SluicedProcess sluiced(
      {"--config", config_.dir(), "--http", "127.0.0.1:0", "--grpc", "off", "--threads", "2"});
  ASSERT_GT(sluiced.port(), 0) << sluiced.Log();
  EXPECT_EQ(Post(sluiced.port(), CheckBody({{{"k", "v"}}}, "other")).status, 200);

  // The domain file becomes a dangling symlink (a ConfigMap update gone wrong).
  const std::filesystem::path other = std::filesystem::path(config_.dir()) / "other.yaml";
  std::filesystem::remove(other);
  std::filesystem::create_symlink(config_.dir() + "/missing-target.yaml", other);
  sluiced.Signal(SIGHUP);
  ASSERT_TRUE(sluiced.WaitForLog("config reloaded")) << sluiced.Log();
  EXPECT_NE(sluiced.Log().find("other.yaml: skipped: a symlink to nothing"), std::string::npos)
      << sluiced.Log();
  EXPECT_NE(sluiced.Log().find("reload removes domain 'other'"), std::string::npos)
      << sluiced.Log();
  EXPECT_EQ(Post(sluiced.port(), CheckBody({{{"k", "v"}}}, "other")).status, 400);

  // A FIFO as the plan file: the reload fails at once (it used to wait for a writer forever,
  // and SIGTERM was never taken), and the server still stops cleanly.
  const std::filesystem::path plans = std::filesystem::path(config_.dir()) / "plans.yaml";
  std::filesystem::remove(plans);
  ASSERT_EQ(::mkfifo(plans.c_str(), 0600), 0);
  sluiced.Signal(SIGHUP);
  ASSERT_TRUE(sluiced.WaitForLog("not a regular file (a FIFO)")) << sluiced.Log();
  EXPECT_NE(sluiced.Log().find("reload failed"), std::string::npos);
  EXPECT_EQ(Post(sluiced.port(), One("user", "u")).status, 200) << "the old config serves";
  sluiced.Signal(SIGTERM);
  EXPECT_EQ(sluiced.WaitExit(), 0) << sluiced.Log();
}

// envoyproxy/ratelimit's share_threshold: every path under /files/ counts against one limit.
TEST_F(SluicedTest, ShareThresholdCountsEveryMatchedValueOnce) {
  config_.Write("share.yaml",
                "domain: share\ndescriptors:\n  - key: path\n    value: /files/*\n"
                "    share_threshold: true\n    rate_limit: {unit: hour, requests_per_unit: 2}\n");
  SluicedProcess sluiced(
      {"--config", config_.dir(), "--http", "127.0.0.1:0", "--grpc", "off", "--threads", "2"});
  ASSERT_GT(sluiced.port(), 0) << sluiced.Log();
  EXPECT_EQ(Post(sluiced.port(), CheckBody({{{"path", "/files/a.pdf"}}}, "share")).status, 200);
  EXPECT_EQ(Post(sluiced.port(), CheckBody({{{"path", "/files/b.csv"}}}, "share")).status, 200);
  EXPECT_EQ(Post(sluiced.port(), CheckBody({{{"path", "/files/c"}}}, "share")).status, 429);
}

TEST_F(SluicedTest, AdminApiNeedsTheToken) {
  auto sluiced = Start({"--admin-token", "s3cret"});
  const int port = sluiced->port();
  EXPECT_EQ(Get(port, "/v1/limits").status, 401);
  EXPECT_EQ(Get(port, "/v1/limits", {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(Get(port, "/v1/state?domain=test&user=z", {"Authorization: Bearer s3cre"}).status, 401);
  const std::vector<std::string> auth = {"Authorization: Bearer s3cret"};
  const HttpResponse limits = Get(port, "/v1/limits", auth);
  ASSERT_EQ(limits.status, 200);
  const Json jl = Parse(limits);
  EXPECT_EQ(jl["domains"][0]["name"], "test");
  EXPECT_EQ(jl["domains"][0]["identities"], 1);
  for (const Json& limit : jl["domains"][0]["limits"]) {
    EXPECT_TRUE(limit["over_limit_hits"].is_null()) << limit << ": unset, the server's default";
    EXPECT_EQ(limit["quota_mode"], false) << limit;
  }
  EXPECT_EQ(limits.body.find("gold_key"), std::string::npos) << "identities are not listed";

  Post(port, One("user", "zed"));
  Post(port, One("user", "zed"));
  const HttpResponse state = Get(port, "/v1/state?domain=test&user=zed", auth);
  ASSERT_EQ(state.status, 200) << state.body;
  EXPECT_EQ(Parse(state)["remaining"], 1);
  EXPECT_EQ(Parse(state)["limit"]["name"], "per_user");
  EXPECT_EQ(Get(port, "/v1/state?domain=test&user=zed", auth, "DELETE").status, 200);
  EXPECT_EQ(Parse(Get(port, "/v1/state?domain=test&user=zed", auth))["remaining"], 3);

  for (int i = 0; i < 5; ++i) Post(port, One("user", "hot"));
  const HttpResponse top = Get(port, "/v1/top?domain=test&n=5", auth);
  ASSERT_EQ(top.status, 200) << top.body;
  EXPECT_NE(top.body.find("hot"), std::string::npos) << top.body;

  auto no_admin = Start();
  EXPECT_EQ(Get(no_admin->port(), "/v1/limits", auth).status, 404);
}

TEST_F(SluicedTest, EveryBadInputIsAClearError) {
  auto sluiced = Start();
  const int port = sluiced->port();
  const auto expect_error = [&](const std::string& body, int status, const std::string& text) {
    const HttpResponse r = Post(port, body);
    EXPECT_EQ(r.status, status) << body.substr(0, 200) << " -> " << r.body;
    const Json j = Json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_NE(j["error"].get<std::string>().find(text), std::string::npos) << j["error"];
  };
  expect_error("{\"domain\":", 400, "not valid JSON");
  expect_error(R"({"domain":"test","descriptors":"user"})", 400, "descriptors: must be an array");
  expect_error(R"({"domain":"test","descriptors":[{"entries":[{"key":"user","value":7}]}]})", 400,
               "must be a string");
  expect_error(R"({"domain":"test","descriptors":[{"entries":[]}]})", 400, "must not be empty");
  expect_error(R"({"domain":"test","descriptors":[{"entries":[{"key":"u","value":"v"}]}],"x":1})",
               400, "unknown field 'x'");
  expect_error(CheckBody({{{"user", "u"}}}, "nope"), 400, "nope");
  expect_error(CheckBody({{{"user", std::string(2 << 20, 'x')}}}), 413, "over the limit");
  // Sizes past the service's bounds are answered, not refused (docs/server.md).
  EXPECT_EQ(Post(port, One(std::string(300, 'k'), "v")).status, 200);
  EXPECT_EQ(Post(port, One("user", std::string(2000, 'v'))).status, 200);
  std::vector<std::vector<std::pair<std::string, std::string>>> many(1030, {{"nobody", "m"}});
  EXPECT_EQ(Post(port, CheckBody(many)).status, 200);

  // Not even HTTP: 400, and the connection is closed.
  HttpClient garbage(port);
  ASSERT_TRUE(garbage.Send("HELLO\r\n\r\n"));
  const auto r = garbage.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(garbage.ClosedByPeer(2s));

  EXPECT_EQ(Get(port, "/nowhere").status, 404);
  EXPECT_EQ(Get(port, "/v1/check").status, 405);
  EXPECT_EQ(Get(port, "/healthz").status, 200);
  EXPECT_EQ(Get(port, "/readyz").status, 200);
}

TEST_F(SluicedTest, BodiesAreBoundedByTheLargestBoundedCheckOrTheFlag) {
  auto sluiced = Start();
  const int port = sluiced->port();
  // A megabyte of '[' was 0.6 s of an I/O thread and 210 MB; now refused at its sixth byte.
  const HttpResponse deep = Post(port, std::string(1 << 20, '['));
  EXPECT_EQ(deep.status, 400);
  EXPECT_NE(deep.body.find("nests deeper than a check request can"), std::string::npos);
  // 1024 descriptors of 64 entries (every count at its bound, over 1 MiB) are a valid check.
  std::vector<std::vector<std::pair<std::string, std::string>>> big(
      1024, std::vector<std::pair<std::string, std::string>>(64, {"u", "v"}));
  const std::string body = CheckBody(big);
  ASSERT_GT(body.size(), size_t{1} << 20);
  EXPECT_EQ(Post(port, body).status, 200);

  auto capped = Start({"--http-max-body-bytes", "2048"});
  EXPECT_EQ(Post(capped->port(), One("user", std::string(1900, 'v'))).status, 200)
      << "under the cap: answered (a long value is counted by its digest)";
  const HttpResponse over = Post(capped->port(), One("user", std::string(2100, 'v')));
  EXPECT_EQ(over.status, 413);
  EXPECT_NE(over.body.find("over the limit of 2048 bytes"), std::string::npos) << over.body;
}

TEST_F(SluicedTest, KeepAliveAndPipelinedRequestsAnswerInOrder) {
  auto sluiced = Start();
  HttpClient c(sluiced->port());
  ASSERT_TRUE(c.Send(HttpClient::Format("POST", "/v1/check", One("user", "p")) +
                     HttpClient::Format("GET", "/healthz") +
                     HttpClient::Format("POST", "/v1/check", One("user", "p"))));
  const auto a = c.Read();
  const auto b = c.Read();
  const auto d = c.Read();
  ASSERT_TRUE(a && b && d);
  EXPECT_EQ(Parse(*a)["statuses"][0]["remaining"], 2);
  EXPECT_EQ(b->body, "{\"status\":\"ok\"}\n");
  EXPECT_EQ(Parse(*d)["statuses"][0]["remaining"], 1);
  EXPECT_EQ(c.Request("GET", "/healthz")->status, 200) << "still open";
}

TEST_F(SluicedTest, SlowClientsAreClosedWhileOthersAreServed) {
  auto sluiced = Start({"--http-timeout-ms", "700"});
  HttpClient slow(sluiced->port());
  const std::string request = HttpClient::Format("POST", "/v1/check", One("user", "s"));
  ASSERT_TRUE(slow.Send(request.substr(0, request.size() / 2)));
  HttpClient idle(sluiced->port());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Get(sluiced->port(), "/healthz").status, 200);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(slow.ClosedByPeer(3s));
  EXPECT_TRUE(idle.ClosedByPeer(3s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 600ms);
  EXPECT_EQ(Get(sluiced->port(), "/healthz").status, 200);
}

// A client holding every slot with idle connections cannot lock others out: at the bound the
// longest idle connection makes room (503 is for when every connection is busy: http_test).
TEST_F(SluicedTest, AtTheConnectionBoundIdleConnectionsMakeRoom) {
  auto sluiced = Start({"--http-max-connections", "2"});
  HttpClient a(sluiced->port());
  ASSERT_EQ(a.Request("GET", "/healthz")->status, 200);
  HttpClient b(sluiced->port());
  ASSERT_EQ(b.Request("GET", "/healthz")->status, 200);
  HttpClient c(sluiced->port());
  EXPECT_EQ(c.Request("GET", "/healthz")->status, 200);
  EXPECT_TRUE(a.ClosedByPeer(2s)) << "the longest idle gave its slot";
  EXPECT_EQ(b.Request("GET", "/healthz")->status, 200) << "the others still work";
}

TEST_F(SluicedTest, SigtermStopsGracefullyWithStatus0) {
  auto sluiced = Start();
  HttpClient idle(sluiced->port());
  ASSERT_EQ(idle.Request("GET", "/healthz")->status, 200);
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0) << sluiced->Log();
  EXPECT_TRUE(idle.ClosedByPeer(1s));
}

TEST_F(SluicedTest, CheckConfigValidatesAndExits) {
  SluicedProcess ok({"--config", config_.file(), "--check-config"}, false);
  EXPECT_EQ(ok.WaitExit(), 0) << ok.Log();
  EXPECT_NE(ok.Log().find("ok"), std::string::npos) << ok.Log();
  config_.Write("bad.yaml", "domain: bad\ndescriptors:\n  - key: x\n    rate_limit: {unit: sec}\n");
  SluicedProcess bad({"--config", config_.dir() + "/bad.yaml", "--check-config"}, false);
  EXPECT_EQ(bad.WaitExit(), 1);
  EXPECT_NE(bad.Log().find("bad.yaml:"), std::string::npos) << bad.Log();
}

// --check-config makes every limit with the store --store names, without contacting Redis:
// what serving would refuse, it refuses. (Every other algorithm serves the whole range on Redis;
// the sliding window log's microsecond scores bound it: docs/redis.md.)
TEST_F(SluicedTest, CheckConfigChecksAgainstTheStoreInUse) {
  config_.Write("big.yaml",
                "domain: big\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, "
                "requests_per_unit: 16777216, algorithm: sliding_window_log}\n");
  const std::string file = config_.dir() + "/big.yaml";
  SluicedProcess memory({"--config", file, "--check-config"}, false);
  EXPECT_EQ(memory.WaitExit(), 0) << memory.Log();
  EXPECT_NE(memory.Log().find("ok with --store memory"), std::string::npos) << memory.Log();
  // Port 1: nothing listens; the answer comes from the store's own rules.
  SluicedProcess redis({"--config", file, "--check-config", "--store", "redis://:pw@127.0.0.1:1"},
                       false);
  EXPECT_EQ(redis.WaitExit(), 1) << redis.Log();
  EXPECT_NE(redis.Log().find("big.yaml:"), std::string::npos) << redis.Log();
  EXPECT_NE(redis.Log().find("outside the redis store's exact range"), std::string::npos)
      << redis.Log();
  EXPECT_EQ(redis.Log().find(":pw@"), std::string::npos) << "the password is not shown";
}

TEST_F(SluicedTest, FlagsComeFromTheEnvironmentToo) {
  setenv("SLUICE_ADMIN_TOKEN", "from-env", 1);
  auto sluiced = Start();
  unsetenv("SLUICE_ADMIN_TOKEN");
  EXPECT_EQ(Get(sluiced->port(), "/v1/limits", {"Authorization: Bearer from-env"}).status, 200);
}

// The gRPC limits are flags with SLUICE_ twins and their defaults in --help, and reach the
// server (each limit's behaviour is tested in tests/grpc/grpc_limits_test.cc).
// --grpc-response-headers: its default in --help, its SLUICE_ twin, a value it refuses, and the
// warning when --legacy-headers can have no effect (what each set sends over gRPC:
// tests/grpc/grpc_response_headers_test.cc).
TEST_F(SluicedTest, GrpcResponseHeadersFlagShowsItsDefaultAndTakesEffect) {
  SluicedProcess help({"--help"}, false);
  EXPECT_EQ(help.WaitExit(), 0);
  const std::string text = help.Log();
  const size_t at = text.find("--grpc-response-headers");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string option = text.substr(at, text.find("\n  -", at) - at);
  EXPECT_NE(option.find("draft11"), std::string::npos) << option;
  EXPECT_NE(option.find("SLUICE_GRPC_RESPONSE_HEADERS"), std::string::npos) << option;

  SluicedProcess bad({"--config", config_.file(), "--grpc-response-headers", "draft10"}, false);
  EXPECT_NE(bad.WaitExit(), 0) << bad.Log();

  setenv("SLUICE_GRPC_RESPONSE_HEADERS", "upstream", 1);
  SluicedProcess sluiced(
      {"--config", config_.file(), "--http", "off", "--grpc", "127.0.0.1:0", "--legacy-headers"});
  unsetenv("SLUICE_GRPC_RESPONSE_HEADERS");
  ASSERT_TRUE(sluiced.WaitForLog("response headers upstream")) << sluiced.Log();
  ASSERT_TRUE(sluiced.WaitForLog("--legacy-headers has no effect")) << sluiced.Log();
}

TEST_F(SluicedTest, GrpcLimitFlagsShowTheirDefaultsAndTakeEffect) {
  SluicedProcess help({"--help"}, false);
  EXPECT_EQ(help.WaitExit(), 0);
  const std::string text = help.Log();
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--grpc-max-connections", "1024"},
                                                        {"--grpc-max-concurrent-streams", "100"},
                                                        {"--grpc-idle-timeout-ms", "300000"},
                                                        {"--grpc-max-connection-age-ms", "3600000"},
                                                        {"--grpc-max-message-bytes", "4194304"}}) {
    const size_t at = text.find(flag);
    ASSERT_NE(at, std::string::npos) << flag << "\n" << text;
    const std::string line = text.substr(at, text.find('\n', at) - at);
    EXPECT_NE(line.find(value), std::string::npos) << line;
  }

  setenv("SLUICE_GRPC_MAX_CONNECTIONS", "1", 1);
  SluicedProcess sluiced({"--config", config_.file(), "--http", "127.0.0.1:0", "--grpc",
                          "127.0.0.1:0", "--grpc-max-concurrent-streams", "9"});
  unsetenv("SLUICE_GRPC_MAX_CONNECTIONS");
  ASSERT_TRUE(sluiced.WaitForLog("at most 1 connections, 9 streams each")) << sluiced.Log();
  const int grpc_port = sluiced.GrpcPort();
  server::test::RawHttp2 first(grpc_port);
  ASSERT_TRUE(first.connected());
  first.Send(std::string(server::test::kClientPreface) + server::test::Settings({}));
  // The first is served: its SETTINGS carry the stream cap...
  const auto frames = first.ReadUntil(
      [](const server::test::Frame& f) { return f.type == server::test::kSettings; }, 10s);
  ASSERT_FALSE(frames.empty());
  EXPECT_NE(frames.back().payload.find(std::string("\x00\x03\x00\x00\x00\x09", 6)),
            std::string::npos);
  // ...and the second, over the cap of 1, is closed.
  server::test::RawHttp2 second(grpc_port);
  second.ReadToClose(10s);
  EXPECT_TRUE(second.closed());
  EXPECT_FALSE(first.closed());
}

TEST_F(SluicedTest, RedisStoreLimitsTheSame) {
  RedisServer redis;
  auto sluiced = Start({"--store", "redis://127.0.0.1:" + std::to_string(redis.port())});
  EXPECT_EQ(Get(sluiced->port(), "/readyz").status, 200);
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = Post(sluiced->port(), One("user", "r"));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Parse(r)["statuses"][0]["remaining"], 2 - i);
  }
  const HttpResponse over = Post(sluiced->port(), One("user", "r"));
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_TRUE(over.Header("Retry-After").has_value());
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0);
}

// The store address may carry Redis's password: sluiced uses it and never logs it.
TEST_F(SluicedTest, TheRedisPasswordIsUsedButNeverLogged) {
  RedisServer redis({"--requirepass", "s3cret-pw"});
  auto sluiced = Start({"--store", "redis://:s3cret-pw@127.0.0.1:" + std::to_string(redis.port())});
  EXPECT_EQ(Get(sluiced->port(), "/readyz").status, 200) << "AUTH with the password succeeded";
  const HttpResponse r = Post(sluiced->port(), One("user", "pw"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(Parse(r)["statuses"][0]["degraded"].get<bool>()) << r.body;
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0);
  const std::string log = sluiced->Log();
  EXPECT_NE(log.find("store redis://***@127.0.0.1:"), std::string::npos) << log;
  EXPECT_EQ(log.find("s3cret-pw"), std::string::npos) << log;
}

// --redis-connections: sluiced keeps exactly that many connections to Redis.
TEST_F(SluicedTest, RedisConnectionsFlagSetsThePool) {
  RedisServer redis;
  auto sluiced = Start(
      {"--store", "redis://127.0.0.1:" + std::to_string(redis.port()), "--redis-connections", "3"});
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(Post(sluiced->port(), One("user", "c" + std::to_string(i))).status, 200);
  }
  auto client = internal::RedisClient::Connect("127.0.0.1", redis.port(), 500ms, 2000ms);
  ASSERT_TRUE(client.has_value()) << client.error().message;
  auto info = (*client)->Command({"INFO", "clients"});
  ASSERT_TRUE(info.has_value()) << info.error().message;
  EXPECT_NE(info->str.find("connected_clients:4\r\n"), std::string::npos)
      << "3 of sluiced's and this one: " << info->str;
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0);
}

// --redis-command-timeout-ms bounds the wait on a hung Redis, and --redis-breaker-failures 1
// opens the breaker after the first timeout, so the next check is refused at once instead of
// waiting out the timeout again (the default, 5, would wait 4 more times).
TEST_F(SluicedTest, RedisTimeoutAndBreakerFlagsTakeEffect) {
  RedisServer redis;
  auto sluiced = Start({"--store", "redis://127.0.0.1:" + std::to_string(redis.port()),
                        "--redis-connections", "1", "--redis-command-timeout-ms", "1500",
                        "--redis-breaker-failures", "1", "--redis-breaker-open-ms", "600000"});
  const HttpResponse before = Post(sluiced->port(), One("user", "t0"));
  ASSERT_EQ(before.status, 200) << before.body;
  EXPECT_FALSE(Parse(before)["statuses"][0]["degraded"].get<bool>());
  redis.Pause();
  const auto t0 = std::chrono::steady_clock::now();
  const HttpResponse timed_out = Post(sluiced->port(), One("user", "t1"));
  const auto t1 = std::chrono::steady_clock::now();
  const HttpResponse refused = Post(sluiced->port(), One("user", "t2"));
  const auto t2 = std::chrono::steady_clock::now();
  redis.Resume();
  EXPECT_TRUE(Parse(timed_out)["statuses"][0]["degraded"].get<bool>()) << timed_out.body;
  EXPECT_TRUE(Parse(refused)["statuses"][0]["degraded"].get<bool>()) << refused.body;
  EXPECT_GE(t1 - t0, 1400ms) << "the first check waited for the 1.5 s command timeout";
  EXPECT_LT(t2 - t1, 1000ms) << "the open breaker refused the second at once";
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0);
}

// With Redis, a check does not hold its I/O thread: the 2 threads keep the checks of many
// connections in flight, each connection still answered in order, and the count exact.
TEST_F(SluicedTest, RedisChecksAreAsynchronousInOrderAndExact) {
  RedisServer redis;
  auto sluiced = Start({"--store", "redis://127.0.0.1:" + std::to_string(redis.port())});
  constexpr int kConnections = 16;
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < kConnections; ++i) {
    clients.push_back(std::make_unique<HttpClient>(sluiced->port()));
    ASSERT_TRUE(clients.back()->Send(HttpClient::Format("POST", "/v1/check", One("user", "a")) +
                                     HttpClient::Format("GET", "/healthz") +
                                     HttpClient::Format("POST", "/v1/check", One("user", "a"))));
  }
  int allowed = 0;
  for (auto& c : clients) {
    const auto first = c->Read();
    const auto health = c->Read();
    const auto second = c->Read();
    ASSERT_TRUE(first && health && second);
    EXPECT_EQ(health->body, "{\"status\":\"ok\"}\n") << "answered in order";
    for (const auto& r : {*first, *second}) {
      ASSERT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.body;
      allowed += r.status == 200;
      EXPECT_TRUE(r.Header("RateLimit").has_value());
      EXPECT_FALSE(Parse(r)["statuses"][0]["degraded"].get<bool>());
    }
  }
  EXPECT_EQ(allowed, 3) << "per_user allows 3 a minute";
  EXPECT_EQ(clients[0]->Request("GET", "/healthz")->status, 200) << "still open";
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0);
}

// Checks still waiting on Redis when a stop's grace runs out (shorter than a Redis timeout)
// are answered by the store as it closes; those answers must not reach a server already gone.
TEST_F(SluicedTest, ChecksWaitingOnAHungRedisAtStopDoNotCrashIt) {
  RedisServer redis;
  auto sluiced = Start(
      {"--store", "redis://127.0.0.1:" + std::to_string(redis.port()), "--shutdown-grace-ms", "0"});
  ASSERT_EQ(Post(sluiced->port(), One("user", "h")).status, 200);  // connected, script loaded
  redis.Pause();
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<HttpClient>(sluiced->port()));
    ASSERT_TRUE(clients.back()->Send(HttpClient::Format("POST", "/v1/check", One("user", "h"))));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the checks reach Redis
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0) << sluiced->Log();
  redis.Resume();
}

// The value of an unlabelled sample `name` in a /metrics page; -1 when it is absent.
double MetricValue(const std::string& page, const std::string& name) {
  const std::string line = "\n" + name + " ";
  const size_t at = page.find(line);
  return at == std::string::npos ? -1 : std::stod(page.substr(at + line.size()));
}

// --memory-max-bytes takes a plain byte count or Ki/Mi/Gi, and the store's limiters hold that
// bound: the configured limits share most of it (sluice_store_max_bytes), never more.
TEST_F(SluicedTest, MemoryMaxBytesTakesBytesAndBinarySuffixes) {
  const std::vector<std::pair<std::string, double>> sizes = {
      {"67108864", 67108864.0}, {"64Mi", 67108864.0}, {"1Gi", 1073741824.0}, {"3Mi", 3145728.0}};
  for (const auto& [flag, bytes] : sizes) {
    auto sluiced = Start({"--memory-max-bytes", flag});
    ASSERT_GT(sluiced->port(), 0) << flag;
    const double held =
        MetricValue(Get(sluiced->port(), "/metrics").body, "sluice_store_max_bytes");
    EXPECT_LE(held, bytes) << flag;
    EXPECT_GE(held, bytes / 2) << flag << ": the configured limits' part";
  }
  setenv("SLUICE_MEMORY_MAX_BYTES", "64Mi", 1);
  auto from_env = Start();
  unsetenv("SLUICE_MEMORY_MAX_BYTES");
  const double held = MetricValue(Get(from_env->port(), "/metrics").body, "sluice_store_max_bytes");
  EXPECT_LE(held, 67108864.0);
  EXPECT_GE(held, 33554432.0);
}

TEST_F(SluicedTest, MemoryMaxBytesRefusesJunkClearly) {
  for (const char* junk : {"64M", "lots", "-5", "1.5Gi", "64 Mi", ""}) {
    SluicedProcess p({"--config", config_.file(), "--http", "127.0.0.1:0", "--grpc", "off",
                      "--memory-max-bytes", junk},
                     false);
    EXPECT_NE(p.WaitExit(), 0) << junk;
    EXPECT_NE(p.Log().find("not a byte count"), std::string::npos) << junk << ": " << p.Log();
  }
  SluicedProcess tiny({"--config", config_.file(), "--memory-max-bytes", "4096"}, false);
  EXPECT_NE(tiny.WaitExit(), 0);
  EXPECT_NE(tiny.Log().find("below the least bound, 1Mi"), std::string::npos) << tiny.Log();
  setenv("SLUICE_MEMORY_MAX_BYTES", "12X", 1);
  SluicedProcess env({"--config", config_.file()}, false);
  unsetenv("SLUICE_MEMORY_MAX_BYTES");
  EXPECT_NE(env.WaitExit(), 0);
  EXPECT_NE(env.Log().find("'12X' is not a byte count"), std::string::npos) << env.Log();
}

// Distinct override rates beyond the 1024 that once filled every place are all answered, and
// the override limits' counters are in the store gauges, within the bound.
TEST_F(SluicedTest, OverrideRatesNeverRunOutAndAreCountedInTheStoreGauges) {
  auto sluiced = Start({"--memory-max-bytes", "16Mi"});
  HttpClient c(sluiced->port());
  for (int n = 0; n < 1100; ++n) {
    Json body = {{"domain", "test"},
                 {"descriptors",
                  {{{"entries", {{{"key", "user"}, {"value", "u" + std::to_string(n)}}}},
                    {"limit", {{"requests_per_unit", n + 1}, {"unit", "day"}}}}}}};
    auto r = c.Request("POST", "/v1/check", body.dump());
    ASSERT_TRUE(r.has_value()) << n;
    ASSERT_EQ(r->status, 200) << n << ": " << r->body;
  }
  const std::string metrics = Get(sluiced->port(), "/metrics").body;
  EXPECT_GE(MetricValue(metrics, "sluice_store_keys"), 16) << metrics;
  EXPECT_LE(MetricValue(metrics, "sluice_store_bytes"), 16777216.0);
  EXPECT_LE(MetricValue(metrics, "sluice_store_max_bytes"), 16777216.0);
}

}  // namespace
}  // namespace sluice::testing
