// --state-dir end to end (docs/quotas.md, "Counters that survive a restart"): the real sluiced
// killed with SIGKILL under load loses at most what it admitted since its last snapshot; after
// SIGTERM it loses nothing; a damaged snapshot is set aside; two sluiced never share a DIR. The
// memory store's concurrency permits survive a restart too (docs/load-protection.md).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/http_test_client.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"
#include "support/wait_for.h"

namespace sluice::testing {
namespace {

using server::test::TempConfigDir;

// A monthly-sized quota no test reaches, so every hit is admitted and counted.
constexpr char kConfig[] = R"(domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 1000000, algorithm: fixed_window}
  - key: job
    concurrency: {max_in_flight: 2, permit_ttl: 10m}
)";
constexpr int64_t kLimit = 1'000'000;

// Sends `hits` for tenant=acme; the limit's remaining after it (-1 on a failure).
int64_t Check(HttpClient& client, int hits) {
  const std::string body = R"({"domain":"api","hits":)" + std::to_string(hits) +
                           R"(,"descriptors":[{"entries":[{"key":"tenant","value":"acme"}]}]})";
  auto r = client.Request("POST", "/v1/check", body);
  if (!r || r->status != 200) return -1;
  return nlohmann::json::parse(r->body)["statuses"][0]["remaining"].get<int64_t>();
}

// The hits acme has used (the check itself takes none).
int64_t Used(int port) {
  HttpClient client(port);
  const int64_t remaining = Check(client, 0);
  return remaining < 0 ? -1 : kLimit - remaining;
}

// Admits `n` hits one by one, as a client's load; how many were admitted.
int64_t Load(int port, int n) {
  HttpClient client(port);
  int64_t admitted = 0;
  for (int i = 0; i < n; ++i) admitted += Check(client, 1) >= 0;
  return admitted;
}

timespec MTime(const std::filesystem::path& file) {
  struct stat st {};
  if (stat(file.c_str(), &st) != 0) return {};
  return st.st_mtim;
}
bool After(timespec a, timespec b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}
bool Same(timespec a, timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

// Waits until a snapshot holds everything admitted before this call: one written after now, and
// then one more -- the first may have copied the counters before now and written after; the
// next copies them after the first was written.
bool WaitForSnapshotOfAllSoFar(const std::filesystem::path& snapshot) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  timespec first{};
  if (!WaitFor([&] { return After(first = MTime(snapshot), now); })) return false;
  return WaitFor([&] { return !Same(MTime(snapshot), first); });
}

class SluicedStateDirTest : public ::testing::Test {
 protected:
  SluicedStateDirTest() : dir_("sluiced-state") {
    config_ = dir_.Write("api.yaml", kConfig).string();
    state_ = dir_.path() / "state";
  }
  std::unique_ptr<SluicedProcess> Start(const std::string& interval = "50ms") {
    return StartSluiced(config_, {"--state-dir", state_.string(), "--snapshot-interval", interval});
  }

