// TLS to Redis against real redis-servers listening on a TLS port only, with certificates made
// by tests/support/make-test-certs: the store suite over rediss://, client certificates, a wrong
// CA, a name mismatch, an expired certificate, an idle connection with TLS 1.3 session tickets
// pending, a silent TLS port, a TLS Redis restarted under load, and the addresses.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/redis_store.h"
#include "store/permit_suite.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_connection.h"
#include "store/redis/redis_endpoint.h"
#include "store/store_suite.h"
#include "support/ports.h"
#include "support/redis_server.h"

namespace sluice::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr LimitSpec kSpec{Algorithm::kTokenBucket, 100, seconds(1), 100, false};

// The test certificates, made once for this process into a temporary directory.
const std::string& CertDir() {
  static const std::string dir = [] {
    char templ[] = "/tmp/sluice-redis-tls-XXXXXX";
    const char* made = mkdtemp(templ);
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    const std::string command =
        std::string(SLUICE_SOURCE_DIR) + "/tests/support/make-test-certs " + made;
    if (std::system(command.c_str()) != 0) throw std::runtime_error("make-test-certs failed");
    return std::string(made);
  }();
  return dir;
}

std::string Cert(const std::string& name) { return CertDir() + "/" + name; }

RedisServer& SharedTlsServer() {
  static RedisServer server({}, RedisServer::Tls{.dir = CertDir()});
  return server;
}

RedisTlsOptions TrustingTheTestCa() { return {.enabled = true, .ca_file = Cert("ca.pem")}; }

// Events, kept for the test to read.
struct EventLog {
  std::mutex mu;
  std::vector<RedisEvent> events;
  RedisEventHook Hook() {
    return [this](const RedisEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(e);
    };
  }
  int Count(RedisEventKind kind) {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (const RedisEvent& e : events) n += e.kind == kind ? 1 : 0;
    return n;
  }
  std::string Messages() {
    std::lock_guard<std::mutex> lock(mu);
    std::string all;
    for (const RedisEvent& e : events) all += e.message + "\n";
    return all;
  }
};

RedisStoreOptions TlsOptions(int port, RedisTlsOptions tls, std::string host = "127.0.0.1") {
  RedisStoreOptions o;
  o.host = std::move(host);
  o.port = port;
  o.tls = std::move(tls);
  o.connect_timeout = milliseconds(2000);
  o.command_timeout = milliseconds(2000);
  o.monitor_interval = milliseconds(0);
  o.key_prefix = UniqueName("tls");
  return o;
}

// ---- The store suite over rediss:// (exact decisions, DecideAll, refunds, failure policy) ----

StoreUnderTest TlsRedis() {
  StoreUnderTest store;
  store.name = "rediss";
  store.open = []() -> std::shared_ptr<Store> {
    RedisStoreOptions o = TlsOptions(SharedTlsServer().port(), TrustingTheTestCa());
    o.use_server_time = false;
    auto opened = OpenRedisStore(o);
    EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error().message);
    return opened ? std::shared_ptr<Store>(*opened) : nullptr;
  };
  store.open_unavailable = []() -> std::shared_ptr<Store> {
    struct Unavailable {
      UnusedPort port;
      std::shared_ptr<Store> store;
    };
    auto held = std::make_shared<Unavailable>();
    auto opened = OpenRedisStore(TlsOptions(held->port.port(), TrustingTheTestCa()));
    if (!opened) return nullptr;
    held->store = *opened;
    return std::shared_ptr<Store>(held, held->store.get());
  };
  store.resolution = std::chrono::microseconds(1);
  store.expires_by_its_own_clock = true;
  store.exact_late_log_refunds = false;
  return store;
}

INSTANTIATE_TEST_SUITE_P(Rediss, StoreSuite, ::testing::Values(TlsRedis()), StoreSuiteName);

// ---- The permit suite over rediss:// (concurrency permits: acquire, release, renew, expiry) ----

PermitStoreUnderTest TlsRedisPermits() {
  PermitStoreUnderTest store;
  store.name = "rediss";
  store.open = []() -> std::shared_ptr<Store> {
    RedisStoreOptions o = TlsOptions(SharedTlsServer().port(), TrustingTheTestCa());
    o.use_server_time = true;
    o.key_prefix = UniqueName("tls_permits");
    auto opened = OpenRedisStore(o);
    EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error().message);
    return opened ? std::shared_ptr<Store>(*opened) : nullptr;
  };
  store.manual_clock = false;
  return store;
}

INSTANTIATE_TEST_SUITE_P(Rediss, PermitSuite, ::testing::Values(TlsRedisPermits()),
                         PermitSuiteName);

// ---- Addresses ----

