// The Redis store against a real 3-master/3-replica Redis Cluster, started by
// scripts/redis-cluster as a ctest fixture (SLUICE_REDIS_CLUSTER_DIR names its state). Shows that
// keys are routed by hash slot (our CRC16 agrees with CLUSTER KEYSLOT) and land on every master,
// that a slot moved to another master is followed (ASK while it migrates, MOVED after), that a
// master killed mid-run costs only the failure policy until its replica takes over, and that
// replays print what the memory store prints. The store suite (tests/store/store_suite.h) runs
// through the cluster too, at the end: decisions as the pure algorithms, refunds, DecideAll
// across slots (given back when one slot refuses), the failure policy.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sluice/redis_store.h"
#include "store/open_store_under_test.h"
#include "store/permit_suite.h"
#include "store/redis/crc16.h"
#include "store/redis/redis_client.h"
#include "store/store_suite.h"

namespace sluice {
namespace {

using internal::RedisClient;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string ClusterDir() {
  const char* dir = std::getenv("SLUICE_REDIS_CLUSTER_DIR");
  return dir != nullptr ? dir : "";
}

std::vector<int> Ports() {
  std::ifstream in(ClusterDir() + "/ports");
  std::vector<int> ports;
  for (int p = 0; in >> p;) ports.push_back(p);
  return ports;
}

std::unique_ptr<RedisClient> Client(int port) {
  auto c = RedisClient::Connect("127.0.0.1", port, milliseconds(300), milliseconds(3000));
  return c ? std::move(*c) : nullptr;
}

struct Master {
  std::string id;
  int port = 0;
  std::vector<std::pair<int, int>> ranges;
  bool Owns(int slot) const {
    for (auto [a, b] : ranges) {
      if (slot >= a && slot <= b) return true;
    }
    return false;
  }
};

// The live masters, from CLUSTER NODES as seen by the first node that answers.
std::vector<Master> Masters() {
  for (int port : Ports()) {
    auto c = Client(port);
    if (!c) continue;
    auto nodes = c->Command({"CLUSTER", "NODES"});
    if (!nodes) continue;
    std::vector<Master> out;
    std::istringstream lines(nodes->str);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream f(line);
      std::string id, addr, flags, master, ping, pong, epoch, link;
      f >> id >> addr >> flags >> master >> ping >> pong >> epoch >> link;
      if (flags.find("master") == std::string::npos || flags.find("fail") != std::string::npos) {
        continue;
      }
      Master m{id, std::stoi(addr.substr(addr.find(':') + 1, addr.find('@'))), {}};
      for (std::string range; f >> range;) {
        if (range.starts_with("[")) continue;  // a slot being migrated or imported
        const size_t dash = range.find('-');
        const int a = std::stoi(range.substr(0, dash));
        m.ranges.emplace_back(a, dash == std::string::npos ? a : std::stoi(range.substr(dash + 1)));
      }
      if (!m.ranges.empty()) out.push_back(m);
    }
    return out;
  }
  return {};
}

const Master* OwnerOf(const std::vector<Master>& masters, int slot) {
  for (const Master& m : masters) {
    if (m.Owns(slot)) return &m;
  }
  return nullptr;
}

bool WaitForClusterOk(seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    bool all = true;
    for (int port : Ports()) {
      auto c = Client(port);
      auto info = c ? c->Command({"CLUSTER", "INFO"}) : MakeError("down");
      if (!info || info->str.find("cluster_state:ok") == std::string::npos) all = false;
    }
    if (all && Masters().size() == 3) return true;
    std::this_thread::sleep_for(milliseconds(100));
  }
  return false;
}

RedisStoreOptions RedisClusterOptions() {
  RedisStoreOptions o;
  o.cluster_seeds = {"127.0.0.1:" + std::to_string(Ports().front())};
  o.use_server_time = false;
  o.command_timeout = milliseconds(1000);
  o.fail_open = false;
  return o;
}

class RedisCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ClusterDir().empty()) GTEST_SKIP() << "run through ctest: the cluster is its fixture";
    ASSERT_EQ(Ports().size(), 6u);
    ASSERT_TRUE(WaitForClusterOk(seconds(30)));
  }

  static RedisStoreOptions Options(const std::string& limit_id) {
    RedisStoreOptions o;
    o.cluster_seeds = {"127.0.0.1:" + std::to_string(Ports().front())};
    o.use_server_time = false;
    o.limit_id = limit_id;
    o.command_timeout = milliseconds(1000);
    o.fail_open = false;
    return o;
  }

  // An identity whose key for `limit_id` hashes to `slot`.
  static std::string IdentityInSlot(const std::string& limit_id, int slot) {
    for (int i = 0;; ++i) {
      const std::string id = "x" + std::to_string(i);
      if (internal::RedisHashSlot(RedisKeyFor("sluice", limit_id, id)) == slot) return id;
    }
  }
};

TEST_F(RedisCluster, OurHashSlotsAreTheClustersHashSlots) {
  auto c = Client(Ports().front());
  ASSERT_NE(c, nullptr);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 300; ++i) {
    std::string identity;
    for (int k = 0; k < 1 + i % 20; ++k) identity.push_back(static_cast<char>(rng() % 256));
    for (const std::string& key :
         {RedisKeyFor("sluice", "api", identity), identity, "{}" + identity, "a{" + identity}) {
      auto slot = c->Command({"CLUSTER", "KEYSLOT", key});
      ASSERT_TRUE(slot.has_value());
      EXPECT_EQ(internal::RedisHashSlot(key), slot->integer) << key;
    }
  }
}

