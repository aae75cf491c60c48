// The gRPC front end against a scripted service: every field of Envoy's request reaches the
// CheckRequest as Envoy means it, every field of the decision reaches Envoy's response, and
// requests that do not translate are INVALID_ARGUMENT before the service is asked. (What the
// check rules refuse is the service's: grpc_e2e_test.cc.)
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "grpc/grpc_test_util.h"
#include "service/ratelimit_headers.h"

namespace sluice::server::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Entries = std::vector<std::pair<std::string, std::string>>;

TEST_F(GrpcServerTest, RequestFieldsReachTheService) {
  rls::RateLimitRequest r;
  r.set_domain("api");
  auto* d0 = r.add_descriptors();
  auto* e = d0->add_entries();
  e->set_key("remote_address");
  e->set_value("10.0.0.1");
  e = d0->add_entries();
  e->set_key("path");
  e->set_value("/v1/pay");
  auto* d1 = r.add_descriptors();
  e = d1->add_entries();
  e->set_key("api_key");
  e->set_value("");  // Envoy allows an empty value
  const CheckRequest got = Translate(r);
  EXPECT_EQ(got.domain, "api");
  ASSERT_EQ(got.descriptors.size(), 2u);
  EXPECT_EQ(got.descriptors[0].entries,
            (Entries{{"remote_address", "10.0.0.1"}, {"path", "/v1/pay"}}));
  EXPECT_EQ(got.descriptors[1].entries, (Entries{{"api_key", ""}}));
  EXPECT_EQ(got.hits, 1);
  for (const CheckDescriptor& d : got.descriptors) {
    EXPECT_FALSE(d.hits.has_value());
    EXPECT_FALSE(d.limit_override.has_value());
  }
}

// The service's rules take Envoy's meaning of an unknown domain, an empty value and its words.
TEST_F(GrpcServerTest, TheServiceIsToldTheRequestIsEnvoys) {
  EXPECT_EQ(Translate(OneDescriptor("api", "k", "v")).caller, Caller::kEnvoy);
}

// A long value is the service's to count by digest (service/check_rules.h): it arrives whole.
TEST_F(GrpcServerTest, AValueOfAnyLengthReachesTheServiceAsIs) {
  const CheckRequest got = Translate(OneDescriptor("api", "path", std::string(5000, 'a')));
  EXPECT_EQ(got.descriptors[0].entries, (Entries{{"path", std::string(5000, 'a')}}));
}

TEST_F(GrpcServerTest, RequestHitsAddendZeroMeansOne) {
  rls::RateLimitRequest r = OneDescriptor("api", "k", "v");
  r.set_hits_addend(0);
  EXPECT_EQ(Translate(r).hits, 1);
}

TEST_F(GrpcServerTest, RequestHitsAddendIsTheDefaultForEveryDescriptor) {
  rls::RateLimitRequest r = OneDescriptor("api", "k", "v");
  r.set_hits_addend(std::numeric_limits<uint32_t>::max());
  const CheckRequest got = Translate(r);
  EXPECT_EQ(got.hits, int64_t{std::numeric_limits<uint32_t>::max()});
  EXPECT_FALSE(got.descriptors[0].hits.has_value());
}

TEST_F(GrpcServerTest, DescriptorHitsAddendOverridesTheRequests) {
  rls::RateLimitRequest r = OneDescriptor("api", "k", "v");
  r.set_hits_addend(5);
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(7);
  auto* d1 = r.add_descriptors();  // explicit 0: a check that takes nothing
  d1->add_entries()->set_key("k");
  d1->mutable_hits_addend()->set_value(0);
  auto* d2 = r.add_descriptors();  // none: the request's 5
  d2->add_entries()->set_key("k");
  const CheckRequest got = Translate(r);
  EXPECT_EQ(got.hits, 5);
  ASSERT_EQ(got.descriptors.size(), 3u);
  EXPECT_EQ(got.descriptors[0].hits, 7);
  EXPECT_EQ(got.descriptors[1].hits, 0);
  EXPECT_FALSE(got.descriptors[2].hits.has_value());
}

