// grpc.health.v1.Health on sluiced's gRPC server, called through the client generated from
// proto/grpc/health/v1/health.proto as Envoy's grpc_health_check and Kubernetes probes call it:
// the names served, NOT_FOUND for others, the status from RateLimitService::Ready() (a scripted
// one, the real service draining, a Redis store whose server is down), Watch's messages on
// every change and at shutdown, and the stream cap on watchers.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "config/config.h"
#include "grpc/grpc_test_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/raw_http2.h"
#include "metrics/metrics.h"
#include "sluice/clock.h"
#include "sluice/open_store.h"
#include "sluice/scheduler.h"
#include "support/redis_server.h"
#include "support/temp_config_dir.h"
#include "support/wait_for.h"

namespace sluice::server::test {
namespace {

using namespace std::chrono_literals;
namespace hv1 = ::grpc::health::v1;
using Serving = hv1::HealthCheckResponse;

constexpr char kRlsName[] = "envoy.service.ratelimit.v3.RateLimitService";

using sluice::testing::WaitFor;

std::unique_ptr<hv1::Health::Stub> HealthStub(int port) {
  return hv1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

// Check(name): the call's status code and, when OK, the serving status.
struct CheckResult {
  grpc::StatusCode code = grpc::StatusCode::OK;
  Serving::ServingStatus status = Serving::UNKNOWN;
};
CheckResult CheckName(hv1::Health::Stub& stub, const std::string& name) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  hv1::HealthCheckRequest request;
  request.set_service(name);
  hv1::HealthCheckResponse response;
  const grpc::Status s = stub.Check(&ctx, request, &response);
  return {s.error_code(), response.status()};
}

// One Watch call; Next() is its next message, nullopt once the stream ends (or after 20 s: a
// message that never comes fails the test instead of hanging it).
class WatchCall {
 public:
  WatchCall(hv1::Health::Stub& stub, const std::string& name) {
    ctx_.set_deadline(std::chrono::system_clock::now() + 20s);
    hv1::HealthCheckRequest request;
    request.set_service(name);
    reader_ = stub.Watch(&ctx_, request);
  }
  std::optional<Serving::ServingStatus> Next() {
    hv1::HealthCheckResponse m;
    if (!reader_->Read(&m)) return std::nullopt;
    return m.status();
  }
  grpc::Status Finish() { return reader_->Finish(); }
  void Cancel() { ctx_.TryCancel(); }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<hv1::HealthCheckResponse>> reader_;
};

class GrpcHealthTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(GrpcServerOptions options) {
    server_.reset();
    options.address = "127.0.0.1:0";
    auto server = GrpcServer::Start(options, service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    stub_ = HealthStub(server_->port());
  }

