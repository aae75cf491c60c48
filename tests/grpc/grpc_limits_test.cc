// The gRPC front end's resource limits, each seen the way a client sees it: real gRPC clients
// and a raw HTTP/2 client (raw_http2.h) over loopback, against a scripted service. Every wait is
// on a condition with a deadline.
#include "grpc/grpc_limits.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "grpc/grpc_test_util.h"
#include "grpc/grpc_translate.h"
#include "grpc/raw_http2.h"
#include "support/wait_for.h"

namespace sluice::server::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using sluice::testing::WaitFor;

// A channel with a connection of its own (gRPC otherwise shares one among channels to a target).
std::shared_ptr<grpc::Channel> OwnChannel(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

grpc::Status CallOn(const std::shared_ptr<grpc::Channel>& channel,
                    const rls::RateLimitRequest& request, std::chrono::milliseconds timeout = 10s) {
  auto stub = rls::RateLimitService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  rls::RateLimitResponse response;
  return stub->ShouldRateLimit(&ctx, request, &response);
}

// A call in flight on its own thread.
std::future<grpc::Status> CallAsync(std::shared_ptr<grpc::Channel> channel,
                                    rls::RateLimitRequest request) {
  return std::async(std::launch::async, [channel = std::move(channel), request] {
    return CallOn(channel, request, 30s);
  });
}

// A FakeService that can also park the calls of domain "held" without blocking the handler
// thread (FakeService::Hold blocks it, and gRPC may hand the next call to that thread's queue):
// their answers go out on Unpark().
class ParkingService : public FakeService {
 public:
  void CheckAsync(const CheckRequest& request, CheckCallback done) override {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (parking_ && request.domain == "held") {
        parked_.push_back(std::move(done));
        ++count_;
        cv_.notify_all();
        return;
      }
    }
    FakeService::CheckAsync(request, std::move(done));
  }
  void Park() {
    const std::lock_guard<std::mutex> lock(mu_);
    parking_ = true;
  }
  void Unpark() {
    std::vector<CheckCallback> parked;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      parking_ = false;
      parked.swap(parked_);
    }
    for (auto& done : parked) done(CheckResponse{});
  }
  bool WaitParked(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 20s, [&] { return count_ >= n; });
  }
  int parked() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool parking_ = false;
  int count_ = 0;  // ever parked
  std::vector<CheckCallback> parked_;
};

// Answers the parked and held calls when a test ends, even at a failed assertion: declared
// after the calls' futures, it runs before their destructors wait for them.
struct ReleaseAtExit {
  ParkingService& service;
  ~ReleaseAtExit() {
    service.Unpark();
    service.Release();
  }
};

class GrpcLimitsTest : public ::testing::Test {
 protected:
  void Start(GrpcServerOptions options) {
    options.address = "127.0.0.1:0";
    auto server = GrpcServer::Start(options, service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
  }
  int port() const { return server_->port(); }

  ParkingService service_;
  std::unique_ptr<GrpcServer> server_;
};

// --- message size ------------------------------------------------------------------------------

// The largest request that reaches the service's bounds both ways (grpc_limits.h): every count
// at its bound with one-byte entries, plus one descriptor with every size at its bound.
rls::RateLimitRequest LargestBoundedRequest() {
  rls::RateLimitRequest r;
  r.set_domain(std::string(kMaxConfiguredDomainBytes, 'd'));
  r.set_hits_addend(UINT32_MAX);
  const auto add = [&](size_t key_bytes, size_t value_bytes) {
    auto* d = r.add_descriptors();
    for (size_t j = 0; j < kCheckLimits.max_entries; ++j) {
      auto* e = d->add_entries();
      e->set_key(std::string(key_bytes, 'k'));
      e->set_value(std::string(value_bytes, 'v'));
    }
    d->mutable_limit()->set_requests_per_unit(UINT32_MAX);
    d->mutable_limit()->set_unit(envoy::type::v3::YEAR);
    d->mutable_hits_addend()->set_value(UINT64_MAX);
  };
  for (size_t i = 0; i < kCheckLimits.max_descriptors; ++i) add(1, 1);
  add(kCheckLimits.max_key_bytes, kCheckLimits.max_value_bytes);
  return r;
}

TEST_F(GrpcLimitsTest, TheDefaultMessageCapHoldsTheLargestBoundedRequestAndIsFourMiB) {
  Start({});
  const rls::RateLimitRequest bounded = LargestBoundedRequest();
  // protobuf's own encoder agrees with the arithmetic in grpc_limits.h.
  ASSERT_EQ(bounded.ByteSizeLong(), LargestBoundedRequestBytes(kCheckLimits));
  ASSERT_EQ(kMaxCheckRequestBytes, 4u << 20);  // gRPC's default, as envoyproxy/ratelimit has it
  const auto channel = OwnChannel(port());
  const grpc::Status ok = CallOn(channel, bounded);
  EXPECT_TRUE(ok.ok()) << ok.error_code() << " " << ok.error_message();

  // Exactly the cap: answered; one byte more: refused before the service sees it.
  rls::RateLimitRequest at_cap = OneDescriptor("api", "k", "");
  auto* value = at_cap.mutable_descriptors(0)->mutable_entries(0)->mutable_value();
  value->assign(kMaxCheckRequestBytes - at_cap.ByteSizeLong(), 'v');
  // The framing (the value's tag and length, longer lengths of the entry and the descriptor)
  // came on top: take it off the value, whose length fields keep their sizes.
  value->resize(value->size() - (at_cap.ByteSizeLong() - kMaxCheckRequestBytes));
  ASSERT_EQ(at_cap.ByteSizeLong(), kMaxCheckRequestBytes);
  const grpc::Status at = CallOn(channel, at_cap);
  EXPECT_TRUE(at.ok()) << at.error_code() << " " << at.error_message();
  rls::RateLimitRequest over = at_cap;
  over.set_domain("apix");
  ASSERT_EQ(over.ByteSizeLong(), kMaxCheckRequestBytes + 1);
  const grpc::Status refused = CallOn(channel, over);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_EQ(service_.requests().size(), 2u);  // the service never saw the larger one
}

TEST_F(GrpcLimitsTest, LongValuesStillPassUnderTheCap) {
  // Envoy copies the client's path or headers into values: a 60 KiB path (Envoy's default
  // header limit) in three descriptors reaches the service whole (which counts it by digest,
  // check_rules.h).
  Start({});
  rls::RateLimitRequest r;
  r.set_domain("api");
  for (int i = 0; i < 3; ++i) {
    auto* e = r.add_descriptors()->add_entries();
    e->set_key("path");
    e->set_value("/" + std::string(60 << 10, 'p'));
  }
  const grpc::Status status = CallOn(OwnChannel(port()), r);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const auto seen = service_.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].descriptors[0].entries[0].second.size(), (60u << 10) + 1);
}

