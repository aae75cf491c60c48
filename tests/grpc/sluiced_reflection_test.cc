// --grpc-reflection on the real sluiced, as a process: on by default (grpcurl list/describe
// work as against envoyproxy/ratelimit, which always serves reflection), off by the flag or by
// SLUICE_GRPC_REFLECTION, when the reflection method is UNIMPLEMENTED and the Envoy service is
// still served; and SIGTERM is not held by an open reflection stream. This test does not link
// the gRPC front end: only the process serves reflection.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "grpc/reflection_client.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"

namespace sluice::server::test {
namespace {

using sluice::testing::SluicedProcess;

constexpr char kConfig[] =
    "domain: reflect\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
    "requests_per_unit: 3}\n";

class SluicedReflection : public ::testing::Test {
 protected:
  std::unique_ptr<SluicedProcess> Start(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--grpc", "127.0.0.1:0", "--threads", "1"});
    auto sluiced =
        sluice::testing::StartSluiced(dir_.Write("reflect.yaml", kConfig).string(), extra);
    EXPECT_GT(sluiced->GrpcPort(), 0) << sluiced->Log();
    return sluiced;
  }

  TempConfigDir dir_{"sluiced-reflection"};
};

TEST_F(SluicedReflection, HelpShowsTheFlagItsDefaultAndItsVariable) {
  SluicedProcess help({"--help"}, false);
  EXPECT_EQ(help.WaitExit(), 0);
  const std::string text = help.Log();
  const size_t at = text.find("--grpc-reflection");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string option = text.substr(at, text.find("\n  -", at) - at);
  EXPECT_NE(option.find("{on,off}=on"), std::string::npos) << option;
  EXPECT_NE(option.find("SLUICE_GRPC_REFLECTION"), std::string::npos) << option;

  SluicedProcess bad(
      {"--config", dir_.Write("reflect.yaml", kConfig).string(), "--grpc-reflection", "yes"},
      false);
  EXPECT_NE(bad.WaitExit(), 0) << bad.Log();
}

TEST_F(SluicedReflection, OnByDefault) {
  auto sluiced = Start({});
  EXPECT_TRUE(sluiced->WaitForLog("grpc.health.v1.Health, with reflection;")) << sluiced->Log();
  ReflectionStream stream(sluiced->GrpcPort());
  const auto answer = stream.Ask(ListServices());
  ASSERT_TRUE(answer.has_value()) << stream.Finish().error_message();
  std::set<std::string> names;
  for (const auto& s : answer->list_services_response().service()) names.insert(s.name());
  EXPECT_TRUE(names.contains("envoy.service.ratelimit.v3.RateLimitService"));
  EXPECT_TRUE(names.contains("grpc.health.v1.Health"));

  const auto file = stream.Ask(FileContainingSymbol("envoy.service.ratelimit.v3.RateLimitService"));
  ASSERT_TRUE(file.has_value());
  const ServedFiles files(file->file_descriptor_response());
  const auto* method =
      files.pool().FindMethodByName("envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit");
  ASSERT_NE(method, nullptr);
  EXPECT_EQ(method->input_type()->full_name(), "envoy.service.ratelimit.v3.RateLimitRequest");
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(SluicedReflection, OffByFlagOrEnvironment) {
  for (const bool by_env : {false, true}) {
    if (by_env) setenv("SLUICE_GRPC_REFLECTION", "off", 1);
    auto sluiced = by_env ? Start({}) : Start({"--grpc-reflection", "off"});
    unsetenv("SLUICE_GRPC_REFLECTION");
    EXPECT_TRUE(sluiced->WaitForLog("grpc.health.v1.Health; at most")) << sluiced->Log();
    ReflectionStream stream(sluiced->GrpcPort());
    EXPECT_FALSE(stream.Ask(ListServices()).has_value()) << "by env: " << by_env;
    EXPECT_EQ(stream.Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << "by env: " << by_env;
  }
}

// SIGTERM with a reflection stream its client keeps open: the stream is ended (CANCELLED)
// rather than waited for, and sluiced exits 0, well within its grace of 60 s. The client waits
// on the stream as a real one does: gRPC's C++ client handles a connection's frames only while
// someone waits on it (or every 5 s), and sluiced's shutdown waits for its GOAWAY to be heard.
TEST_F(SluicedReflection, AnOpenStreamDoesNotHoldSigterm) {
  auto sluiced = Start({"--shutdown-grace-ms", "60000"});
  auto stream = std::make_unique<ReflectionStream>(sluiced->GrpcPort());
  ASSERT_TRUE(stream->Ask(ListServices()).has_value()) << sluiced->Log();
  const auto start = std::chrono::steady_clock::now();
  sluiced->Signal(SIGTERM);
  EXPECT_FALSE(stream->ReadsAnotherMessage());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15))
      << "the stream lasted until its own deadline";
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  stream.reset();  // closes the connection
  EXPECT_EQ(sluiced->WaitExit(std::chrono::seconds(30)), 0) << sluiced->Log();
}

}  // namespace
}  // namespace sluice::server::test