  FakeService service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<hv1::Health::Stub> stub_;
};

TEST_F(GrpcHealthTest, TheThreeNamesAreServing) {
  for (const std::string name : {"", "ratelimit", kRlsName}) {
    const CheckResult r = CheckName(*stub_, name);
    EXPECT_EQ(r.code, grpc::StatusCode::OK) << "'" << name << "'";
    EXPECT_EQ(r.status, Serving::SERVING) << "'" << name << "'";
  }
}

TEST_F(GrpcHealthTest, AnyOtherNameIsNotFound) {
  for (const std::string name : {"nope", "RateLimit", "envoy.service.ratelimit.v3.RateLimitServic",
                                 "grpc.health.v1.Health", " "}) {
    EXPECT_EQ(CheckName(*stub_, name).code, grpc::StatusCode::NOT_FOUND) << "'" << name << "'";
  }
}

TEST_F(GrpcHealthTest, CheckAsksTheReadinessEveryTime) {
  service_.SetReady(false);
  const int before = service_.ready_calls();
  for (const std::string name : {"", "ratelimit", kRlsName}) {
    EXPECT_EQ(CheckName(*stub_, name).status, Serving::NOT_SERVING) << "'" << name << "'";
  }
  EXPECT_EQ(service_.ready_calls(), before + 3);
  service_.SetReady(true);
  EXPECT_EQ(CheckName(*stub_, "").status, Serving::SERVING);
  // An unknown name does not ask.
  EXPECT_EQ(CheckName(*stub_, "nope").code, grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(service_.ready_calls(), before + 4);
}

TEST_F(GrpcHealthTest, WatchSendsTheStatusThenEachChange) {
  Start({.health_poll_interval = 5ms});
  WatchCall watch(*stub_, kRlsName);
  EXPECT_EQ(watch.Next(), Serving::SERVING);
  service_.SetReady(false);
  EXPECT_EQ(watch.Next(), Serving::NOT_SERVING);
  service_.SetReady(true);
  EXPECT_EQ(watch.Next(), Serving::SERVING);
  service_.SetReady(false);
  EXPECT_EQ(watch.Next(), Serving::NOT_SERVING);
}

TEST_F(GrpcHealthTest, ShutdownSendsNotServingAndEndsEveryWatchAtOnce) {
  Start({.shutdown_grace = 60s});
  WatchCall a(*stub_, "");
  WatchCall b(*stub_, "ratelimit");
  WatchCall unknown(*stub_, "nope");
  EXPECT_EQ(a.Next(), Serving::SERVING);
  EXPECT_EQ(b.Next(), Serving::SERVING);
  EXPECT_EQ(unknown.Next(), Serving::SERVICE_UNKNOWN);
  ASSERT_EQ(server_->health_watchers(), 3u);
  const auto start = std::chrono::steady_clock::now();
  std::thread stop([&] { server_->Shutdown(); });
  EXPECT_EQ(a.Next(), Serving::NOT_SERVING);
  EXPECT_EQ(a.Next(), std::nullopt);
  EXPECT_EQ(a.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(b.Next(), Serving::NOT_SERVING);
  EXPECT_EQ(b.Next(), std::nullopt);
  // An unknown name stays unknown: it gets no NOT_SERVING, only the end.
  EXPECT_EQ(unknown.Next(), std::nullopt);
  EXPECT_EQ(unknown.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  stop.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "a watch held the shutdown";
  EXPECT_EQ(server_->health_watchers(), 0u);
}

TEST_F(GrpcHealthTest, AnUnknownNameIsWatchedAsServiceUnknown) {
  Start({.health_poll_interval = 5ms});
  WatchCall unknown(*stub_, "nope");
  EXPECT_EQ(unknown.Next(), Serving::SERVICE_UNKNOWN);
  // A known watcher on the same connection sees a change; the unknown one gets nothing from it
  // (its next message would be read below, before the end of its stream).
  WatchCall known(*stub_, "");
  EXPECT_EQ(known.Next(), Serving::SERVING);
  service_.SetReady(false);
  EXPECT_EQ(known.Next(), Serving::NOT_SERVING);
  server_->Shutdown();
  EXPECT_EQ(unknown.Next(), std::nullopt);
}

TEST_F(GrpcHealthTest, ACancelledWatchIsForgotten) {
  WatchCall watch(*stub_, "");
  EXPECT_EQ(watch.Next(), Serving::SERVING);
  EXPECT_EQ(server_->health_watchers(), 1u);
  watch.Cancel();
  EXPECT_EQ(watch.Next(), std::nullopt);
  EXPECT_EQ(watch.Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return server_->health_watchers() == 0; }));
}

TEST_F(GrpcHealthTest, AClientIgnoringTheStreamCapWithWatchesIsCut) {
  // As for ShouldRateLimit (grpc_limits_test): no SETTINGS ACK, a zero window (no message can be
  // sent, so every Watch stays open), and far more Watch streams than the cap.
  Start({.max_concurrent_streams = 4});
  RawHttp2 attacker(server_->port());
  std::string burst = std::string(kClientPreface) + Settings({{4, 0}});  // INITIAL_WINDOW_SIZE 0
  hv1::HealthCheckRequest request;
  for (uint32_t i = 0; i < 200; ++i) {
    burst += CallFrames(2 * i + 1, request.SerializeAsString(), "/grpc.health.v1.Health/Watch");
  }
  attacker.Send(burst);
  attacker.ReadToClose(10s);
  EXPECT_TRUE(attacker.closed());
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server_->health_watchers() == 0; }));
  EXPECT_EQ(CheckName(*HealthStub(server_->port()), "").status, Serving::SERVING);
}

