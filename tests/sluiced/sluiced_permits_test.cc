// Concurrency permits through the real sluiced on a real redis-server: permits outlive the
// sluiced that granted them (a restart, a release on another node), and the exactness test of
// docs/load-protection.md: three sluiced sharing one Redis, many threads acquiring, holding and
// releasing on random nodes; the in-flight count computed from the store-clock times the answers
// carry never exceeds max_in_flight.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/http_test_client.h"
#include "support/redis_server.h"
#include "support/sluiced_process.h"
#include "support/wait_for.h"

namespace sluice::testing {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxInFlight = 4;
constexpr char kConfig[] = R"(domain: api
descriptors:
  - key: tenant
    concurrency: {max_in_flight: 4, permit_ttl: 1s}
  - key: long
    concurrency: {max_in_flight: 2, permit_ttl: 60s}
  - key: lost
    concurrency: {max_in_flight: 2, permit_ttl: 60s, failure_mode: closed}
)";

class PermitsOnRedis : public ::testing::Test {
 protected:
  PermitsOnRedis() {
    char tmpl[] = "/tmp/sluiced-permits-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ / "api.yaml") << kConfig;
  }
  ~PermitsOnRedis() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SluicedProcess> Start() {
    auto p = std::make_unique<SluicedProcess>(std::vector<std::string>{
        "--config", (dir_ / "api.yaml").string(), "--http", "127.0.0.1:0", "--grpc", "off",
        "--store", "redis://127.0.0.1:" + std::to_string(redis_.port())});
    EXPECT_GT(p->port(), 0) << p->Log();
    return p;
  }

  static std::string Acquire(const std::string& tenant_key, const std::string& value) {
    return Json{{"domain", "api"},
                {"descriptors", {{{"entries", {{{"key", tenant_key}, {"value", value}}}}}}}}
        .dump();
  }
  static Json Post(int port, std::string_view path, const std::string& body) {
    HttpClient client(port);
    auto r = client.Request("POST", path, body);
    if (!r) return Json{{"status", 0}};
    Json j = Json::parse(r->body, nullptr, false);
    if (!j.is_object()) j = Json::object();
    j["status"] = r->status;
    return j;
  }

  RedisServer redis_;
  std::filesystem::path dir_;
};

TEST_F(PermitsOnRedis, PermitsSurviveASluicedRestartAndReleaseOnAnyNode) {
  std::string first;
  {
    auto a = Start();
    first = Post(a->port(), "/v1/acquire", Acquire("long", "acme")).value("permit", "");
    ASSERT_FALSE(first.empty());
    ASSERT_EQ(Post(a->port(), "/v1/acquire", Acquire("long", "acme"))["status"], 200);
    ASSERT_EQ(Post(a->port(), "/v1/acquire", Acquire("long", "acme"))["status"], 429);
  }  // killed (SIGKILL): nothing is released on the way out
  auto b = Start();
  const Json refused = Post(b->port(), "/v1/acquire", Acquire("long", "acme"));
  EXPECT_EQ(refused["status"], 429) << refused.dump();
  const Json released = Post(b->port(), "/v1/release", Json{{"permit", first}}.dump());
  EXPECT_EQ(released["status"], 200);
  EXPECT_EQ(released["released"], true) << released.dump();
  EXPECT_EQ(Post(b->port(), "/v1/acquire", Acquire("long", "acme"))["status"], 200);
  const Json again = Post(b->port(), "/v1/release", Json{{"permit", first}}.dump());
  EXPECT_EQ(again["released"], false);
}

