// The priority -> reserve rule (core/shed.h): exact decimal thresholds, and who counts as what.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/shed.h"

namespace sluice {
namespace {

ShedRule Rule(std::initializer_list<std::pair<const char*, const char*>> levels) {
  ShedRule rule;
  for (const auto& [priority, above] : levels) {
    rule.levels.push_back({priority, *ParseShedFraction(above)});
  }
  return rule;
}

TEST(ShedFraction, ParsesExactDecimals) {
  EXPECT_EQ(*ParseShedFraction("0.6"), (ShedFraction{6, 10}));
  EXPECT_EQ(*ParseShedFraction(".6"), (ShedFraction{6, 10}));
  EXPECT_EQ(*ParseShedFraction("1"), (ShedFraction{1, 1}));
  EXPECT_EQ(*ParseShedFraction("1.000"), (ShedFraction{1000, 1000}));
  EXPECT_EQ(*ParseShedFraction("0.875"), (ShedFraction{875, 1000}));
  EXPECT_EQ(*ParseShedFraction("0.000000000000000001"),
            (ShedFraction{1, 1'000'000'000'000'000'000}));
  for (std::string_view bad : {"0", "0.0", "1.01", "2", "-0.5", "0.6e0", "60%", "", ".", "1.",
                               "0.0000000000000000001", "0,6", " 0.6", "nan"}) {
    EXPECT_FALSE(ParseShedFraction(bad).has_value()) << bad;
  }
}

TEST(ShedFraction, PrintsAsTheDecimalItWasWritten) {
  EXPECT_EQ(ShedFractionText(*ParseShedFraction("0.6")), "0.6");
  EXPECT_EQ(ShedFractionText(*ParseShedFraction("0.60")), "0.60");
  EXPECT_EQ(ShedFractionText(*ParseShedFraction(".05")), "0.05");
  EXPECT_EQ(ShedFractionText(*ParseShedFraction("1")), "1");
  EXPECT_EQ(ShedFractionText(*ParseShedFraction("1.0")), "1.0");
  EXPECT_EQ(ShedFractionText(*ParseShedFraction("0.000000000000000001")), "0.000000000000000001");
}

TEST(ShedFraction, ComparesExactly) {
  EXPECT_TRUE(ShedFractionLess(*ParseShedFraction("0.6"), *ParseShedFraction("0.61")));
  EXPECT_FALSE(ShedFractionLess(*ParseShedFraction("0.60"), *ParseShedFraction("0.6")));
  EXPECT_TRUE(
      ShedFractionLess(*ParseShedFraction("0.999999999999999999"), *ParseShedFraction("1")));
}

TEST(ShedReserve, TheIssuesExample) {
  const ShedRule rule = Rule({{"low", "0.6"}, {"normal", "0.8"}});
  EXPECT_EQ(ShedReserve(rule, "low", 100), 40);     // low may fill it to 60
  EXPECT_EQ(ShedReserve(rule, "normal", 100), 20);  // normal to 80
  EXPECT_EQ(ShedReserve(rule, "critical", 100), 0);
}

TEST(ShedReserve, AbsentOrUnknownIsTheLowest) {
  const ShedRule rule = Rule({{"low", "0.6"}, {"normal", "0.8"}});
  EXPECT_EQ(ShedReserve(rule, std::nullopt, 100), 40);
  EXPECT_EQ(ShedReserve(rule, "urgent", 100), 40);
  EXPECT_EQ(ShedReserve(rule, "", 100), 40);
  EXPECT_EQ(ShedReserve(rule, "Critical", 100), 40);  // names are exact: critical must be sent
}

TEST(ShedReserve, FloorsTheAllowedPartExactly) {
  // floor(0.6 * 7) = 4: a low request must leave 3 of 7 free. In doubles 0.29 * 100 is
  // 28.999999999999996, whose floor would leave 72 free, not 71.
  EXPECT_EQ(ShedReserve(Rule({{"low", "0.6"}}), "low", 7), 3);
  EXPECT_EQ(ShedReserve(Rule({{"low", "0.7"}}), "low", 10), 3);
  EXPECT_EQ(ShedReserve(Rule({{"low", "0.29"}}), "low", 100), 71);
  // 128-bit products: the largest capacity and the finest threshold.
  constexpr int64_t kMax = INT64_MAX;
  EXPECT_EQ(ShedReserve(Rule({{"low", "0.5"}}), "low", kMax), kMax - kMax / 2);
  EXPECT_EQ(ShedReserve(Rule({{"low", "0.999999999999999999"}}), "low", kMax),
            kMax - static_cast<int64_t>(static_cast<__int128>(kMax) * 999999999999999999 /
                                        1000000000000000000));
  EXPECT_EQ(ShedReserve(Rule({{"low", "1"}}), "low", kMax), 0);
  EXPECT_EQ(ShedReserve(Rule({{"low", "0.5"}}), "low", 0), 0);
}

TEST(ShedReserve, APriorityListedWithoutThresholdIsNeverShed) {
  ShedRule rule = Rule({{"low", "0.6"}});
  rule.levels.push_back({"high", ShedFraction{}});
  EXPECT_EQ(ShedReserve(rule, "high", 100), 0);
  EXPECT_EQ(ShedReserve(rule, "other", 100), 40);
}

}  // namespace
}  // namespace sluice
