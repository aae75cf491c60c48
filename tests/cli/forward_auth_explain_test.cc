// `sluice forward-auth explain`: the report for requests whose canonical path, host and
// descriptors are worked out by hand from the config below.
#include "cli/forward_auth_explain.h"

#include <gtest/gtest.h>

#include "support/temp_config_dir.h"

namespace sluice::cli {
namespace {

constexpr char kConfig[] = R"yaml(
domain: api
forward_auth:
  trusted_proxies: [127.0.0.1]
  normalize: {path_params: strip}
  actions:
    - [{header: X-Api-Key, key: api_key}, path]
    - [host]
descriptors:
  - key: api_key
    descriptors:
      - key: path
        value: /v1/search
        rate_limit: {name: search, unit: minute, requests_per_unit: 3}
)yaml";

class ExplainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("api.yaml", kConfig);
    auto config = server::LoadConfig(dir_.path());
    ASSERT_TRUE(config.has_value()) << config.error().message;
    config_ = *config;
  }
  server::test::TempConfigDir dir_{"explain"};
  std::shared_ptr<const server::Config> config_;
};

TEST_F(ExplainTest, ShowsTheCanonicalRequestAndItsDescriptors) {
  const auto report = ExplainForwardAuth(*config_, {.uri = "http://h/v1//%73earch;a?q=1#f",
                                                    .host = "Shaped.Example.:8443",
                                                    .peer = "127.0.0.1",
                                                    .headers = {"X-Api-Key: k1"}});
  ASSERT_TRUE(report.has_value()) << report.error().message;
  EXPECT_TRUE(
      report->starts_with("domain: api\n"
                          "method: GET\n"
                          "path: /v1/search\n"
                          "query: q=1\n"
                          "host: shaped.example\n"
                          "client: 127.0.0.1\n"
                          "descriptors:\n"
                          "  - api_key=k1 path=/v1/search\n"
                          "    limit 'search', counter "))
      << *report;
  // The counter holds the request's values (its escaping is descriptor.h's).
  const size_t counter = report->find("counter ");
  EXPECT_NE(report->find("api_key=k1", counter), std::string::npos) << *report;
  EXPECT_TRUE(report->ends_with("  - host=shaped.example\n    no limit matches\n")) << *report;
}

TEST_F(ExplainTest, ShowsTheRefusalOfAPathWithNoCanonicalForm) {
  const auto report = ExplainForwardAuth(*config_, {.uri = "/v1/%zz", .host = "a b"});
  ASSERT_TRUE(report.has_value()) << report.error().message;
  EXPECT_NE(report->find("path: (none: bad percent-escape '%zz'"), std::string::npos) << *report;
  EXPECT_NE(report->find("host: (none: not a valid name or address)"), std::string::npos);
  EXPECT_TRUE(
      report->ends_with("answer: 400, an action reads the path and it has no canonical "
                        "form\n"))
      << *report;
}

TEST_F(ExplainTest, RefusesWhatDescribesNoRequest) {
  EXPECT_FALSE(ExplainForwardAuth(*config_, {.domain = "other", .uri = "/"}).has_value());
  EXPECT_FALSE(ExplainForwardAuth(*config_, {.uri = "/", .headers = {"no colon"}}).has_value());
}

}  // namespace
}  // namespace sluice::cli