// Envoy's descriptor hits_addend is a uint64: beyond int64 it is read as the largest int64, over
// every limit (every capacity is below it), never refused.
TEST_F(GrpcServerTest, DescriptorHitsAddendBeyondInt64IsTheLargestInt64) {
  rls::RateLimitRequest r = OneDescriptor("api", "k", "v");
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(UINT64_MAX);
  r.set_hits_addend(UINT32_MAX);
  const CheckRequest got = Translate(r);
  EXPECT_EQ(got.descriptors[0].hits, INT64_MAX);
  EXPECT_EQ(got.hits, 4'294'967'295);
}

TEST_F(GrpcServerTest, LimitOverrideEveryUnit) {
  const std::vector<std::pair<envoy::type::v3::RateLimitUnit, Unit>> units = {
      {envoy::type::v3::SECOND, Unit::kSecond}, {envoy::type::v3::MINUTE, Unit::kMinute},
      {envoy::type::v3::HOUR, Unit::kHour},     {envoy::type::v3::DAY, Unit::kDay},
      {envoy::type::v3::MONTH, Unit::kMonth},   {envoy::type::v3::YEAR, Unit::kYear},
  };
  rls::RateLimitRequest r;
  r.set_domain("api");
  for (size_t i = 0; i < units.size(); ++i) {
    auto* d = r.add_descriptors();
    d->add_entries()->set_key("k");
    d->mutable_limit()->set_requests_per_unit(static_cast<uint32_t>(10 + i));
    d->mutable_limit()->set_unit(units[i].first);
  }
  const CheckRequest got = Translate(r);
  ASSERT_EQ(got.descriptors.size(), units.size());
  for (size_t i = 0; i < units.size(); ++i) {
    ASSERT_TRUE(got.descriptors[i].limit_override.has_value()) << i;
    EXPECT_EQ(got.descriptors[i].limit_override->requests_per_unit, int64_t(10 + i));
    EXPECT_EQ(got.descriptors[i].limit_override->period.unit, units[i].second);
  }
}

TEST_F(GrpcServerTest, LimitOverrideOfZeroIsPassedOn) {
  // ratelimit's "0 blocks": the service's rule, not the front end's.
  rls::RateLimitRequest r = OneDescriptor("api", "k", "v");
  r.mutable_descriptors(0)->mutable_limit()->set_unit(envoy::type::v3::MINUTE);
  const CheckRequest got = Translate(r);
  ASSERT_TRUE(got.descriptors[0].limit_override.has_value());
  EXPECT_EQ(got.descriptors[0].limit_override->requests_per_unit, 0);
}

struct InvalidCase {
  std::string name;
  rls::RateLimitRequest request;
  std::string message;
};

std::vector<InvalidCase> InvalidCases() {
  std::vector<InvalidCase> cases;
  rls::RateLimitRequest r = OneDescriptor("api", "k", "v");
  r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(10);
  cases.push_back({"override without unit", r,
                   "descriptors[0].limit.unit must be one of SECOND, MINUTE, HOUR, DAY, MONTH, "
                   "YEAR (got 0)"});
  r = OneDescriptor("api", "k", "v");
  r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(10);
  r.mutable_descriptors(0)->mutable_limit()->set_unit(
      static_cast<envoy::type::v3::RateLimitUnit>(7));  // no WEEK in this enum
  cases.push_back({"override with an undefined unit", r,
                   "descriptors[0].limit.unit must be one of SECOND, MINUTE, HOUR, DAY, MONTH, "
                   "YEAR (got 7)"});
  return cases;
}

TEST_F(GrpcServerTest, InvalidRequestsNeverReachTheService) {
  for (const InvalidCase& c : InvalidCases()) {
    SCOPED_TRACE(c.name);
    rls::RateLimitResponse response;
    const grpc::Status status = Call(c.request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), c.message);
  }
  EXPECT_TRUE(service_.requests().empty());
}

