// Shared by the gRPC front end tests: a scripted RateLimitService, a GrpcServer on a free port
// with a client generated from sluice's .proto, and limits to point statuses at.
#ifndef SLUICE_TESTS_GRPC_GRPC_TEST_UTIL_H_
#define SLUICE_TESTS_GRPC_GRPC_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/grpc_server.h"
#include "service/rate_limit_service.h"

namespace sluice::server::test {

namespace rls = envoy::service::ratelimit::v3;

// Answers every Check() with `response` (or `error`), recording the requests it was asked.
// Hold() makes Check() wait until Release(), to have a call in flight (only the calls of one
// domain, if it names one).
class FakeService : public RateLimitService {
 public:
  Result<CheckResponse> Check(const CheckRequest& request) override {
    std::unique_lock<std::mutex> lock(mu_);
    requests_.push_back(request);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock,
             [&] { return !hold_ || (!hold_domain_.empty() && request.domain != hold_domain_); });
    if (!error_.empty()) return MakeError(error_);
    return response_;
  }
  Result<void> Reload(std::shared_ptr<const Config>) override { return {}; }
  std::shared_ptr<const Config> config() const override { return nullptr; }
  bool Ready() override {
    ready_calls_.fetch_add(1);
    return ready_.load();
  }
  void StartDraining() override { ready_.store(false); }
  StoreStats StoreTotals() const override { return {}; }
  Result<CounterState> State(std::string_view,
                             const std::vector<std::pair<std::string, std::string>>&) override {
    return MakeError("not in the fake");
  }
  Result<void> Reset(std::string_view,
                     const std::vector<std::pair<std::string, std::string>>&) override {
    return MakeError("not in the fake");
  }

  // What Ready() says from now on, and how often it was asked.
  void SetReady(bool ready) { ready_.store(ready); }
  int ready_calls() const { return ready_calls_.load(); }

  void Answer(CheckResponse response) {
    const std::lock_guard<std::mutex> lock(mu_);
    response_ = std::move(response);
    error_.clear();
  }
  void Fail(std::string message) {
    const std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(message);
  }
  void Hold(std::string domain = "") {
    const std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
    hold_domain_ = std::move(domain);
  }
  void Release() {
    const std::lock_guard<std::mutex> lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }
  // False if fewer than n calls entered within the timeout.
  bool WaitEntered(int n, std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return entered_ >= n; });
  }
  int entered() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return entered_;
  }
  std::vector<CheckRequest> requests() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  CheckResponse response_;
  std::string error_;
  bool hold_ = false;
  std::string hold_domain_;
  int entered_ = 0;
  std::vector<CheckRequest> requests_;
  std::atomic<bool> ready_{true};
  std::atomic<int> ready_calls_{0};
};

// A limit as the config would hold it (only what the gRPC translation reads).
inline std::shared_ptr<const Limit> MakeLimit(std::string name, int64_t requests_per_unit,
                                              Unit unit, LimitKind kind = LimitKind::kLimited) {
  auto limit = std::make_shared<Limit>();
  limit->id = "test|" + name;
  limit->domain = "test";
  limit->name = std::move(name);
  limit->kind = kind;
  limit->period = LimitPeriod::Of(unit);
  limit->requests_per_unit = requests_per_unit;
  return limit;
}

// A status of a matched limit (the response keeps the limit alive through `owned`).
inline DescriptorStatus StatusOf(std::shared_ptr<const Limit> limit, Code code, int64_t remaining,
                                 Duration reset_after) {
  DescriptorStatus s;
  s.code = code;
  s.limit = limit.get();
  s.owned = std::move(limit);
  s.remaining = remaining;
  s.reset_after = reset_after;
  s.over_limit = code == Code::kOverLimit;
  return s;
}

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(HeaderOptions{}, 2); }

  void StartServer(HeaderOptions headers, int threads) {
    server_.reset();
    auto server = GrpcServer::Start(
        {.address = "127.0.0.1:0", .threads = threads, .headers = headers}, service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials());
    stub_ = rls::RateLimitService::NewStub(channel_);
  }

  std::string Target() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  grpc::Status Call(const rls::RateLimitRequest& request, rls::RateLimitResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ShouldRateLimit(&ctx, request, response);
  }

  // Calls and returns the one request the service saw; fails the test on an RPC error.
  CheckRequest Translate(const rls::RateLimitRequest& request) {
    rls::RateLimitResponse response;
    const grpc::Status status = Call(request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    const std::vector<CheckRequest> seen = service_.requests();
    EXPECT_EQ(seen.size(), 1u);
    return seen.empty() ? CheckRequest{} : seen.back();
  }

  FakeService service_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
};

// A one-descriptor request: {domain, [[key=value]]}.
inline rls::RateLimitRequest OneDescriptor(std::string domain, std::string key, std::string value) {
  rls::RateLimitRequest r;
  r.set_domain(std::move(domain));
  auto* e = r.add_descriptors()->add_entries();
  e->set_key(std::move(key));
  e->set_value(std::move(value));
  return r;
}

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_GRPC_GRPC_TEST_UTIL_H_
