// Issue 12, item 5: requests past the service's bounds (service/check_rules.h), over gRPC through
// the client generated from the .proto, as Envoy sends them, on the real service (memory store,
// manual clock). Every one is answered, as envoyproxy/ratelimit answers it: 65 and 1030
// descriptors, 17 and 65 entries, 300- and 5000-byte keys, long values, a request hits_addend of
// 2e9 and a descriptor hits_addend of 2^53-1 on every algorithm. The expected answers are written
// by hand from the config below.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

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
#include "support/bounds_config.h"
#include "support/temp_config_dir.h"

namespace sluice::server::test {
namespace {

using sluice::testing::kBoundsConfig;

constexpr int64_t kMaxExactInDouble = (int64_t{1} << 53) - 1;

class GrpcBounds : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("bounds.yaml", kBoundsConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    options.unchecked_warning = [this](const std::string& m) { warnings_.push_back(m); };
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
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    return response;
  }

  // A descriptor of `entries` (key, value) with an optional override of `per_minute`.
  static void Add(rls::RateLimitRequest& r,
                  const std::vector<std::pair<std::string, std::string>>& entries,
                  uint32_t per_minute = 0) {
    auto* d = r.add_descriptors();
    for (const auto& [k, v] : entries) {
      auto* e = d->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
    if (per_minute != 0) {
      d->mutable_limit()->set_requests_per_unit(per_minute);
      d->mutable_limit()->set_unit(envoy::type::v3::MINUTE);
    }
  }
  static rls::RateLimitRequest Request() {
    rls::RateLimitRequest r;
    r.set_domain("bounds");
    return r;
  }
  std::string Metric(const std::string& reason) {
    const std::string text = metrics_.Render();
    const std::string series = "sluice_descriptors_unchecked_total{reason=\"" + reason + "\"} ";
    const size_t at = text.find(series);
    if (at == std::string::npos) return "<absent>";
    return text.substr(at + series.size(), text.find('\n', at) - at - series.size());
  }

  // Minute-aligned, so the fixed windows do not roll over inside a test.
  ManualClock clock_{FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000)};
  Metrics metrics_;
  std::vector<std::string> warnings_;
  TempConfigDir dir_{"grpc-bounds"};
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
};

using RLR = rls::RateLimitResponse;

TEST_F(GrpcBounds, SixtyFiveDescriptorsAreAllChecked) {
  rls::RateLimitRequest r = Request();
  for (int i = 0; i < 65; ++i) Add(r, {{"user", "u" + std::to_string(i)}});
  const RLR got = MustCall(r);
  EXPECT_EQ(got.overall_code(), RLR::OK);
  ASSERT_EQ(got.statuses_size(), 65);
  for (const auto& s : got.statuses()) {
    EXPECT_TRUE(s.has_current_limit());
    EXPECT_EQ(s.limit_remaining(), 9u);
  }
  EXPECT_EQ(Metric("descriptors"), "0");
}

TEST_F(GrpcBounds, DescriptorsPastThe1024thAreAnsweredOkWithoutALimitAndReported) {
  rls::RateLimitRequest r = Request();
  // Descriptor 1024 and later would be over their limit (1 per minute) on a second call.
  for (int i = 0; i < 1030; ++i) Add(r, {{"path", "/p" + std::to_string(i)}});
  MustCall(r);
  const RLR got = MustCall(r);
  ASSERT_EQ(got.statuses_size(), 1030);
  EXPECT_EQ(got.overall_code(), RLR::OVER_LIMIT);  // the checked ones are over
  EXPECT_EQ(got.statuses(1023).code(), RLR::OVER_LIMIT);
  EXPECT_TRUE(got.statuses(1023).has_current_limit());
  for (int i = 1024; i < 1030; ++i) {
    EXPECT_EQ(got.statuses(i).code(), RLR::OK) << i;
    EXPECT_FALSE(got.statuses(i).has_current_limit()) << i;
  }
  EXPECT_EQ(Metric("descriptors"), "12");  // 6 per call
  // One warning for both calls (they are within 10 s), then one more after 10 s.
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("6 past the first 1024"), std::string::npos) << warnings_[0];
  clock_.Advance(std::chrono::seconds(10));
  MustCall(r);
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_NE(warnings_[1].find("answered 12 request descriptors"), std::string::npos)
      << warnings_[1];
}

