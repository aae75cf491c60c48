// sluiced's usage views end to end, and the dashboard and alerting rules in docs/ against a
// live /metrics: every metric docs/grafana/sluiced.json and docs/prometheus/sluice-rules.yml
// query must be a family a running sluiced serves (so a renamed metric breaks this test, not a
// dashboard). Also --usage-tracking, --usage-period and --near-limit-ratio and their env twins,
// and `sluice recommend --from` reading a live sluiced.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/http_test_client.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"
#include "support/test_certs.h"

namespace sluice::testing {
namespace {

using Json = nlohmann::json;

constexpr char kConfig[] = R"(domain: api
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 10}
  - key: trial
    rate_limit: {name: trial_cap, unit: minute, requests_per_unit: 2, mode: shadow}
  - key: jobs
    concurrency: {max_in_flight: 4, permit_ttl: 30s}
)";

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Families of an exposition: histograms under their series' names too (_bucket, _sum,
// _count), as PromQL queries them.
std::set<std::string> FamiliesOf(const std::string& page) {
  std::set<std::string> out;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    out.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return out;
}

using sluice::testing::TestCerts;

class SluicedUsageTest : public ::testing::Test {
 protected:
  std::unique_ptr<SluicedProcess> Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--threads", "2", "--admin-token", "t"});
    return StartSluiced(config_, extra);
  }
  static HttpResponse Request(int port, const std::string& method, const std::string& target,
                              const std::string& body = "") {
    HttpClient c(port);
    auto r = c.Request(method, target, body, {"Authorization: Bearer t"});
    EXPECT_TRUE(r.has_value()) << target;
    return r.value_or(HttpResponse{});
  }
  static void Check(int port, const std::string& key, const std::string& value) {
    const Json body = {{"domain", "api"},
                       {"descriptors", {{{"entries", {{{"key", key}, {"value", value}}}}}}}};
    Request(port, "POST", "/v1/check", body.dump());
  }

  server::test::TempConfigDir dir_{"sluiced-usage"};
  const std::string config_ = dir_.Write("api.yaml", kConfig).string();
};

TEST_F(SluicedUsageTest, DashboardAndRulesQueryOnlyMetricsALiveSluicedServes) {
  // A TLS listener (forward-auth; the HTTP API stays plaintext for this test's client), so that
  // the certificate-expiry alert's series exists too.
  const TestCerts certs;
  ASSERT_TRUE(certs.ok());
  auto sluiced = Start({"--forward-auth", "127.0.0.1:0", "--tls-cert", certs["server.pem"],
                        "--tls-key", certs["server.key"], "--http-tls", "off"});
  // Traffic that makes every per-limit series exist: allowed, refused, shadow-refused.
  for (int i = 0; i < 12; ++i) Check(sluiced->port(), "api_key", "k1");
  for (int i = 0; i < 3; ++i) Check(sluiced->port(), "trial", "t1");
  const std::set<std::string> served = FamiliesOf(Request(sluiced->port(), "GET", "/metrics").body);
  ASSERT_TRUE(served.contains("sluice_limit_identities"));

  const std::filesystem::path docs = SLUICE_SOURCE_DIR "/docs";
  const std::regex metric("sluice_[a-z0-9_]+");
  size_t queried = 0;
  for (const char* file : {"grafana/sluiced.json", "prometheus/sluice-rules.yml"}) {
    const std::string text = ReadFile(docs / file);
    ASSERT_FALSE(text.empty()) << file;
    for (std::sregex_iterator it(text.begin(), text.end(), metric), end; it != end; ++it) {
      ++queried;
      EXPECT_TRUE(served.contains(it->str()))
          << file << " queries " << it->str() << ", which a live sluiced does not serve";
    }
  }
  EXPECT_GE(queried, 10u);
  // The dashboard is JSON Grafana can import: panels, each with a query.
  const Json dashboard = Json::parse(ReadFile(docs / "grafana/sluiced.json"), nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded());
  ASSERT_GE(dashboard["panels"].size(), 8u);
  for (const Json& panel : dashboard["panels"]) EXPECT_FALSE(panel["targets"].empty());
}

