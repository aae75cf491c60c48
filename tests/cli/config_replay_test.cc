// `sluice replay --config` per limit against counts made here from the generated traffic: a
// fixed window of 5 per minute refuses what each key sends beyond 5 in a minute; a shadow limit
// refuses nothing and counts what it would have refused; recommend's per-limit peaks are each
// identity's largest minute.
#include "cli/config_replay.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/cli_test_util.h"
#include "support/temp_config_dir.h"

namespace sluice::cli {
namespace {

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 5, algorithm: fixed_window}
  - key: ip
    rate_limit: {name: per_ip, unit: minute, requests_per_unit: 4, algorithm: fixed_window,
                 mode: shadow}
)yaml";

constexpr int64_t kStartMs = int64_t{28'333'334} * 60'000;  // a minute boundary

struct Offered {
  std::string key;  // "api_key" or "ip"
  std::string value;
  int minute;  // 0, 2 or 4: minutes apart, so a sliding minute never holds two of them
  int count;
};

std::vector<Offered> Traffic() {
  std::vector<Offered> out;
  for (int m : {0, 2, 4}) {
    for (int k = 0; k < 12; ++k)
      out.push_back({"api_key", "k" + std::to_string(k), m, (k * 3 + m) % 10 + 1});
    for (int i = 0; i < 4; ++i) out.push_back({"ip", "10.0.0." + std::to_string(i), m, 2 + i * m});
  }
  return out;
}

std::string Jsonl(const std::vector<Offered>& traffic) {
  std::multimap<int64_t, std::string> lines;  // by time
  int salt = 0;
  for (const Offered& o : traffic) {
    ++salt;
    for (int j = 0; j < o.count; ++j) {
      const int64_t t = kStartMs + o.minute * 60'000 + j * 1000 + salt;
      nlohmann::json check = {
          {"domain", "api"},
          {"descriptors", {{{"entries", {{{"key", o.key}, {"value", o.value}}}}}}}};
      lines.emplace(t, nlohmann::json{{"t_ms", t}, {"check", check}}.dump());
    }
  }
  std::string out = "# a comment line\n";
  for (const auto& [t, line] : lines) out += line + "\n";
  return out;
}

class ConfigReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = server::LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config) << config.error().message;
    config_ = *config;
  }
  server::test::TempConfigDir dir_{"config-replay"};
  std::shared_ptr<const server::Config> config_;
};

TEST_F(ConfigReplayTest, CountsPerLimitMatchWhatTheTrafficHasOverEachLimit) {
  const auto traffic = Traffic();
  uint64_t key_checks = 0, key_over = 0, ip_checks = 0, ip_over = 0;
  std::set<std::string> keys_over, ips_over;
  for (const Offered& o : traffic) {
    if (o.key == "api_key") {
      key_checks += o.count;
      key_over += std::max(0, o.count - 5);
      if (o.count > 5) keys_over.insert(o.value);
    } else {
      ip_checks += o.count;
      ip_over += std::max(0, o.count - 4);
      if (o.count > 4) ips_over.insert(o.value);
    }
  }
  auto in = test::TmpFileWith(Jsonl(traffic));
  test::MemOut out;
  auto replay = ReplayConfig(config_, in.get(), ConfigReplayOutput::kSummary, out.file());
  ASSERT_TRUE(replay) << replay.error().message;
  EXPECT_EQ(replay->lines, key_checks + ip_checks);
  EXPECT_EQ(replay->requests_over, key_over);  // shadow refusals still pass
  const auto summary = nlohmann::json::parse(out.str());
  ASSERT_EQ(summary["limits"].size(), 2u);
  const auto& per_key =
      summary["limits"][0]["name"] == "per_key" ? summary["limits"][0] : summary["limits"][1];
  const auto& per_ip =
      summary["limits"][0]["name"] == "per_ip" ? summary["limits"][0] : summary["limits"][1];
  EXPECT_EQ(per_key["checks"], key_checks);
  EXPECT_EQ(per_key["over_limit"], key_over);
  EXPECT_EQ(per_key["admitted"], key_checks - key_over);
  EXPECT_EQ(per_key["identities"], 12);
  EXPECT_EQ(per_key["identities_over"], keys_over.size());
  EXPECT_EQ(per_ip["mode"], "shadow");
  EXPECT_EQ(per_ip["over_limit"], 0);
  EXPECT_EQ(per_ip["admitted"], ip_checks);
  EXPECT_EQ(per_ip["shadow_over_limit"], ip_over);
  EXPECT_EQ(per_ip["identities_over"], ips_over.size());
}