TEST_F(GrpcLimitsTest, ASmallerMessageCapIsHonoured) {
  Start({.max_message_bytes = 64});
  const auto channel = OwnChannel(port());
  EXPECT_TRUE(CallOn(channel, OneDescriptor("api", "k", "v")).ok());
  EXPECT_EQ(CallOn(channel, OneDescriptor("api", "k", std::string(100, 'v'))).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST(GrpcLimits, TheLongestConfigurableDomainIsTheOneTheCapAllows) {
  // kMaxConfiguredDomainBytes is the config's own bound: one byte more and it refuses the file.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sluice-grpc-domain-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto load = [&](size_t bytes) {
    const auto file = dir / "d.yaml";
    std::ofstream(file) << "domain: " << std::string(bytes, 'd') << "\ndescriptors:\n"
                        << "  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
    return LoadConfig(file.string()).has_value();
  };
  EXPECT_TRUE(load(kMaxConfiguredDomainBytes));
  EXPECT_FALSE(load(kMaxConfiguredDomainBytes + 1));
  std::filesystem::remove_all(dir);
}

// --- connections -------------------------------------------------------------------------------

TEST_F(GrpcLimitsTest, TheConnectionOverTheCapIsRefusedUntilOneCloses) {
  Start({.max_connections = 2});
  RawHttp2 first(port());
  RawHttp2 second(port());
  ASSERT_TRUE(first.connected() && second.connected());
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 2; }));

  // The third is closed before any HTTP/2 (no server preface), and a gRPC client's call fails
  // at once rather than at its deadline.
  RawHttp2 third(port());
  third.Send(kClientPreface + Settings({}));
  const std::vector<Frame> frames = third.ReadToClose(10s);
  EXPECT_TRUE(third.closed());
  EXPECT_TRUE(frames.empty());
  const auto began = Clock::now();
  EXPECT_EQ(CallOn(OwnChannel(port()), OneDescriptor("api", "k", "v"), 20s).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(Clock::now() - began, 10s);
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 2; }));

  first.Close();  // gRPC sees it go and closes its side: a place is free
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 1; }));
  const grpc::Status status = CallOn(OwnChannel(port()), OneDescriptor("api", "k", "v"));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// --- streams -----------------------------------------------------------------------------------

