// gRPC server reflection on sluiced's gRPC server, asked as grpcurl asks it: a bidi stream on
// /grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo, with requests and answers
// from the test's own copy of the protocol's messages (proto/sluice_test/reflection_v1alpha.proto)
// through a generic stub. The services listed, and each service described from the
// FileDescriptorProtos served: parsed, built into a pool of their own (so the imports a client
// needs are all there), and compared with what the server was compiled from. Then: turned off,
// the method is UNIMPLEMENTED; open streams beyond the sync pool's cap are refused
// RESOURCE_EXHAUSTED instead of growing it.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/descriptor_database.h>
#include <grpcpp/generic/generic_stub.h>
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
#include "sluice_test/reflection_v1alpha.pb.h"
#include "support/wait_for.h"

namespace sluice::server::test {
namespace {

using namespace std::chrono_literals;
namespace pb = ::google::protobuf;
namespace refl = ::sluice_test::reflection::v1alpha;

constexpr char kMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
constexpr char kRlsName[] = "envoy.service.ratelimit.v3.RateLimitService";
constexpr char kHealthName[] = "grpc.health.v1.Health";

// One ServerReflectionInfo stream, driven step by step on its own completion queue. A step
// that fails (the stream ended, or its 20 s deadline passed) makes the stream dead; Finish()
// then says why.
class ReflectionStream {
 public:
  explicit ReflectionStream(int port)
      : channel_(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials())),
        stub_(channel_) {
    ctx_.set_deadline(std::chrono::system_clock::now() + 20s);
    call_ = stub_.PrepareCall(&ctx_, kMethod, &cq_);
    call_->StartCall(this);
    alive_ = Step();
  }
  ~ReflectionStream() {
    if (!finished_) {
      ctx_.TryCancel();
      Finish();
    }
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  // Sends `request` and returns the server's answer; nullopt if the stream is dead.
  std::optional<refl::ServerReflectionResponse> Ask(const refl::ServerReflectionRequest& request) {
    if (!alive_) return std::nullopt;
    const std::string bytes = request.SerializeAsString();
    grpc::Slice slice(bytes);
    call_->Write(grpc::ByteBuffer(&slice, 1), this);
    grpc::ByteBuffer answer;
    if (!(alive_ = Step())) return std::nullopt;
    call_->Read(&answer, this);
    if (!(alive_ = Step())) return std::nullopt;
    std::vector<grpc::Slice> slices;
    if (!answer.Dump(&slices).ok()) return std::nullopt;
    std::string joined;
    for (const grpc::Slice& s : slices) joined.append(s.begin(), s.end());
    refl::ServerReflectionResponse response;
    if (!response.ParseFromString(joined)) return std::nullopt;
    return response;
  }

  // Half-closes (if the stream is alive) and returns the call's status.
  grpc::Status Finish() {
    if (alive_) {
      call_->WritesDone(this);
      Step();
      alive_ = false;
    }
    grpc::Status status;
    call_->Finish(&status, this);
    Step();
    finished_ = true;
    return status;
  }

 private:
  // Waits for the one operation in flight; whether it succeeded.
  bool Step() {
    void* tag = nullptr;
    bool ok = false;
    return cq_.Next(&tag, &ok) && ok;
  }

  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool alive_ = false;
  bool finished_ = false;
};

refl::ServerReflectionRequest ListServices() {
  refl::ServerReflectionRequest r;
  r.set_list_services("*");
  return r;
}

refl::ServerReflectionRequest FileContainingSymbol(const std::string& symbol) {
  refl::ServerReflectionRequest r;
  r.set_file_containing_symbol(symbol);
  return r;
}

// The files of a file_descriptor_response, parsed, in a pool of their own: a file whose
// imports were not all served fails to build, and the pool finds nothing in it.
class ServedFiles {
 public:
  explicit ServedFiles(const refl::FileDescriptorResponse& response) : pool_(&db_) {
    for (const std::string& bytes : response.file_descriptor_proto()) {
      pb::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes)) << "not a FileDescriptorProto";
      names_.push_back(file.name());
      EXPECT_TRUE(db_.Add(file)) << file.name() << " served twice or inconsistently";
    }
  }
  const pb::DescriptorPool& pool() const { return pool_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  pb::SimpleDescriptorDatabase db_;
  pb::DescriptorPool pool_;
  std::vector<std::string> names_;
};

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

}  // namespace
}  // namespace sluice::server::test
