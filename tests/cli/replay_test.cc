// cli::Replay end to end through the memory store: jsonl decisions checked against values worked
// out by hand, and the summary checked against a brute-force count over the same trace.
#include "cli/replay.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_test_util.h"
#include "sluice/memory_store.h"

namespace sluice::cli {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::MemOut;
using test::TmpFileWith;

struct ReplayRun {
  Result<ReplayResult> result;
  std::string text;         // everything Replay wrote
  std::vector<json> lines;  // jsonl mode: each output line, parsed
};

LimitSpec Spec(Algorithm a, int64_t limit, Duration per, int64_t burst = 0, bool shaper = false) {
  return LimitSpec{a, limit, per, burst, shaper};
}

ReplayRun DoReplay(const LimitSpec& spec, std::string_view trace, ReplayOutput output) {
  ReplayRun run{MakeError("not run"), {}, {}};
  auto limiter = MakeMemoryLimiter(spec);
  EXPECT_TRUE(limiter.has_value()) << (limiter ? "" : limiter.error().message);
  if (!limiter) return run;
  test::FilePtr in = TmpFileWith(trace);
  if (!in) return run;
  MemOut out;
  TraceReader reader(in.get());
  run.result = Replay(reader, **limiter, output, out.file());
  run.text = out.str();
  if (output == ReplayOutput::kJsonl) {
    size_t start = 0;
    while (start < run.text.size()) {
      size_t nl = run.text.find('\n', start);
      EXPECT_NE(nl, std::string::npos) << "jsonl output does not end with a newline";
      if (nl == std::string::npos) nl = run.text.size();
      const std::string line = run.text.substr(start, nl - start);
      try {
        run.lines.push_back(json::parse(line));
      } catch (const json::exception& e) {
        ADD_FAILURE() << "not JSON: '" << line << "': " << e.what();
      }
      start = nl + 1;
    }
  }
  return run;
}

std::string Repeat(std::string_view line, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += line;
    out += '\n';
  }
  return out;
}

std::set<std::string> FieldNames(const json& j) {
  std::set<std::string> names;
  for (const auto& [k, v] : j.items()) names.insert(k);
  return names;
}

const std::set<std::string> kMeterFields = {"t_ms", "key", "allowed", "remaining",
                                            "retry_after_ms"};
const std::set<std::string> kShaperFields = {"t_ms",           "key",     "allowed", "remaining",
                                             "retry_after_ms", "delay_ms"};

// One expected jsonl decision.
struct Want {
  int64_t t_ms;
  std::string key;
  bool allowed;
  int64_t remaining;
  int64_t retry_after_ms;
  int64_t delay_ms = -1;  // -1: no "delay_ms" field expected
};

void ExpectDecisions(const ReplayRun& run, const std::vector<Want>& want) {
  ASSERT_TRUE(run.result.has_value()) << run.result.error().message;
  ASSERT_EQ(run.lines.size(), want.size()) << run.text;
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(fmt::format("output line {}: {}", i + 1, run.lines[i].dump()));
    const json& j = run.lines[i];
    const Want& w = want[i];
    EXPECT_EQ(FieldNames(j), w.delay_ms < 0 ? kMeterFields : kShaperFields);
    EXPECT_EQ(j.at("t_ms"), w.t_ms);
    EXPECT_EQ(j.at("key"), w.key);
    EXPECT_EQ(j.at("allowed"), w.allowed);
    EXPECT_EQ(j.at("remaining"), w.remaining);
    EXPECT_EQ(j.at("retry_after_ms"), w.retry_after_ms);
    if (w.delay_ms >= 0) {
      EXPECT_EQ(j.value("delay_ms", int64_t{-1}), w.delay_ms);
    }
  }
}