  TempConfigDir dir_;
  std::string config_;
  std::filesystem::path state_;
};

TEST_F(SluicedStateDirTest, SigkillLosesAtMostWhatCameAfterTheLastSnapshot) {
  auto first = Start();
  ASSERT_GT(first->port(), 0);
  const int64_t before = Load(first->port(), 300);
  ASSERT_EQ(before, 300);
  ASSERT_TRUE(WaitForSnapshotOfAllSoFar(state_ / "snapshot")) << first->Log();
  // More load, then the process dies mid-interval without a word.
  const int64_t after = Load(first->port(), 200);
  ASSERT_EQ(after, 200);
  first->Signal(SIGKILL);
  ASSERT_EQ(first->WaitExit(), 128 + SIGKILL);

  auto second = Start();
  ASSERT_GT(second->port(), 0) << second->Log();
  const int64_t used = Used(second->port());
  EXPECT_GE(used, before) << "everything the last snapshot held comes back\n" << second->Log();
  EXPECT_LE(used, before + after) << "and nothing that was never admitted";
  EXPECT_NE(second->Log().find("counters restored"), std::string::npos);
}

TEST_F(SluicedStateDirTest, SigtermLosesNothing) {
  auto first = Start("1h");  // no periodic snapshot: the shutdown's alone must hold them
  ASSERT_GT(first->port(), 0);
  ASSERT_EQ(Load(first->port(), 250), 250);
  first->Signal(SIGTERM);
  ASSERT_EQ(first->WaitExit(), 0) << first->Log();
  EXPECT_NE(first->Log().find("counters written at shutdown"), std::string::npos);

  auto second = Start("1h");
  EXPECT_EQ(Used(second->port()), 250) << second->Log();
  // And again: restored counters are saved like any other.
  ASSERT_EQ(Load(second->port(), 5), 5);
  second->Signal(SIGTERM);
  ASSERT_EQ(second->WaitExit(), 0);
  auto third = Start("1h");
  EXPECT_EQ(Used(third->port()), 255) << third->Log();
}

// POST to `path`: the status and the body's JSON (an empty object when there is none).
std::pair<int, nlohmann::json> Post(int port, std::string_view path, const std::string& body) {
  HttpClient client(port);
  auto r = client.Request("POST", path, body);
  if (!r) return {0, nlohmann::json::object()};
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  return {r->status, j.is_object() ? j : nlohmann::json::object()};
}
constexpr char kAcquireJob[] =
    R"({"domain":"api","descriptors":[{"entries":[{"key":"job","value":"nightly"}]}]})";
std::string ReleaseBody(const std::string& permit) {
  return nlohmann::json{{"permit", permit}}.dump();
}

TEST_F(SluicedStateDirTest, PermitsSurviveARestartAndCountAgainstMaxInFlight) {
  auto first = Start("1h");  // the shutdown's snapshot alone must hold them
  ASSERT_GT(first->port(), 0);
  std::vector<std::string> held;
  for (int i = 0; i < 2; ++i) {
    const auto [status, body] = Post(first->port(), "/v1/acquire", kAcquireJob);
    ASSERT_EQ(status, 200) << body.dump();
    held.push_back(body["permit"].get<std::string>());
  }
  ASSERT_EQ(Post(first->port(), "/v1/acquire", kAcquireJob).first, 429);
  first->Signal(SIGTERM);
  ASSERT_EQ(first->WaitExit(), 0) << first->Log();

  auto second = Start("1h");
  ASSERT_GT(second->port(), 0) << second->Log();
  EXPECT_NE(second->Log().find("2 concurrency permits held again"), std::string::npos)
      << second->Log();
  EXPECT_EQ(Post(second->port(), "/v1/acquire", kAcquireJob).first, 429)
      << "the two held before the restart are held still\n"
      << second->Log();
  const auto [status, released] = Post(second->port(), "/v1/release", ReleaseBody(held[0]));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(released.value("released", false), true) << released.dump();
  const auto [again, granted] = Post(second->port(), "/v1/acquire", kAcquireJob);
  EXPECT_EQ(again, 200) << granted.dump();
  EXPECT_EQ(Post(second->port(), "/v1/acquire", kAcquireJob).first, 429);
  EXPECT_EQ(
      Post(second->port(), "/v1/release", ReleaseBody(held[0])).second.value("released", true),
      false)
      << "released once";
  EXPECT_EQ(
      Post(second->port(), "/v1/release", ReleaseBody(held[1])).second.value("released", false),
      true);
}

TEST_F(SluicedStateDirTest, TwoSluicedCannotShareADirectory) {
  auto first = Start();
  ASSERT_GT(first->port(), 0);
  SluicedProcess second({"--config", config_, "--http", "127.0.0.1:0", "--grpc", "off",
                         "--state-dir", state_.string()});
  EXPECT_EQ(second.WaitExit(), 1);
  EXPECT_NE(second.Log().find("in use by another sluiced"), std::string::npos) << second.Log();
  EXPECT_GE(Used(first->port()), 0) << "the first one serves on";
}

TEST_F(SluicedStateDirTest, ADamagedSnapshotIsSetAside) {
  std::filesystem::create_directories(state_);
  std::ofstream(state_ / "snapshot") << "SLUICESN and then nothing a snapshot holds";
  auto sluiced = Start();
  ASSERT_GT(sluiced->port(), 0);
  EXPECT_NE(sluiced->Log().find("set aside as"), std::string::npos) << sluiced->Log();
  bool set_aside = false;
  for (const auto& entry : std::filesystem::directory_iterator(state_)) {
    set_aside |= entry.path().filename().string().starts_with("snapshot.bad-");
  }
  EXPECT_TRUE(set_aside);
  EXPECT_EQ(Used(sluiced->port()), 0) << "it starts with no counters";
}

TEST_F(SluicedStateDirTest, RefusedWhereItCannotWork) {
  // Redis keeps its own counters.
  SluicedProcess redis({"--config", config_, "--http", "127.0.0.1:0", "--store",
                        "redis://127.0.0.1:1", "--state-dir", state_.string()},
                       /*wait_for_http=*/false);
  EXPECT_EQ(redis.WaitExit(), 2);
  EXPECT_NE(redis.Log().find("need --store memory"), std::string::npos) << redis.Log();
  // From the environment alone, as the Debian unit sets it for every store: ignored, said so.
  setenv("SLUICE_STATE_DIR", state_.c_str(), 1);
  SluicedProcess from_env({"--config", config_, "--http", "127.0.0.1:0", "--grpc", "off", "--store",
                           "redis://127.0.0.1:1"});
  unsetenv("SLUICE_STATE_DIR");
  EXPECT_GT(from_env.port(), 0) << from_env.Log();
  EXPECT_NE(from_env.Log().find("SLUICE_STATE_DIR and SLUICE_SNAPSHOT_INTERVAL are ignored"),
            std::string::npos)
      << from_env.Log();
  // A DIR that is a file.
  const std::string file = dir_.Write("not-a-dir", "x").string();
  SluicedProcess unusable(
      {"--config", config_, "--http", "127.0.0.1:0", "--grpc", "off", "--state-dir", file},
      /*wait_for_http=*/false);
  EXPECT_EQ(unusable.WaitExit(), 1);
  EXPECT_NE(unusable.Log().find("--state-dir " + file), std::string::npos) << unusable.Log();
}

}  // namespace
}  // namespace sluice::testing