TEST_F(ConfigReplayTest, EachLimitsTrafficGivesItsOwnRecommendation) {
  const auto traffic = Traffic();
  std::map<std::string, int> key_peak;
  for (const Offered& o : traffic) {
    if (o.key == "api_key") key_peak[o.value] = std::max(key_peak[o.value], o.count);
  }
  std::vector<int64_t> peaks;
  for (const auto& [k, p] : key_peak) peaks.push_back(p);
  std::sort(peaks.begin(), peaks.end());
  auto in = test::TmpFileWith(Jsonl(traffic));
  auto replay = ReplayConfig(config_, in.get(), ConfigReplayOutput::kNone, nullptr);
  ASSERT_TRUE(replay) << replay.error().message;
  const LimitReplay* per_key = nullptr;
  for (const LimitReplay& l : replay->limits) {
    if (l.limit->name == "per_key") per_key = &l;
  }
  ASSERT_NE(per_key, nullptr);
  RecommendOptions o;
  o.per = per_key->limit->spec.period;
  o.percentile = 50;
  o.headroom = 1.0;
  o.algorithm = per_key->limit->spec.algorithm;
  o.candidates = {5};
  auto r = Recommend(per_key->traffic, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->identities, 12u);
  EXPECT_EQ(r->distribution.max, peaks.back());
  EXPECT_EQ(r->limit, peaks[5]);  // nearest rank: the 6th of 12
  // What-if at the configured limit: what the replay itself refused.
  ASSERT_EQ(r->what_if.size(), 1u);
  EXPECT_EQ(r->what_if[0].requests_rejected, per_key->over_limit);
  EXPECT_EQ(r->what_if[0].identities_rejected, per_key->identities_over);
}

