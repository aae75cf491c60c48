// sluice::client::Client against the real sluiced (started on a port of its own with a temp
// config): allowed and refused checks as the config's limits say, keep-alive, the over-limit
// cache honouring the retry time (on a manual clock), sluiced down under both failure modes, a
// silent server and the deadline, asynchronous calls, and requests sluiced refuses.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "sluice/client/client.h"
#include "sluice/clock.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"

namespace sluice::client {
namespace {

using namespace std::chrono_literals;
using sluice::testing::SluicedProcess;
using sluice::testing::StartSluiced;

constexpr char kConfig[] = R"(domain: test
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 3}
  - key: fast
    rate_limit: {name: per_fast, unit: second, requests_per_unit: 1}
)";

CheckRequest UserCheck(const std::string& user, int64_t hits = 1) {
  return CheckRequest{
      .domain = "test", .descriptors = {Descriptor{.entries = {{"user", user}}}}, .hits = hits};
}

class ClientSluicedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto file = dir_.Write("test.yaml", kConfig);
    sluiced_ = StartSluiced(file.string(), {"--threads", "2"});
    ASSERT_GT(sluiced_->port(), 0);
  }

  std::unique_ptr<Client> MakeClient(const Clock& clock, ClientOptions options = {}) {
    options.port = sluiced_->port();
    if (options.deadline == ClientOptions{}.deadline) options.deadline = 2s;
    auto c = Client::Create(options, clock);
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message);
    return c ? std::move(*c) : nullptr;
  }

  server::test::TempConfigDir dir_{"client-sluiced"};
  std::unique_ptr<SluicedProcess> sluiced_;
  MonotonicClock clock_;
};

TEST_F(ClientSluicedTest, AnswersAsTheConfigsLimitOverOneKeptAliveConnection) {
  auto client = MakeClient(clock_, {.cache_max_entries = 0});
  for (int i = 0; i < 3; ++i) {
    auto r = client->Check(UserCheck("alice"));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->allowed) << i;
    EXPECT_EQ(r->source, Source::kSluiced);
    ASSERT_EQ(r->statuses.size(), 1u);
    EXPECT_EQ(r->statuses[0].limit_name, "per_user");
    EXPECT_EQ(r->statuses[0].remaining, 2 - i);
  }
  auto over = client->Check(UserCheck("alice"));
  ASSERT_TRUE(over);
  EXPECT_FALSE(over->allowed);
  EXPECT_TRUE(over->statuses[0].over_limit);
  ASSERT_TRUE(over->retry_after);
  EXPECT_GT(*over->retry_after, 0s);
  EXPECT_LE(*over->retry_after, 60s);
  // More hits than the limit holds can never pass: no retry time.
  auto never = client->Check(UserCheck("bob", 4));
  ASSERT_TRUE(never);
  EXPECT_FALSE(never->allowed);
  EXPECT_FALSE(never->retry_after);
  EXPECT_EQ(client->Stats().connections_opened, 1u);
  EXPECT_EQ(client->Stats().calls, 5u);
}

TEST_F(ClientSluicedTest, TheOverLimitCacheAnswersUntilTheRetryTimeThenAsksAgain) {
  ManualClock manual(FromNanos(0));
  auto client = MakeClient(manual);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->Check(UserCheck("carol"))->allowed);
  auto over = client->Check(UserCheck("carol"));
  ASSERT_TRUE(over);
  ASSERT_FALSE(over->allowed);
  EXPECT_EQ(over->source, Source::kSluiced);
  const Duration retry = *over->retry_after;

  manual.Advance(retry / 2);
  auto cached = client->Check(UserCheck("carol"));
  ASSERT_TRUE(cached);
  EXPECT_FALSE(cached->allowed);
  EXPECT_EQ(cached->source, Source::kCache);
  EXPECT_EQ(*cached->retry_after, retry - retry / 2);  // what is left of the wait
  EXPECT_EQ(client->Stats().cache_answers, 1u);

  // Another key, other hits, or a charge: not the cached check, so sluiced answers them.
  EXPECT_EQ(client->Check(UserCheck("dave"))->source, Source::kSluiced);
  EXPECT_EQ(client->Check(UserCheck("carol", 2))->source, Source::kSluiced);
  CheckRequest charge = UserCheck("carol");
  charge.charge = true;
  EXPECT_EQ(client->Check(charge)->source, Source::kSluiced);

  manual.Advance(retry - retry / 2);  // the retry time has come: ask sluiced again
  EXPECT_EQ(client->Check(UserCheck("carol"))->source, Source::kSluiced);
  EXPECT_EQ(client->Stats().cache_answers, 1u);
}