// The per-connection stream bound finds a connection by the peer gRPC names for a handed-over
// descriptor ("fd:N"), which does not depend on the socket's family: it holds on a Unix socket.
TEST_F(GrpcHealthTest, AClientIgnoringTheStreamCapOnAUnixSocketIsCut) {
  char dir[] = "/tmp/sluice-grpc-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/rls.sock";
  server_.reset();
  auto server =
      GrpcServer::Start({.address = "unix:" + path, .max_concurrent_streams = 4}, service_);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  server_ = std::move(*server);
  RawHttp2 attacker(path);
  ASSERT_TRUE(attacker.connected());
  std::string burst = std::string(kClientPreface) + Settings({{4, 0}});  // INITIAL_WINDOW_SIZE 0
  hv1::HealthCheckRequest request;
  for (uint32_t i = 0; i < 200; ++i) {
    burst += CallFrames(2 * i + 1, request.SerializeAsString(), "/grpc.health.v1.Health/Watch");
  }
  attacker.Send(burst);
  attacker.ReadToClose(10s);
  EXPECT_TRUE(attacker.closed());
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server_->health_watchers() == 0; }));
  auto stub =
      hv1::Health::NewStub(grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials()));
  EXPECT_EQ(CheckName(*stub, "").status, Serving::SERVING);
  server_.reset();
  rmdir(dir);  // empty: the server removed its socket
}

// --- over the real service ---------------------------------------------------------------------

constexpr char kConfig[] = R"yaml(
domain: health
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 3}
)yaml";

class GrpcHealthOverService : public ::testing::Test {
 protected:
  // A service on `store` and a gRPC server for it.
  void Start(const std::string& store, GrpcServerOptions options = {}) {
    auto config = LoadConfig(dir_.Write("health.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions service_options;
    OpenStoreOptions store_options;
    // No monitor (a ManualScheduler never advanced), on the wall clock as before.
    store_options.scheduler = std::make_shared<ManualScheduler>(idle_clock_);
    store_options.clock = &wall_clock_;
    service_options.clock = &wall_clock_;
    auto opened = OpenStore(store, store_options);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, service_options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    options.address = "127.0.0.1:0";
    auto server = GrpcServer::Start(options, *service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    stub_ = HealthStub(server_->port());
  }
  void TearDown() override { server_.reset(); }

  TempConfigDir dir_{"grpc-health"};
  Metrics metrics_;
  MonotonicClock wall_clock_;  // both outlive the service
  ManualClock idle_clock_;
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<hv1::Health::Stub> stub_;
};

TEST_F(GrpcHealthOverService, DrainingIsNotServing) {
  Start("memory", {.health_poll_interval = 5ms});
  EXPECT_EQ(CheckName(*stub_, "").status, Serving::SERVING);
  WatchCall watch(*stub_, "ratelimit");
  EXPECT_EQ(watch.Next(), Serving::SERVING);
  service_->StartDraining();
  EXPECT_EQ(watch.Next(), Serving::NOT_SERVING);
  for (const std::string name : {"", "ratelimit", kRlsName}) {
    EXPECT_EQ(CheckName(*stub_, name).status, Serving::NOT_SERVING) << "'" << name << "'";
  }
  // Checks are still answered while draining.
  grpc::ClientContext ctx;
  rls::RateLimitResponse response;
  EXPECT_TRUE(rls::RateLimitService::NewStub(
                  grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                      grpc::InsecureChannelCredentials()))
                  ->ShouldRateLimit(&ctx, OneDescriptor("health", "k", "v"), &response)
                  .ok());
  EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OK);
}

TEST_F(GrpcHealthOverService, ARedisStoreWhoseServerIsDownIsNotServing) {
  sluice::testing::RedisServer redis;
  Start("redis://127.0.0.1:" + std::to_string(redis.port()), {.health_poll_interval = 5ms});
  EXPECT_EQ(CheckName(*stub_, "").status, Serving::SERVING);
  WatchCall watch(*stub_, "");
  EXPECT_EQ(watch.Next(), Serving::SERVING);
  redis.Stop();
  EXPECT_EQ(watch.Next(), Serving::NOT_SERVING);
  EXPECT_EQ(CheckName(*stub_, kRlsName).status, Serving::NOT_SERVING);
  ASSERT_TRUE(redis.Restart());
  EXPECT_EQ(watch.Next(), Serving::SERVING);
  // The store's connections come back one by one at the reconnect pace (docs/redis.md): a PING
  // on one still reconnecting may fail for a few more milliseconds, so the check may see one
  // more NOT_SERVING before it settles. Settle it must, within a deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  Serving::ServingStatus status = CheckName(*stub_, kRlsName).status;
  while (status != Serving::SERVING && std::chrono::steady_clock::now() < deadline) {
    status = CheckName(*stub_, kRlsName).status;
  }
  EXPECT_EQ(status, Serving::SERVING);
}

}  // namespace
}  // namespace sluice::server::test
