// gRPC server reflection on sluiced's gRPC server, asked as grpcurl asks it (reflection_client.h).
// The services listed, and each service described from the FileDescriptorProtos served: parsed,
// built into a pool of their own (so the imports a client needs are all there), and compared
// with what the server was compiled from. Then: an unknown symbol is NOT_FOUND; v1 is
// UNIMPLEMENTED (clients fall back to v1alpha on it), as is everything once reflection is off;
// open streams beyond the sync pool's cap are refused RESOURCE_EXHAUSTED instead of growing it.
#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpc/grpc_test_util.h"
#include "grpc/health/v1/health.pb.h"
#include "grpc/reflection.h"
#include "grpc/reflection_client.h"
#include "support/wait_for.h"

namespace sluice::server::test {
namespace {

using namespace std::chrono_literals;
namespace pb = ::google::protobuf;

constexpr char kRlsName[] = "envoy.service.ratelimit.v3.RateLimitService";
constexpr char kHealthName[] = "grpc.health.v1.Health";

class GrpcReflectionTest : public ::testing::Test {
 protected:
  void Start(bool reflection) {
    auto server = GrpcServer::Start(
        {.address = "127.0.0.1:0", .threads = 1, .reflection = reflection}, service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
  }

  // Asks for the file that defines `symbol`; fails the test unless files came back.
  refl::FileDescriptorResponse Describe(const std::string& symbol) {
    ReflectionStream stream(server_->port());
    const auto answer = stream.Ask(FileContainingSymbol(symbol));
    EXPECT_TRUE(answer.has_value()) << stream.Finish().error_message();
    if (!answer) return {};
    EXPECT_EQ(answer->original_request().file_containing_symbol(), symbol);
    EXPECT_TRUE(answer->has_file_descriptor_response())
        << answer->error_response().error_code() << " " << answer->error_response().error_message();
    EXPECT_TRUE(stream.Finish().ok());
    return answer->file_descriptor_response();
  }

  FakeService service_;
  std::unique_ptr<GrpcServer> server_;
};

TEST_F(GrpcReflectionTest, ListsTheServicesServed) {
  Start(true);
  ReflectionStream stream(server_->port());
  const auto answer = stream.Ask(ListServices());
  ASSERT_TRUE(answer.has_value()) << stream.Finish().error_message();
  ASSERT_TRUE(answer->has_list_services_response());
  std::multiset<std::string> names;
  for (const auto& s : answer->list_services_response().service()) names.insert(s.name());
  EXPECT_EQ(names, (std::multiset<std::string>{kRlsName, kHealthName,
                                               "grpc.reflection.v1alpha.ServerReflection"}));
  // The same stream takes the next request, as grpcurl's `describe` asks for the files of a
  // service it listed.
  const auto file = stream.Ask(FileContainingSymbol(kRlsName));
  ASSERT_TRUE(file.has_value());
  const ServedFiles files(file->file_descriptor_response());
  EXPECT_NE(files.pool().FindServiceByName(kRlsName), nullptr);
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(GrpcReflectionTest, DescribesRateLimitServiceWithEveryImport) {
  Start(true);
  const ServedFiles files(Describe(kRlsName));
  ASSERT_FALSE(files.names().empty());
  EXPECT_EQ(files.names().front(), "envoy/service/ratelimit/v3/rls.proto");

  const pb::ServiceDescriptor* service = files.pool().FindServiceByName(kRlsName);
  ASSERT_NE(service, nullptr) << "the served files do not build into RateLimitService";
  ASSERT_EQ(service->method_count(), 1);
  const pb::MethodDescriptor* method = service->FindMethodByName("ShouldRateLimit");
  ASSERT_NE(method, nullptr);
  EXPECT_FALSE(method->client_streaming());
  EXPECT_FALSE(method->server_streaming());
  EXPECT_EQ(method->input_type()->full_name(), "envoy.service.ratelimit.v3.RateLimitRequest");
  EXPECT_EQ(method->output_type()->full_name(), "envoy.service.ratelimit.v3.RateLimitResponse");
  // `grpcurl describe` of a message: its fields, as Envoy numbers them.
  const pb::FieldDescriptor* domain = method->input_type()->FindFieldByName("domain");
  ASSERT_NE(domain, nullptr);
  EXPECT_EQ(domain->number(), 1);
  const pb::FieldDescriptor* descriptors = method->input_type()->FindFieldByName("descriptors");
  ASSERT_NE(descriptors, nullptr);
  EXPECT_EQ(descriptors->number(), 2);
  EXPECT_EQ(descriptors->message_type()->full_name(),
            "envoy.extensions.common.ratelimit.v3.RateLimitDescriptor");

  // Every type the service reaches is served as the server was compiled with it.
  for (const pb::Descriptor* type :
       {rls::RateLimitRequest::descriptor(), rls::RateLimitResponse::descriptor()}) {
    const pb::Descriptor* served = files.pool().FindMessageTypeByName(type->full_name());
    ASSERT_NE(served, nullptr) << type->full_name();
    EXPECT_EQ(served->file()->DebugString(), type->file()->DebugString());
  }
}

TEST_F(GrpcReflectionTest, DescribesHealth) {
  Start(true);
  const ServedFiles files(Describe(kHealthName));
  const pb::ServiceDescriptor* service = files.pool().FindServiceByName(kHealthName);
  ASSERT_NE(service, nullptr);
  const pb::MethodDescriptor* check = service->FindMethodByName("Check");
  const pb::MethodDescriptor* watch = service->FindMethodByName("Watch");
  ASSERT_NE(check, nullptr);
  ASSERT_NE(watch, nullptr);
  EXPECT_FALSE(check->server_streaming());
  EXPECT_TRUE(watch->server_streaming());
  EXPECT_EQ(check->input_type()->full_name(), "grpc.health.v1.HealthCheckRequest");
  EXPECT_EQ(service->file()->DebugString(),
            ::grpc::health::v1::HealthCheckRequest::descriptor()->file()->DebugString());
}

TEST_F(GrpcReflectionTest, AnUnknownSymbolIsNotFound) {
  Start(true);
  ReflectionStream stream(server_->port());
  const auto answer = stream.Ask(FileContainingSymbol("no.such.Service"));
  ASSERT_TRUE(answer.has_value()) << stream.Finish().error_message();
  ASSERT_TRUE(answer->has_error_response());
  EXPECT_EQ(answer->error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(GrpcReflectionTest, TurnedOffIsUnimplemented) {
  Start(false);
  ReflectionStream stream(server_->port());
  EXPECT_FALSE(stream.Ask(ListServices()).has_value());
  EXPECT_EQ(stream.Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// Only v1alpha is served: grpcurl (1.8.8 and later) asks v1 first and falls back to v1alpha on
// exactly this answer.
TEST_F(GrpcReflectionTest, V1IsUnimplementedSoClientsFallBackToV1alpha) {
  Start(true);
  ReflectionStream v1(server_->port(), "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
  EXPECT_FALSE(v1.Ask(ListServices()).has_value());
  EXPECT_EQ(v1.Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  ReflectionStream v1alpha(server_->port());
  EXPECT_TRUE(v1alpha.Ask(ListServices()).has_value());
  EXPECT_TRUE(v1alpha.Finish().ok());
}

// Each reflection stream holds a thread of the sync pool while it is open: past the cap, a new
// one is refused at once, and once the open ones close a new one is served again.
TEST_F(GrpcReflectionTest, OpenStreamsCannotGrowThePool) {
  Start(true);
  constexpr int kStreams = kSyncServerThreads + 4;
  std::vector<std::unique_ptr<ReflectionStream>> open;
  int served = 0;
  int refused = 0;
  for (int i = 0; i < kStreams; ++i) {
    auto stream = std::make_unique<ReflectionStream>(server_->port());
    if (stream->Ask(ListServices()).has_value()) {
      ++served;
      open.push_back(std::move(stream));  // kept open: its handler waits for the next request
    } else {
      EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      ++refused;
    }
  }
  EXPECT_GE(served, 1);
  EXPECT_LT(served, kSyncServerThreads);  // a poller always keeps one thread
  EXPECT_EQ(served + refused, kStreams);

  for (auto& stream : open) EXPECT_TRUE(stream->Finish().ok());
  open.clear();
  // The handlers' threads return to the pool after their calls' status went out.
  EXPECT_TRUE(sluice::testing::WaitFor([&] {
    ReflectionStream stream(server_->port());
    const bool answered = stream.Ask(ListServices()).has_value();
    stream.Finish();
    return answered;
  }));
}

// A stream its client keeps open would hold Shutdown() until the grace ends: it is ended at
// once, as health watches are.
TEST_F(GrpcReflectionTest, AnOpenStreamDoesNotHoldShutdown) {
  constexpr auto kGrace = 60s;
  auto server = GrpcServer::Start(
      {.address = "127.0.0.1:0", .threads = 1, .shutdown_grace = kGrace}, service_);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  ReflectionStream stream((*server)->port());
  ASSERT_TRUE(stream.Ask(ListServices()).has_value());
  const auto start = std::chrono::steady_clock::now();
  (*server)->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kGrace / 2);
  EXPECT_FALSE(stream.Ask(ListServices()).has_value());
  EXPECT_FALSE(stream.Finish().ok());
}

}  // namespace
}  // namespace sluice::server::test
