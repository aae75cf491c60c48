// The gRPC front end over the real RateLimitService (memory store, manual clock, a config loaded
// from YAML), called through the client generated from sluice's .proto as Envoy would call it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
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
domain: e2e
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: route
    rate_limit: {name: per_route, unit: hour, requests_per_unit: 10, algorithm: fixed_window}
  - key: internal
    rate_limit: {unlimited: true}
  - key: jobs
    concurrency: {max_in_flight: 1, permit_ttl: 30s}
  - key: path
    rate_limit: {name: per_path, unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: category
    value: read
    descriptors:
      - key: user
        rate_limit: {name: user_reads, unit: minute, requests_per_unit: 4, algorithm: fixed_window}
  - key: endpoint
    value: report
    descriptors:
      - key: user
        rate_limit:
          replaces: [{name: user_reads}]
          requests_per_unit: 9
          unit: minute
          algorithm: fixed_window
)yaml";

class GrpcEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("e2e.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    auto server = GrpcServer::Start({.address = "127.0.0.1:0", .threads = 2}, *service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    stub_ = rls::RateLimitService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_.reset(); }

  rls::RateLimitResponse MustCall(const rls::RateLimitRequest& request) {
    rls::RateLimitResponse response;
    grpc::ClientContext ctx;
    const grpc::Status status = stub_->ShouldRateLimit(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  static bool HasHeader(const rls::RateLimitResponse& r, const std::string& key) {
    for (const auto& h : r.response_headers_to_add()) {
      if (h.key() == key) return true;
    }
    return false;
  }

  // Minute-aligned, so the fixed windows do not roll over inside a test.
  ManualClock clock_{FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000)};
  Metrics metrics_;
  TempConfigDir dir_{"grpc-e2e"};
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
};

TEST_F(GrpcEndToEnd, CountsThenRejectsWithTheLimitAndHeaders) {
  for (uint32_t i = 0; i < 3; ++i) {
    const auto r = MustCall(OneDescriptor("e2e", "api_key", "k1"));
    ASSERT_EQ(r.overall_code(), rls::RateLimitResponse::OK) << i;
    ASSERT_EQ(r.statuses_size(), 1);
    const auto& s = r.statuses(0);
    EXPECT_EQ(s.code(), rls::RateLimitResponse::OK);
    EXPECT_EQ(s.current_limit().name(), "per_key");
    EXPECT_EQ(s.current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(s.current_limit().unit(), rls::RateLimitResponse::RateLimit::MINUTE);
    EXPECT_EQ(s.limit_remaining(), 2 - i);
    EXPECT_EQ(s.duration_until_reset().seconds(), 60);
    EXPECT_TRUE(HasHeader(r, "RateLimit-Policy"));
    EXPECT_FALSE(HasHeader(r, "Retry-After"));
  }
  const auto over = MustCall(OneDescriptor("e2e", "api_key", "k1"));
  EXPECT_EQ(over.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
  EXPECT_TRUE(HasHeader(over, "Retry-After"));
  // Another value has its own counter.
  EXPECT_EQ(MustCall(OneDescriptor("e2e", "api_key", "k2")).statuses(0).limit_remaining(), 2u);
}

// hits_addend 4 on a fresh 3/minute: over, and can never pass. duration_until_reset was 0
// (the key is untouched), which reads as "retry now", while Retry-After said 60.
TEST_F(GrpcEndToEnd, HitsOverTheWholeLimitCarryATrueResetTime) {
  rls::RateLimitRequest r = OneDescriptor("e2e", "api_key", "fresh");
  r.set_hits_addend(4);
  const auto over = MustCall(r);
  ASSERT_EQ(over.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 60);
  bool retry_after_60 = false;
  for (const auto& h : over.response_headers_to_add()) {
    retry_after_60 = retry_after_60 || (h.key() == "Retry-After" && h.value() == "60");
  }
  EXPECT_TRUE(retry_after_60);
}

TEST_F(GrpcEndToEnd, HitsAddendRequestAndDescriptorLevel) {
  rls::RateLimitRequest r = OneDescriptor("e2e", "route", "/a");
  r.set_hits_addend(4);
  *r.add_descriptors() = r.descriptors(0);
  r.mutable_descriptors(1)->mutable_entries(0)->set_value("/b");
  r.mutable_descriptors(1)->mutable_hits_addend()->set_value(7);
  const auto got = MustCall(r);
  EXPECT_EQ(got.statuses(0).limit_remaining(), 6u);  // 10 - 4
  EXPECT_EQ(got.statuses(1).limit_remaining(), 3u);  // 10 - 7
}

TEST_F(GrpcEndToEnd, RejectedRequestTakesNoQuotaFromItsOtherLimits) {
  rls::RateLimitRequest r = OneDescriptor("e2e", "route", "/a");
  auto* d = r.add_descriptors();
  auto* e = d->add_entries();
  e->set_key("api_key");
  e->set_value("k1");
  d->mutable_hits_addend()->set_value(4);  // over per_key's 3 by itself
  const auto got = MustCall(r);
  EXPECT_EQ(got.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(got.statuses(1).code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(MustCall(OneDescriptor("e2e", "route", "/a")).statuses(0).limit_remaining(), 9u);
}

TEST_F(GrpcEndToEnd, LimitOverride) {
  rls::RateLimitRequest r = OneDescriptor("e2e", "api_key", "k9");
  r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1);
  r.mutable_descriptors(0)->mutable_limit()->set_unit(envoy::type::v3::SECOND);
  const auto first = MustCall(r);
  EXPECT_EQ(first.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(first.statuses(0).current_limit().requests_per_unit(), 1u);
  EXPECT_EQ(first.statuses(0).current_limit().unit(), rls::RateLimitResponse::RateLimit::SECOND);
  EXPECT_EQ(MustCall(r).overall_code(), rls::RateLimitResponse::OVER_LIMIT);
}

TEST_F(GrpcEndToEnd, UnlimitedAndUnmatched) {
  rls::RateLimitRequest r = OneDescriptor("e2e", "internal", "yes");
  auto* e = r.add_descriptors()->add_entries();
  e->set_key("nothing");
  e->set_value("matches");
  const auto got = MustCall(r);
  EXPECT_EQ(got.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_FALSE(got.statuses(0).has_current_limit());
  EXPECT_EQ(got.statuses(0).limit_remaining(), std::numeric_limits<uint32_t>::max());
  EXPECT_FALSE(got.statuses(1).has_current_limit());
  EXPECT_EQ(got.statuses(1).limit_remaining(), 0u);
}

// Envoy's protocol cannot release a permit: a concurrency rule is skipped (OK, as unlimited)
// and counted (docs/load-protection.md).
TEST_F(GrpcEndToEnd, ConcurrencyRulesAreSkippedAndCounted) {
  for (int i = 0; i < 3; ++i) {
    const auto r = MustCall(OneDescriptor("e2e", "jobs", "a"));
    EXPECT_EQ(r.overall_code(), rls::RateLimitResponse::OK) << i << " (max_in_flight is 1)";
  }
  EXPECT_NE(metrics_.Render().find("sluice_descriptors_unchecked_total{reason=\"concurrency\"} 3"),
            std::string::npos);
}

TEST_F(GrpcEndToEnd, UnknownDomainLimitsNothing) {
  rls::RateLimitRequest r = OneDescriptor("nope", "api_key", "k1");
  r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1);
  r.mutable_descriptors(0)->mutable_limit()->set_unit(envoy::type::v3::SECOND);
  *r.add_descriptors() = OneDescriptor("nope", "route", "/a").descriptors(0);
  for (int i = 0; i < 3; ++i) {
    const auto got = MustCall(r);
    EXPECT_EQ(got.overall_code(), rls::RateLimitResponse::OK);
    ASSERT_EQ(got.statuses_size(), 2);
    for (const auto& s : got.statuses()) {
      EXPECT_EQ(s.code(), rls::RateLimitResponse::OK);
      EXPECT_FALSE(s.has_current_limit());
      EXPECT_EQ(s.limit_remaining(), 0u);
    }
    EXPECT_EQ(got.response_headers_to_add_size(), 0);
  }
}

// The check rules (service/check_rules.h) for Envoy, in the words Envoy's callers have always
// had: INVALID_ARGUMENT naming the proto field for what makes a request one. The bounds refuse
// nothing (grpc_bounds_test.cc).
TEST_F(GrpcEndToEnd, RequestsTheRulesRefuseAreInvalidArgument) {
  std::vector<std::pair<rls::RateLimitRequest, std::string>> cases;
  cases.emplace_back(OneDescriptor("", "k", "v"), "domain must not be empty");
  rls::RateLimitRequest r;
  r.set_domain("e2e");
  cases.emplace_back(r, "at least one descriptor is required");
  r = OneDescriptor("e2e", "k", "v");
  r.add_descriptors();
  cases.emplace_back(r, "descriptors[1]: a descriptor needs at least one entry");
  r = OneDescriptor("e2e", "k", "v");
  r.mutable_descriptors(0)->add_entries()->set_value("v");
  cases.emplace_back(r, "descriptors[0].entries[1].key must not be empty");
  r = OneDescriptor("nope", "k", "v");
  r.mutable_descriptors(0)->add_entries()->set_value("v");
  cases.emplace_back(r, "descriptors[0].entries[1].key must not be empty");
  for (const auto& [request, message] : cases) {
    SCOPED_TRACE(message);
    rls::RateLimitResponse response;
    grpc::ClientContext ctx;
    const grpc::Status status = stub_->ShouldRateLimit(&ctx, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), message);
  }
}

// A domain sluiced does not have limits nothing whatever the request's size.
TEST_F(GrpcEndToEnd, AnUnknownDomainLimitsNothingWhateverItsSize) {
  rls::RateLimitRequest r = OneDescriptor("nope", "k", "v");
  for (int i = 0; i < 1100; ++i) *r.add_descriptors() = r.descriptors(0);
  r.set_hits_addend(4'000'000'000);
  const auto got = MustCall(r);
  EXPECT_EQ(got.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(got.statuses_size(), 1101);
}

// README Example 7: the endpoint limit replaces the category limit; the replaced descriptor is
// reported as unmatched (no current_limit), not as a limit with 0 remaining.
TEST_F(GrpcEndToEnd, AReplacedLimitIsReportedWithoutALimit) {
  rls::RateLimitRequest r;
  r.set_domain("e2e");
  for (const char* first : {"category", "endpoint"}) {
    auto* d = r.add_descriptors();
    auto* e = d->add_entries();
    e->set_key(first);
    e->set_value(std::string(first) == "category" ? "read" : "report");
    e = d->add_entries();
    e->set_key("user");
    e->set_value("carol");
  }
  for (uint32_t i = 0; i < 5; ++i) {
    const auto got = MustCall(r);
    ASSERT_EQ(got.statuses_size(), 2);
    EXPECT_EQ(got.overall_code(), rls::RateLimitResponse::OK) << "user_reads (4) is replaced";
    EXPECT_FALSE(got.statuses(0).has_current_limit());
    EXPECT_EQ(got.statuses(0).limit_remaining(), 0u);
    EXPECT_EQ(got.statuses(1).current_limit().requests_per_unit(), 9u);
    EXPECT_EQ(got.statuses(1).limit_remaining(), 8 - i);
  }
}

// A client-sized value (a path) over the value bound must not fail the call -- that would skip
// every other limit in it -- but is counted under its digest.
TEST_F(GrpcEndToEnd, AnOverlongValueIsStillCountedAndDoesNotFailTheCall) {
  const std::string long_path(5000, 'p');
  rls::RateLimitRequest r = OneDescriptor("e2e", "path", long_path);
  *r.add_descriptors() = OneDescriptor("e2e", "api_key", "long-1").descriptors(0);
  const auto first = MustCall(r);
  EXPECT_EQ(first.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(first.statuses(1).limit_remaining(), 2u);
  const auto second = MustCall(r);
  EXPECT_EQ(second.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(second.statuses(0).code(), rls::RateLimitResponse::OVER_LIMIT);
  // Another long value is another counter; so is the same value one byte shorter.
  EXPECT_EQ(MustCall(OneDescriptor("e2e", "path", std::string(5000, 'q'))).overall_code(),
            rls::RateLimitResponse::OK);
  EXPECT_EQ(MustCall(OneDescriptor("e2e", "path", std::string(4999, 'p'))).overall_code(),
            rls::RateLimitResponse::OK);
}

}  // namespace
}  // namespace sluice::server::test