TEST(ReplayTest, TokenBucketBurstThenRejections) {
  // 10/1s with a bucket of 50: one token per 100ms.
  const LimitSpec spec = Spec(Algorithm::kTokenBucket, 10, 1s, 50);
  const std::string trace = Repeat("10000,a", 60) + "10100,a\n10150,a\n10250,a\n";
  std::vector<Want> want;
  for (int i = 0; i < 50; ++i) want.push_back({10000, "a", true, 49 - i, 0});
  for (int i = 0; i < 10; ++i) want.push_back({10000, "a", false, 0, 100});
  want.push_back({10100, "a", true, 0, 0});    // one token back after 100ms
  want.push_back({10150, "a", false, 0, 50});  // half a token: 50ms to go
  want.push_back({10250, "a", true, 0, 0});    // 1.5 tokens: one used, half left
  const ReplayRun run = DoReplay(spec, trace, ReplayOutput::kJsonl);
  ExpectDecisions(run, want);
  ASSERT_TRUE(run.result);
  EXPECT_EQ(run.result->lines, 63u);
  EXPECT_EQ(run.result->admitted, 52u);
  EXPECT_EQ(run.result->rejected, 11u);
}

TEST(ReplayTest, RetryAfterIsRoundedUpToTheMillisecond) {
  // 3/1s: a token every 333.33..ms, so the wait is 334ms, never 333.
  const ReplayRun run = DoReplay(Spec(Algorithm::kTokenBucket, 3, 1s), Repeat("0,k", 4) + "1,k\n",
                                 ReplayOutput::kJsonl);
  ExpectDecisions(run, {{0, "k", true, 2, 0},
                        {0, "k", true, 1, 0},
                        {0, "k", true, 0, 0},
                        {0, "k", false, 0, 334},
                        {1, "k", false, 0, 333}});
}

TEST(ReplayTest, FixedWindowTwoPerSecond) {
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 2, 1s);
  const std::string trace =
      "10000,a\n"
      "10000,a\n"
      "10000,a\n"  // window [10000, 11000) full
      "10500,a\n"
      "10999,a\n"
      "10999,b\n"  // another key has its own window
      "11000,a\n"  // a new window
      "11000,a\n"
      "11001,a\n"
      "13999,a\n";
  ExpectDecisions(DoReplay(spec, trace, ReplayOutput::kJsonl), {{10000, "a", true, 1, 0},
                                                                {10000, "a", true, 0, 0},
                                                                {10000, "a", false, 0, 1000},
                                                                {10500, "a", false, 0, 500},
                                                                {10999, "a", false, 0, 1},
                                                                {10999, "b", true, 1, 0},
                                                                {11000, "a", true, 1, 0},
                                                                {11000, "a", true, 0, 0},
                                                                {11001, "a", false, 0, 999},
                                                                {13999, "a", true, 1, 0}});
}

TEST(ReplayTest, ShaperDelaysAdmittedRequestsEvenly) {
  // Leaky bucket 10/1s, queue 10: releases are 100ms apart.
  const LimitSpec spec = Spec(Algorithm::kLeakyBucket, 10, 1s, 0, /*shaper=*/true);
  const std::string trace = Repeat("5000,a", 11) + "5050,a\n5100,a\n5100,b\n";
  std::vector<Want> want;
  for (int i = 0; i < 10; ++i) want.push_back({5000, "a", true, 9 - i, 0, 100 * i});
  want.push_back({5000, "a", false, 0, 100, 0});  // queue full: one slot frees in 100ms
  want.push_back({5050, "a", false, 0, 50, 0});   // 9.5 queued
  want.push_back({5100, "a", true, 0, 0, 900});   // 9 queued ahead of it
  want.push_back({5100, "b", true, 9, 0, 0});
  ExpectDecisions(DoReplay(spec, trace, ReplayOutput::kJsonl), want);
}

