// Issue 12, item 6: --grpc-response-headers draft11|upstream|off, over gRPC through the client
// generated from the .proto, on the real service (memory store, manual clock), with and without
// --legacy-headers. The expected fields are written by hand from the config below and
// envoyproxy/ratelimit's choice of status (ratelimit_headers.h).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "grpc/grpc_test_util.h"
#include "metrics/metrics.h"
#include "sluice/clock.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server::test {
namespace {

constexpr char kConfig[] = R"yaml(
domain: hdr
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: ip
    rate_limit: {name: per_ip, unit: minute, requests_per_unit: 5, algorithm: fixed_window}
)yaml";

using Headers = std::vector<std::pair<std::string, std::string>>;
using RLR = rls::RateLimitResponse;

class GrpcResponseHeaders : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("hdr.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    // 15 s into a minute: each fixed window ends 45 s from now.
    clock_.Advance(std::chrono::seconds(15));
  }
  void Start(HeaderSet set, bool legacy) {
    GrpcServerOptions options{.address = "127.0.0.1:0", .threads = 1};
    options.headers = {.set = set, .legacy = legacy};
    auto server = GrpcServer::Start(options, *service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    stub_ = rls::RateLimitService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_.reset(); }

  // Envoy's request [api_key=<key>], [ip=<ip>], [user=u] (no rule: unmatched).
  static rls::RateLimitRequest Request(const std::string& key,
                                       const std::string& ip = "198.51.100.7") {
    rls::RateLimitRequest r;
    r.set_domain("hdr");
    for (const auto& [k, v] : Headers{{"api_key", key}, {"ip", ip}, {"user", "u"}}) {
      auto* e = r.add_descriptors()->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
    return r;
  }
  std::pair<RLR::Code, Headers> Call(const rls::RateLimitRequest& request) {
    rls::RateLimitResponse response;
    grpc::ClientContext ctx;
    const grpc::Status status = stub_->ShouldRateLimit(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    Headers headers;
    for (const auto& h : response.response_headers_to_add())
      headers.emplace_back(h.key(), h.value());
    return {response.overall_code(), headers};
  }

  ManualClock clock_{FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000)};
  Metrics metrics_;
  TempConfigDir dir_{"grpc-headers"};
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
};

TEST_F(GrpcResponseHeaders, Draft11IsTheDefaultAndLegacyAddsXRateLimit) {
  EXPECT_EQ(GrpcServerOptions{}.headers.set, HeaderSet::kDraft11);
  Start(HeaderSet::kDraft11, /*legacy=*/false);
  EXPECT_EQ(Call(Request("a")).second,
            (Headers{{"RateLimit-Policy", R"("per_key";q=3;w=60, "per_ip";q=5;w=60)"},
                     {"RateLimit", R"("per_key";r=2;t=45, "per_ip";r=4;t=45)"}}));
  server_.reset();
  Start(HeaderSet::kDraft11, /*legacy=*/true);
  Call(Request("a"));
  Call(Request("a"));
  // The 4th of 3 for the key (one before the restart, three since); the address's 4th of 5
  // passes and is given back.
  const auto [code, headers] = Call(Request("a"));
  EXPECT_EQ(code, RLR::OVER_LIMIT);
  EXPECT_EQ(headers, (Headers{{"RateLimit-Policy", R"("per_key";q=3;w=60, "per_ip";q=5;w=60)"},
                              {"RateLimit", R"("per_key";r=0;t=45, "per_ip";r=2;t=45)"},
                              {"Retry-After", "45"},
                              {"X-RateLimit-Limit", "3"},
                              {"X-RateLimit-Remaining", "0"},
                              {"X-RateLimit-Reset", "45"}}));
}

TEST_F(GrpcResponseHeaders, UpstreamIsExactlyItsThreeFieldsWithOrWithoutLegacy) {
  for (const bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "legacy" : "no legacy");
    Start(HeaderSet::kUpstream, legacy);
    // Counters of their own in each round.
    const std::string key = legacy ? "b" : "a";
    const std::string ip = legacy ? "198.51.100.8" : "198.51.100.9";
    // per_key has 2 left, per_ip 4, the unmatched descriptor no limit: per_key is chosen.
    EXPECT_EQ(Call(Request(key, ip)).second, (Headers{{"RateLimit-Limit", "3"},
                                                      {"RateLimit-Remaining", "2"},
                                                      {"RateLimit-Reset", "45"}}));
    Call(Request(key, ip));
    Call(Request(key, ip));
    // The 4th of 3 for the key (per_ip has 2 left, less than nothing is not less than the
    // over-limit status): the over-limit status.
    const auto [code, headers] = Call(Request(key, ip));
    EXPECT_EQ(code, RLR::OVER_LIMIT);
    EXPECT_EQ(headers, (Headers{{"RateLimit-Limit", "3"},
                                {"RateLimit-Remaining", "0"},
                                {"RateLimit-Reset", "45"}}));
    server_.reset();
  }
}

TEST_F(GrpcResponseHeaders, UpstreamChoosesTheDescriptorClosestToItsLimit) {
  Start(HeaderSet::kUpstream, false);
  for (int i = 0; i < 3; ++i) {
    rls::RateLimitRequest ip_only;
    ip_only.set_domain("hdr");
    auto* e = ip_only.add_descriptors()->add_entries();
    e->set_key("ip");
    e->set_value("198.51.100.7");
    Call(ip_only);
  }
  // per_ip now has 5 - 3 - 1 = 1 left, per_key (a fresh key) 2: per_ip is chosen.
  EXPECT_EQ(
      Call(Request("fresh")).second,
      (Headers{{"RateLimit-Limit", "5"}, {"RateLimit-Remaining", "1"}, {"RateLimit-Reset", "45"}}));
}

TEST_F(GrpcResponseHeaders, UpstreamAddsNothingWhenNoDescriptorHasALimit) {
  Start(HeaderSet::kUpstream, false);
  rls::RateLimitRequest r;
  r.set_domain("hdr");
  auto* e = r.add_descriptors()->add_entries();
  e->set_key("user");
  e->set_value("u");
  EXPECT_EQ(Call(r).second, Headers{});
}

TEST_F(GrpcResponseHeaders, OffAddsNothingEvenOverTheLimitWithLegacy) {
  Start(HeaderSet::kOff, /*legacy=*/true);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Call(Request("a")).second, Headers{});
  const auto [code, headers] = Call(Request("a"));
  EXPECT_EQ(code, RLR::OVER_LIMIT);
  EXPECT_EQ(headers, Headers{});
}

}  // namespace
}  // namespace sluice::server::test
