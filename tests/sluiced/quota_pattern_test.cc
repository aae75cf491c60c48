// Envoy's quota pattern against the real sluiced, over gRPC (a client generated from the RLS
// proto) and over HTTP, with every algorithm, on the memory store and on Redis: a hits_addend 0
// check before the request and, when it passes, the real hits sent after it (Envoy's
// apply_on_stream_done). As upstream's integration-test/scripts/token-quota.sh asserts, with
// 2 per minute the 4th check is refused -- with over_limit_hits: count, set per limit or for
// the whole server. And the HTTP API's "charge": true, which counts what was done under the
// default drop mode: an LLM gateway's "check the estimate, charge the actual".
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "support/http_test_client.h"
#include "support/redis_server.h"
#include "support/sluiced_process.h"

namespace sluice::testing {
namespace {

namespace rls = envoy::service::ratelimit::v3;
using Json = nlohmann::json;

constexpr const char* kAlgorithms[] = {"token_bucket",       "gcra",
                                       "leaky_bucket",       "fixed_window",
                                       "sliding_window_log", "sliding_window_counter"};

// One rule per algorithm, 2 per minute: service=<algorithm>.
std::string Config(bool count_per_limit) {
  std::string yaml = "domain: quota\ndescriptors:\n";
  for (const char* a : kAlgorithms) {
    yaml +=
        std::string("  - key: service\n    value: ") + a +
        "\n    rate_limit:\n      unit: minute\n      requests_per_unit: 2\n      algorithm: " + a +
        "\n";
    if (count_per_limit) yaml += "      over_limit_hits: count\n";
  }
  return yaml;
}

enum class Counting { kDefault, kPerLimit, kServerFlag };

struct Case {
  bool redis;
  Counting counting;
};

std::string Name(const ::testing::TestParamInfo<Case>& info) {
  const char* counting[] = {"drop_default", "count_per_limit", "count_server_flag"};
  return std::string(info.param.redis ? "redis_" : "memory_") +
         counting[static_cast<int>(info.param.counting)];
}

class QuotaPattern : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-quota-" + std::to_string(getpid()) + "-" +
            std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::create_directories(dir_);
    const std::string file = (dir_ / "quota.yaml").string();
    std::ofstream(file) << Config(GetParam().counting == Counting::kPerLimit);
    std::vector<std::string> args = {"--config", file,          "--http",    "127.0.0.1:0",
                                     "--grpc",   "127.0.0.1:0", "--threads", "2"};
    if (GetParam().counting == Counting::kServerFlag) {
      args.insert(args.end(), {"--over-limit-hits", "count"});
    }
    if (GetParam().redis) {
      redis_.emplace();
      args.insert(args.end(), {"--store", "redis://127.0.0.1:" + std::to_string(redis_->port())});
    }
    sluiced_ = std::make_unique<SluicedProcess>(args);
    ASSERT_GT(sluiced_->port(), 0) << sluiced_->Log();
    const int grpc_port = sluiced_->GrpcPort();
    ASSERT_GT(grpc_port, 0) << sluiced_->Log();
    stub_ = rls::RateLimitService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(grpc_port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  bool Counts() const { return GetParam().counting != Counting::kDefault; }

  // ShouldRateLimit for [service=<value>] with the descriptor's own hits_addend `hits` (the
  // wrapper Envoy sets for a quota check: a request-level 0 means 1): true for OK.
  bool GrpcCheck(const std::string& value, uint64_t hits) {
    rls::RateLimitRequest request;
    request.set_domain("quota");
    auto* descriptor = request.add_descriptors();
    descriptor->mutable_hits_addend()->set_value(hits);
    auto* entry = descriptor->add_entries();
    entry->set_key("service");
    entry->set_value(value);
    rls::RateLimitResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status status = stub_->ShouldRateLimit(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.overall_code() == rls::RateLimitResponse::OK;
  }

  HttpResponse Post(const std::string& value, int hits, bool charge = false) {
    HttpClient client(sluiced_->port());
    const std::string body = R"({"domain":"quota","hits":)" + std::to_string(hits) +
                             (charge ? R"(,"charge":true)" : "") +
                             R"(,"descriptors":[{"entries":[{"key":"service","value":")" + value +
                             R"("}]}]})";
    auto r = client.Request("POST", "/v1/check", body, {});
    EXPECT_TRUE(r.has_value());
    return r.value_or(HttpResponse{});
  }

  std::filesystem::path dir_;
  std::optional<RedisServer> redis_;
  std::unique_ptr<SluicedProcess> sluiced_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
};

// The repro: five times, a cost-0 check and, when it passes, the real hit.
TEST_P(QuotaPattern, OverGrpc) {
  for (const char* a : kAlgorithms) {
    std::vector<bool> checks;
    for (int i = 0; i < 5; ++i) {
      const bool ok = GrpcCheck(a, 0);
      checks.push_back(ok);
      if (ok) GrpcCheck(a, 1);  // apply_on_stream_done: the answer is not used
    }
    // Counting every hit, the 3rd charge goes into debt and the 4th check is refused; dropping
    // hits over the limit (sluice's default), the charge is refused and never counted.
    const std::vector<bool> expected =
        Counts() ? std::vector<bool>{true, true, true, false, false} : std::vector<bool>(5, true);
    EXPECT_EQ(checks, expected) << a;
  }
}