TEST(ReplayTest, ShaperDelayIsRoundedUp) {
  // 3/1s: the second request waits 333.33..ms -> 334; 1ms later the third waits 666.67-1 -> 666.
  const LimitSpec spec = Spec(Algorithm::kLeakyBucket, 3, 1s, 0, true);
  ExpectDecisions(DoReplay(spec, "0,k\n0,k\n1,k\n", ReplayOutput::kJsonl),
                  {{0, "k", true, 2, 0, 0}, {0, "k", true, 1, 0, 334}, {1, "k", true, 0, 0, 666}});
}

TEST(ReplayTest, MeterModeHasNoDelayField) {
  const ReplayRun run =
      DoReplay(Spec(Algorithm::kLeakyBucket, 10, 1s), Repeat("0,a", 3), ReplayOutput::kJsonl);
  ExpectDecisions(run, {{0, "a", true, 9, 0}, {0, "a", true, 8, 0}, {0, "a", true, 7, 0}});
}

TEST(ReplayTest, CostsAreCharged) {
  const ReplayRun run = DoReplay(Spec(Algorithm::kTokenBucket, 10, 1s),
                                 "0,a,4\n0,a,4\n0,a,4\n0,a,2\n0,a,1\n", ReplayOutput::kJsonl);
  // 2 tokens left for the third: 2 missing at 100ms each.
  ExpectDecisions(run, {{0, "a", true, 6, 0},
                        {0, "a", true, 2, 0},
                        {0, "a", false, 2, 200},
                        {0, "a", true, 0, 0},
                        {0, "a", false, 0, 100}});
}

TEST(ReplayTest, CostAboveCapacityIsNeverRetryable) {
  struct Case {
    LimitSpec spec;
    int64_t capacity;
  };
  for (const Case& c :
       {Case{Spec(Algorithm::kTokenBucket, 10, 1s), 10},
        Case{Spec(Algorithm::kTokenBucket, 10, 1s, 20), 20},
        Case{Spec(Algorithm::kGcra, 10, 1s), 10}, Case{Spec(Algorithm::kFixedWindow, 2, 1s), 2},
        Case{Spec(Algorithm::kSlidingWindowLog, 2, 1s), 2},
        Case{Spec(Algorithm::kSlidingWindowCounter, 2, 1s), 2},
        Case{Spec(Algorithm::kLeakyBucket, 10, 1s), 10},
        Case{Spec(Algorithm::kLeakyBucket, 10, 1s, 0, true), 10}}) {
    SCOPED_TRACE(DescribeLimitSpec(c.spec));
    const std::string trace = fmt::format("1000,a,{}\n1000,a,{}\n", c.capacity + 1, c.capacity);
    const ReplayRun run = DoReplay(c.spec, trace, ReplayOutput::kJsonl);
    ASSERT_TRUE(run.result) << run.result.error().message;
    ASSERT_EQ(run.lines.size(), 2u) << run.text;
    const json& never = run.lines[0];
    EXPECT_EQ(never.at("allowed"), false);
    EXPECT_TRUE(never.at("retry_after_ms").is_null()) << never.dump();
    EXPECT_EQ(never.value("reason", ""), "cost_exceeds_capacity") << never.dump();
    EXPECT_EQ(never.at("remaining"), c.capacity) << "a hopeless request must not consume";
    if (c.spec.shaper) {
      EXPECT_EQ(never.value("delay_ms", -1), 0);
    }
    // The exact text, as the spec writes it.
    EXPECT_NE(run.text.find("\"retry_after_ms\":null,\"reason\":\"cost_exceeds_capacity\""),
              std::string::npos)
        << run.text;
    // The state was untouched: the full capacity still passes.
    const json& full = run.lines[1];
    EXPECT_EQ(full.at("allowed"), true) << full.dump();
    EXPECT_EQ(full.at("remaining"), 0);
    EXPECT_EQ(full.at("retry_after_ms"), 0);
    EXPECT_FALSE(full.contains("reason"));
    EXPECT_EQ(run.result->admitted, 1u);
    EXPECT_EQ(run.result->rejected, 1u);
  }
}