TEST(RedissAddress, SchemesTurnTlsOnAndKeepCredentialsAndDatabase) {
  auto one = ParseRedisAddress("rediss://app:s3cr@t@redis.example:6380/2");
  ASSERT_TRUE(one.has_value()) << one.error().message;
  EXPECT_TRUE(one->tls.enabled);
  EXPECT_EQ(one->user, "app");
  EXPECT_EQ(one->password, "s3cr@t");
  EXPECT_EQ(one->host, "redis.example");
  EXPECT_EQ(one->port, 6380);
  EXPECT_EQ(one->db, 2);
  auto cluster = ParseRedisAddress("rediss+cluster://a:1,b:2");
  ASSERT_TRUE(cluster.has_value()) << cluster.error().message;
  EXPECT_TRUE(cluster->tls.enabled);
  EXPECT_EQ(cluster->cluster_seeds.size(), 2u);
  auto plain = ParseRedisAddress("redis://h:1");
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->tls.enabled);
  EXPECT_EQ(RedactRedisAddress("rediss://app:pw@h:1"), "rediss://***@h:1");
}

TEST(RedissAddress, AnUnreadableCaFileIsAnErrorAtOpenNotAtFirstUse) {
  RedisStoreOptions o = TlsOptions(1, {.enabled = true, .ca_file = "/nonexistent/ca.pem"});
  auto store = OpenRedisStore(o);
  ASSERT_FALSE(store.has_value());
  EXPECT_NE(store.error().message.find("/nonexistent/ca.pem"), std::string::npos);
  o.tls = {.enabled = true, .ca_file = Cert("ca.pem"), .cert_file = Cert("client.pem")};
  EXPECT_FALSE(OpenRedisStore(o).has_value()) << "a certificate without its key";
}

// ---- Verification: each failure is the limit's failure mode, told once with its reason ----

// Decides 5 times with each failure mode and checks every decision is the failure mode's,
// degraded; returns the events' text.
std::string ExpectFailureModeApplied(const RedisStoreOptions& options, EventLog& log) {
  RedisStoreOptions o = options;
  o.on_event = log.Hook();
  o.breaker_failures = 1000;  // every decision tries the handshake again
  auto store = OpenRedisStore(o);
  EXPECT_TRUE(store.has_value());
  if (!store) return "";
  for (bool fail_open : {false, true}) {
    auto limiter = (*store)->MakeLimiter(kSpec, "verify", fail_open);
    EXPECT_TRUE(limiter.has_value());
    for (int i = 0; i < 5; ++i) {
      const Decision d = (*limiter)->Decide("k", {}, 1);
      EXPECT_TRUE(d.degraded);
      EXPECT_EQ(d.allowed, fail_open);
      EXPECT_EQ(d.reason, DecisionReason::kStoreUnavailable);
    }
  }
  EXPECT_FALSE((*store)->Ping());
  // Once per state change: ten failed decisions, one event.
  EXPECT_EQ(log.Count(RedisEventKind::kConnectionLost), 1) << log.Messages();
  return log.Messages();
}

TEST(RedisTls, AServerCertificateFromAnotherCaIsRefusedWithItsReason) {
  EventLog log;
  const std::string told = ExpectFailureModeApplied(
      TlsOptions(SharedTlsServer().port(), {.enabled = true, .ca_file = Cert("otherca.pem")}), log);
  EXPECT_NE(told.find("certificate verification failed (unknown CA)"), std::string::npos) << told;
}

TEST(RedisTls, ANameMismatchIsRefusedUnlessTheServerNameOrSkipVerifySaysOtherwise) {
  RedisServer wrong({}, RedisServer::Tls{.dir = CertDir(), .cert = "wrongname"});
  EventLog log;
  const std::string told =
      ExpectFailureModeApplied(TlsOptions(wrong.port(), TrustingTheTestCa(), "localhost"), log);
  EXPECT_NE(told.find("(name mismatch): hostname mismatch"), std::string::npos) << told;

  RedisTlsOptions named = TrustingTheTestCa();
  named.server_name = "wrong.test";
  auto store = OpenRedisStore(TlsOptions(wrong.port(), named, "localhost"));
  ASSERT_TRUE(store.has_value());
  EXPECT_TRUE((*store)->Ping()) << "verified against --redis-tls-server-name";

  RedisTlsOptions skip = {.enabled = true, .insecure_skip_verify = true};  // not even the CA
  auto skipping = OpenRedisStore(TlsOptions(wrong.port(), skip, "localhost"));
  ASSERT_TRUE(skipping.has_value());
  EXPECT_TRUE((*skipping)->Ping());
}

TEST(RedisTls, AnExpiredServerCertificateIsRefusedWithItsReason) {
  RedisServer expired({}, RedisServer::Tls{.dir = CertDir(), .cert = "expired"});
  EventLog log;
  const std::string told =
      ExpectFailureModeApplied(TlsOptions(expired.port(), TrustingTheTestCa()), log);
  EXPECT_NE(told.find("(expired): certificate has expired"), std::string::npos) << told;
}