TEST_F(GrpcServerTest, ServiceErrorIsInvalidArgumentWithItsMessage) {
  service_.Fail("unknown domain 'nope'");
  rls::RateLimitResponse response;
  const grpc::Status status = Call(OneDescriptor("nope", "k", "v"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "unknown domain 'nope'");
}

TEST_F(GrpcServerTest, ResponseFieldByField) {
  CheckResponse decision;
  decision.overall = Code::kOverLimit;
  decision.statuses.push_back(
      StatusOf(MakeLimit("per_ip", 100, Unit::kMinute), Code::kOk, 42, milliseconds(1500)));
  decision.statuses.push_back(
      StatusOf(MakeLimit("pay", 5, Unit::kSecond), Code::kOverLimit, 0, milliseconds(200)));
  decision.statuses.emplace_back();  // no rule matched
  decision.statuses.push_back(StatusOf(MakeLimit("free", 0, Unit::kSecond, LimitKind::kUnlimited),
                                       Code::kOk, 0, Duration{0}));
  decision.statuses.push_back(
      StatusOf(MakeLimit("weekly", 7, Unit::kWeek), Code::kOk, 6, seconds(7 * 24 * 3600)));
  service_.Answer(decision);

  rls::RateLimitRequest r = OneDescriptor("api", "k", "v");
  for (int i = 0; i < 4; ++i) *r.add_descriptors() = r.descriptors(0);
  rls::RateLimitResponse got;
  ASSERT_TRUE(Call(r, &got).ok());

  EXPECT_EQ(got.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  ASSERT_EQ(got.statuses_size(), 5);

  const auto& ip = got.statuses(0);
  EXPECT_EQ(ip.code(), rls::RateLimitResponse::OK);
  ASSERT_TRUE(ip.has_current_limit());
  EXPECT_EQ(ip.current_limit().name(), "per_ip");
  EXPECT_EQ(ip.current_limit().requests_per_unit(), 100u);
  EXPECT_EQ(ip.current_limit().unit(), rls::RateLimitResponse::RateLimit::MINUTE);
  EXPECT_EQ(ip.limit_remaining(), 42u);
  ASSERT_TRUE(ip.has_duration_until_reset());
  EXPECT_EQ(ip.duration_until_reset().seconds(), 1);
  EXPECT_EQ(ip.duration_until_reset().nanos(), 500'000'000);

  const auto& pay = got.statuses(1);
  EXPECT_EQ(pay.code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(pay.current_limit().name(), "pay");
  EXPECT_EQ(pay.current_limit().requests_per_unit(), 5u);
  EXPECT_EQ(pay.current_limit().unit(), rls::RateLimitResponse::RateLimit::SECOND);
  EXPECT_EQ(pay.limit_remaining(), 0u);
  EXPECT_EQ(pay.duration_until_reset().seconds(), 0);
  EXPECT_EQ(pay.duration_until_reset().nanos(), 200'000'000);

  // As envoyproxy/ratelimit answers: no rule, OK and nothing else; unlimited, all remaining.
  const auto& none = got.statuses(2);
  EXPECT_EQ(none.code(), rls::RateLimitResponse::OK);
  EXPECT_FALSE(none.has_current_limit());
  EXPECT_EQ(none.limit_remaining(), 0u);
  EXPECT_FALSE(none.has_duration_until_reset());
  const auto& free = got.statuses(3);
  EXPECT_EQ(free.code(), rls::RateLimitResponse::OK);
  EXPECT_FALSE(free.has_current_limit());
  EXPECT_EQ(free.limit_remaining(), std::numeric_limits<uint32_t>::max());

  const auto& weekly = got.statuses(4);
  EXPECT_EQ(weekly.current_limit().unit(), rls::RateLimitResponse::RateLimit::WEEK);
  EXPECT_EQ(weekly.duration_until_reset().seconds(), 7 * 24 * 3600);
  EXPECT_EQ(weekly.duration_until_reset().nanos(), 0);
}

// Envoy's RateLimit.Unit has no 5-minute value: such a limit goes as UNKNOWN, which Envoy's
// X-RateLimit headers leave without a window rather than give a wrong one; a period as long as
// a unit goes as that unit.
TEST_F(GrpcServerTest, APeriodNoUnitNamesGoesAsUnknown) {
  auto five = std::make_shared<Limit>(*MakeLimit("per_5m", 600, Unit::kSecond));
  five->period = *ParsePeriod("5m");
  auto sixty = std::make_shared<Limit>(*MakeLimit("per_60s", 10, Unit::kSecond));
  sixty->period = *ParsePeriod("60s");
  CheckResponse decision;
  decision.statuses.push_back(StatusOf(five, Code::kOk, 599, seconds(300)));
  decision.statuses.push_back(StatusOf(sixty, Code::kOk, 9, seconds(60)));
  service_.Answer(decision);
  rls::RateLimitRequest r = OneDescriptor("api", "k", "v");
  *r.add_descriptors() = r.descriptors(0);
  rls::RateLimitResponse got;
  ASSERT_TRUE(Call(r, &got).ok());
  ASSERT_EQ(got.statuses_size(), 2);
  EXPECT_EQ(got.statuses(0).current_limit().unit(), rls::RateLimitResponse::RateLimit::UNKNOWN);
  EXPECT_EQ(got.statuses(0).current_limit().requests_per_unit(), 600u);
  EXPECT_EQ(got.statuses(0).duration_until_reset().seconds(), 300);
  EXPECT_EQ(got.statuses(1).current_limit().unit(), rls::RateLimitResponse::RateLimit::MINUTE);
}

TEST_F(GrpcServerTest, OverallOkAndRemainingClampedToUint32) {
  CheckResponse decision;
  decision.statuses.push_back(StatusOf(MakeLimit("huge", int64_t{1} << 40, Unit::kDay), Code::kOk,
                                       int64_t{1} << 40, seconds(1)));
  service_.Answer(decision);
  rls::RateLimitResponse got;
  ASSERT_TRUE(Call(OneDescriptor("api", "k", "v"), &got).ok());
  EXPECT_EQ(got.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(got.statuses(0).current_limit().requests_per_unit(),
            std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(got.statuses(0).limit_remaining(), std::numeric_limits<uint32_t>::max());
}

void ExpectHeaders(const rls::RateLimitResponse& got, const CheckResponse& decision,
                   const HeaderOptions& options) {
  const auto want = RateLimitHeaders(decision, options);
  ASSERT_EQ(got.response_headers_to_add_size(), static_cast<int>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.response_headers_to_add(static_cast<int>(i)).key(), want[i].first);
    EXPECT_EQ(got.response_headers_to_add(static_cast<int>(i)).value(), want[i].second);
  }
}

bool HasHeader(const rls::RateLimitResponse& got, std::string_view name) {
  for (const auto& h : got.response_headers_to_add()) {
    if (h.key().size() == name.size() &&
        std::equal(name.begin(), name.end(), h.key().begin(),
                   [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return true;
    }
  }
  return false;
}

// RFC 9651 integers have at most 15 digits: larger counts are reported as the largest.
TEST(RateLimitHeadersTest, CountsBeyondAStructuredFieldIntegerAreClamped) {
  CheckResponse decision;
  decision.statuses.push_back(StatusOf(MakeLimit("vast", int64_t{1} << 60, Unit::kSecond),
                                       Code::kOk, int64_t{1} << 59, milliseconds(1)));
  const auto headers = RateLimitHeaders(decision, HeaderOptions{});
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers[0].second, "\"vast\";q=999999999999999;w=1");
  EXPECT_EQ(headers[1].second, "\"vast\";r=999999999999999;t=1");
}

TEST_F(GrpcServerTest, ResponseHeadersAreTheRateLimitHeaders) {
  CheckResponse decision;
  decision.overall = Code::kOverLimit;
  decision.statuses.push_back(
      StatusOf(MakeLimit("pay", 5, Unit::kSecond), Code::kOverLimit, 0, milliseconds(200)));
  service_.Answer(decision);
  rls::RateLimitResponse got;
  ASSERT_TRUE(Call(OneDescriptor("api", "k", "v"), &got).ok());
  ExpectHeaders(got, decision, HeaderOptions{});
  EXPECT_TRUE(HasHeader(got, "RateLimit-Policy"));
  EXPECT_TRUE(HasHeader(got, "RateLimit"));

  StartServer(HeaderOptions{.legacy = true}, 1);
  ASSERT_TRUE(Call(OneDescriptor("api", "k", "v"), &got).ok());
  ExpectHeaders(got, decision, HeaderOptions{.legacy = true});
  EXPECT_TRUE(HasHeader(got, "X-RateLimit-Limit"));
}

TEST_F(GrpcServerTest, ConcurrentCallsAllAnswered) {
  CheckResponse decision;
  decision.statuses.push_back(
      StatusOf(MakeLimit("l", 10, Unit::kSecond), Code::kOk, 3, milliseconds(1)));
  service_.Answer(decision);
  constexpr int kClients = 8;
  constexpr int kCalls = 50;
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = rls::RateLimitService::NewStub(channel_);
      for (int i = 0; i < kCalls; ++i) {
        grpc::ClientContext ctx;
        rls::RateLimitResponse response;
        const auto request = OneDescriptor("api", "client", std::to_string(c));
        if (stub->ShouldRateLimit(&ctx, request, &response).ok() &&
            response.statuses(0).limit_remaining() == 3) {
          ++ok;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kClients * kCalls);
  EXPECT_EQ(service_.requests().size(), size_t{kClients * kCalls});
}

TEST_F(GrpcServerTest, ShutdownFinishesTheCallInFlight) {
  service_.Hold();
  grpc::Status status;
  rls::RateLimitResponse response;
  std::thread caller([&] { status = Call(OneDescriptor("api", "k", "v"), &response); });
  service_.WaitEntered(1);
  std::thread stopper([&] { server_->Shutdown(); });
  std::this_thread::sleep_for(milliseconds(100));  // Shutdown() is now waiting for the call
  service_.Release();
  caller.join();
  stopper.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OK);
  server_->Shutdown();  // idempotent
  // Nothing listens any more.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(500));
  rls::RateLimitResponse late;
  EXPECT_FALSE(stub_->ShouldRateLimit(&ctx, OneDescriptor("api", "k", "v"), &late).ok());
}

TEST(GrpcServerStart, RefusesZeroThreads) {
  FakeService service;
  auto server = GrpcServer::Start({.address = "127.0.0.1:0", .threads = 0}, service);
  ASSERT_FALSE(server.has_value());
  EXPECT_EQ(server.error().message, "grpc: threads must be at least 1");
}

TEST(GrpcServerStart, RefusesAPortInUse) {
  FakeService service;
  auto first = GrpcServer::Start({.address = "127.0.0.1:0", .threads = 1}, service);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = GrpcServer::Start({.address = address, .threads = 1}, service);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().message,
            "grpc: cannot listen on " + address + ": bind: Address already in use");
}

TEST(GrpcServerStart, RefusesABadAddress) {
  FakeService service;
  auto server = GrpcServer::Start({.address = "not an address", .threads = 1}, service);
  ASSERT_FALSE(server.has_value());
}

}  // namespace
}  // namespace sluice::server::test