// Six limits' keys for eight identities hash all over the slot space: every master holds some of
// them (decisions through the cluster are the store suite's, below).
TEST_F(RedisCluster, KeysOfManyLimitsAndIdentitiesLandOnEveryMaster) {
  RedisStoreOptions o = Options("unused");
  o.key_prefix = testing::UniqueName("spread");
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  const Timestamp now = FromNanos(int64_t{1'700'000'000} * 1'000'000'000);
  for (Algorithm a : kAllAlgorithms) {
    const LimitSpec spec{a, 10, seconds(60), HasBurst(a) ? 10 : 0, false};
    auto limiter = (*store)->MakeLimiter(spec, "spread-" + std::string(AlgorithmName(a)), false);
    ASSERT_TRUE(limiter.has_value());
    for (int i = 0; i < 8; ++i) {
      const Decision d = (*limiter)->Decide("client-" + std::to_string(i), now, 1);
      ASSERT_TRUE(d.allowed && !d.degraded) << AlgorithmName(a) << " client-" << i;
    }
  }
  for (const Master& m : Masters()) {
    auto c = Client(m.port);
    ASSERT_NE(c, nullptr);
    auto keys = c->Command({"KEYS", o.key_prefix + ":*"});
    ASSERT_TRUE(keys.has_value());
    EXPECT_GT(keys->elements.size(), 0u) << "master " << m.port << " got none of the keys";
  }
}

// Moves `slot` from its master to another one the way redis-cli --cluster reshard does, calling
// `while_migrating` between MIGRATING/IMPORTING and the move of its keys.
template <typename Fn>
void MoveSlot(int slot, Fn&& while_migrating) {
  const std::vector<Master> masters = Masters();
  ASSERT_EQ(masters.size(), 3u);
  const Master* from = OwnerOf(masters, slot);
  ASSERT_NE(from, nullptr);
  const Master* to = from == &masters[0] ? &masters[1] : &masters[0];
  auto src = Client(from->port);
  auto dst = Client(to->port);
  ASSERT_TRUE(src && dst);
  const std::string s = std::to_string(slot);
  ASSERT_TRUE(dst->Command({"CLUSTER", "SETSLOT", s, "IMPORTING", from->id}).has_value());
  ASSERT_TRUE(src->Command({"CLUSTER", "SETSLOT", s, "MIGRATING", to->id}).has_value());
  while_migrating();
  auto keys = src->Command({"CLUSTER", "GETKEYSINSLOT", s, "1000"});
  ASSERT_TRUE(keys.has_value());
  for (const auto& key : keys->elements) {
    auto moved = src->Command(
        {"MIGRATE", "127.0.0.1", std::to_string(to->port), key.str, "0", "5000", "REPLACE"});
    ASSERT_TRUE(moved.has_value()) << moved.error().message;
  }
  for (const Master& m : masters) {
    auto c = Client(m.port);
    ASSERT_TRUE(c && c->Command({"CLUSTER", "SETSLOT", s, "NODE", to->id}).has_value());
  }
}

TEST_F(RedisCluster, FollowsAskWhileASlotMigratesAndMovedAfterItMoved) {
  const std::string limit_id = "reshard";
  const int slot = internal::RedisHashSlot(RedisKeyFor("sluice", limit_id, "alice"));
  const std::string bob = IdentityInSlot(limit_id, slot);  // a second key in the same slot
  auto store = OpenRedisStore(Options(limit_id));
  ASSERT_TRUE(store.has_value());
  auto limiter =
      (*store)->MakeLimiter({Algorithm::kTokenBucket, 1, seconds(60), 10, false}, limit_id, false);
  ASSERT_TRUE(limiter.has_value());
  const Timestamp now = FromNanos(int64_t{1'700'000'000} * 1'000'000'000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*limiter)->Decide("alice", now, 1).allowed);
  const uint64_t redirects_before = (*store)->RedisStats().redirects;

  MoveSlot(slot, [&] {
    // bob has no key on the old master yet: it answers ASK, and bob's counter starts on the new
    // one. alice's key is still on the old master, which serves it.
    const Decision b = (*limiter)->Decide(bob, now, 4);
    EXPECT_FALSE(b.degraded);
    EXPECT_TRUE(b.allowed);
    EXPECT_EQ(b.remaining, 6);
    EXPECT_EQ((*limiter)->Decide("alice", now, 1).remaining, 6);
  });
  EXPECT_GT((*store)->RedisStats().redirects, redirects_before) << "the ASK was followed";

  // Both counters moved with the slot: MOVED is followed and the state is where it was.
  const uint64_t after_ask = (*store)->RedisStats().redirects;
  const Decision a = (*limiter)->Decide("alice", now, 1);
  EXPECT_FALSE(a.degraded);
  EXPECT_EQ(a.remaining, 5);
  EXPECT_EQ((*limiter)->Decide(bob, now, 1).remaining, 5);
  EXPECT_GT((*store)->RedisStats().redirects, after_ask) << "the MOVED was followed";
  EXPECT_GT((*store)->RedisStats().map_refreshes, 0u);
}

TEST_F(RedisCluster, AMasterKilledMidRunCostsTheFailurePolicyUntilItsReplicaTakesOver) {
  const std::vector<Master> masters = Masters();
  ASSERT_EQ(masters.size(), 3u);
  const std::string limit_id = "failover";
  // One identity on the master we kill, one on another master.
  const Master& victim = masters[0];
  const std::string on_victim = IdentityInSlot(limit_id, victim.ranges.front().first);
  const std::string elsewhere = IdentityInSlot(limit_id, masters[1].ranges.front().first);
  RedisStoreOptions o = Options(limit_id);
  o.use_server_time = true;
  o.command_timeout = milliseconds(200);
  o.breaker_open_for = milliseconds(200);
  auto limiter = MakeRedisLimiter({Algorithm::kTokenBucket, 100000, seconds(1), 100000, false}, o);
  ASSERT_TRUE(limiter.has_value());
  ASSERT_FALSE((*limiter)->Decide(on_victim, Timestamp{}, 1).degraded);

  std::atomic<bool> stop{false};
  std::atomic<int> degraded{0}, degraded_but_admitted{0}, served{0};
  std::atomic<int64_t> last_degraded_ms{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const Decision d = (*limiter)->Decide(i % 2 == t % 2 ? on_victim : elsewhere, {}, 1);
        if (d.degraded) {
          degraded.fetch_add(1);
          if (d.allowed) degraded_but_admitted.fetch_add(1);
          last_degraded_ms.store(
              std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start)
                  .count());
        } else {
          served.fetch_add(1);
        }
        std::this_thread::sleep_for(milliseconds(1));
      }
    });
  }
  std::this_thread::sleep_for(milliseconds(300));
  std::ifstream pid_file(ClusterDir() + "/pid-" + std::to_string(victim.port));
  int pid = 0;
  ASSERT_TRUE(pid_file >> pid);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  const auto killed_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();

  // Wait until the victim's key is served again (its replica promoted and found).
  bool recovered = false;
  for (int i = 0; i < 300 && !recovered; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    recovered = !(*limiter)->Decide(on_victim, {}, 1).degraded;
  }
  std::this_thread::sleep_for(milliseconds(300));
  const int served_before_end = served.load();
  std::this_thread::sleep_for(milliseconds(300));
  stop = true;
  for (auto& c : callers) c.join();

  EXPECT_TRUE(recovered) << "the promoted replica never served the victim's slots";
  EXPECT_GT(degraded.load(), 0) << "the outage was not seen";
  EXPECT_EQ(degraded_but_admitted.load(), 0) << "failure_mode closed admitted while degraded";
  EXPECT_GT(last_degraded_ms.load(), killed_ms);
  EXPECT_GT(served.load(), served_before_end) << "decisions did not resume";
  std::printf("failover: %d degraded decisions, recovered %lld ms after the kill\n",
              degraded.load(), static_cast<long long>(last_degraded_ms.load() - killed_ms));

  // Put the node back (it rejoins as a replica) so the cluster has replicas again.
  const std::string restart =
      "scripts/redis-cluster restart-node " + ClusterDir() + " " + std::to_string(victim.port);
  EXPECT_EQ(std::system(("cd " SLUICE_SOURCE_DIR " && " + restart).c_str()), 0);
  EXPECT_TRUE(WaitForClusterOk(seconds(30)));
}