TEST(RedisTls, AServerRequiringClientCertificatesTakesOursAndRefusesNone) {
  RedisServer strict({}, RedisServer::Tls{.dir = CertDir(), .auth_clients = true});
  RedisTlsOptions with = TrustingTheTestCa();
  with.cert_file = Cert("client.pem");
  with.key_file = Cert("client.key");
  auto store = OpenRedisStore(TlsOptions(strict.port(), with));
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kSpec, "mtls", false);
  ASSERT_TRUE(limiter.has_value());
  const Decision d = (*limiter)->Decide("k", {}, 1);
  EXPECT_FALSE(d.degraded);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 99);

  EventLog log;
  ExpectFailureModeApplied(TlsOptions(strict.port(), TrustingTheTestCa()), log);
}

// ---- The transport's own bounds and the idle check ----

// A TLS 1.3 server sends session tickets after the handshake: on an idle connection they are
// readable bytes that are not Redis talking. The idle check reads them through the session and
// keeps the connection.
TEST(RedisTls, SessionTicketsOnAnIdleConnectionDoNotMakeItLookClosed) {
  auto context = internal::RedisTlsContext::Make(TrustingTheTestCa());
  ASSERT_TRUE(context.has_value());
  internal::RedisEndpoint e = SharedTlsServer().Endpoint(milliseconds(2000));
  e.tls = *context;
  auto connection = internal::RedisConnection::Open(e);
  ASSERT_TRUE(connection.has_value()) << connection.error().message;
  // Wait (bounded) until the tickets have arrived: the socket is readable with nothing asked.
  pollfd p{(*connection)->fd(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1) << "no session ticket arrived: is the server TLS 1.3?";
  EXPECT_TRUE((*connection)->StillOpen());
  const std::vector<std::string> ping = {"PING"};
  auto pong = (*connection)->Command(ping);
  ASSERT_TRUE(pong.has_value()) << pong.error().message;
  EXPECT_EQ(pong->str, "PONG");
}

uint64_t ConnectionsReceived(internal::RedisClient& client) {
  auto info = client.Command({"INFO", "stats"});
  if (!info) return 0;
  const std::string key = "total_connections_received:";
  const size_t at = info->str.find(key);
  return at == std::string::npos ? 0 : std::stoull(info->str.substr(at + key.size()));
}

TEST(RedisTls, IdleTlsConnectionsAreKeptNotRemade) {
  auto admin = internal::RedisClient::Connect(SharedTlsServer().Endpoint(milliseconds(2000)));
  ASSERT_TRUE(admin.has_value()) << admin.error().message;
  RedisStoreOptions o = TlsOptions(SharedTlsServer().port(), TrustingTheTestCa());
  o.connections = 1;
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kSpec, "idle", false);
  ASSERT_TRUE(limiter.has_value());
  ASSERT_FALSE((*limiter)->Decide("k", {}, 1).degraded);
  const uint64_t before = ConnectionsReceived(**admin);
  for (int i = 0; i < 10; ++i) {
    // Idle for longer than the pipeline's kFreshFor, so each decision runs the idle check: the
    // wait is the condition under test, not a synchronisation.
    std::this_thread::sleep_for(milliseconds(5));
    const Decision d = (*limiter)->Decide("k", {}, 1);
    EXPECT_FALSE(d.degraded);
  }
  EXPECT_EQ(ConnectionsReceived(**admin), before) << "an idle TLS connection was re-made";
}

TEST(RedisTls, ASilentTlsPortCostsTheConnectTimeoutNotAThread) {
  // A listening socket that never answers the ClientHello: the kernel accepts, nobody reads.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  RedisStoreOptions o = TlsOptions(ntohs(a.sin_port), TrustingTheTestCa());
  o.connect_timeout = milliseconds(100);
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kSpec, "silent", true);
  ASSERT_TRUE(limiter.has_value());
  const auto start = Clock::now();
  const Decision d = (*limiter)->Decide("k", {}, 1);
  EXPECT_TRUE(d.degraded);
  EXPECT_TRUE(d.allowed);
  EXPECT_LT(Clock::now() - start, seconds(2)) << "the handshake must obey the connect timeout";
  close(fd);
}

