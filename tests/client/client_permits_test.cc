// Client::Acquire against the real sluiced: a permit holds its slot until it is destroyed or
// released, renews itself past its permit_ttl while held, and a refused or failed acquire holds
// nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "sluice/client/client.h"
#include "sluice/clock.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"
#include "support/wait_for.h"

namespace sluice::client {
namespace {

using namespace std::chrono_literals;
using sluice::testing::SluicedProcess;
using sluice::testing::StartSluiced;

constexpr char kConfig[] = R"(domain: test
descriptors:
  - key: job
    concurrency: {max_in_flight: 1, permit_ttl: 30s}
  - key: short
    concurrency: {max_in_flight: 1, permit_ttl: 300ms}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100}
)";

CheckRequest One(const std::string& key, const std::string& value) {
  return CheckRequest{.domain = "test", .descriptors = {Descriptor{.entries = {{key, value}}}}};
}

class ClientPermits : public ::testing::Test {
 protected:
  void SetUp() override {
    sluiced_ = StartSluiced(dir_.Write("test.yaml", kConfig).string());
    ASSERT_GT(sluiced_->port(), 0);
    auto c = Client::Create({.port = sluiced_->port(), .deadline = 2s}, clock_);
    ASSERT_TRUE(c.has_value()) << c.error().message;
    client_ = std::move(*c);
  }
  // Whether an acquire of `key` is allowed now (its permit released at once).
  bool Free(const std::string& key) {
    auto r = client_->Acquire(One(key, "a"));
    EXPECT_TRUE(r.has_value()) << r.error().message;
    return r && r->allowed;
  }

  server::test::TempConfigDir dir_{"client-permits"};
  std::unique_ptr<SluicedProcess> sluiced_;
  MonotonicClock clock_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientPermits, APermitHoldsItsSlotUntilDestroyed) {
  {
    auto held = client_->Acquire(One("job", "a"));
    ASSERT_TRUE(held.has_value()) << held.error().message;
    ASSERT_TRUE(held->allowed);
    EXPECT_TRUE(held->permit.held());
    EXPECT_FALSE(held->permit.token().empty());
    EXPECT_EQ(held->permit_ttl, 30s);

    auto refused = client_->Acquire(One("job", "a"));
    ASSERT_TRUE(refused.has_value());
    EXPECT_FALSE(refused->allowed);
    EXPECT_FALSE(refused->permit.held());
    ASSERT_TRUE(refused->retry_after.has_value());
    EXPECT_GT(*refused->retry_after, 29s);
  }
  EXPECT_TRUE(Free("job")) << "the destroyed permit gave its slot back";
}

TEST_F(ClientPermits, ReleaseGivesTheSlotBackOnce) {
  auto held = client_->Acquire(One("job", "a"));
  ASSERT_TRUE(held && held->allowed);
  Permit permit = std::move(held->permit);
  auto released = permit.Release();
  ASSERT_TRUE(released.has_value()) << released.error().message;
  EXPECT_TRUE(*released);
  EXPECT_FALSE(permit.held());
  EXPECT_FALSE(*permit.Release()) << "empty after a release";
  EXPECT_TRUE(Free("job"));
}

TEST_F(ClientPermits, APermitRenewsItselfPastItsTtl) {
  auto held = client_->Acquire(One("short", "a"));
  ASSERT_TRUE(held && held->allowed);
  // Renewed every third of 300 ms: four renewals are more than one permit_ttl after the acquire.
  ASSERT_TRUE(sluice::testing::WaitFor([&] { return held->permit.renewals() >= 4; }));
  EXPECT_TRUE(held->permit.held());
  EXPECT_FALSE(Free("short")) << "still held by the renewed permit";
  ASSERT_TRUE(*held->permit.Release());
  EXPECT_TRUE(Free("short"));
}

TEST_F(ClientPermits, NoConcurrencyRuleNoPermitAndChargeIsRefused) {
  auto r = client_->Acquire(One("user", "u"));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->allowed);
  EXPECT_FALSE(r->permit.held());
  CheckRequest charge = One("job", "a");
  charge.charge = true;
  EXPECT_FALSE(client_->Acquire(charge).has_value());
}

TEST_F(ClientPermits, SluicedDownTheFailureModeDecidesAndNothingIsHeld) {
  const int port = sluiced_->port();
  sluiced_.reset();
  for (FailureMode mode : {FailureMode::kOpen, FailureMode::kClosed}) {
    auto c = Client::Create({.port = port, .deadline = 500ms, .failure_mode = mode}, clock_);
    ASSERT_TRUE(c.has_value());
    auto r = (*c)->Acquire(One("job", "a"));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->allowed, mode == FailureMode::kOpen);
    EXPECT_EQ(r->source, Source::kFailureMode);
    EXPECT_FALSE(r->permit.held());
  }
}

}  // namespace
}  // namespace sluice::client
