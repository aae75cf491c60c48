// HttpApi without a network: routes, methods, admin auth, status codes and headers, against a
// fake RateLimitService that answers what each test sets up.
#include "http/http_api.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

namespace sluice::server {
namespace {

class FakeService : public RateLimitService {
 public:
  Result<CheckResponse> Check(const CheckRequest& request) override {
    last_request = request;
    if (request.domain != "api") return MakeError("unknown domain '" + request.domain + "'");
    return response;
  }
  Result<void> Reload(std::shared_ptr<const Config>) override { return {}; }
  std::shared_ptr<const Config> config() const override { return config_; }
  bool Ready() override { return ready; }
  StoreStats StoreTotals() const override { return {}; }
  Result<CounterState> State(std::string_view domain,
                             const std::vector<std::pair<std::string, std::string>>& e) override {
    last_entries = e;
    if (domain != "api") return MakeError("unknown domain");
    CounterState s;
    s.counter_key = "api|api_key#api_key=" + e[0].second;
    s.remaining = 7;
    s.reset_after = std::chrono::seconds(2);
    return s;
  }
  Result<void> Reset(std::string_view,
                     const std::vector<std::pair<std::string, std::string>>& e) override {
    last_entries = e;
    ++resets;
    return {};
  }

  CheckResponse response;
  CheckRequest last_request;
  std::vector<std::pair<std::string, std::string>> last_entries;
  bool ready = true;
  int resets = 0;
  std::shared_ptr<const Config> config_ =
      std::make_shared<Config>(std::map<std::string, Domain, std::less<>>{});
};

std::string Header(const HttpReply& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<absent>";
}

constexpr char kBody[] =
    R"({"domain":"api","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})";

class HttpApiTest : public ::testing::Test {
 protected:
  HttpApiTest() {
    limit_.name = "per_key";
    limit_.requests_per_unit = 2;
    limit_.spec.limit = 2;
    limit_.spec.period = std::chrono::seconds(1);
    DescriptorStatus s;
    s.limit = &limit_;
    s.remaining = 1;
    service_.response.statuses = {s};
  }
  HttpApi Api(std::string token = "") {
    HttpApiOptions o;
    o.admin_token = std::move(token);
    o.max_body_bytes = 1000;
    return HttpApi(&service_, &metrics_, o);
  }
  Limit limit_;
  FakeService service_;
  Metrics metrics_;
};

TEST_F(HttpApiTest, CheckAllowedIs200WithJson) {
  const HttpReply r = Api().Handle({"POST", "/v1/check", "", kBody});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_NE(r.body.find(R"("overall":"OK")"), std::string::npos) << r.body;
  EXPECT_EQ(service_.last_request.descriptors[0].entries[0].second, "v");
  EXPECT_EQ(Header(r, "Retry-After"), "<absent>");
  EXPECT_EQ(Header(r, kSoftOverLimitHeader), "<absent>");
}

TEST_F(HttpApiTest, OverLimitIs429WithRetryAfter) {
  service_.response.overall = Code::kOverLimit;
  service_.response.statuses[0].code = Code::kOverLimit;
  service_.response.statuses[0].retry_after = std::chrono::milliseconds(1200);
  const HttpReply r = Api().Handle({"POST", "/v1/check", "", kBody});
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(Header(r, "Retry-After"), "2");  // 1.2 s rounded up
}

TEST_F(HttpApiTest, SoftOverLimitIsFlaggedInAHeader) {
  service_.response.statuses[0].soft_over_limit = true;
  service_.response.statuses[0].mode = Mode::kSoft;
  const HttpReply r = Api().Handle({"POST", "/v1/check", "", kBody});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Header(r, kSoftOverLimitHeader), "?1");
  EXPECT_NE(r.body.find(R"("soft_over_limit":true)"), std::string::npos);
}