TEST(RedisTls, ATlsRedisRestartedUnderLoadIsUsedAgain) {
  RedisServer server({}, RedisServer::Tls{.dir = CertDir()});
  RedisStoreOptions o = TlsOptions(server.port(), TrustingTheTestCa());
  o.command_timeout = milliseconds(200);
  o.connect_timeout = milliseconds(200);
  o.breaker_open_for = milliseconds(100);
  o.monitor_interval = milliseconds(50);
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value());
  auto limiter = (*store)->MakeLimiter(kSpec, "restart", true);
  ASSERT_TRUE(limiter.has_value());
  std::atomic<bool> stop{false};
  std::atomic<int> decided{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, t] {
      while (!stop.load()) {
        (*limiter)->Decide("k" + std::to_string(t), {}, 1);
        decided.fetch_add(1);
      }
    });
  }
  const auto busy = Clock::now() + seconds(5);
  while (decided.load() < 100 && Clock::now() < busy) std::this_thread::yield();
  ASSERT_TRUE(server.Restart());
  // Exact again: a decision that is not degraded, within a generous deadline.
  const auto until = Clock::now() + seconds(10);
  bool recovered = false;
  while (!recovered && Clock::now() < until) {
    recovered = !(*limiter)->Decide("after", {}, 1).degraded;
    if (!recovered) std::this_thread::sleep_for(milliseconds(20));
  }
  stop = true;
  for (auto& t : load) t.join();
  EXPECT_TRUE(recovered);
  const Decision d = (*limiter)->Decide("fresh", {}, 1);
  EXPECT_FALSE(d.degraded);
  EXPECT_EQ(d.remaining, 99) << "an empty restarted server counts from the start";
}

// ---- A TLS Redis Cluster (tls-cluster yes): nodes announced by IP, verified by the seed's name
// ----

bool ClusterOk(const RedisServer& node) {
  auto client = internal::RedisClient::Connect(node.Endpoint(milliseconds(2000)));
  if (!client) return false;
  auto info = (*client)->Command({"CLUSTER", "INFO"});
  return info && info->str.find("cluster_state:ok") != std::string::npos;
}

TEST(RedisTls, ATlsClusterDecidesExactlyOnEveryNode) {
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::vector<std::string> dirs;
  for (int i = 0; i < 3; ++i) {
    char templ[] = "/tmp/sluice-tls-cluster-XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr);
    dirs.emplace_back(templ);
    nodes.push_back(std::make_unique<RedisServer>(
        std::vector<std::string>{"--cluster-enabled", "yes", "--dir", dirs.back(),
                                 "--cluster-node-timeout", "1000", "--tls-cluster", "yes",
                                 "--tls-replication", "yes",
                                 // The cluster bus always asks for a client certificate: the
                                 // nodes present the test client's (server.pem is serverAuth).
                                 "--tls-client-cert-file", Cert("client.pem"),
                                 "--tls-client-key-file", Cert("client.key")},
        RedisServer::Tls{.dir = CertDir()}));
  }
  std::string create =
      "timeout 60 redis-cli --tls --cacert " + Cert("ca.pem") + " --cluster create";
  for (const auto& n : nodes) create += " 127.0.0.1:" + std::to_string(n->port());
  create += " --cluster-yes >/dev/null 2>&1";
  ASSERT_EQ(std::system(create.c_str()), 0) << create;
  const auto until = Clock::now() + seconds(30);
  bool ok = false;
  while (!ok && Clock::now() < until) {
    ok = ClusterOk(*nodes[0]) && ClusterOk(*nodes[1]) && ClusterOk(*nodes[2]);
    if (!ok) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_TRUE(ok) << "the TLS cluster did not reach cluster_state:ok";

  // The seed by name; CLUSTER SLOTS names every node by IP, verified against "localhost".
  RedisStoreOptions o = TlsOptions(0, TrustingTheTestCa(), "localhost");
  o.cluster_seeds = {"localhost:" + std::to_string(nodes[0]->port())};
  auto store = OpenRedisStore(o);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  // A period of an hour: a key keeps its TTL (the time to refill one unit, 36 s) until DBSIZE
  // below has looked, where 100/s would let it expire in 10 ms.
  const LimitSpec hourly{Algorithm::kTokenBucket, 100, std::chrono::hours(1), 100, false};
  auto limiter = (*store)->MakeLimiter(hourly, "cluster", false);
  ASSERT_TRUE(limiter.has_value());
  for (int k = 0; k < 200; ++k) {
    const Decision d = (*limiter)->Decide("user-" + std::to_string(k), {}, 1);
    ASSERT_FALSE(d.degraded) << "key " << k;
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 99);
  }
  for (int i = 0; i < 3; ++i) {
    auto client =
        internal::RedisClient::Connect(nodes[static_cast<size_t>(i)]->Endpoint(seconds(2)));
    ASSERT_TRUE(client.has_value());
    auto keys = (*client)->Command({"DBSIZE"});
    ASSERT_TRUE(keys.has_value());
    EXPECT_GT(keys->integer, 0) << "node " << i << " holds none of the 200 keys";
  }
  nodes.clear();
  for (const std::string& d : dirs) std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace sluice::testing