// `sluice replay --store redis+cluster://...` prints what the memory store prints.
TEST_F(RedisCluster, ReplayThroughTheClusterPrintsWhatTheMemoryStorePrints) {
  const char* sluice = SLUICE_BIN;
  const std::string trace = ::testing::TempDir() + "/cluster-trace.csv";
  {
    std::ofstream out(trace);
    std::mt19937_64 rng(11);
    int64_t t = 1'700'000'000'000;
    for (int i = 0; i < 2000; ++i) {
      t += static_cast<int64_t>(rng() % 30);
      out << t << ",user-" << rng() % 10 << "," << 1 + rng() % 3 << "\n";
    }
  }
  auto run = [&](const std::string& store) {
    const std::string cmd = std::string(sluice) +
                            " replay --algorithm sliding_window_counter --limit 3 --per 1s" +
                            " --input " + trace + " --store " + store;
    std::FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << cmd;
    return out;
  };
  const std::string memory = run("memory");
  EXPECT_NE(memory.find("\"allowed\":false"), std::string::npos);
  EXPECT_EQ(run("redis+cluster://127.0.0.1:" + std::to_string(Ports()[1])), memory);
}

// The store suite (tests/store/store_suite.h) through the cluster. Each store opened gets a key
// prefix of its own (the cluster outlives the test processes); its limits' keys hash all over the
// slot space, so the suite's multi-limit requests span slots, and a request refused in one slot
// is given back by refund calls to the others.
using testing::StoreSuite;

