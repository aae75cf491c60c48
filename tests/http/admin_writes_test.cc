// POST /v1/state (credits, debits, remaining) and the audit log, through the HTTP API over the
// real service, on the memory store and on a real redis-server (through the over-limit cache
// OpenStore puts in front of it). The oracle is what follows a change: after crediting N to an
// exhausted counter exactly N more requests pass, after setting remaining R exactly R do, and a
// surplus is gone when its window ends. Time is a ManualClock.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/api_tokens.h"
#include "http/http_api.h"
#include "service/audit_log.h"
#include "service/caller_auth.h"
#include "service/rate_limit_service.h"
#include "sluice/clock.h"
#include "sluice/open_store.h"
#include "support/redis_server.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using nlohmann::json;
using sluice::testing::RedisServer;
using test::TempConfigDir;

// Every algorithm, 10 an hour. The window starts at the fixture's start.
constexpr char kConfig[] = R"yaml(
domain: d
descriptors:
  - key: fixed_window
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: fixed_window}
  - key: sliding_window_counter
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: sliding_window_counter}
  - key: sliding_window_log
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: sliding_window_log}
  - key: token_bucket
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: gcra}
  - key: leaky_bucket
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: leaky_bucket}
  # Beyond Lua's exact doubles for the narrow scripts (a prime rate over a year: 999983 per
  # 31536000000000 us does not reduce), so Redis runs their wide variants.
  - key: wide_token_bucket
    rate_limit: {period: 365d, requests_per_unit: 999983, algorithm: token_bucket}
  - key: wide_gcra
    rate_limit: {period: 365d, requests_per_unit: 999983, algorithm: gcra}
  - key: wide_leaky_bucket
    rate_limit: {period: 365d, requests_per_unit: 999983, algorithm: leaky_bucket}
  # A calendar day in Tokyo: kStart is 17:00 there, so the window ends 7 hours later.
  - key: calendar_day
    rate_limit: {calendar: day, timezone: Asia/Tokyo, requests_per_unit: 10}
  - key: wide_sliding_window_counter
    rate_limit: {period: 365d, requests_per_unit: 999983, algorithm: sliding_window_counter}
)yaml";

constexpr const char* kAlgorithms[] = {
    "fixed_window", "sliding_window_counter", "sliding_window_log", "token_bucket",
    "gcra",         "leaky_bucket",           "calendar_day"};

// 1.8e9 s is a whole number of hours: windows start there.
const Timestamp kStart = FromNanos(int64_t{1'800'000'000} * 1'000'000'000);

RedisServer& Redis() {
  static RedisServer* server = new RedisServer();  // one per test binary, stopped at exit
  return *server;
}

// A node: its store (its own over-limit cache on Redis), service and API, on a shared clock.
struct Node {
  std::unique_ptr<RateLimitService> service;
  std::unique_ptr<HttpApi> api;
};

class AdminWrites : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("d.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    config_ = *config;
    auto log = AuditLog::Open((dir_.path() / "audit.log").string());
    ASSERT_TRUE(log.has_value()) << log.error().message;
    audit_ = std::move(*log);
    node_ = MakeNode();
  }

  Node MakeNode(AuditLog* audit = nullptr) {
    OpenStoreOptions store_options;
    store_options.clock = &clock_;
    store_options.redis_server_time = false;  // the manual clock decides on Redis too
    store_options.redis_command_timeout = std::chrono::milliseconds(5000);
    store_options.redis_key_prefix =
        "aw" + std::to_string(getpid()) + "_" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string where =
        GetParam() == "memory" ? "memory" : "redis://127.0.0.1:" + std::to_string(Redis().port());
    auto store = OpenStore(where, store_options);
    EXPECT_TRUE(store.has_value()) << store.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    Node node;
    auto service = RateLimitService::Create(config_, *store, options, &metrics_);
    EXPECT_TRUE(service.has_value()) << service.error().message;
    node.service = std::move(*service);
    HttpApiOptions api_options;
    api_options.admin_token = "t";
    api_options.audit = audit != nullptr ? audit : audit_.get();
    api_options.clock = &clock_;
    node.api = std::make_unique<HttpApi>(node.service.get(), &metrics_, api_options);
    return node;
  }

  static int Check(const Node& node, std::string_view alg, std::string_view value) {
    const std::string body = R"({"domain":"d","descriptors":[{"entries":[{"key":")" +
                             std::string(alg) + R"(","value":")" + std::string(value) + "\"}]}]}";
    return node.api->Handle({"POST", "/v1/check", "", body}).status;
  }
  int Check(std::string_view alg, std::string_view value) { return Check(node_, alg, value); }

  // Requests that pass before the first refusal (at most `most`).
  int Passes(std::string_view alg, std::string_view value, int most = 40) {
    for (int n = 0; n < most; ++n) {
      if (Check(alg, value) != 200) return n;
    }
    return most;
  }

  static HttpReply Post(const Node& node, std::string_view alg, std::string_view value,
                        const std::string& body, std::string_view auth = "Bearer t") {
    const std::string target = "/v1/state?domain=d&" + std::string(alg) + "=" + std::string(value);
    return node.api->Handle({"POST", target, auth, body});
  }
  HttpReply Post(std::string_view alg, std::string_view value, const std::string& body) {
    return Post(node_, alg, value, body);
  }

  // The answer's before and after remaining.
  static std::pair<int64_t, int64_t> BeforeAfter(const HttpReply& r) {
    const json j = json::parse(r.body);
    return {j["before"]["remaining"].get<int64_t>(), j["after"]["remaining"].get<int64_t>()};
  }

  std::vector<json> AuditLines() const {
    std::ifstream in(dir_.path() / "audit.log");
    std::vector<json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    return lines;
  }

  TempConfigDir dir_{"admin-writes"};
  ManualClock clock_{kStart + std::chrono::seconds(10)};
  Metrics metrics_;
  std::shared_ptr<const Config> config_;
  std::unique_ptr<AuditLog> audit_;
  Node node_;
};

