// The exposition-format building blocks, and the validator the metrics tests rely on (it must
// reject what Prometheus rejects, or its passing means nothing).
#include "metrics/prometheus_text.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <string_view>

#include "metrics/prometheus_validator.h"

namespace sluice::server {
namespace {

std::string LabelValue(std::string_view v) {
  std::string out;
  AppendLabelValue(out, v);
  return out;
}

TEST(PrometheusText, EscapesBackslashQuoteAndLineFeedInLabelValues) {
  EXPECT_EQ(LabelValue("plain"), "plain");
  EXPECT_EQ(LabelValue(R"(a\b)"), R"(a\\b)");
  EXPECT_EQ(LabelValue(R"(say "hi")"), R"(say \"hi\")");
  EXPECT_EQ(LabelValue("two\nlines"), R"(two\nlines)");
  EXPECT_EQ(LabelValue("tab\tstays"), "tab\tstays");  // only three characters are escaped
}

TEST(PrometheusText, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(LabelValue("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(LabelValue("a\xFF"
                       "b"),
            "a" + fffd + "b");
  EXPECT_EQ(LabelValue("\xC0\x80"), fffd + fffd);                        // overlong NUL
  EXPECT_EQ(LabelValue("\xED\xA0\x80"), fffd + fffd + fffd);             // a UTF-16 surrogate
  EXPECT_EQ(LabelValue("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // above U+10FFFF
  EXPECT_EQ(LabelValue("x\xE2\x82"), "x" + fffd + fffd);                 // cut short
}

TEST(PrometheusText, HelpEscapesBackslashAndLineFeedOnly) {
  std::string out;
  AppendHelpAndType(out, "m", "a \"q\" \\ b\nc", "counter");
  EXPECT_EQ(out, "# HELP m a \"q\" \\\\ b\\nc\n# TYPE m counter\n");
}

TEST(PrometheusText, Numbers) {
  auto num = [](auto v) {
    std::string out;
    AppendNumber(out, v);
    return out;
  };
  EXPECT_EQ(num(uint64_t{0}), "0");
  EXPECT_EQ(num(uint64_t{18446744073709551615ULL}), "18446744073709551615");
  EXPECT_EQ(num(0.85), "0.85");
  EXPECT_EQ(num(2.0), "2");
  EXPECT_EQ(num(3e-5), "3e-05");
  EXPECT_EQ(num(INFINITY), "+Inf");
  EXPECT_EQ(num(-INFINITY), "-Inf");
  EXPECT_EQ(num(NAN), "NaN");
}

TEST(PrometheusText, SampleJoinsLabelLists) {
  std::string out;
  AppendSample(out, "m", "", "", uint64_t{1});
  AppendSample(out, "m", "a=\"1\"", "", uint64_t{2});
  AppendSample(out, "m", "", "b=\"2\"", uint64_t{3});
  AppendSample(out, "m", "a=\"1\"", "b=\"2\"", 0.5);
  EXPECT_EQ(out, "m 1\nm{a=\"1\"} 2\nm{b=\"2\"} 3\nm{a=\"1\",b=\"2\"} 0.5\n");
}

TEST(PrometheusText, HistogramIsCumulativeWithInfSumAndCount) {
  constexpr std::array<std::string_view, 2> le = {"0.5", "1"};
  constexpr std::array<uint64_t, 3> counts = {2, 0, 1};
  std::string out;
  AppendHistogram(out, "h", "x=\"y\"", le, counts, 3.25);
  EXPECT_EQ(out,
            "h_bucket{x=\"y\",le=\"0.5\"} 2\n"
            "h_bucket{x=\"y\",le=\"1\"} 2\n"
            "h_bucket{x=\"y\",le=\"+Inf\"} 3\n"
            "h_sum{x=\"y\"} 3.25\n"
            "h_count{x=\"y\"} 3\n");
}

// The validator itself.
bool Valid(std::string_view text) { return test::ParseExposition(text).errors.empty(); }

TEST(PrometheusValidator, AcceptsAWellFormedExposition) {
  EXPECT_TRUE(Valid(""));
  EXPECT_TRUE(
      Valid("# HELP c A counter.\n# TYPE c counter\nc{a=\"x\\\"y\\\\z\\n\"} 3\n"
            "# TYPE g gauge\ng -1.5e3\ng{b=\"1\",} NaN 1700000000000\n"
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
            "h_sum 3\nh_count 2\n"));
  auto e = test::ParseExposition("# TYPE c counter\nc{a=\"q\\\"\\n\"} 3\n");
  ASSERT_EQ(e.samples.size(), 1u);
  EXPECT_EQ(e.samples[0].labels[0].second, "q\"\n");
}

TEST(PrometheusValidator, RejectsWhatPrometheusRejects) {
  EXPECT_FALSE(Valid("# TYPE c counter\nc 1"));                     // no final line feed
  EXPECT_FALSE(Valid("c 1\n"));                                     // no TYPE
  EXPECT_FALSE(Valid("# TYPE c counter\nc{a=\"x\"y\"} 1\n"));       // unescaped quote
  EXPECT_FALSE(Valid("# TYPE c counter\nc{a=\"x\\ty\"} 1\n"));      // unknown escape
  EXPECT_FALSE(Valid("# TYPE c counter\nc{1a=\"x\"} 1\n"));         // bad label name
  EXPECT_FALSE(Valid("# TYPE c counter\nc{a=\"x\",a=\"y\"} 1\n"));  // label twice
  EXPECT_FALSE(Valid("# TYPE c counter\nc one\n"));                 // not a number
  EXPECT_FALSE(Valid("# TYPE c counter\nc 1\nc 2\n"));              // duplicate series
  EXPECT_FALSE(Valid("# TYPE c counter\n# TYPE c gauge\nc 1\n"));   // second TYPE
  EXPECT_FALSE(Valid("# TYPE c teapot\nc 1\n"));                    // unknown type
  EXPECT_FALSE(Valid("# HELP c a\\tb\n# TYPE c counter\nc 1\n"));   // bad HELP escape
  EXPECT_FALSE(Valid("# TYPE c counter\n# TYPE d counter\nc 1\nd 1\nc{a=\"b\"} 1\n"));
  EXPECT_FALSE(Valid("# TYPE c counter\nc{a=\"\xFF\"} 1\n"));  // invalid UTF-8
  const std::string h = "# TYPE h histogram\n";
  EXPECT_FALSE(Valid(h + "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"));
  EXPECT_FALSE(Valid(h + "h_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\n"
                         "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"));
  EXPECT_FALSE(Valid(h + "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"));  // no +Inf
  EXPECT_FALSE(Valid(h + "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n"));
  EXPECT_FALSE(Valid(h + "h_bucket{le=\"+Inf\"} 1\nh_count 1\n"));  // no _sum
  EXPECT_FALSE(Valid(h + "h 1\n"));
}

}  // namespace
}  // namespace sluice::server
