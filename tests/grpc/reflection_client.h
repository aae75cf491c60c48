// A gRPC server reflection client for the tests, as grpcurl asks: a bidi stream on
// /grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo through a generic stub, with
// requests and answers from the tests' own copy of the protocol's messages
// (tests/grpc/proto/sluice_test/reflection_v1alpha.proto), and the FileDescriptorProtos an
// answer carries built into a pool of their own.
#ifndef SLUICE_TESTS_GRPC_REFLECTION_CLIENT_H_
#define SLUICE_TESTS_GRPC_REFLECTION_CLIENT_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/descriptor_database.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice_test/reflection_v1alpha.pb.h"

namespace sluice::server::test {

namespace refl = ::sluice_test::reflection::v1alpha;

inline constexpr char kReflectionMethod[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// One ServerReflectionInfo stream, driven step by step on its own completion queue. A step
// that fails (the stream ended, or its 20 s deadline passed) makes the stream dead; Finish()
// then says why.
class ReflectionStream {
 public:
  // `method`: another path, such as reflection v1's.
  explicit ReflectionStream(int port, const std::string& method = kReflectionMethod)
      : channel_(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials())),
        stub_(channel_) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    call_ = stub_.PrepareCall(&ctx_, method, &cq_);
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

  // Waits for the server's next message without asking anything; false once the stream ended.
  bool ReadsAnotherMessage() {
    if (!alive_) return false;
    grpc::ByteBuffer answer;
    call_->Read(&answer, this);
    return alive_ = Step();
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

inline refl::ServerReflectionRequest ListServices() {
  refl::ServerReflectionRequest r;
  r.set_list_services("*");
  return r;
}

inline refl::ServerReflectionRequest FileContainingSymbol(const std::string& symbol) {
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
      ::google::protobuf::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes)) << "not a FileDescriptorProto";
      names_.push_back(file.name());
      EXPECT_TRUE(db_.Add(file)) << file.name() << " served twice or inconsistently";
    }
  }
  const ::google::protobuf::DescriptorPool& pool() const { return pool_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  ::google::protobuf::SimpleDescriptorDatabase db_;
  ::google::protobuf::DescriptorPool pool_;
  std::vector<std::string> names_;
};

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_GRPC_REFLECTION_CLIENT_H_