TEST(ReplayTest, KeysAreEscapedAndEchoed) {
  const std::vector<std::string> keys = {
      "plain",
      "a\"b",
      "back\\slash",
      "caf\xc3\xa9",
      "in\tside",
      "ctl\x01"
      "x",
      "\xf0\x9f\x98\x80",
      "sp ace",
      "{\"json\":1}",
  };
  std::string trace;
  for (size_t i = 0; i < keys.size(); ++i) trace += fmt::format("{},{}\n", 100 + i, keys[i]);
  const ReplayRun run = DoReplay(Spec(Algorithm::kTokenBucket, 5, 1s), trace, ReplayOutput::kJsonl);
  ASSERT_TRUE(run.result) << run.result.error().message;
  ASSERT_EQ(run.lines.size(), keys.size()) << run.text;
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(run.lines[i].at("key").get<std::string>(), keys[i]);
    EXPECT_EQ(run.lines[i].at("t_ms"), 100 + i);
    EXPECT_EQ(run.lines[i].at("remaining"), 4) << "each key has its own bucket";
  }
  // One object per line: no raw newline or tab may leak out of a key.
  EXPECT_EQ(std::count(run.text.begin(), run.text.end(), '\n'), static_cast<long>(keys.size()));
  EXPECT_EQ(run.text.find('\t'), std::string::npos);
}

TEST(ReplayTest, LongestKeyTheReaderAcceptsIsDecidedNormally) {
  // The reader's key limit must not exceed the store's: a 4096-byte key is an ordinary key, not
  // an invalid request (which would come out as retry_after_ms null).
  const std::string key(kMaxTraceKeyBytes, 'k');
  const ReplayRun run = DoReplay(Spec(Algorithm::kFixedWindow, 1, 1s),
                                 "0," + key + "\n0," + key + "\n", ReplayOutput::kJsonl);
  ExpectDecisions(run, {{0, key, true, 0, 0}, {0, key, false, 0, 1000}});
}

TEST(ReplayTest, CommentsAndBlankLinesProduceNoOutput) {
  const ReplayRun run = DoReplay(Spec(Algorithm::kTokenBucket, 5, 1s),
                                 "# header\n\n1,a\n  # x\n\r\n2,a\n", ReplayOutput::kJsonl);
  ExpectDecisions(run, {{1, "a", true, 4, 0}, {2, "a", true, 3, 0}});
  EXPECT_EQ(run.result->lines, 2u);
}

TEST(ReplayTest, EmptyTrace) {
  const ReplayRun jsonl = DoReplay(Spec(Algorithm::kTokenBucket, 5, 1s), "", ReplayOutput::kJsonl);
  ASSERT_TRUE(jsonl.result);
  EXPECT_EQ(jsonl.text, "");
  EXPECT_EQ(jsonl.result->lines, 0u);
  const ReplayRun summary =
      DoReplay(Spec(Algorithm::kTokenBucket, 5, 1s), "# nothing\n", ReplayOutput::kSummary);
  ASSERT_TRUE(summary.result);
  const json s = json::parse(summary.text);
  EXPECT_EQ(s.at("lines"), 0);
  EXPECT_EQ(s.at("admitted"), 0);
  EXPECT_EQ(s.at("rejected"), 0);
  EXPECT_EQ(s.at("keys"), json::object());
}

TEST(ReplayTest, StopsAtTheFirstBadLineAfterWritingEarlierDecisions) {
  const ReplayRun run = DoReplay(Spec(Algorithm::kTokenBucket, 5, 1s),
                                 "1,a\n2,b\n# c\n3,a,0\n4,a\n", ReplayOutput::kJsonl);
  ASSERT_FALSE(run.result);
  EXPECT_EQ(run.result.error().message.rfind("line 4: ", 0), 0u) << run.result.error().message;
  EXPECT_CONTAINS(run.result.error().message, "cost '0'");
  ASSERT_EQ(run.lines.size(), 2u) << run.text;
  EXPECT_EQ(run.lines[0].at("key"), "a");
  EXPECT_EQ(run.lines[1].at("key"), "b");

  const ReplayRun summary =
      DoReplay(Spec(Algorithm::kTokenBucket, 5, 1s), "1,a\n0,a\n", ReplayOutput::kSummary);
  ASSERT_FALSE(summary.result);
  EXPECT_CONTAINS(summary.result.error().message, "line 2: time 0 is before");
  EXPECT_EQ(summary.text, "") << "no summary for a trace that failed";
}

