// The service past its bounds (service/check_rules.h), on the memory store with a manual clock:
// long values and long counter keys counted by their SHA-256 (digests from sha256sum / Python's
// hashlib, not from the code under test), unchecked descriptors counted in the metrics, and the
// warning rate-limited on the service's clock.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: path
    rate_limit: {name: per_path, unit: minute, requests_per_unit: 1, algorithm: fixed_window}
)yaml";

using Entries = std::vector<std::pair<std::string, std::string>>;

class RequestBounds : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    options.unchecked_warning = [this](const std::string& m) { warnings_.push_back(m); };
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
  }
  CheckResponse MustCheck(std::vector<CheckDescriptor> descriptors) {
    CheckRequest r;
    r.domain = "api";
    r.descriptors = std::move(descriptors);
    auto response = service_->Check(r);
    EXPECT_TRUE(response.has_value()) << response.error().message;
    return response ? std::move(*response) : CheckResponse{};
  }

  ManualClock clock_{FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000)};
  Metrics metrics_;
  std::vector<std::string> warnings_;
  test::TempConfigDir dir_{"bounds"};
  std::unique_ptr<RateLimitService> service_;
};

TEST_F(RequestBounds, AValueOver1024BytesIsMatchedAndCountedByItsDigest) {
  const CheckDescriptor d{{{"path", std::string(1025, 'a')}}, {}, {}};
  const CheckResponse first = MustCheck({d});
  ASSERT_NE(first.statuses[0].limit, nullptr);
  EXPECT_TRUE(first.statuses[0].counter_key.ends_with(
      "#path=sha256:4a82297889eb505cf6b5cbdf69977afab4632d6557539782f657bd7dc78091a5"))
      << first.statuses[0].counter_key;
  EXPECT_EQ(MustCheck({d}).overall, Code::kOverLimit);
  // The admin view finds the same counter from the same long value.
  auto state = service_->State("api", d.entries);
  ASSERT_TRUE(state.has_value()) << state.error().message;
  EXPECT_EQ(state->counter_key, first.statuses[0].counter_key);
}

TEST_F(RequestBounds, ACounterKeyOver65535BytesIsCountedByTheDigestOfItsIdentity) {
  // An override counts every entry: 64 keys of 4096 bytes make a counter key far over 65535.
  Entries entries(64, {std::string(4096, 'k'), "v"});
  for (size_t i = 0; i < entries.size(); ++i) entries[i].first[0] = static_cast<char>('a' + i % 26);
  CheckDescriptor d{entries, {}, LimitOverride{1, LimitPeriod::Of(Unit::kMinute)}};
  const CheckResponse first = MustCheck({d});
  EXPECT_EQ(first.overall, Code::kOk);
  ASSERT_NE(first.statuses[0].limit, nullptr);
  const std::string& key = first.statuses[0].counter_key;
  EXPECT_LE(key.size(), 65535u);
  EXPECT_NE(key.find("#sha256:"), std::string::npos) << key.substr(0, 200);
  EXPECT_EQ(MustCheck({d}).overall, Code::kOverLimit) << "still one counter for it";
  d.entries.back().second = "w";  // another identity: another counter
  EXPECT_EQ(MustCheck({d}).overall, Code::kOk);
}

TEST_F(RequestBounds, UncheckedDescriptorsAreCountedAndWarnedAboutAtMostEveryTenSeconds) {
  const CheckDescriptor ok{{{"path", "/a"}}, {}, {}};
  const CheckDescriptor too_many{Entries(65, {"path", "/a"}), {}, {}};
  const CheckDescriptor long_key{{{std::string(4097, 'k'), "v"}}, {}, {}};
  const CheckResponse r = MustCheck({ok, too_many, long_key});
  EXPECT_EQ(r.statuses[0].limit != nullptr, true);
  EXPECT_EQ(r.statuses[1].limit, nullptr);
  EXPECT_EQ(r.statuses[2].limit, nullptr);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("answered 2 request descriptors OK without a check"),
            std::string::npos)
      << warnings_[0];
  clock_.Advance(std::chrono::milliseconds(9999));
  MustCheck({long_key});
  EXPECT_EQ(warnings_.size(), 1u) << "within 10 s of the last";
  clock_.Advance(std::chrono::milliseconds(1));
  MustCheck({long_key});
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_NE(warnings_[1].find("answered 2 request descriptors"), std::string::npos)
      << "both since the last warning: " << warnings_[1];
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("sluice_descriptors_unchecked_total{reason=\"entries\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("sluice_descriptors_unchecked_total{reason=\"key\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("sluice_descriptors_unchecked_total{reason=\"descriptors\"} 0\n"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::server