// Lost writes are outside the invariant (docs/load-protection.md, "Failover, restarts and lost
// writes"): a Redis that comes back empty does not know the permits still held, grants
// max_in_flight more, and a lost permit's release answers false. Real concurrency is then
// max_in_flight plus the permits lost (until they would have expired).
TEST_F(PermitsOnRedis, ARedisThatLostItsWritesAdmitsMaxPlusTheLostPermits) {
  auto node = Start();
  const std::string a =
      Post(node->port(), "/v1/acquire", Acquire("lost", "acme")).value("permit", "");
  const std::string b =
      Post(node->port(), "/v1/acquire", Acquire("lost", "acme")).value("permit", "");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(Post(node->port(), "/v1/acquire", Acquire("lost", "acme"))["status"], 429);

  ASSERT_TRUE(redis_.Restart());  // empty, as after a crash without persistence
  // failure_mode closed: only the store grants. A probe on a key of its own waits for it.
  ASSERT_TRUE(WaitFor([&] {
    return Post(node->port(), "/v1/acquire", Acquire("lost", "probe"))["status"] == 200;
  }));
  // a and b are still held by their holders; the store grants two more.
  EXPECT_EQ(Post(node->port(), "/v1/acquire", Acquire("lost", "acme"))["status"], 200);
  EXPECT_EQ(Post(node->port(), "/v1/acquire", Acquire("lost", "acme"))["status"], 200);
  EXPECT_EQ(Post(node->port(), "/v1/acquire", Acquire("lost", "acme"))["status"], 429)
      << "max_in_flight again, over what it knows";
  EXPECT_EQ(Post(node->port(), "/v1/release", Json{{"permit", a}}.dump())["released"], false);
}

// One granted permit, on the store's clock: live from `from` until `until` (its release, or its
// expiry if it was never released or the release came after it).
struct Held {
  int64_t from = 0;
  int64_t until = 0;
};

TEST_F(PermitsOnRedis, InFlightNeverExceedsMaxInFlightAcrossThreeNodes) {
  std::vector<std::unique_ptr<SluicedProcess>> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(Start());
  for (const auto& n : nodes) ASSERT_GT(n->port(), 0);

  constexpr int kThreads = 12;
  constexpr int kRounds = 40;
  std::mutex mu;
  std::vector<Held> held;
  std::atomic<int> refused{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<uint32_t>(1234 + t));
      auto node = [&] { return nodes[random() % nodes.size()]->port(); };
      for (int round = 0; round < kRounds; ++round) {
        const Json got = Post(node(), "/v1/acquire", Acquire("tenant", "acme"));
        if (got["status"] == 429) {
          ++refused;
          continue;
        }
        if (got["status"] != 200 || !got["permit"].is_string()) {
          if (errors++ == 0) ADD_FAILURE() << got.dump();
          continue;
        }
        const Json& s = got["statuses"][0];
        Held h{s["store_time_us"].get<int64_t>(), s["permit_expires_us"].get<int64_t>()};
        // The holder's work: a few milliseconds, or (one in 20) it never releases.
        const int work_ms = static_cast<int>(random() % 8);
        std::this_thread::sleep_for(std::chrono::milliseconds(work_ms));
        if (random() % 20 != 0) {
          const Json r = Post(node(), "/v1/release", Json{{"permit", got["permit"]}}.dump());
          if (r.value("released", false)) {
            h.until = std::min(h.until, r["store_time_us"].get<int64_t>());
          }
        }
        std::lock_guard lock(mu);
        held.push_back(h);
      }
    });
  }
  for (auto& t : threads) t.join();

  EXPECT_EQ(errors.load(), 0) << nodes[0]->Log() << nodes[1]->Log() << nodes[2]->Log();
  ASSERT_GT(held.size(), 20u);
  EXPECT_GT(refused.load(), 0) << "the limit was never reached: the test proves nothing";
  // A sweep over [from, until) intervals: an end at t frees before a start at t takes.
  std::vector<std::pair<int64_t, int>> events;
  for (const Held& h : held) {
    ASSERT_LT(h.from, h.until);
    events.emplace_back(h.from, +1);
    events.emplace_back(h.until, -1);
  }
  std::sort(events.begin(), events.end());
  int in_flight = 0;
  int most = 0;
  for (const auto& [at, delta] : events) {
    in_flight += delta;
    most = std::max(most, in_flight);
  }
  EXPECT_LE(most, kMaxInFlight);
  EXPECT_EQ(most, kMaxInFlight) << "12 threads on 4 slots fill them";
}

}  // namespace
}  // namespace sluice::testing