TEST(ReplayTest, LargeOutputIsWrittenCompletely) {
  // Far more than the 1 MiB output buffer.
  constexpr int kLines = 60000;
  std::string trace;
  for (int i = 0; i < kLines; ++i) trace += fmt::format("{},key-{}\n", i / 10, i % 97);
  const ReplayRun run =
      DoReplay(Spec(Algorithm::kSlidingWindowLog, 3, 1s), trace, ReplayOutput::kJsonl);
  ASSERT_TRUE(run.result) << run.result.error().message;
  ASSERT_EQ(run.lines.size(), static_cast<size_t>(kLines));
  EXPECT_EQ(run.result->lines, static_cast<uint64_t>(kLines));
  uint64_t admitted = 0;
  for (int i = 0; i < kLines; ++i) {
    if (run.lines[i].at("t_ms") != i / 10 ||
        run.lines[i].at("key") != fmt::format("key-{}", i % 97)) {
      FAIL() << "line " << i << " out of order: " << run.lines[i].dump();
    }
    admitted += run.lines[i].at("allowed").get<bool>();
  }
  EXPECT_EQ(admitted, run.result->admitted);
  EXPECT_EQ(run.result->admitted + run.result->rejected, static_cast<uint64_t>(kLines));
}

// Replay decides lines in batches; the decisions must be those of one Decide per line, in
// order, also when a key repeats inside a batch.
TEST(ReplayTest, BatchedDecisionsMatchOneDecidePerLine) {
  std::mt19937_64 rng(7);
  std::string trace;
  struct Line {
    int64_t t_ms;
    std::string key;
    int64_t cost;
  };
  std::vector<Line> lines;
  int64_t t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += static_cast<int64_t>(rng() % 3);
    Line line{t, fmt::format("k{}", rng() % 23), 1 + static_cast<int64_t>(rng() % 3)};
    trace += fmt::format("{},{},{}\n", line.t_ms, line.key, line.cost);
    lines.push_back(std::move(line));
  }
  for (const Algorithm a :
       {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kFixedWindow,
        Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter, Algorithm::kGcra}) {
    SCOPED_TRACE(AlgorithmName(a));
    const LimitSpec spec = Spec(a, 20, 1s);
    const ReplayRun run = DoReplay(spec, trace, ReplayOutput::kJsonl);
    ASSERT_TRUE(run.result) << run.result.error().message;
    ASSERT_EQ(run.lines.size(), lines.size());
    auto reference = MakeMemoryLimiter(spec);
    ASSERT_TRUE(reference);
    int rejected = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const Decision d =
          (*reference)->Decide(lines[i].key, FromNanos(lines[i].t_ms * 1'000'000), lines[i].cost);
      rejected += !d.allowed;
      const json& j = run.lines[i];
      ASSERT_EQ(j.at("key"), lines[i].key) << "line " << i + 1;
      ASSERT_EQ(j.at("allowed"), d.allowed) << "line " << i + 1;
      ASSERT_EQ(j.at("remaining"), d.remaining) << "line " << i + 1;
      ASSERT_EQ(j.at("retry_after_ms"), CeilMillis(d.retry_after)) << "line " << i + 1;
    }
    EXPECT_GT(rejected, 100) << "the trace should exercise rejections";
  }
}