TEST_P(AdminWrites, ACreditToAnExhaustedCounterLetsExactlyThatManyMorePass) {
  for (const char* alg : kAlgorithms) {
    SCOPED_TRACE(alg);
    ASSERT_EQ(Passes(alg, "k"), 10);
    const HttpReply r = Post(alg, "k", R"({"credit": 4})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{0}, int64_t{4}));
    EXPECT_EQ(Passes(alg, "k"), 4);
  }
}

TEST_P(AdminWrites, ACreditNeverGoesBeyondTheLimitWithoutAllowOverLimit) {
  for (const char* alg : kAlgorithms) {
    SCOPED_TRACE(alg);
    ASSERT_EQ(Passes(alg, "k", 3), 3);
    const HttpReply r = Post(alg, "k", R"({"credit": 1000})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{7}, int64_t{10}));
    EXPECT_EQ(Passes(alg, "k"), 10);
  }
}

TEST_P(AdminWrites, ADebitTakesThatManyAndBeyondTheLimitIntoDebt) {
  for (const char* alg : kAlgorithms) {
    SCOPED_TRACE(alg);
    HttpReply r = Post(alg, "k", R"({"debit": 7})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{10}, int64_t{3}));
    EXPECT_EQ(Passes(alg, "k"), 3);
    // Into debt: a credit of 5 then repays it and leaves nothing to spend.
    r = Post(alg, "k", R"({"debit": 5})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{0}, int64_t{0}));
    r = Post(alg, "k", R"({"credit": 5})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r).second, 0);
    EXPECT_EQ(Passes(alg, "k"), 0);
  }
}

TEST_P(AdminWrites, RemainingSetsTheCounterExactlyWhateverItHeld) {
  for (const char* alg : kAlgorithms) {
    SCOPED_TRACE(alg);
    ASSERT_EQ(Passes(alg, "k", 8), 8);
    HttpReply r = Post(alg, "k", R"({"remaining": 5})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{2}, int64_t{5}));
    EXPECT_EQ(Passes(alg, "k"), 5);
    // From debt too.
    ASSERT_EQ(Post(alg, "k", R"({"debit": 10})").status, 200);
    r = Post(alg, "k", R"({"remaining": 3})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r).second, 3);
    EXPECT_EQ(Passes(alg, "k"), 3);
    r = Post(alg, "k", R"({"remaining": 0})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Passes(alg, "k"), 0);
  }
}

TEST_P(AdminWrites, WideLimitsAreAdjustedAsNarrowOnes) {
  for (const char* alg :
       {"wide_token_bucket", "wide_gcra", "wide_leaky_bucket", "wide_sliding_window_counter"}) {
    SCOPED_TRACE(alg);
    HttpReply r = Post(alg, "k", R"({"debit": 10})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{999983}, int64_t{999973}));
    r = Post(alg, "k", R"({"credit": 4})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{999973}, int64_t{999977}));
    r = Post(alg, "k", R"({"remaining": 3})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BeforeAfter(r).second, 3);
    EXPECT_EQ(Passes(alg, "k"), 3);
    r = Post(alg, "k", R"({"credit": 2})");
    EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{0}, int64_t{2}));
    EXPECT_EQ(Passes(alg, "k"), 2);
  }
}

TEST_P(AdminWrites, TheAnswerHoldsTheCounterAsGetStateShowsIt) {
  ASSERT_EQ(Passes("fixed_window", "k", 4), 4);
  const HttpReply r = Post("fixed_window", "k", R"({"credit": 2})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = json::parse(r.body);
  const json state = json::parse(
      node_.api->Handle({"GET", "/v1/state?domain=d&fixed_window=k", "Bearer t", ""}).body);
  EXPECT_EQ(answer["after"], state);
  EXPECT_EQ(answer["action"], "credit");
  EXPECT_EQ(answer["counter_key"], state["counter_key"]);
  EXPECT_EQ(answer["before"]["remaining"], 6);
  EXPECT_EQ(state["remaining"], 8);
}

TEST_P(AdminWrites, ASurplusIsCappedAtOneCapacityAndLostAtTheWindowsEnd) {
  ASSERT_EQ(Passes("fixed_window", "k"), 10);
  HttpReply r = Post("fixed_window", "k", R"({"credit": 35, "allow_over_limit": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{0}, int64_t{20}));
  EXPECT_EQ(Passes("fixed_window", "k"), 20);

  // A fresh key: 15 remaining, 2 spent; the next window starts at 10 again, not 23.
  r = Post("fixed_window", "j", R"({"remaining": 15, "allow_over_limit": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{10}, int64_t{15}));
  EXPECT_GT(json::parse(r.body)["after"]["reset_after_ms"].get<int64_t>(), 0);
  EXPECT_EQ(Passes("fixed_window", "j", 2), 2);
  clock_.Advance(std::chrono::minutes(59));  // still the same window: the surplus stays
  r = Post("fixed_window", "j", R"({"credit": 0})");
  EXPECT_EQ(BeforeAfter(r).first, 13);
  // A plain credit neither adds to the surplus nor takes it away.
  r = Post("fixed_window", "j", R"({"credit": 5})");
  EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{13}, int64_t{13}));
  clock_.Advance(std::chrono::minutes(1));
  EXPECT_EQ(Passes("fixed_window", "j"), 10);
}

TEST_P(AdminWrites, ACalendarWindowsSurplusIsLostAtTheLocalMidnight) {
  ASSERT_EQ(Passes("calendar_day", "k"), 10);
  HttpReply r = Post("calendar_day", "k", R"({"credit": 35, "allow_over_limit": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(BeforeAfter(r), std::make_pair(int64_t{0}, int64_t{20}));
  // The surplus lasts as long as the day: until 00:00 in Tokyo, 15:00 UTC.
  const int64_t reset_ms = json::parse(r.body)["after"]["reset_after_ms"].get<int64_t>();
  EXPECT_EQ(reset_ms, (7 * 3600 - 10) * 1000);
  EXPECT_EQ(Passes("calendar_day", "k", 15), 15);
  clock_.Advance(std::chrono::seconds(7 * 3600 - 11));  // 23:59:59 in Tokyo: the same day
  EXPECT_EQ(Passes("calendar_day", "k"), 5);
  clock_.Advance(std::chrono::seconds(1));  // the next day starts at the limit, no surplus
  EXPECT_EQ(Passes("calendar_day", "k"), 10);
}

TEST_P(AdminWrites, WrongBodiesAreRefusedWithAReasonAndChangeNothing) {
  const std::pair<const char*, const char*> bad[] = {
      {"not json", "JSON object"},
      {"[1]", "JSON object"},
      {"{}", "give one of"},
      {R"({"credit": 1, "debit": 1})", "exactly one"},
      {R"({"credit": -1})", "whole number"},
      {R"({"credit": 1.5})", "whole number"},
      {R"({"credit": "1"})", "whole number"},
      {R"({"credit": 9007199254740993})", "whole number"},
      {R"({"refund": 1})", "unknown field 'refund'"},
      {R"({"credit": 1, "allow_over_limit": 1})", "true or false"},
      {R"({"remaining": 11})", "beyond what the limit holds"},
      {R"({"remaining": 21, "allow_over_limit": true})", "beyond what the limit holds"},
      {R"({"debit": 1, "allow_over_limit": true})", "not a debit"},
  };
  for (const auto& [body, reason] : bad) {
    SCOPED_TRACE(body);
    const HttpReply r = Post("fixed_window", "k", body);
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find(reason), std::string::npos) << r.body;
  }
  const HttpReply r = Post("token_bucket", "k", R"({"credit": 1, "allow_over_limit": true})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("fixed_window only"), std::string::npos) << r.body;
  EXPECT_EQ(Passes("fixed_window", "k"), 10);
  EXPECT_EQ(Post("fixed_window", "k", "{\"credit\":1}").status, 200);
  // The refused bodies never reached the log: one write, two lines.
  EXPECT_EQ(AuditLines().size(), 2u);
}

TEST_P(AdminWrites, EveryWriteIsAuditedWithTheCounterBeforeAndAfter) {
  ASSERT_EQ(Passes("fixed_window", "k", 3), 3);
  HttpReply r = node_.api->Handle({"POST", "/v1/state?domain=d&fixed_window=k", "Bearer t",
                                   R"({"credit": 2})", nullptr, "X-Request-Id: req-42\r\n"});
  ASSERT_EQ(r.status, 200) << r.body;
  r = node_.api->Handle({"DELETE", "/v1/state?domain=d&fixed_window=k", "Bearer t", ""});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<json> lines = AuditLines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["phase"], "intent");
  EXPECT_EQ(lines[0]["action"], "credit");
  EXPECT_EQ(lines[0]["client"], "admin-token");
  EXPECT_EQ(lines[0]["domain"], "d");
  EXPECT_EQ(lines[0]["counter_key"], "d|fixed_window#fixed_window=k");
  EXPECT_EQ(lines[0]["request_id"], "req-42");
  EXPECT_EQ(lines[0]["change"], json::parse(R"({"credit": 2})"));
  EXPECT_FALSE(lines[0].contains("after"));
  EXPECT_EQ(lines[0]["time"], "2027-01-15T08:00:10.000Z");
  EXPECT_EQ(lines[1]["phase"], "done");
  EXPECT_EQ(lines[1]["request_id"], "req-42");
  EXPECT_EQ(lines[1]["before"]["remaining"], 7);
  EXPECT_EQ(lines[1]["after"]["remaining"], 9);
  EXPECT_EQ(lines[2]["action"], "reset");
  EXPECT_EQ(lines[2]["before"]["remaining"], 9);
  EXPECT_EQ(lines[3]["after"]["remaining"], 10);
  EXPECT_EQ(lines[2]["request_id"], lines[3]["request_id"]);
  EXPECT_EQ(lines[2]["request_id"].get<std::string>().size(), 32u);  // made up: none was sent
  // No secret: the admin token appears nowhere.
  std::ifstream in(dir_.path() / "audit.log");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("Bearer"), std::string::npos);
  EXPECT_EQ(text.find("\"t\""), std::string::npos);
}

TEST_P(AdminWrites, AWriteThatCannotBeAuditedIsRefusedAndDoesNotHappen) {
  auto full = AuditLog::Open("/dev/full");  // every write fails with ENOSPC
  ASSERT_TRUE(full.has_value()) << full.error().message;
  Node node = MakeNode(full->get());
  ASSERT_EQ(Passes("fixed_window", "k"), 10);
  HttpReply r = Post(node, "fixed_window", "k", R"({"credit": 5})");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("audit log"), std::string::npos) << r.body;
  r = node.api->Handle({"DELETE", "/v1/state?domain=d&fixed_window=k", "Bearer t", ""});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Passes("fixed_window", "k"), 0);  // neither the credit nor the reset happened
}

// Two nodes share a counter only on Redis. Each has its own over-limit cache, which keeps a
// refusal for at most a second (kRefusalTrust): then it asks Redis again.
TEST_P(AdminWrites, ACreditOnOneNodeTakesEffectOnAnotherWithinASecond) {
  if (GetParam() == "memory") GTEST_SKIP() << "memory stores are one node's own";
  Node other = MakeNode();
  ASSERT_EQ(Passes("fixed_window", "k"), 10);
  // The other node learns the refusal (on Redis, its over-limit cache keeps it).
  ASSERT_EQ(Check(other, "fixed_window", "k"), 429);
  ASSERT_EQ(Post("fixed_window", "k", R"({"credit": 3})").status, 200);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Check(other, "fixed_window", "k"), 200);
  EXPECT_EQ(Check(other, "fixed_window", "k"), 200);
  EXPECT_EQ(Check(other, "fixed_window", "k"), 200);
  EXPECT_EQ(Check(other, "fixed_window", "k"), 429);
}

// --api-tokens: a client writes only with admin: true, for its own domains, and is named by its
// name in the audit log.
TEST_P(AdminWrites, OnlyAdminClientsWriteAndTheLogNamesThem) {
  const auto hex = [](std::string_view token) {
    std::string out;
    for (unsigned char b : DigestOfToken(token)) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    }
    return out;
  };
  const std::string tokens =
      "clients:\n"
      "  - {name: reader, token_sha256: " +
      hex("tok-reader") +
      ", domains: [d]}\n"
      "  - {name: support-desk, token_sha256: " +
      hex("tok-support") +
      ", domains: [d], admin: true}\n"
      "  - {name: elsewhere, token_sha256: " +
      hex("tok-elsewhere") + ", domains: [other], admin: true}\n";
  auto table = ParseApiTokens("tokens.yaml", tokens);
  ASSERT_TRUE(table.has_value()) << table.error().message;
  CallerIdentity callers(*table, &metrics_);
  HttpApiOptions api_options;
  api_options.admin_token = "t";
  api_options.audit = audit_.get();
  api_options.clock = &clock_;
  api_options.callers = &callers;
  HttpApi api(node_.service.get(), &metrics_, api_options);
  const auto post = [&api](std::string_view token) {
    return api
        .Handle({"POST", "/v1/state?domain=d&fixed_window=k", "Bearer " + std::string(token),
                 R"({"debit": 1})"})
        .status;
  };
  EXPECT_EQ(post("tok-reader"), 403);
  EXPECT_EQ(post("tok-elsewhere"), 403);
  EXPECT_EQ(
      api.Handle({"DELETE", "/v1/state?domain=d&fixed_window=k", "Bearer tok-reader", ""}).status,
      403);
  EXPECT_EQ(post("tok-support"), 200);
  EXPECT_EQ(Passes("fixed_window", "k"), 9);
  const std::vector<json> lines = AuditLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["client"], "support-desk");
  EXPECT_EQ(lines[1]["client"], "support-desk");
  std::ifstream in(dir_.path() / "audit.log");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("tok-support"), std::string::npos);
  EXPECT_EQ(text.find(hex("tok-support")), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Stores, AdminWrites, ::testing::Values("memory", "redis"),
                         [](const auto& param) { return param.param; });

TEST(AuditLog, ReopenFollowsALogrotateRename) {
  TempConfigDir dir("audit-reopen");
  const auto path = dir.path() / "audit.log";
  auto log = AuditLog::Open(path.string());
  ASSERT_TRUE(log.has_value()) << log.error().message;
  ASSERT_TRUE((*log)->Append("{\"n\":1}"));
  std::filesystem::rename(path, dir.path() / "audit.log.1");
  ASSERT_TRUE((*log)->Append("{\"n\":2}"));  // still the renamed file, as logrotate expects
  ASSERT_TRUE((*log)->Reopen());
  ASSERT_TRUE((*log)->Append("{\"n\":3}"));
  const auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(read(dir.path() / "audit.log.1"), "{\"n\":1}\n{\"n\":2}\n");
  EXPECT_EQ(read(path), "{\"n\":3}\n");
}

TEST(AuditLog, AFailedReopenKeepsWritingToTheFileOpen) {
  TempConfigDir dir("audit-reopen-fail");
  const auto sub = dir.path() / "sub";
  std::filesystem::create_directories(sub);
  auto log = AuditLog::Open((sub / "audit.log").string());
  ASSERT_TRUE(log.has_value());
  std::filesystem::rename(sub, dir.path() / "moved");  // the path's directory is gone
  EXPECT_FALSE((*log)->Reopen());
  ASSERT_TRUE((*log)->Append("{}"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "moved" / "audit.log"));
}

TEST(AuditLog, ReloadLinesCarryTheConfigsSha256) {
  // The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const json line = json::parse(AuditReloadLine(kStart, "/etc/sluice/sluice.yaml", "ab", true));
  EXPECT_EQ(line["event"], "reload");
  EXPECT_EQ(line["sha256"], "ab");
  EXPECT_EQ(line["outcome"], "ok");
  EXPECT_EQ(line["time"], "2027-01-15T08:00:00.000Z");
}

}  // namespace
}  // namespace sluice::server
