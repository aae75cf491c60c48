// The gRPC front end over the Redis store (a real redis-server): calls are answered from the
// store's I/O thread (CheckAsync), so one handler thread serves many calls in flight. Checks
// that every call is answered, that a shared counter stays exact, and that all or nothing holds.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "grpc/grpc_test_util.h"
#include "metrics/metrics.h"
#include "sluice/open_store.h"
#include "support/redis_server.h"
#include "support/temp_config_dir.h"

namespace sluice::server::test {
namespace {

constexpr char kConfig[] = R"yaml(
domain: rd
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: hour, requests_per_unit: 25, algorithm: fixed_window}
  - key: route
    rate_limit: {name: per_route, unit: hour, requests_per_unit: 1, algorithm: fixed_window}
)yaml";

class GrpcOverRedis : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("rd.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    auto opened = OpenStore("redis://127.0.0.1:" + std::to_string(redis_.port()));
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    // One handler thread: every call below is in flight through it.
    auto server = GrpcServer::Start({.address = "127.0.0.1:0", .threads = 1}, *service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override { server_.reset(); }

  sluice::testing::RedisServer redis_;
  TempConfigDir dir_{"grpc-redis"};
  Metrics metrics_;
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcOverRedis, ConcurrentCallsAreAllAnsweredAndCountExactly) {
  constexpr int kThreads = 8;
  constexpr int kCallsEach = 10;
  std::atomic<int> ok{0}, over{0}, failed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&] {
      auto stub = rls::RateLimitService::NewStub(channel_);
      for (int i = 0; i < kCallsEach; ++i) {
        rls::RateLimitResponse response;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        const grpc::Status status =
            stub->ShouldRateLimit(&ctx, OneDescriptor("rd", "api_key", "shared"), &response);
        if (!status.ok()) {
          failed.fetch_add(1);
        } else if (response.overall_code() == rls::RateLimitResponse::OK) {
          ok.fetch_add(1);
        } else {
          over.fetch_add(1);
        }
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(ok.load(), 25);
  EXPECT_EQ(over.load(), kThreads * kCallsEach - 25);
}

TEST_F(GrpcOverRedis, ARejectedCallTakesNothingFromItsOtherLimits) {
  auto stub = rls::RateLimitService::NewStub(channel_);
  rls::RateLimitRequest r = OneDescriptor("rd", "route", "/pay");
  *r.add_descriptors() = OneDescriptor("rd", "api_key", "k").descriptors(0);
  for (int i = 0; i < 3; ++i) {
    rls::RateLimitResponse response;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->ShouldRateLimit(&ctx, r, &response).ok());
    EXPECT_EQ(response.overall_code(),
              i == 0 ? rls::RateLimitResponse::OK : rls::RateLimitResponse::OVER_LIMIT);
  }
  rls::RateLimitResponse response;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->ShouldRateLimit(&ctx, OneDescriptor("rd", "api_key", "k"), &response).ok());
  EXPECT_EQ(response.statuses(0).limit_remaining(), 23u) << "only the first call was counted";
}

}  // namespace
}  // namespace sluice::server::test