TEST_F(HttpApiTest, BadRequestsAre400And413) {
  HttpApi api = Api();
  EXPECT_EQ(api.Handle({"POST", "/v1/check", "", "{"}).status, 400);
  const HttpReply unknown =
      api.Handle({"POST", "/v1/check", "",
                  R"({"domain":"nope","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})"});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.body, "{\"error\":\"unknown domain 'nope'\"}\n");
  EXPECT_EQ(api.Handle({"POST", "/v1/check", "", std::string(1001, ' ')}).status, 413);
}

TEST_F(HttpApiTest, RoutesAndMethods) {
  HttpApi api = Api();
  EXPECT_EQ(api.Handle({"GET", "/healthz", "", ""}).status, 200);
  EXPECT_EQ(api.Handle({"GET", "/readyz", "", ""}).status, 200);
  service_.ready = false;
  EXPECT_EQ(api.Handle({"GET", "/readyz", "", ""}).status, 503);
  const HttpReply metrics = api.Handle({"GET", "/metrics", "", ""});
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(api.Handle({"GET", "/nope", "", ""}).status, 404);
  const HttpReply wrong = api.Handle({"GET", "/v1/check", "", ""});
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(Header(wrong, "Allow"), "POST");
  EXPECT_EQ(api.Handle({"POST", "/healthz", "", ""}).status, 405);
}

TEST_F(HttpApiTest, AdminIsOffWithoutAToken) {
  EXPECT_EQ(Api().Handle({"GET", "/v1/limits", "Bearer x", ""}).status, 404);
}

TEST_F(HttpApiTest, AdminNeedsTheBearerToken) {
  HttpApi api = Api("s3cret");
  EXPECT_EQ(api.Handle({"GET", "/v1/limits", "", ""}).status, 401);
  EXPECT_EQ(api.Handle({"GET", "/v1/limits", "Bearer wrong", ""}).status, 401);
  EXPECT_EQ(api.Handle({"GET", "/v1/limits", "Bearer s3cre", ""}).status, 401);
  EXPECT_EQ(api.Handle({"GET", "/v1/limits", "Basic s3cret", ""}).status, 401);
  const HttpReply ok = api.Handle({"GET", "/v1/limits", "bearer s3cret", ""});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "{\"domains\":[]}\n");
  EXPECT_EQ(api.Handle({"POST", "/v1/limits", "Bearer s3cret", ""}).status, 405);
}

TEST_F(HttpApiTest, StateAndReset) {
  HttpApi api = Api("t");
  const HttpReply state =
      api.Handle({"GET", "/v1/state?domain=api&api_key=k%201&path=/x", "Bearer t", ""});
  EXPECT_EQ(state.status, 200) << state.body;
  EXPECT_EQ(state.body, R"({"domain":"api","counter_key":"api|api_key#api_key=k 1","limit":null,)"
                        R"("remaining":7,"reset_after_ms":2000})"
                        "\n");
  ASSERT_EQ(service_.last_entries.size(), 2u);
  EXPECT_EQ(service_.last_entries[1].first, "path");
  EXPECT_EQ(api.Handle({"GET", "/v1/state?api_key=k", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"GET", "/v1/state?domain=api", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"DELETE", "/v1/state?domain=api&api_key=k", "Bearer t", ""}).status, 200);
  EXPECT_EQ(service_.resets, 1);
  EXPECT_EQ(api.Handle({"PUT", "/v1/state?domain=api&api_key=k", "Bearer t", ""}).status, 405);
}

TEST_F(HttpApiTest, TopValidatesItsQuery) {
  HttpApi api = Api("t");
  EXPECT_EQ(api.Handle({"GET", "/v1/top?domain=api&n=0", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"GET", "/v1/top?domain=api&n=x", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"GET", "/v1/top?n=3", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"GET", "/v1/top?domain=api&n=3", "Bearer t", ""}).status, 400)
      << "unknown domain in the (empty) config";
}

}  // namespace
}  // namespace sluice::server