TEST(ReplayTest, BadLineInALaterBatchWritesEveryEarlierDecision) {
  std::string trace;
  for (int i = 0; i < 36; ++i) trace += fmt::format("{},key-{}\n", i, i % 5);
  trace += "36,key-0,-1\n37,key-1\n";
  const ReplayRun run = DoReplay(Spec(Algorithm::kTokenBucket, 5, 1s), trace, ReplayOutput::kJsonl);
  ASSERT_FALSE(run.result);
  EXPECT_EQ(run.result.error().message.rfind("line 37: ", 0), 0u) << run.result.error().message;
  ASSERT_EQ(run.lines.size(), 36u) << run.text;
  for (int i = 0; i < 36; ++i) EXPECT_EQ(run.lines[i].at("t_ms"), i);
}

// ---- Summary ----

TEST(ReplaySummaryTest, HandWorkedFixedWindowEdge) {
  // Two at the end of one window and two at the start of the next: 4 admitted within 100ms.
  const std::string trace =
      "900,a\n900,a\n1000,a\n1000,a\n"
      "1500,a\n"  // rejected: window [1000, 2000) is full
      "1999,b\n"
      "2000,a\n";  // (1000, 2000] holds only this one
  const ReplayRun run =
      DoReplay(Spec(Algorithm::kFixedWindow, 2, 1s), trace, ReplayOutput::kSummary);
  ASSERT_TRUE(run.result) << run.result.error().message;
  const json s = json::parse(run.text);
  EXPECT_EQ(s.at("algorithm"), "fixed_window");
  EXPECT_EQ(s.at("limit"), 2);
  EXPECT_EQ(s.at("per"), "1s");
  EXPECT_EQ(s.at("burst"), 2);
  EXPECT_EQ(s.at("shaper"), false);
  EXPECT_EQ(s.at("lines"), 7);
  EXPECT_EQ(s.at("admitted"), 6);
  EXPECT_EQ(s.at("rejected"), 1);
  EXPECT_EQ(s.at("keys"), json::parse(R"({
      "a": {"admitted": 5, "rejected": 1, "max_admitted_in_window": 4},
      "b": {"admitted": 1, "rejected": 0, "max_admitted_in_window": 1}})"));
}

TEST(ReplaySummaryTest, WindowIsOpenOnTheLeft) {
  // sliding_window_log 2/1s: hits at 0 and 1000 are not in the same (t-1s, t] interval.
  const ReplayRun run = DoReplay(Spec(Algorithm::kSlidingWindowLog, 2, 1s),
                                 "0,a\n0,a\n1000,a\n1000,a\n1999,a\n", ReplayOutput::kSummary);
  ASSERT_TRUE(run.result) << run.result.error().message;
  const json a = json::parse(run.text).at("keys").at("a");
  EXPECT_EQ(a.at("admitted"), 4);
  EXPECT_EQ(a.at("rejected"), 1);
  EXPECT_EQ(a.at("max_admitted_in_window"), 2);
}

TEST(ReplaySummaryTest, WindowCountIsWeightedByCost) {
  const ReplayRun run = DoReplay(Spec(Algorithm::kTokenBucket, 10, 1s, 20),
                                 "0,a,7\n0,a,7\n500,a,7\n", ReplayOutput::kSummary);
  ASSERT_TRUE(run.result) << run.result.error().message;
  const json s = json::parse(run.text);
  EXPECT_EQ(s.at("burst"), 20);
  // 20 tokens: 7 + 7 at 0 leaves 6, +5 by 500ms = 11: the third (7) passes.
  EXPECT_EQ(s.at("keys").at("a"),
            json::parse(R"({"admitted": 3, "rejected": 0, "max_admitted_in_window": 21})"));
}

struct TraceRow {
  int64_t t_ms;
  std::string key;
  int64_t cost;
};