// The permit suite (tests/store/permit_suite.h) on the cluster, under each key's master's TIME.
testing::PermitStoreUnderTest ClusterPermits() {
  return {.name = "redis_cluster",
          .open = []() -> std::shared_ptr<Store> {
            RedisStoreOptions o = RedisClusterOptions();
            o.use_server_time = true;
            o.key_prefix = testing::UniqueName("permits");
            auto opened = OpenRedisStore(o);
            EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error().message);
            return opened ? std::shared_ptr<Store>(*opened) : nullptr;
          },
          .manual_clock = false,
          .set_up =
              [] {
                if (ClusterDir().empty())
                  GTEST_SKIP() << "run through ctest: the cluster is its fixture";
                ASSERT_TRUE(WaitForClusterOk(seconds(30)));
              }};
}

using testing::PermitSuite;
INSTANTIATE_TEST_SUITE_P(RedisCluster, PermitSuite, ::testing::Values(ClusterPermits()),
                         testing::PermitSuiteName);

testing::StoreUnderTest ClusterStore() {
  testing::StoreUnderTest store;
  store.name = "redis_cluster";
  store.set_up = [] {
    if (ClusterDir().empty()) GTEST_SKIP() << "run through ctest: the cluster is its fixture";
    ASSERT_EQ(Ports().size(), 6u);
    ASSERT_TRUE(WaitForClusterOk(seconds(30)));
  };
  store.open = []() -> std::shared_ptr<Store> {
    RedisStoreOptions o = RedisClusterOptions();
    o.key_prefix = testing::UniqueName("suite");
    auto opened = OpenRedisStore(o);
    EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error().message);
    return opened ? std::shared_ptr<Store>(*opened) : nullptr;
  };
  store.open_unavailable = []() -> std::shared_ptr<Store> {
    struct Unavailable {  // the store and the port nobody listens on, held while it lives
      testing::UnusedPort port;
      std::shared_ptr<Store> store;
    };
    auto held = std::make_shared<Unavailable>();
    RedisStoreOptions o;
    o.cluster_seeds = {"127.0.0.1:" + std::to_string(held->port.port())};
    auto opened = OpenRedisStore(o);
    if (!opened) return nullptr;
    held->store = *opened;
    return std::shared_ptr<Store>(held, held->store.get());
  };
  store.resolution = std::chrono::microseconds(1);
  store.expires_by_its_own_clock = true;
  store.counts_keys = false;
  store.exact_late_log_refunds = false;
  store.partition_of = [](std::string_view limit_id, std::string_view identity) {
    return internal::RedisHashSlot(RedisKeyFor("sluice", limit_id, identity));
  };
  // Slots decide alone: a request one slot refused was given back by refund calls, all answered.
  store.check_all_or_nothing = [](Store& s, int partly_admitted) {
    const RedisStoreStats stats = dynamic_cast<RedisStore&>(s).RedisStats();
    if (partly_admitted > 0) {
      EXPECT_GT(stats.refunds, 0u);
    }
    EXPECT_EQ(stats.refund_failures, 0u);
  };
  return store;
}

INSTANTIATE_TEST_SUITE_P(RedisCluster, StoreSuite, ::testing::Values(ClusterStore()),
                         testing::StoreSuiteName);

// And as sluiced opens it: OpenStore, the leased, batched and over-limit cache layers in front,
// every limit in one sync mode.
std::vector<testing::StoreUnderTest> ClusterThroughOpenStore() {
  std::vector<testing::StoreUnderTest> out = testing::ThroughOpenStoreInEveryMode(
      "cluster",
      [] {
        std::string address = "redis+cluster://";
        for (int port : Ports()) address += "127.0.0.1:" + std::to_string(port) + ",";
        address.pop_back();
        return address;
      },
      [](int port) { return "redis+cluster://127.0.0.1:" + std::to_string(port); });
  const testing::StoreUnderTest raw = ClusterStore();
  for (testing::StoreUnderTest& store : out) {
    store.set_up = raw.set_up;
    store.partition_of = raw.partition_of;
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(RedisClusterOpenStore, StoreSuite,
                         ::testing::ValuesIn(ClusterThroughOpenStore()), testing::StoreSuiteName);

}  // namespace
}  // namespace sluice