TEST_F(GrpcLimitsTest, TheServerAdvertisesTheStreamCap) {
  Start({.max_concurrent_streams = 7});
  RawHttp2 client(port());
  client.Send(kClientPreface + Settings({}));
  const auto frames = client.ReadUntil([](const Frame& f) { return f.type == kSettings; }, 10s);
  ASSERT_FALSE(frames.empty());
  const Frame& settings = frames.back();
  ASSERT_EQ(settings.type, kSettings);
  bool found = false;
  for (size_t at = 0; at + 6 <= settings.payload.size(); at += 6) {
    const int id = static_cast<uint8_t>(settings.payload[at]) << 8 |
                   static_cast<uint8_t>(settings.payload[at + 1]);
    if (id == 3) {  // SETTINGS_MAX_CONCURRENT_STREAMS
      EXPECT_EQ(FrameU32(settings.payload, at + 2), 7u);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(GrpcLimitsTest, AGrpcClientQueuesTheCallOverTheStreamCap) {
  // Enough handler threads that a third call would be served at once if its stream were open.
  Start({.threads = 4, .max_concurrent_streams = 2});
  service_.Park();
  const auto channel = OwnChannel(port());
  std::future<grpc::Status> a, b, c;
  const ReleaseAtExit release{service_};
  a = CallAsync(channel, OneDescriptor("held", "k", "1"));
  b = CallAsync(channel, OneDescriptor("held", "k", "2"));
  ASSERT_TRUE(service_.WaitParked(2));
  c = CallAsync(channel, OneDescriptor("held", "k", "3"));  // over the cap: the client waits
  // Another connection is served meanwhile (so the server is free to take calls), and its call,
  // made after the third, is the only one the service has seen besides the first two.
  ASSERT_TRUE(CallOn(OwnChannel(port()), OneDescriptor("other", "k", "v")).ok());
  EXPECT_EQ(service_.parked(), 2);
  EXPECT_EQ(c.wait_for(0s), std::future_status::timeout);
  service_.Unpark();  // a and b end; c's stream opens, and c is answered (not parked)
  EXPECT_TRUE(a.get().ok());
  EXPECT_TRUE(b.get().ok());
  EXPECT_TRUE(c.get().ok());
  EXPECT_EQ(service_.parked(), 2);
}

TEST_F(GrpcLimitsTest, AClientIgnoringTheStreamCapIsCut) {
  // No SETTINGS ACK (so gRPC never applies its cap), a zero window (so no answer can be sent and
  // every call stays in flight), and far more streams than the cap: the connection is cut.
  Start({.max_concurrent_streams = 4});
  RawHttp2 attacker(port());
  std::string burst = kClientPreface + Settings({{4, 0}});  // INITIAL_WINDOW_SIZE = 0
  rls::RateLimitRequest request = OneDescriptor("api", "k", "v");
  for (uint32_t i = 0; i < 200; ++i) burst += CallFrames(2 * i + 1, request.SerializeAsString());
  attacker.Send(burst);
  attacker.ReadToClose(10s);
  EXPECT_TRUE(attacker.closed());
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
  // Others are still served.
  EXPECT_TRUE(CallOn(OwnChannel(port()), OneDescriptor("api", "k", "v")).ok());
}

// --- idle and age ------------------------------------------------------------------------------

TEST_F(GrpcLimitsTest, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  Start({.idle_timeout = 300ms});
  service_.Park();
  const auto busy = OwnChannel(port());
  std::future<grpc::Status> held;
  const ReleaseAtExit release{service_};
  held = CallAsync(busy, OneDescriptor("held", "k", "v"));
  ASSERT_TRUE(service_.WaitParked(1));
  const auto opened = Clock::now();
  RawHttp2 idle(port());
  idle.Send(kClientPreface + Settings({}));
  const auto frames = idle.ReadToClose(10s);
  const auto elapsed = Clock::now() - opened;
  ASSERT_TRUE(idle.closed());
  EXPECT_GE(elapsed, 300ms);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().type, kGoaway);
  // The connection with a call in flight was not idle: its call is answered.
  service_.Unpark();
  const grpc::Status status = held.get();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcLimitsTest, AnOldConnectionGetsGoawayAndItsCallsFinish) {
  Start({.max_connection_age = 300ms, .shutdown_grace = 10s});
  service_.Park();
  const auto channel = OwnChannel(port());
  std::future<grpc::Status> held;
  const ReleaseAtExit release{service_};
  held = CallAsync(channel, OneDescriptor("held", "k", "v"));
  ASSERT_TRUE(service_.WaitParked(1));
  // A raw connection of the same age sees the GOAWAY (gRPC's is "max_age").
  RawHttp2 watcher(port());
  watcher.Send(kClientPreface + Settings({}) + EncodeFrame(kSettings, 0x1, 0, ""));
  const auto frames = watcher.ReadUntil([](const Frame& f) { return f.type == kGoaway; }, 10s);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().type, kGoaway);
  // The call in flight on the aged connection still finishes, within the grace.
  service_.Unpark();
  const grpc::Status status = held.get();
  EXPECT_TRUE(status.ok()) << status.error_message();
  // And the client simply reconnects.
  EXPECT_TRUE(CallOn(channel, OneDescriptor("api", "k", "v")).ok());
}

// --- shutdown ----------------------------------------------------------------------------------

TEST_F(GrpcLimitsTest, ShutdownWaitsTheGraceThenCancels) {
  Start({.shutdown_grace = 400ms});
  service_.Hold();
  std::future<grpc::Status> held;
  const ReleaseAtExit release{service_};
  held = CallAsync(OwnChannel(port()), OneDescriptor("api", "k", "v"));
  ASSERT_TRUE(service_.WaitEntered(1));
  const auto began = Clock::now();
  std::thread stopper([&] { server_->Shutdown(); });
  const grpc::Status status = held.get();  // ends when the grace runs out
  const auto waited = Clock::now() - began;
  EXPECT_FALSE(status.ok());
  EXPECT_GE(waited, 400ms);
  EXPECT_LT(waited, 4s);  // not the 5 s it once was, whatever the flag said
  service_.Release();     // the handler thread may now return, and Shutdown() join it
  stopper.join();
}

}  // namespace
}  // namespace sluice::server::test