std::vector<TraceRow> RandomTrace(uint32_t seed, int n, int64_t capacity) {
  std::mt19937 rng(seed);
  const std::vector<std::string> keys = {"alice", "bob", "carol", "dave", "k\"5", "\xc3\xa9ve"};
  std::discrete_distribution<int> key_pick({40, 25, 15, 10, 6, 4});
  std::uniform_int_distribution<int> gap_kind(0, 9);
  std::vector<TraceRow> out;
  int64_t t = 1'700'000'000'000;
  for (int i = 0; i < n; ++i) {
    const int g = gap_kind(rng);
    if (g < 4) {
      // same millisecond
    } else if (g < 8) {
      t += std::uniform_int_distribution<int64_t>(1, 40)(rng);
    } else if (g < 9) {
      t += std::uniform_int_distribution<int64_t>(200, 1500)(rng);
    } else {
      t += std::uniform_int_distribution<int64_t>(0, 5)(rng) * 250;  // on window edges
    }
    const int c = std::uniform_int_distribution<int>(0, 99)(rng);
    const int64_t cost = c < 80 ? 1 : c < 97 ? 1 + c % 3 : capacity + 1;
    out.push_back({t, keys[key_pick(rng)], cost});
  }
  return out;
}

std::string TraceText(const std::vector<TraceRow>& rows) {
  std::string out = "# t_ms,key,cost\n";
  for (const TraceRow& r : rows) {
    if (r.cost == 1) {
      out += fmt::format("{},{}\n", r.t_ms, r.key);
    } else {
      out += fmt::format("{},{},{}\n", r.t_ms, r.key, r.cost);
    }
  }
  return out;
}

struct KeyCounts {
  uint64_t admitted = 0;
  uint64_t rejected = 0;
  int64_t max_in_window = 0;
};

// Brute force: for every admitted request at time t, the total admitted cost of the key's
// requests in (t - D, t], over the whole list (O(n^2), no sliding state).
std::map<std::string, KeyCounts> BruteForce(const std::vector<TraceRow>& rows,
                                            const std::vector<bool>& allowed, int64_t period_ms) {
  std::map<std::string, KeyCounts> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    KeyCounts& k = out[rows[i].key];
    if (!allowed[i]) {
      ++k.rejected;
      continue;
    }
    ++k.admitted;
    int64_t sum = 0;
    for (size_t j = 0; j < rows.size(); ++j) {
      if (allowed[j] && rows[j].key == rows[i].key && rows[j].t_ms > rows[i].t_ms - period_ms &&
          rows[j].t_ms <= rows[i].t_ms) {
        sum += rows[j].cost;
      }
    }
    k.max_in_window = std::max(k.max_in_window, sum);
  }
  return out;
}