TEST_P(QuotaPattern, OverHttp) {
  for (const char* a : kAlgorithms) {
    std::vector<int> checks;
    for (int i = 0; i < 5; ++i) {
      const HttpResponse check = Post(a, 0);
      checks.push_back(check.status);
      if (check.status == 200) Post(a, 1);
    }
    const std::vector<int> expected =
        Counts() ? std::vector<int>{200, 200, 200, 429, 429} : std::vector<int>(5, 200);
    EXPECT_EQ(checks, expected) << a;
  }
}

// "charge": true counts what was done whatever the mode: checked with the estimate (1), charged
// the actual (5, over the limit of 2): the answer is 200 with nothing remaining, and the key is
// in debt -- a cost-0 check is refused, with a Retry-After.
TEST_P(QuotaPattern, HttpChargeCountsBeyondTheLimit) {
  for (const char* a : kAlgorithms) {
    const std::string key = std::string(a);
    EXPECT_EQ(Post(key, 1).status, 200) << a;
    const HttpResponse charged = Post(key, 5, /*charge=*/true);
    EXPECT_EQ(charged.status, 200) << a << ": a charge is not refused";
    const Json body = Json::parse(charged.body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << charged.body;
    EXPECT_EQ(body["overall"], "OK") << a;
    EXPECT_EQ(body["statuses"][0]["remaining"], 0) << a << ": " << charged.body;
    const HttpResponse next = Post(key, 0);
    EXPECT_EQ(next.status, 429) << a << ": in debt, even a cost-0 check is over";
    EXPECT_TRUE(next.Header("Retry-After").has_value()) << a;
  }
}

// The migration one-liner (docs/envoy.md, "Migrating from envoyproxy/ratelimit"): with
// --over-limit-hits count --default-algorithm fixed_window --grpc-response-headers upstream a
// rule that names no algorithm answers with upstream's numbers: the window's remaining, the time
// to the window's end, 0 left once over, and upstream's RateLimit-Limit/-Remaining/-Reset.
TEST(UpstreamSettings, GiveUpstreamsNumbers) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("sluice-upstream-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "u.yaml").string();
  std::ofstream(file) << "domain: u\ndescriptors:\n  - key: k\n"
                         "    rate_limit: {unit: minute, requests_per_unit: 3}\n";
  SluicedProcess sluiced({"--config", file, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
                          "--over-limit-hits", "count", "--default-algorithm", "fixed_window",
                          "--grpc-response-headers", "upstream"});
  ASSERT_GT(sluiced.port(), 0) << sluiced.Log();
  const int grpc_port = sluiced.GrpcPort();
  ASSERT_GT(grpc_port, 0) << sluiced.Log();
  auto stub = rls::RateLimitService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(grpc_port), grpc::InsecureChannelCredentials()));
  const auto call = [&](uint32_t hits) {
    rls::RateLimitRequest request;
    request.set_domain("u");
    request.set_hits_addend(hits);
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("k");
    entry->set_value("v");
    rls::RateLimitResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    EXPECT_TRUE(stub->ShouldRateLimit(&ctx, request, &response).ok());
    return response;
  };
  const auto wall_s = [] {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  // All three calls in one window: not in the last seconds of a minute.
  while (wall_s() % 60 >= 57) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t before = wall_s();
  const rls::RateLimitResponse first = call(1);
  const int64_t after = wall_s();
  ASSERT_EQ(first.statuses_size(), 1);
  EXPECT_EQ(first.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(first.statuses(0).limit_remaining(), 2u);
  // Until the end of the epoch-aligned minute (whole seconds, taken around the call).
  const int64_t reset = first.statuses(0).duration_until_reset().seconds();
  EXPECT_GE(reset, 60 - after % 60 - 1);
  EXPECT_LE(reset, 60 - before % 60);
  std::map<std::string, std::string> headers;
  for (const auto& h : first.response_headers_to_add()) headers[h.key()] = h.value();
  EXPECT_EQ(headers["RateLimit-Limit"], "3");
  EXPECT_EQ(headers["RateLimit-Remaining"], "2");
  EXPECT_EQ(headers.size(), 3u) << "upstream's three headers, nothing else";
  // 1 + 4 hits: over, counted (upstream counts every hit), nothing left.
  const rls::RateLimitResponse over = call(4);
  EXPECT_EQ(over.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
  // The window's count is now over its limit: even one more hit is over.
  EXPECT_EQ(call(1).overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Stores, QuotaPattern,
    ::testing::Values(Case{false, Counting::kDefault}, Case{false, Counting::kPerLimit},
                      Case{false, Counting::kServerFlag}, Case{true, Counting::kDefault},
                      Case{true, Counting::kPerLimit}, Case{true, Counting::kServerFlag}),
    Name);

}  // namespace
}  // namespace sluice::testing
