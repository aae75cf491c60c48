// sluiced's gRPC health service end to end: the real binary as a process, called through the
// client generated from proto/grpc/health/v1/health.proto as Kubernetes' grpc probe and Envoy's
// grpc_health_check call it. The wiring main.cc owns: the same readiness as /readyz, NOT_SERVING
// once SIGTERM starts the drain, and a Watch that ends with the server rather than holding its
// shutdown to --shutdown-grace-ms.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "support/http_test_client.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;
namespace hv1 = ::grpc::health::v1;
using Serving = hv1::HealthCheckResponse;

constexpr char kConfig[] =
    "domain: health\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
    "requests_per_unit: 3}\n";

class SluicedHealth : public ::testing::Test {
 protected:
  // sluiced with HTTP and gRPC on ports of its own, and a health client for its gRPC port.
  std::unique_ptr<SluicedProcess> Start(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--grpc", "127.0.0.1:0", "--threads", "2"});
    auto sluiced = StartSluiced(dir_.Write("health.yaml", kConfig).string(), extra);
    const int port = sluiced->GrpcPort();
    EXPECT_GT(port, 0) << sluiced->Log();
    if (port == 0) return sluiced;
    stub_ = hv1::Health::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                     grpc::InsecureChannelCredentials()));
    return sluiced;
  }

  // The serving status Check answers for `name`, or nullopt if the call failed.
  std::optional<Serving::ServingStatus> Check(const std::string& name) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    hv1::HealthCheckRequest request;
    request.set_service(name);
    hv1::HealthCheckResponse response;
    if (!stub_->Check(&ctx, request, &response).ok()) return std::nullopt;
    return response.status();
  }

  static int ReadyzStatus(int port) {
    HttpClient c(port);
    auto r = c.Request("GET", "/readyz", "", {});
    return r ? r->status : 0;
  }

  sluice::server::test::TempConfigDir dir_{"sluiced-health"};
  std::unique_ptr<hv1::Health::Stub> stub_;
};

TEST_F(SluicedHealth, ServingUntilSigtermThenNotServingAndTheWatchEnds) {
  auto sluiced = Start({"--shutdown-grace-ms", "60000"});
  ASSERT_TRUE(stub_) << sluiced->Log();
  EXPECT_EQ(ReadyzStatus(sluiced->port()), 200);
  for (const std::string name : {"", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"}) {
    EXPECT_EQ(Check(name), Serving::SERVING) << "'" << name << "'";
  }
  EXPECT_EQ(Check("other"), std::nullopt) << "NOT_FOUND";

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  hv1::HealthCheckRequest request;
  auto watch = stub_->Watch(&ctx, request);
  hv1::HealthCheckResponse m;
  ASSERT_TRUE(watch->Read(&m));
  EXPECT_EQ(m.status(), Serving::SERVING);

  sluiced->Signal(SIGTERM);
  ASSERT_TRUE(watch->Read(&m)) << sluiced->Log();
  EXPECT_EQ(m.status(), Serving::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&m)) << "the watch ends with the server";
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  // Well within the 60 s grace: the open watch did not hold the shutdown.
  EXPECT_EQ(sluiced->WaitExit(15s), 0) << sluiced->Log();
}

TEST_F(SluicedHealth, ARedisStoreThatDoesNotAnswerIsNotServingAsReadyzIsNotReady) {
  // Nothing listens on port 1 of the loopback.
  auto sluiced = Start({"--store", "redis://127.0.0.1:1"});
  ASSERT_TRUE(stub_) << sluiced->Log();
  EXPECT_EQ(ReadyzStatus(sluiced->port()), 503);
  EXPECT_EQ(Check(""), Serving::NOT_SERVING);
  EXPECT_EQ(Check("ratelimit"), Serving::NOT_SERVING);
}

}  // namespace
}  // namespace sluice::testing
