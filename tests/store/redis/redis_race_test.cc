// The race the Lua scripts exist to prevent, proved against a real redis-server: 8 processes x
// 4 threads hammer one key whose limit is 100 per window. The atomic script admits exactly 100.
// A deliberately naive GET-then-INCR client, with a pause injected between its read and its
// write, admits more -- so the harness demonstrably can see the race.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "store/redis/redis_client.h"
#include "store/redis/redis_scripts.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using internal::RedisClient;
using std::chrono::milliseconds;

constexpr int kProcesses = 8;
constexpr int kThreadsPerProcess = 4;
constexpr int kAttemptsPerThread = 10;  // 320 attempts against a limit of 100
constexpr int64_t kLimit = 100;
// One window for the whole run, in test-mode time, so no window edge can interfere.
constexpr int64_t kNowUs = 1'700'000'000'000'000;
constexpr int64_t kWindowUs = 3'600'000'000;

std::unique_ptr<RedisClient> Connect(int port) {
  auto c = RedisClient::Connect("127.0.0.1", port, milliseconds(1000), milliseconds(5000));
  if (!c) return nullptr;
  return std::move(*c);
}

// One decision through the atomic script: 1 admitted, 0 rejected, -1 error.
int AtomicDecide(RedisClient& c, const std::string& key) {
  auto r = c.Eval(internal::kFixedWindowScript, {key},
                  {std::to_string(kNowUs), std::to_string(kLimit), std::to_string(kWindowUs), "1"});
  if (!r || r->elements.empty()) return -1;
  return static_cast<int>(r->elements[0].integer);
}

// The bug the seed describes: read, decide, then write -- two commands, a gap between them.
int NaiveDecide(RedisClient& c, const std::string& key) {
  auto got = c.Command({"GET", key});
  if (!got) return -1;
  const int64_t count = got->type == internal::RedisReply::Type::kString ? std::stoll(got->str) : 0;
  if (count + 1 > kLimit) return 0;
  std::this_thread::sleep_for(milliseconds(2));  // the injected pause
  if (!c.Command({"INCR", key})) return -1;
  return 1;
}

// Runs the hammer in kProcesses forked processes; returns the total admitted (or -1 on error).
template <typename Decide>
int Hammer(int port, const std::string& key, Decide decide) {
  std::vector<int> pipes;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::atomic<int> admitted{0};
      std::atomic<bool> failed{false};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreadsPerProcess; ++t) {
        threads.emplace_back([&] {
          auto c = Connect(port);
          if (!c) {
            failed = true;
            return;
          }
          for (int i = 0; i < kAttemptsPerThread; ++i) {
            const int d = decide(*c, key);
            if (d < 0) failed = true;
            if (d > 0) admitted.fetch_add(1);
          }
        });
      }
      for (auto& th : threads) th.join();
      const int result = failed ? -1 : admitted.load();
      const ssize_t written = write(fds[1], &result, sizeof(result));
      _exit(written == sizeof(result) ? 0 : 1);
    }
    close(fds[1]);
    pipes.push_back(fds[0]);
    children.push_back(pid);
  }
  int total = 0;
  for (size_t i = 0; i < pipes.size(); ++i) {
    int result = -1;
    if (read(pipes[i], &result, sizeof(result)) != sizeof(result)) result = -1;
    close(pipes[i]);
    waitpid(children[i], nullptr, 0);
    if (result < 0) return -1;
    total += result;
  }
  return total;
}

class RedisRace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<testing::RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }
  static std::unique_ptr<testing::RedisServer> server_;
};
std::unique_ptr<testing::RedisServer> RedisRace::server_;

TEST_F(RedisRace, AtomicScriptAdmitsExactlyTheLimit) {
  EXPECT_EQ(Hammer(server_->port(), "sluice:{race}:atomic", AtomicDecide), kLimit);
}

TEST_F(RedisRace, NaiveGetThenIncrAdmitsMoreThanTheLimit) {
  const int admitted = Hammer(server_->port(), "sluice:{race}:naive", NaiveDecide);
  ASSERT_GE(admitted, 0) << "redis errors";
  EXPECT_GT(admitted, kLimit) << "the harness failed to provoke the race";
}

TEST_F(RedisRace, ScriptSurvivesAScriptFlush) {
  auto c = Connect(server_->port());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(AtomicDecide(*c, "sluice:{flush}:k"), 1);
  ASSERT_TRUE(c->Command({"SCRIPT", "FLUSH"}));
  EXPECT_EQ(AtomicDecide(*c, "sluice:{flush}:k"), 1) << "NOSCRIPT must reload and retry";
}

TEST_F(RedisRace, FixedWindowScriptExpiresItsKeyAtTheWindowEnd) {
  auto c = Connect(server_->port());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(AtomicDecide(*c, "sluice:{ttl}:k"), 1);
  auto ttl = c->Command({"PTTL", "sluice:{ttl}:k"});
  ASSERT_TRUE(ttl.has_value()) << ttl.error().message;
  const int64_t until_window_end = ((kNowUs / kWindowUs + 1) * kWindowUs - kNowUs) / 1000;
  EXPECT_GT(ttl->integer, until_window_end - 1000);
  EXPECT_LE(ttl->integer, until_window_end);
}

}  // namespace
}  // namespace sluice