TEST_F(GrpcBounds, SeventeenEntriesAreCheckedSixtyFiveAreNot) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < 17; ++i) entries.emplace_back("k" + std::to_string(i), "v");
  rls::RateLimitRequest seventeen = Request();
  Add(seventeen, entries, 1);  // an override of 1 per minute counts any descriptor
  EXPECT_EQ(MustCall(seventeen).overall_code(), RLR::OK);
  const RLR again = MustCall(seventeen);
  EXPECT_EQ(again.overall_code(), RLR::OVER_LIMIT);
  EXPECT_EQ(again.statuses(0).current_limit().requests_per_unit(), 1u);

  while (entries.size() < 65) entries.emplace_back("k" + std::to_string(entries.size()), "v");
  rls::RateLimitRequest many = Request();
  Add(many, entries, 1);
  for (int i = 0; i < 3; ++i) {
    const RLR got = MustCall(many);
    EXPECT_EQ(got.overall_code(), RLR::OK);
    EXPECT_FALSE(got.statuses(0).has_current_limit());
  }
  EXPECT_EQ(Metric("entries"), "3");
}

TEST_F(GrpcBounds, A300ByteKeyIsCheckedA5000ByteKeyIsNot) {
  rls::RateLimitRequest r = Request();
  Add(r, {{std::string(300, 'k'), "v"}}, 1);
  EXPECT_EQ(MustCall(r).overall_code(), RLR::OK);
  EXPECT_EQ(MustCall(r).overall_code(), RLR::OVER_LIMIT);
  // No configured rule has such a key: without an override it matches nothing, as upstream's
  // config would not have it either.
  rls::RateLimitRequest plain = Request();
  Add(plain, {{std::string(300, 'k'), "v"}});
  EXPECT_FALSE(MustCall(plain).statuses(0).has_current_limit());

  rls::RateLimitRequest longer = Request();
  Add(longer, {{std::string(5000, 'k'), "v"}}, 1);
  for (int i = 0; i < 2; ++i) {
    const RLR got = MustCall(longer);
    EXPECT_EQ(got.overall_code(), RLR::OK);
    EXPECT_FALSE(got.statuses(0).has_current_limit());
  }
  EXPECT_EQ(Metric("key"), "2");
}

TEST_F(GrpcBounds, LongValuesAreCountedEachOnItsOwnCounter) {
  const std::string a = "/" + std::string(60 << 10, 'a');
  const std::string b = "/" + std::string(60 << 10, 'b');
  rls::RateLimitRequest ra = Request();
  Add(ra, {{"path", a}});
  rls::RateLimitRequest rb = Request();
  Add(rb, {{"path", b}});
  EXPECT_EQ(MustCall(ra).overall_code(), RLR::OK);
  EXPECT_EQ(MustCall(rb).overall_code(), RLR::OK) << "another long value: its own counter";
  EXPECT_EQ(MustCall(ra).overall_code(), RLR::OVER_LIMIT);
}

// A request hits_addend of 2e9 (a uint32 over int32, far over any limit here) is over the limit,
// with a time to come back, and takes nothing: the next request of one hit passes.
TEST_F(GrpcBounds, ARequestHitsAddendOf2e9IsOverTheLimitNotAnError) {
  rls::RateLimitRequest r = Request();
  Add(r, {{"user", "big"}});
  r.set_hits_addend(2'000'000'000);
  const RLR got = MustCall(r);
  EXPECT_EQ(got.overall_code(), RLR::OVER_LIMIT);
  EXPECT_EQ(got.statuses(0).current_limit().requests_per_unit(), 10u);
  EXPECT_GT(got.statuses(0).duration_until_reset().seconds(), 0);
  r.set_hits_addend(1);
  const RLR after = MustCall(r);
  EXPECT_EQ(after.overall_code(), RLR::OK);
  EXPECT_EQ(after.statuses(0).limit_remaining(), 9u);
}

TEST_F(GrpcBounds, ADescriptorHitsAddendOf2To53Minus1IsOverEveryAlgorithmsLimit) {
  for (const char* alg : {"token_bucket", "gcra", "leaky_bucket", "fixed_window",
                          "sliding_window_counter", "sliding_window_log"}) {
    SCOPED_TRACE(alg);
    for (const uint64_t hits : {uint64_t(kMaxExactInDouble), uint64_t{UINT64_MAX}}) {
      rls::RateLimitRequest r = Request();
      Add(r, {{"alg", alg}});
      r.mutable_descriptors(0)->mutable_hits_addend()->set_value(hits);
      const RLR got = MustCall(r);
      EXPECT_EQ(got.overall_code(), RLR::OVER_LIMIT);
      EXPECT_TRUE(got.statuses(0).has_current_limit());
      EXPECT_GT(got.statuses(0).duration_until_reset().seconds(), 0);
    }
    rls::RateLimitRequest one = Request();
    Add(one, {{"alg", alg}});
    const RLR after = MustCall(one);
    EXPECT_EQ(after.overall_code(), RLR::OK);
    EXPECT_EQ(after.statuses(0).limit_remaining(), 9u) << "the huge requests took nothing";
  }
}

}  // namespace
}  // namespace sluice::server::test