TEST_F(ClientSluicedTest, SluicedDownFailsOpenOrClosedAsConfigured) {
  const int port = sluiced_->port();
  sluiced_.reset();  // killed: its port now refuses connections
  for (FailureMode mode : {FailureMode::kOpen, FailureMode::kClosed}) {
    auto client = Client::Create({.port = port, .deadline = 1s, .failure_mode = mode}, clock_);
    ASSERT_TRUE(client);
    auto r = (*client)->Check(UserCheck("erin"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->allowed, mode == FailureMode::kOpen);
    EXPECT_EQ(r->source, Source::kFailureMode);
    EXPECT_NE(r->error.find("connect"), std::string::npos) << r->error;
    EXPECT_FALSE(r->retry_after);
    EXPECT_EQ((*client)->Stats().failure_answers, 1u);
  }
}

TEST_F(ClientSluicedTest, ASilentServerEndsTheCallAtItsDeadline) {
  // A socket that listens and never answers: connect succeeds (the kernel's backlog), the
  // request is sent, no answer comes.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto client = Client::Create(
      {.port = ntohs(addr.sin_port), .deadline = 300ms, .failure_mode = FailureMode::kClosed},
      clock_);
  ASSERT_TRUE(client);
  const auto start = std::chrono::steady_clock::now();
  auto r = (*client)->Check(UserCheck("frank"));
  const auto took = std::chrono::steady_clock::now() - start;
  close(fd);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->source, Source::kFailureMode);
  EXPECT_NE(r->error.find("deadline"), std::string::npos) << r->error;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);  // the deadline and scheduling slack, not a hang
}

TEST_F(ClientSluicedTest, AsynchronousChecksAdmitExactlyTheLimit) {
  auto client = MakeClient(clock_, {.max_connections = 4, .cache_max_entries = 0});
  std::vector<std::future<Result<CheckResponse>>> futures;
  for (int i = 0; i < 20; ++i) futures.push_back(client->CheckAsync(UserCheck("grace")));
  int allowed = 0;
  for (auto& f : futures) {
    auto r = f.get();
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->source, Source::kSluiced);
    allowed += r->allowed ? 1 : 0;
  }
  EXPECT_EQ(allowed, 3);  // per_user: 3 a minute
  EXPECT_LE(client->Stats().connections_opened, 4u);
}

TEST_F(ClientSluicedTest, ARequestSluicedRefusesIsAnErrorNamingWhy) {
  auto client = MakeClient(clock_);
  auto r =
      client->Check({.domain = "nope", .descriptors = {Descriptor{.entries = {{"user", "x"}}}}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("nope"), std::string::npos) << r.error().message;
  auto empty =
      client->Check({.domain = "test", .descriptors = {Descriptor{.entries = {{"", "x"}}}}});
  ASSERT_FALSE(empty);
  // The connection is still good for the next check.
  EXPECT_TRUE(client->Check(UserCheck("heidi"))->allowed);
}

TEST(ClientOptionsTest, BadOptionsAreRefusedByName) {
  MonotonicClock clock;
  EXPECT_NE(Client::Create({.host = "localhost"}, clock).error().message.find("host"),
            std::string::npos);
  EXPECT_NE(Client::Create({.port = 70000}, clock).error().message.find("port"), std::string::npos);
  EXPECT_FALSE(Client::Create({.deadline = 0ms}, clock));
  EXPECT_FALSE(Client::Create({.max_connections = 0}, clock));
  EXPECT_TRUE(Client::Create({.host = "::1", .port = 1}, clock));
}

}  // namespace
}  // namespace sluice::client