// A rule with a `period` (issue 27) replays on its own window: 5 per 90 s, as a fixed window,
// takes 4 at 0 s and 4 at 60 s in one window (3 over), where a minute's rule would take both.
TEST_F(ConfigReplayTest, APeriodRuleReplaysOnItsWindow) {
  auto config = server::LoadConfig(
      dir_.Write("period.yaml",
                 "domain: p\ndescriptors:\n  - key: k\n    rate_limit: {name: per_90s, "
                 "period: 90s, requests_per_unit: 5, algorithm: fixed_window}\n"));
  ASSERT_TRUE(config) << config.error().message;
  constexpr int64_t kWindowMs = int64_t{19'000'000} * 90'000;  // a 90 s boundary
  std::string jsonl;
  for (int64_t at : {0, 60'000}) {
    for (int j = 0; j < 4; ++j) {
      nlohmann::json check = {{"domain", "p"},
                              {"descriptors", {{{"entries", {{{"key", "k"}, {"value", "v"}}}}}}}};
      jsonl += nlohmann::json{{"t_ms", kWindowMs + at + j}, {"check", check}}.dump() + "\n";
    }
  }
  auto in = test::TmpFileWith(jsonl);
  test::MemOut out;
  auto replay = ReplayConfig(*config, in.get(), ConfigReplayOutput::kSummary, out.file());
  ASSERT_TRUE(replay) << replay.error().message;
  EXPECT_EQ(replay->lines, 8u);
  EXPECT_EQ(replay->requests_over, 3u);
}

// A `calendar` rule (issue 27) replays in the zone's calendar: March 2026 in Lisbon ends at
// 04-01 00:00 WEST = 03-31 23:00Z (1774998000). 5 a month: 5 in March's last hour pass, 4 at
// April's first minute pass, 2 more half an hour later: one over. (A 30-day `unit: month`
// window, epoch-aligned, holds all 11 and refuses 6.)
TEST_F(ConfigReplayTest, ACalendarRuleReplaysInTheLocalMonth) {
  auto config = server::LoadConfig(
      dir_.Write("calendar.yaml",
                 "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {name: monthly, "
                 "calendar: month, timezone: Europe/Lisbon, requests_per_unit: 5}\n"));
  ASSERT_TRUE(config) << config.error().message;
  constexpr int64_t kAprilMs = int64_t{1774998000} * 1000;
  const std::pair<int64_t, int> groups[] = {
      {kAprilMs - 3'600'000, 3}, {kAprilMs - 60'000, 2}, {kAprilMs, 4}, {kAprilMs + 1'800'000, 2}};
  std::string jsonl;
  for (const auto& [at, n] : groups) {
    for (int j = 0; j < n; ++j) {
      nlohmann::json check = {{"domain", "c"},
                              {"descriptors", {{{"entries", {{{"key", "k"}, {"value", "v"}}}}}}}};
      jsonl += nlohmann::json{{"t_ms", at + j}, {"check", check}}.dump() + "\n";
    }
  }
  auto in = test::TmpFileWith(jsonl);
  test::MemOut out;
  auto replay = ReplayConfig(*config, in.get(), ConfigReplayOutput::kSummary, out.file());
  ASSERT_TRUE(replay) << replay.error().message;
  EXPECT_EQ(replay->lines, 11u);
  EXPECT_EQ(replay->requests_over, 1u);
}

TEST_F(ConfigReplayTest, JsonlWritesEachAnswer) {
  auto in = test::TmpFileWith(Jsonl(Traffic()));
  test::MemOut out;
  auto replay = ReplayConfig(config_, in.get(), ConfigReplayOutput::kJsonl, out.file());
  ASSERT_TRUE(replay) << replay.error().message;
  const std::string text = out.str();
  EXPECT_EQ(static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n')), replay->lines);
  const auto first = nlohmann::json::parse(text.substr(0, text.find('\n')));
  EXPECT_EQ(first["t_ms"].get<int64_t>() / 60'000 * 60'000, kStartMs);
  EXPECT_EQ(first["response"]["overall"], "OK");
}

TEST_F(ConfigReplayTest, BadLinesAreRefusedWithTheirLineNumber) {
  const std::string good =
      R"({"t_ms":1000,"check":{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"a"}]}]}})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good + "\nnot json\n", "line 2: not a JSON object"},
      {good + "\n{\"check\":{}}\n", "line 2: t_ms: must be an integer"},
      {good + "\n{\"t_ms\":-1,\"check\":{}}\n", "line 2: t_ms: must be from 0"},
      {good + "\n{\"t_ms\":5,\"check\":[]}\n", "line 2: check: must be an object"},
      {"{\"t_ms\":5,\"check\":{\"domain\":\"api\",\"descriptors\":\"x\"}}\n",
       "line 1: check: descriptors"},
      {"{\"t_ms\":2000,\"check\":{\"domain\":\"api\",\"descriptors\":[]}}\n" + good + "\n",
       "line 1: "},
      {R"({"t_ms":2000,"check":{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"a"}]}]}})"
       "\n" +
           good + "\n",
       "line 2: t_ms 1000 is earlier"},
  };
  for (const auto& [input, expected] : cases) {
    auto in = test::TmpFileWith(input);
    auto replay = ReplayConfig(config_, in.get(), ConfigReplayOutput::kNone, nullptr);
    ASSERT_FALSE(replay) << input;
    EXPECT_EQ(replay.error().message.rfind(expected, 0), 0u) << replay.error().message;
  }
}

}  // namespace
}  // namespace sluice::cli