TEST_F(SluicedUsageTest, UsageEndpointAndSeriesFollowTheFlags) {
  auto sluiced = Start({"--usage-period", "10m"});
  for (int i = 0; i < 4; ++i) Check(sluiced->port(), "api_key", "k" + std::to_string(i % 2));
  const HttpResponse r = Request(sluiced->port(), "GET", "/v1/usage?domain=api&limit=per_key");
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  EXPECT_EQ(j["period_s"], 600);
  EXPECT_EQ(j["identities"], 2);
  EXPECT_EQ(j["percentiles"]["max"], 2);  // each key sent 2 of its 10
  const std::string metrics = Request(sluiced->port(), "GET", "/metrics").body;
  EXPECT_NE(
      metrics.find("sluice_limit_identities{domain=\"api\",limit=\"per_key\",state=\"seen\"} 2"),
      std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("with at least 0.9 of the limit used"), std::string::npos);

  setenv("SLUICE_USAGE_PERIOD", "2h", 1);
  setenv("SLUICE_NEAR_LIMIT_RATIO", "0.5", 1);
  auto from_env = Start();
  unsetenv("SLUICE_USAGE_PERIOD");
  unsetenv("SLUICE_NEAR_LIMIT_RATIO");
  const Json e =
      Json::parse(Request(from_env->port(), "GET", "/v1/usage?domain=api&limit=per_key").body);
  EXPECT_EQ(e["period_s"], 7200);
  const std::string env_metrics = Request(from_env->port(), "GET", "/metrics").body;
  EXPECT_NE(env_metrics.find("with at least 0.5 of the limit used"), std::string::npos);
}

TEST_F(SluicedUsageTest, TrackingOffRemovesTheViews) {
  for (const bool by_env : {false, true}) {
    if (by_env) setenv("SLUICE_USAGE_TRACKING", "off", 1);
    auto sluiced = by_env ? Start() : Start({"--usage-tracking", "off"});
    unsetenv("SLUICE_USAGE_TRACKING");
    Check(sluiced->port(), "api_key", "k1");
    EXPECT_EQ(Request(sluiced->port(), "GET", "/metrics").body.find("sluice_limit_identities"),
              std::string::npos);
    const HttpResponse r = Request(sluiced->port(), "GET", "/v1/usage?domain=api&limit=per_key");
    EXPECT_EQ(r.status, 404);
    EXPECT_NE(r.body.find("usage tracking is off"), std::string::npos) << r.body;
  }
}

// `sluice recommend --from` against a live sluiced: ten keys sent 1..10 checks each, so the
// busiest identity used 10 in the window; the suggestion is that times the headroom.
TEST_F(SluicedUsageTest, RecommendFromReadsALiveSluiced) {
  auto sluiced = Start();
  for (int key = 1; key <= 10; ++key) {
    for (int n = 0; n < key; ++n) Check(sluiced->port(), "api_key", "k" + std::to_string(key));
  }
  const std::string from = "http://127.0.0.1:" + std::to_string(sluiced->port());
  const auto run = [&](const std::string& token, int* status) {
    const std::string command = std::string(SLUICE_BIN) + " recommend --from " + from +
                                " --admin-token " + token +
                                " --domain api --limit per_key --percentile 100 --headroom 1.5"
                                " --output json 2>&1";
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    EXPECT_NE(pipe, nullptr);
    if (pipe == nullptr) return out;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    *status = pclose(pipe);
    return out;
  };
  int status = -1;
  const std::string out = run("t", &status);
  ASSERT_EQ(status, 0) << out;
  const Json j = Json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["identities"], 10) << out;
  EXPECT_EQ(j["distribution"]["max"], 10) << out;
  EXPECT_EQ(j["suggested"]["limit"], 15) << out;

  // A wrong token is the server's refusal, printed, and a failed run.
  const std::string refused = run("wrong", &status);
  EXPECT_NE(status, 0) << refused;
  EXPECT_NE(refused.find("401"), std::string::npos) << refused;
}

TEST_F(SluicedUsageTest, BadUsageFlagsAreRefusedClearly) {
  const std::string config = config_;
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--usage-period", "5s"}, "outside 1m to 7d"},
      {{"--usage-period", "60"}, "--usage-period"},
      {{"--usage-tracking", "maybe"}, "--usage-tracking"},
      {{"--near-limit-ratio", "1.5"}, "--near-limit-ratio"},
      {{"--near-limit-ratio", "0"}, "--near-limit-ratio"}};
  for (const auto& [flags, message] : bad) {
    std::vector<std::string> args = {"--config", config, "--http", "127.0.0.1:0", "--grpc", "off"};
    args.insert(args.end(), flags.begin(), flags.end());
    SluicedProcess p(args, false);
    EXPECT_NE(p.WaitExit(), 0) << flags[1];
    EXPECT_NE(p.Log().find(message), std::string::npos) << flags[1] << ": " << p.Log();
  }
  SluicedProcess help({"--help"}, false);
  EXPECT_EQ(help.WaitExit(), 0);
  for (const char* shown :
       {"--usage-tracking", "SLUICE_USAGE_TRACKING", "--usage-period", "SLUICE_USAGE_PERIOD",
        "--near-limit-ratio", "SLUICE_NEAR_LIMIT_RATIO", "0.9", "1h"}) {
    EXPECT_NE(help.Log().find(shown), std::string::npos) << shown << "\n" << help.Log();
  }
}

}  // namespace
}  // namespace sluice::testing