TEST(ReplaySummaryTest, MatchesBruteForceOverJsonlDecisions) {
  const std::vector<LimitSpec> specs = {
      Spec(Algorithm::kTokenBucket, 5, 1s),
      Spec(Algorithm::kTokenBucket, 3, 250ms, 8),
      Spec(Algorithm::kGcra, 4, 1s, 6),
      Spec(Algorithm::kLeakyBucket, 5, 1s),
      Spec(Algorithm::kLeakyBucket, 5, 1s, 3, true),
      Spec(Algorithm::kFixedWindow, 5, 1s),
      Spec(Algorithm::kFixedWindow, 2, 250ms),
      Spec(Algorithm::kSlidingWindowLog, 5, 1s),
      Spec(Algorithm::kSlidingWindowCounter, 5, 1s),
      Spec(Algorithm::kSlidingWindowCounter, 7, 2s),
  };
  uint32_t seed = 1;
  for (const LimitSpec& spec : specs) {
    for (int rep = 0; rep < 2; ++rep, ++seed) {
      SCOPED_TRACE(fmt::format("{} seed {}", DescribeLimitSpec(spec), seed));
      const std::vector<TraceRow> rows = RandomTrace(seed, 1500, spec.Capacity());
      const std::string text = TraceText(rows);
      const int64_t period_ms = spec.period / 1ms;

      const ReplayRun jsonl = DoReplay(spec, text, ReplayOutput::kJsonl);
      ASSERT_TRUE(jsonl.result) << jsonl.result.error().message;
      ASSERT_EQ(jsonl.lines.size(), rows.size());
      std::vector<bool> allowed;
      for (size_t i = 0; i < rows.size(); ++i) {
        const json& j = jsonl.lines[i];
        ASSERT_EQ(j.at("t_ms"), rows[i].t_ms) << i;
        ASSERT_EQ(j.at("key"), rows[i].key) << i;
        const bool a = j.at("allowed").get<bool>();
        if (rows[i].cost > spec.Capacity()) {
          EXPECT_FALSE(a);
          EXPECT_TRUE(j.at("retry_after_ms").is_null()) << j.dump();
        } else {
          EXPECT_EQ(j.at("retry_after_ms").get<int64_t>() == 0, a) << j.dump();
        }
        allowed.push_back(a);
      }
      const auto want = BruteForce(rows, allowed, period_ms);
      uint64_t total_admitted = 0;
      for (bool a : allowed) total_admitted += a;

      const ReplayRun summary = DoReplay(spec, text, ReplayOutput::kSummary);
      ASSERT_TRUE(summary.result) << summary.result.error().message;
      json s;
      ASSERT_NO_THROW(s = json::parse(summary.text)) << summary.text;
      EXPECT_EQ(s.at("algorithm"), std::string(AlgorithmName(spec.algorithm)));
      EXPECT_EQ(s.at("limit"), spec.limit);
      EXPECT_EQ(s.at("per"), period_ms == 250 ? "250ms" : fmt::format("{}s", period_ms / 1000));
      EXPECT_EQ(s.at("burst"), spec.Capacity());
      EXPECT_EQ(s.at("shaper"), spec.shaper);
      EXPECT_EQ(s.at("lines"), rows.size());
      EXPECT_EQ(s.at("admitted"), total_admitted);
      EXPECT_EQ(s.at("rejected"), rows.size() - total_admitted);
      EXPECT_EQ(summary.result->admitted, total_admitted);

      const json& keys = s.at("keys");
      ASSERT_EQ(keys.size(), want.size()) << keys.dump();
      for (const auto& [key, counts] : want) {
        SCOPED_TRACE(key);
        ASSERT_TRUE(keys.contains(key)) << keys.dump();
        const json& k = keys.at(key);
        EXPECT_EQ(FieldNames(k),
                  (std::set<std::string>{"admitted", "rejected", "max_admitted_in_window"}));
        EXPECT_EQ(k.at("admitted"), counts.admitted);
        EXPECT_EQ(k.at("rejected"), counts.rejected);
        EXPECT_EQ(k.at("max_admitted_in_window"), counts.max_in_window);
        // Sanity of the trace itself: it must exercise both outcomes for the busiest key.
        if (key == "alice") {
          EXPECT_GT(counts.admitted, 0u);
          EXPECT_GT(counts.rejected, 0u);
        }
        // The exact sliding log can never exceed its limit in any window.
        if (spec.algorithm == Algorithm::kSlidingWindowLog) {
          EXPECT_LE(counts.max_in_window, spec.limit);
        }
      }
    }
  }
}

// ---- CeilMillis ----

TEST(ReplayTest, CeilMillis) {
  EXPECT_EQ(CeilMillis(Duration(0)), 0);
  EXPECT_EQ(CeilMillis(Duration(1)), 1);
  EXPECT_EQ(CeilMillis(Duration(999'999)), 1);
  EXPECT_EQ(CeilMillis(1ms), 1);
  EXPECT_EQ(CeilMillis(1ms + Duration(1)), 2);
  EXPECT_EQ(CeilMillis(100ms), 100);
  EXPECT_EQ(CeilMillis(Duration(333'333'334)), 334);
  EXPECT_EQ(CeilMillis(std::chrono::hours(24)), 86'400'000);
}

}  // namespace
}  // namespace sluice::cli
