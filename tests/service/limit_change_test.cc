// Changing a limit mid-period on the memory store (tests/service/limit_change.h): a reload that
// changes requests_per_unit keeps every counter's usage, per algorithm.
#include "service/limit_change.h"

#include <gtest/gtest.h>

#include "sluice/open_store.h"

namespace sluice::server::test {
namespace {

class MemoryLimitChange : public ::testing::TestWithParam<Algorithm> {
 protected:
  void SetUp() override {
    auto store = OpenStore("memory");
    ASSERT_TRUE(store.has_value()) << store.error().message;
    quota_ = std::make_unique<MonthlyQuota>(GetParam(), *store);
  }
  std::unique_ptr<MonthlyQuota> quota_;
};

TEST_P(MemoryLimitChange, RaisingKeepsWhatWasUsed) { ExpectRaisingKeepsWhatWasUsed(*quota_); }

TEST_P(MemoryLimitChange, LoweringBelowTheUsageRefuses) {
  ExpectLoweringBelowTheUsageRefuses(*quota_, GetParam());
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, MemoryLimitChange, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& p) { return std::string(AlgorithmName(p.param)); });

}  // namespace
}  // namespace sluice::server::test
