// ShouldRateLimit on a leaky-bucket shaper: the OK answer is held for the request's delay, so
// that a caller which forwards on OK (Envoy) sends its upstream one request per 1/r; holding
// costs no thread; max_delay refuses at once; Shutdown releases held answers. The real service
// on the memory store and the real clock (the spacing is in real time), one server thread,
// many calls in flight from one asynchronous client.
//
// Tolerance (release build, a shared 2-core machine): an answer may come 5 ms early at most
// (gRPC's timers round to the millisecond and the client's clock reads the answer after it was
// sent) and 40 ms late (scheduling under load); the schedule itself is exact.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "grpc/grpc_test_util.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server::test {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// `paced`: 20/s (one release every 50 ms), a queue of 40. `bounded`: the same, but a request
// that would wait over 200 ms is refused. `fast`: 100/s, a queue of 300. `slow`: 1/s, a queue
// of 10. `open`: no limit.
constexpr char kConfig[] = R"yaml(
domain: shape
descriptors:
  - key: paced
    rate_limit: {unit: second, requests_per_unit: 20, algorithm: leaky_bucket, burst: 40,
                 shaper: true}
  - key: fast
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: leaky_bucket, burst: 300,
                 shaper: true}
  - key: bounded
    rate_limit: {unit: second, requests_per_unit: 20, algorithm: leaky_bucket, burst: 40,
                 shaper: true, max_delay: 200ms}
  - key: slow
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky_bucket, burst: 10,
                 shaper: true}
  - key: open
    rate_limit: {unlimited: true}
)yaml";

constexpr milliseconds kEarly{5};
// How late a held answer may go out: its timer fires on the server's event loop, which shares
// two cores with the other tests and builds in CI (47 ms seen there). The schedule itself is the
// lower bound (never early), which load cannot break; this bound catches an answer held for
// many intervals too long.
constexpr milliseconds kLateUnderLoad{500};

class GrpcShaping : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("shape.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, ServiceOptions{}, nullptr);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    // A held call keeps its stream: room for every call these tests hold at once.
    auto server = GrpcServer::Start(
        {.address = "127.0.0.1:0", .threads = 1, .max_concurrent_streams = 1000}, *service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    // Connected before any test times an answer: the connection is not the server's delay.
    ASSERT_TRUE(
        channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
    stub_ = rls::RateLimitService::NewStub(channel_);
  }
  void TearDown() override { server_.reset(); }

  // Calls in flight at once; each one's answer and when it came.
  struct Answered {
    grpc::Status status;
    rls::RateLimitResponse response;
    Steady::time_point at;
  };
  struct Flight {
    grpc::ClientContext ctx;
    rls::RateLimitResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<rls::RateLimitResponse>> reader;
  };
  void Send(const std::string& key, const std::string& value) {
    auto f = std::make_unique<Flight>();
    f->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    f->reader = stub_->AsyncShouldRateLimit(&f->ctx, OneDescriptor("shape", key, value), &cq_);
    f->reader->Finish(&f->response, &f->status, f.get());
    flights_.push_back(std::move(f));
  }
  // The next answer to come, in the order they come.
  Answered Next() {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq_.Next(&tag, &ok));
    auto* f = static_cast<Flight*>(tag);
    return {f->status, f->response, Steady::now()};
  }

  TempConfigDir dir_{"grpc-shaping"};
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<Flight>> flights_;
};

TEST_F(GrpcShaping, ConcurrentCallsAreAnsweredOneIntervalApart) {
  constexpr int kCalls = 20;
  constexpr milliseconds kInterval{50};
  // Every check is asked after this, so no answer may come before sent + its place x interval.
  // The anchor is not the first answer: under a sanitizer the first call's own round trip can
  // take longer than the held ones', which would make every later answer look early.
  const Steady::time_point sent = Steady::now();
  for (int i = 0; i < kCalls; ++i) Send("paced", "u1");
  std::vector<Steady::time_point> at;
  for (int i = 0; i < kCalls; ++i) {
    const Answered a = Next();
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    ASSERT_EQ(a.response.overall_code(), rls::RateLimitResponse::OK) << i;
    at.push_back(a.at);
  }
  // The k-th answer is due k intervals after the first check was asked (the first is not held).
  std::chrono::microseconds earliest{0}, latest{0};
  for (int k = 0; k < kCalls; ++k) {
    const auto off = std::chrono::duration_cast<std::chrono::microseconds>(at[k] - sent) -
                     std::chrono::microseconds(k * kInterval);
    earliest = std::min(earliest, off);
    latest = std::max(latest, off);
    EXPECT_GE(off, -kEarly) << "answer " << k;
    EXPECT_LE(off, kLateUnderLoad) << "answer " << k;
  }
  RecordProperty("off_schedule_us",
                 std::to_string(earliest.count()) + ".." + std::to_string(latest.count()));
}

TEST_F(GrpcShaping, HeldCallsTakeNoThreadAndMaxDelayRefusesAtOnce) {
  // 200 calls at 100/s on the server's one thread: the last is due 1.99 s from now.
  constexpr int kHeld = 200;
  const Steady::time_point start = Steady::now();
  for (int i = 0; i < kHeld; ++i) Send("fast", "u1");
  // Meanwhile an unlimited call and the bounded shaper's are answered at once: four fit in
  // 200 ms (waits 0, 50, 100, 150, 200 ms: five), the sixth is refused.
  Send("open", "x");
  for (int i = 0; i < 6; ++i) Send("bounded", "u1");
  int ok = 0, refused = 0;
  Steady::time_point last_prompt = start, last = start;
  for (int i = 0; i < kHeld + 7; ++i) {
    const Answered a = Next();
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    if (a.response.overall_code() == rls::RateLimitResponse::OVER_LIMIT) {
      ++refused;
      last_prompt = std::max(last_prompt, a.at);
      continue;
    }
    ++ok;
    last = a.at;
  }
  EXPECT_EQ(refused, 1) << "only the bounded shaper's sixth call waits over 200 ms";
  EXPECT_EQ(ok, kHeld + 6);
  EXPECT_LT(last_prompt - start, milliseconds(500)) << "the refusal was not held";
  EXPECT_GE(last - start, milliseconds(1990) - kEarly) << "the last held call";
}

TEST_F(GrpcShaping, AnUnheldCallIsAnsweredWhileManyAreHeld) {
  for (int i = 0; i < 100; ++i) Send("slow", "u" + std::to_string(i % 10));  // up to 9 s each
  // The first of each key is not held: 10 answers come at once.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Next().status.ok());
  const Steady::time_point asked = Steady::now();
  Send("open", "x");
  const Answered open = Next();
  ASSERT_TRUE(open.status.ok());
  EXPECT_EQ(open.response.overall_code(), rls::RateLimitResponse::OK);
  EXPECT_LT(open.at - asked, milliseconds(500)) << "the one server thread is free";
  // Shutdown releases the 90 held answers now, not over the next 9 s.
  const Steady::time_point stop = Steady::now();
  server_->Shutdown();
  for (int i = 0; i < 90; ++i) {
    const Answered a = Next();
    ASSERT_TRUE(a.status.ok()) << i << ": " << a.status.error_message();
    EXPECT_EQ(a.response.overall_code(), rls::RateLimitResponse::OK);
  }
  EXPECT_LT(Steady::now() - stop, milliseconds(2000));
}

}  // namespace
}  // namespace sluice::server::test
