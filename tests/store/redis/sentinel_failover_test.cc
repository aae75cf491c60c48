// Redis Sentinel against real processes: a master, a replica (--replicaof) and three
// `redis-server --sentinel` on loopback. Decisions through redis+sentinel:// are exact; during a
// failover (SENTINEL FAILOVER, or the master killed with SIGKILL) every decision that is not
// exact follows the limit's failure mode and is marked degraded; after it, decisions are exact
// against the promoted replica, and no script goes to the old master. The kill also measures
// the over-admission: admissions the old master acknowledged that the promoted replica never
// received (docs/redis.md, "Sentinel"). Label: sentinel (ctest -L sentinel).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/memory_store.h"
#include "sluice/redis_store.h"
#include "sluice/region_scope.h"
#include "sluice/region_store.h"
#include "sluice/scheduler.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_endpoint.h"
#include "store/redis/redis_tls.h"
#include "support/ports.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;
using internal::RedisClient;
using internal::RedisReply;

// A million a day in a fixed window: while a test runs (not across midnight UTC), `remaining`
// after each admission is exactly one less than before, wherever the count lives.
constexpr LimitSpec kSpec{Algorithm::kFixedWindow, 1'000'000, std::chrono::hours(24), 0, false};
constexpr milliseconds kSetupDeadline{30'000};

// A server the test asks things of: its port, and the TLS context (the test CA, the client
// certificate) when it listens with TLS only.
struct Target {
  Target(int p, std::shared_ptr<const internal::RedisTlsContext> t = nullptr)  // NOLINT: implicit
      : port(p), tls(std::move(t)) {}
  int port;
  std::shared_ptr<const internal::RedisTlsContext> tls;
};

// One child process (redis-server in either mode), killed when the test process dies.
class Process {
 public:
  explicit Process(std::vector<std::string> argv) {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
  }
  ~Process() { Kill(SIGKILL); }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  void Kill(int signal) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  bool Exited() {
    if (pid_ <= 0) return true;
    if (waitpid(pid_, nullptr, WNOHANG) != pid_) return false;
    pid_ = -1;
    return true;
  }

 private:
  pid_t pid_ = -1;
};

// `command` on a fresh connection, after AUTH `password` if there is one.
Result<RedisReply> Ask(const Target& target, const std::vector<std::string>& command,
                       const std::string& password = "") {
  internal::RedisEndpoint e;
  e.port = target.port;
  e.connect_timeout = milliseconds(500);
  e.command_timeout = milliseconds(2000);
  e.tls = target.tls;
  auto c = RedisClient::Connect(e);
  if (!c) return std::unexpected(c.error());
  if (!password.empty()) {
    if (auto auth = (*c)->Command({"AUTH", password}); !auth) return auth;
  }
  return (*c)->Command(command);
}

// "name:value" in an INFO reply, or "".
std::string InfoField(const Target& port, const std::string& section, const std::string& name,
                      const std::string& password = "") {
  auto info = Ask(port, {"INFO", section}, password);
  if (!info) return {};
  const std::string key = "\n" + name + ":";
  const std::string text = "\n" + info->str;
  const size_t at = text.find(key);
  if (at == std::string::npos) return {};
  const size_t from = at + key.size();
  return text.substr(from, text.find_first_of("\r\n", from) - from);
}

int64_t InfoNumber(const Target& port, const std::string& section, const std::string& name) {
  const std::string v = InfoField(port, section, name);
  return v.empty() ? -1 : std::stoll(v);
}

// Scripts a server has run: EVALSHA and EVAL calls (INFO commandstats).
int64_t ScriptCalls(const Target& port) {
  auto info = Ask(port, {"INFO", "commandstats"});
  if (!info) return -1;
  int64_t calls = 0;
  for (const std::string cmd : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const size_t at = info->str.find(cmd);
    if (at != std::string::npos) calls += std::stoll(info->str.substr(at + cmd.size()));
  }
  return calls;
}

// Scripts a server was sent: EVALSHA and EVAL calls (a script that failed, READONLY included,
// is a call) and calls rejected before running.
int64_t ScriptAttempts(const Target& port) {
  auto info = Ask(port, {"INFO", "commandstats"});
  if (!info) return -1;
  int64_t n = 0;
  for (const std::string cmd : {"cmdstat_evalsha:", "cmdstat_eval:"}) {
    const size_t at = info->str.find(cmd);
    if (at == std::string::npos) continue;
    const std::string line = info->str.substr(at, info->str.find('\r', at) - at);
    for (const std::string field : {"calls=", "rejected_calls="}) {
      const size_t f = line.find("," + field) != std::string::npos ? line.find("," + field) + 1
                                                                   : line.find(":" + field) + 1;
      if (f != 0) n += std::stoll(line.substr(f + field.size()));
    }
  }
  return n;
}

// A field of a SENTINEL replicas entry (a flat array of names and values).
std::string Field(const RedisReply& entry, const std::string& name) {
  for (size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
    if (entry.elements[i].str == name) return entry.elements[i + 1].str;
  }
  return {};
}

bool IsMaster(const Target& port) {
  auto role = Ask(port, {"ROLE"});
  return role && !role->elements.empty() && role->elements[0].str == "master";
}

// A master, its replica and three sentinels watching it as "mymaster" (quorum 2); with
// passwords, the servers' (`requirepass`, `masterauth`) and the sentinels' own. With `certs` (a
// make-test-certs directory), every one of the five listens with TLS only (--port 0), requires
// a client certificate, and replicates and talks to the others over TLS.
class Topology {
 public:
  explicit Topology(const std::string& dir, std::string master_password = "",
                    std::string sentinel_password = "", std::string certs = "")
      : dir_(dir),
        master_password_(std::move(master_password)),
        sentinel_password_(std::move(sentinel_password)),
        certs_(std::move(certs)) {
    if (!certs_.empty()) {
      // The tests' own checks: the client certificate, the server's verified by the CA only.
      auto tls = internal::RedisTlsContext::Make({.enabled = true,
                                                  .ca_file = certs_ + "/ca.pem",
                                                  .cert_file = certs_ + "/client.pem",
                                                  .key_file = certs_ + "/client.key",
                                                  .insecure_skip_verify = true});
      EXPECT_TRUE(tls.has_value()) << tls.error().message;
      if (tls) tls_ = std::move(*tls);
    }
    // No diskless-sync delay: the replica syncs at once.
    std::vector<std::string> common = {"--repl-diskless-sync-delay", "0"};
    if (!master_password_.empty()) {
      common.insert(common.end(),
                    {"--requirepass", master_password_, "--masterauth", master_password_});
    }
    master_port_ = StartServer(master_, "master", common);
    common.insert(common.end(), {"--replicaof", "127.0.0.1", std::to_string(master_port_)});
    replica_port_ = StartServer(replica_, "replica", common);
    // The replica in sync before the sentinels look: they find it in the master's INFO.
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          return InfoField(At(replica_port_), "replication", "master_link_status",
                           master_password_) == "up";
        },
        kSetupDeadline));
    for (int i = 0; i < 3; ++i) sentinel_ports_.push_back(StartSentinel(i));
    // Every sentinel knows the replica and the two other sentinels (hello messages, every 2 s):
    // a failover needs both.
    for (int port : sentinel_ports_) {
      EXPECT_TRUE(testing::WaitFor(
          [&] {
            auto replicas = Ask(At(port), {"SENTINEL", "replicas", "mymaster"}, sentinel_password_);
            auto sentinels =
                Ask(At(port), {"SENTINEL", "sentinels", "mymaster"}, sentinel_password_);
            return replicas && replicas->elements.size() == 1 &&
                   Field(replicas->elements[0], "flags") == "slave" &&
                   Field(replicas->elements[0], "master-link-status") == "ok" && sentinels &&
                   sentinels->elements.size() == 2;
          },
          kSetupDeadline))
          << "sentinel on " << port << " did not discover its peers";
    }
  }

  // Over TLS, the sentinels by the name their certificate carries ("localhost"): the master
  // they name by IP is then verified against it too.
  std::string Address() const {
    const std::string host = tls_ ? "localhost:" : "127.0.0.1:";
    std::string a = tls_ ? "rediss+sentinel://" : "redis+sentinel://";
    for (size_t i = 0; i < sentinel_ports_.size(); ++i) {
      a += (i > 0 ? "," : "") + host + std::to_string(sentinel_ports_[i]);
    }
    return a + "/mymaster";
  }

  int master_port() const { return master_port_; }
  int replica_port() const { return replica_port_; }
  int sentinel_port(int i) const { return sentinel_ports_[static_cast<size_t>(i)]; }
  Target master() const { return At(master_port_); }
  Target replica() const { return At(replica_port_); }
  Target sentinel(int i) const { return At(sentinel_port(i)); }
  Target At(int port) const { return Target(port, tls_); }
  void KillMaster() { master_->Kill(SIGKILL); }

 private:
  // Starts redis-server with `args` on a free port, retrying on another if it is taken.
  int StartServer(std::unique_ptr<Process>& p, const std::string& name,
                  const std::vector<std::string>& extra) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      const int port = testing::FreePort();
      std::vector<std::string> argv = {"redis-server"};
      if (tls_) {
        argv.insert(argv.end(),
                    {"--port", "0", "--tls-port", std::to_string(port), "--tls-cert-file",
                     certs_ + "/server.pem", "--tls-key-file", certs_ + "/server.key",
                     "--tls-ca-cert-file", certs_ + "/ca.pem", "--tls-auth-clients", "yes",
                     "--tls-replication", "yes", "--tls-client-cert-file", certs_ + "/client.pem",
                     "--tls-client-key-file", certs_ + "/client.key"});
      } else {
        argv.insert(argv.end(), {"--port", std::to_string(port)});
      }
      argv.insert(argv.end(), {"--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                               "--loglevel", "warning", "--logfile", dir_ + "/" + name + ".log",
                               // A replica writes what it syncs to disk, and a server
                               // loads what it finds there at start: a directory of
                               // this test's own, never the current one.
                               "--dir", dir_, "--dbfilename", name + ".rdb"});
      argv.insert(argv.end(), extra.begin(), extra.end());
      p = std::make_unique<Process>(argv);
      if (Up(*p, port, master_password_)) return port;
    }
    ADD_FAILURE() << "redis-server did not start";
    return 0;
  }

  int StartSentinel(int i) {
    auto& p = sentinels_.emplace_back();
    for (int attempt = 0; attempt < 5; ++attempt) {
      const int port = testing::FreePort();
      const std::string conf = dir_ + "/sentinel" + std::to_string(i) + ".conf";
      std::ofstream(conf) << (tls_ ? "port 0\ntls-port " : "port ") << port
                          << "\nbind 127.0.0.1\ndaemonize no\n"
                          << "dir " << dir_ << "\nloglevel notice\n"
                          << "logfile " << dir_ << "/sentinel" << i << ".log\n"
                          << "sentinel monitor mymaster 127.0.0.1 " << master_port_ << " 2\n"
                          << "sentinel down-after-milliseconds mymaster 1000\n"
                          << "sentinel failover-timeout mymaster 4000\n"
                          << "sentinel parallel-syncs mymaster 1\n";
      if (!master_password_.empty()) {
        std::ofstream(conf, std::ios::app)
            << "sentinel auth-pass mymaster " << master_password_ << "\n";
      }
      if (tls_) {
        std::ofstream(conf, std::ios::app)
            << "tls-cert-file " << certs_ << "/server.pem\ntls-key-file " << certs_
            << "/server.key\ntls-ca-cert-file " << certs_ << "/ca.pem\ntls-client-cert-file "
            << certs_ << "/client.pem\ntls-client-key-file " << certs_
            << "/client.key\ntls-auth-clients yes\ntls-replication yes\n";
      }
      if (!sentinel_password_.empty()) {
        std::ofstream(conf, std::ios::app) << "requirepass " << sentinel_password_ << "\n";
      }
      p = std::make_unique<Process>(std::vector<std::string>{"redis-server", conf, "--sentinel"});
      if (Up(*p, port, sentinel_password_)) return port;
    }
    ADD_FAILURE() << "redis-server --sentinel did not start";
    return 0;
  }

  // Up, and the server on `port` is ours: a port found free can be taken before the server
  // binds it (the machine runs other tests' servers), and then ours exits while the other
  // answers. So the answer must name our process.
  bool Up(Process& p, int port, const std::string& password) const {
    const std::string pid = std::to_string(p.pid());
    return testing::WaitFor(
               [&] {
                 return p.Exited() || InfoField(At(port), "server", "process_id", password) == pid;
               },
               kSetupDeadline) &&
           !p.Exited();
  }

  std::string dir_;
  std::string master_password_;
  std::string sentinel_password_;
  std::string certs_;
  std::shared_ptr<const internal::RedisTlsContext> tls_;  // null: plaintext
  std::unique_ptr<Process> master_;
  std::unique_ptr<Process> replica_;
  std::vector<std::unique_ptr<Process>> sentinels_;
  int master_port_ = 0;
  int replica_port_ = 0;
  std::vector<int> sentinel_ports_;
};

// A decision, with when it was asked and when its answer came. Which server answered is told by
// `asked`: a decision asked after the master died cannot have been answered by it, while one
// answered just before the kill can be stamped `at` after it (its thread descheduled between the
// answer and the clock read, seen under ASan on a loaded machine).
struct Seen {
  SteadyClock::time_point asked;
  SteadyClock::time_point at;
  Decision d;
};

// Decisions for one key on a thread of its own, one after another, all recorded.
class Load {
 public:
  explicit Load(Limiter& limiter) : limiter_(limiter), thread_([this] { Run(); }) {}
  ~Load() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::vector<Seen> Decisions() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.size();
  }
  // Exact decisions asked after `since`.
  size_t ExactSince(SteadyClock::time_point since) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const Seen& s : seen_) n += s.asked > since && !s.d.degraded ? 1 : 0;
    return n;
  }

 private:
  void Run() {
    while (!stop_.load()) {
      const SteadyClock::time_point asked = SteadyClock::now();
      const Decision d = limiter_.Decide("k", {}, 1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back({asked, SteadyClock::now(), d});
      }
      // Pacing, not synchronisation: a refused-at-once decision costs nothing, and a loop of
      // them would take a core the five servers need.
      if (d.degraded) std::this_thread::sleep_for(milliseconds(1));
    }
  }
  Limiter& limiter_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Seen> seen_;
  std::thread thread_;
};

class SentinelTest : public ::testing::Test {
 protected:
  // SentinelTlsTest: the same over TLS (rediss+sentinel://).
  virtual bool UseTls() const { return false; }

  void SetUp() override {
    char tmpl[] = "/tmp/sluice-sentinel-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    if (UseTls()) {
      certs_ = std::make_unique<testing::TestCerts>();
      ASSERT_TRUE(certs_->ok());
    }
    topology_ = std::make_unique<Topology>(dir_, "", "", UseTls() ? certs_->dir().string() : "");
    auto store = OpenRedisStore(Options());
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = *store;
    ASSERT_TRUE(testing::WaitFor([&] { return store_->Ping(); }, kSetupDeadline));
  }
  void TearDown() override {
    store_.reset();
    topology_.reset();
    certs_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // The store's options for the topology; over TLS, the test CA and the client certificate.
  RedisStoreOptions Options() const {
    auto options = ParseRedisAddress(topology_->Address());
    EXPECT_TRUE(options.has_value()) << options.error().message;
    if (!options) return {};
    // Generous: a loaded 2-core machine runs five servers and the test.
    options->connect_timeout = milliseconds(500);
    options->command_timeout = milliseconds(500);
    options->breaker_open_for = milliseconds(100);
    options->connections = 2;
    if (certs_ != nullptr) {
      options->tls.ca_file = (*certs_)["ca.pem"];
      options->tls.cert_file = (*certs_)["client.pem"];
      options->tls.key_file = (*certs_)["client.key"];
    }
    return *options;
  }

  std::unique_ptr<Limiter> MakeLimiter(bool fail_open) {
    auto limiter = store_->MakeLimiter(kSpec, "sentinel", fail_open);
    EXPECT_TRUE(limiter.has_value()) << limiter.error().message;
    return limiter ? std::move(*limiter) : nullptr;
  }

  // Every decision is exact (admitted, one fewer remaining than the exact one before it, when
  // that one was on the same server) or degraded by the failure mode.
  static void ExpectExactOrDegraded(const std::vector<Seen>& seen, bool fail_open) {
    for (const Seen& s : seen) {
      if (s.d.degraded) {
        EXPECT_EQ(s.d.allowed, fail_open);
        EXPECT_EQ(s.d.reason, DecisionReason::kStoreUnavailable);
      } else {
        EXPECT_TRUE(s.d.allowed);
      }
    }
  }

  // Asked after `since`: the exact decisions count down one by one (all on one server's count).
  static void ExpectExactAfter(const std::vector<Seen>& seen, SteadyClock::time_point since) {
    int64_t last = -1;
    size_t n = 0;
    for (const Seen& s : seen) {
      if (s.asked <= since) continue;
      ASSERT_FALSE(s.d.degraded) << "a degraded decision after the failover had ended";
      if (last >= 0) {
        EXPECT_EQ(s.d.remaining, last - 1);
      }
      last = s.d.remaining;
      ++n;
    }
    EXPECT_GT(n, 0u);
  }

  void DecisionsAreExactOnTheMaster() {
    auto limiter = MakeLimiter(/*fail_open=*/false);
    const int64_t before = ScriptCalls(topology_->master());
    for (int i = 1; i <= 50; ++i) {
      const Decision d = limiter->Decide("k", {}, 1);
      ASSERT_FALSE(d.degraded);
      ASSERT_TRUE(d.allowed);
      EXPECT_EQ(d.remaining, 1'000'000 - i);
    }
    // On the master, and only there.
    EXPECT_GE(ScriptCalls(topology_->master()) - before, 50);
    EXPECT_EQ(ScriptCalls(topology_->replica()), 0);
  }

  // SENTINEL FAILOVER, once a sentinel takes it.
  void AskForAFailover() {
    // NOGOODSLAVE while the sentinel's view of the replica is not fresh enough: asked again.
    std::string refusal;
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          auto failover = Ask(topology_->sentinel(0), {"SENTINEL", "FAILOVER", "mymaster"});
          if (!failover) refusal = failover.error().message;
          return failover.has_value() || refusal.starts_with("INPROG");
        },
        kSetupDeadline))
        << refusal;
  }

  void ManualFailoverUnderLoad() {
    auto limiter = MakeLimiter(/*fail_open=*/true);
    Load load(*limiter);
    ASSERT_TRUE(testing::WaitFor([&] { return load.Count() >= 100; }));
    ASSERT_NO_FATAL_FAILURE(AskForAFailover());
    const auto started = SteadyClock::now();
    ASSERT_TRUE(testing::WaitFor([&] { return IsMaster(topology_->replica()); }, kSetupDeadline));
    // The promoted replica runs the scripts now: 200 of them, exact.
    const int64_t base = ScriptCalls(topology_->replica());
    ASSERT_TRUE(testing::WaitFor([&] { return ScriptCalls(topology_->replica()) - base >= 200; },
                                 kSetupDeadline));
    const auto moved = SteadyClock::now();
    const int64_t old_master_calls = ScriptCalls(topology_->master());
    ASSERT_TRUE(testing::WaitFor([&] { return load.ExactSince(moved) >= 200; }, kSetupDeadline));
    load.Stop();
    std::printf(
        "[ sentinel ] manual failover%s: promoted replica serving %lld ms after SENTINEL "
        "FAILOVER\n",
        UseTls() ? " over TLS" : "",
        static_cast<long long>(std::chrono::duration_cast<milliseconds>(moved - started).count()));
    const std::vector<Seen> seen = load.Decisions();
    ExpectExactOrDegraded(seen, /*fail_open=*/true);
    ExpectExactAfter(seen, moved);
    // Nothing more went to the old master once the new one served.
    EXPECT_EQ(ScriptCalls(topology_->master()), old_master_calls);
  }

  std::string dir_;
  std::unique_ptr<testing::TestCerts> certs_;
  std::unique_ptr<Topology> topology_;
  std::shared_ptr<RedisStore> store_;
};

TEST_F(SentinelTest, DecisionsThroughTheSentinelsAreExact) { DecisionsAreExactOnTheMaster(); }

// A master demoted behind the sentinels' back (REPLICAOF, the sentinels still name it): the
// first script there is refused with READONLY, writing nothing, and no other goes there; the
// sentinels name it still and ROLE says replica, so decisions take the failure mode.
TEST_F(SentinelTest, AReadOnlyMasterGetsNoMoreScriptsAndDecisionsTakeTheFailureMode) {
  auto limiter = MakeLimiter(/*fail_open=*/false);
  for (int i = 1; i <= 10; ++i) ASSERT_FALSE(limiter->Decide("k", {}, 1).degraded);
  const int master = topology_->master_port();
  ASSERT_TRUE(Ask(topology_->replica_port(), {"REPLICAOF", "NO", "ONE"}).has_value());
  ASSERT_TRUE(Ask(master, {"REPLICAOF", "127.0.0.1", std::to_string(topology_->replica_port())})
                  .has_value());
  ASSERT_FALSE(IsMaster(master));
  const int64_t before = ScriptAttempts(master);
  for (int i = 0; i < 50; ++i) {
    const Decision d = limiter->Decide("k", {}, 1);
    EXPECT_TRUE(d.degraded);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.reason, DecisionReason::kStoreUnavailable);
  }
  // At most one per pipelined connection reached it (and was refused) before sluice stopped
  // trusting it.
  EXPECT_LE(ScriptAttempts(master) - before, 2);
}

TEST_F(SentinelTest, AManualFailoverIsFollowedAndDecisionsAreExactOnThePromotedReplica) {
  ManualFailoverUnderLoad();
}

TEST_F(SentinelTest, AKilledMasterIsReplacedAndTheOverAdmissionIsTheUnreplicatedWrites) {
  auto limiter = MakeLimiter(/*fail_open=*/false);
  Load load(*limiter);
  ASSERT_TRUE(testing::WaitFor([&] { return load.Count() >= 200; }));
  // The replication lag right before the kill, in bytes, and what one decision costs in the
  // replication stream (measured over the load so far).
  // The replica's first: the difference is then at least the lag at the moment of the kill.
  const int64_t replica_offset =
      InfoNumber(topology_->replica_port(), "replication", "slave_repl_offset");
  const int64_t master_offset =
      InfoNumber(topology_->master_port(), "replication", "master_repl_offset");
  const size_t decided = load.Count();
  topology_->KillMaster();
  const auto killed = SteadyClock::now();
  // The first exact decision after the kill was made by the promoted replica.
  ASSERT_TRUE(testing::WaitFor([&] { return load.ExactSince(killed) >= 1; }, kSetupDeadline));
  const std::vector<Seen> first = load.Decisions();
  SteadyClock::time_point recovered{};
  for (const Seen& s : first) {
    if (s.asked > killed && !s.d.degraded) {
      recovered = s.asked;
      break;
    }
  }
  ASSERT_TRUE(testing::WaitFor([&] { return load.ExactSince(recovered) >= 200; }, kSetupDeadline));
  load.Stop();
  EXPECT_TRUE(IsMaster(topology_->replica_port()));
  const std::vector<Seen> seen = load.Decisions();
  ExpectExactOrDegraded(seen, /*fail_open=*/false);
  ExpectExactAfter(seen, recovered);

  // Admissions the old master acknowledged (the last exact `remaining` before the kill) against
  // what the promoted replica had (the first exact `remaining` after it): each admission lost
  // is one the limit grants again, the over-admission.
  int64_t last_old = -1;
  int64_t first_new = -1;
  size_t degraded = 0;
  for (const Seen& s : seen) {
    if (s.d.degraded) ++degraded;
    if (s.d.degraded) continue;
    if (s.asked < killed) last_old = s.d.remaining;
    if (s.asked >= recovered && first_new < 0) first_new = s.d.remaining;
  }
  ASSERT_GE(last_old, 0);
  ASSERT_GE(first_new, 0);
  const int64_t lost = first_new - last_old + 1;
  const int64_t lag_bytes = master_offset - replica_offset;
  const double bytes_per_decision =
      decided > 0 ? static_cast<double>(master_offset) / static_cast<double>(decided) : 0;
  std::printf(
      "[ sentinel ] master killed: new master exact after %lld ms (%zu degraded decisions, "
      "rejected by fail-closed); admissions lost with the old master: %lld; replication lag "
      "just before the kill: at most %lld bytes (~%.0f bytes per decision)\n",
      static_cast<long long>(std::chrono::duration_cast<milliseconds>(recovered - killed).count()),
      degraded, static_cast<long long>(lost), static_cast<long long>(lag_bytes),
      bytes_per_decision);
  // A decision in flight at the kill may have been written and replicated without its answer
  // (it was degraded): the replica has at most that one more. It never lacks more admissions
  // than the old master acknowledged in the moment before the kill: replication on loopback is
  // continuous, so only the newest writes can be missing.
  EXPECT_GE(lost, -1);
  size_t acked_last_second = 0;
  for (const Seen& s : seen) {
    acked_last_second += !s.d.degraded && s.asked < killed && killed - s.at < seconds(1) ? 1 : 0;
  }
  EXPECT_LE(lost, static_cast<int64_t>(acked_last_second));
}

// The address's password goes to the master, --redis-sentinel-password to the sentinels; a wrong
// sentinel password is reported (without the password) and decisions take the failure mode.
TEST(SentinelPasswords, EachPasswordGoesWhereItBelongs) {
  char tmpl[] = "/tmp/sluice-sentinel-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    Topology topology(dir, "master-pw", "sentinel-pw");
    const std::string address = topology.Address();
    auto options =
        ParseRedisAddress("redis+sentinel://:master-pw@" + address.substr(address.find("//") + 2));
    ASSERT_TRUE(options.has_value()) << options.error().message;
    options->connect_timeout = milliseconds(500);
    options->command_timeout = milliseconds(500);

    std::mutex mu;
    std::vector<std::string> events;
    RedisStoreOptions wrong = *options;
    wrong.sentinel_password = "not-the-sentinel-pw";
    wrong.on_event = [&](const RedisEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(e.message);
    };
    options->sentinel_password = "sentinel-pw";

    auto store = OpenRedisStore(*options);
    ASSERT_TRUE(store.has_value());
    ASSERT_TRUE(testing::WaitFor([&] { return (*store)->Ping(); }, kSetupDeadline));
    auto limiter = (*store)->MakeLimiter(kSpec, "pw", /*fail_open=*/false);
    ASSERT_TRUE(limiter.has_value());
    for (int i = 1; i <= 10; ++i) {
      const Decision d = (*limiter)->Decide("k", {}, 1);
      ASSERT_FALSE(d.degraded);
      EXPECT_EQ(d.remaining, 1'000'000 - i);
    }

    auto refused = OpenRedisStore(wrong);
    ASSERT_TRUE(refused.has_value());
    ASSERT_TRUE(testing::WaitFor([&] {
      std::lock_guard<std::mutex> lock(mu);
      for (const std::string& m : events) {
        if (m.find("no sentinel answered") != std::string::npos) return true;
      }
      return false;
    }));
    auto refused_limiter = (*refused)->MakeLimiter(kSpec, "pw", /*fail_open=*/false);
    ASSERT_TRUE(refused_limiter.has_value());
    const Decision d = (*refused_limiter)->Decide("k", {}, 1);
    EXPECT_TRUE(d.degraded);
    EXPECT_FALSE(d.allowed);
    EXPECT_FALSE((*refused)->Ping());
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& m : events) {
      EXPECT_EQ(m.find("-pw"), std::string::npos) << m;
    }
    refused->reset();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// ---- rediss+sentinel://: the same topology with TLS only, every connection verified.

// A store's events, kept.
struct Events {
  std::mutex mu;
  std::vector<std::string> seen;

  RedisEventHook Hook(const std::shared_ptr<Events>& self) {
    return [self](const RedisEvent& e) {
      std::lock_guard<std::mutex> lock(self->mu);
      self->seen.push_back(e.message);
    };
  }
  std::vector<std::string> All() {
    std::lock_guard<std::mutex> lock(mu);
    return seen;
  }
  size_t Count(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<size_t>(std::count_if(seen.begin(), seen.end(), [&](const std::string& m) {
      return m.find(part) != std::string::npos;
    }));
  }
};

class SentinelTlsTest : public SentinelTest {
 protected:
  bool UseTls() const override { return true; }

  // A second store on the topology with `options`, every event kept (none held back).
  std::shared_ptr<RedisStore> Open(RedisStoreOptions options,
                                   const std::shared_ptr<Events>& events) {
    options.event_interval = milliseconds(0);
    options.on_event = events->Hook(events);
    auto store = OpenRedisStore(options);
    EXPECT_TRUE(store.has_value()) << store.error().message;
    return store ? *store : nullptr;
  }

  // Decisions of a store that cannot reach the master: each one the failure mode's, degraded,
  // and no script reached the master.
  void ExpectFailClosed(RedisStore& store) {
    auto limiter = store.MakeLimiter(kSpec, "refused", /*fail_open=*/false);
    ASSERT_TRUE(limiter.has_value());
    const int64_t before = ScriptCalls(topology_->master());
    for (int i = 0; i < 20; ++i) {
      const Decision d = (*limiter)->Decide("k", {}, 1);
      EXPECT_TRUE(d.degraded);
      EXPECT_FALSE(d.allowed);
      EXPECT_EQ(d.reason, DecisionReason::kStoreUnavailable);
    }
    EXPECT_EQ(ScriptCalls(topology_->master()), before);
    EXPECT_FALSE(store.Ping());
  }

  // Handshakes the sentinels saw fail (each logs the client's alert): how often a store with a
  // certificate it refuses has asked them.
  size_t RefusedHandshakes() const {
    size_t n = 0;
    for (int i = 0; i < 3; ++i) {
      std::ifstream log(dir_ + "/sentinel" + std::to_string(i) + ".log");
      for (std::string line; std::getline(log, line);) {
        n += line.find("Error accepting a client connection") != std::string::npos ? 1 : 0;
      }
    }
    return n;
  }

  // Each state told once: no event repeats the one before it.
  static void ExpectNoRepeats(const std::vector<std::string>& events) {
    for (size_t i = 1; i < events.size(); ++i) EXPECT_NE(events[i], events[i - 1]);
  }
};

// Five TLS-only servers (--port 0): whatever the store reached, it reached over TLS, with its
// client certificate (--tls-auth-clients yes), the master named by IP verified as "localhost".
TEST_F(SentinelTlsTest, DecisionsThroughTlsSentinelsAreExactOnTheMaster) {
  DecisionsAreExactOnTheMaster();
}

TEST_F(SentinelTlsTest, AManualFailoverUnderLoadIsFollowedOverTls) { ManualFailoverUnderLoad(); }

// The sentinels' certificates do not chain to the CA given: no sentinel is trusted, the reason
// is told once while the watch keeps asking, and decisions take the failure mode.
TEST_F(SentinelTlsTest, AWrongCaIsRefusedWithItsReasonOnce) {
  auto events = std::make_shared<Events>();
  RedisStoreOptions options = Options();
  options.tls.ca_file = (*certs_)["otherca.pem"];
  auto store = Open(options, events);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(testing::WaitFor([&] { return events->Count("unknown CA") >= 1; }));
  ExpectFailClosed(*store);
  // Refused decisions ask the watch again; with its backoff (at most a second) it does, each
  // time of all three sentinels (and for the subscription). Three more rounds at least.
  const size_t refused = RefusedHandshakes();
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        (void)store->Ping();
        return RefusedHandshakes() >= refused + 9;
      },
      kSetupDeadline));
  // Told once per state change (a handshake that timed out on a loaded machine would be one):
  // never the same event twice in a row.
  const auto asked = events->All();
  EXPECT_NE(asked.front().find("no sentinel answered"), std::string::npos) << asked.front();
  ExpectNoRepeats(asked);
}

// The sentinels verified against their own host ("localhost") answer; the master they name by
// IP is verified against --redis-tls-server-name, which its certificate does not carry.
TEST_F(SentinelTlsTest, AMasterWhoseCertificateLacksTheServerNameIsRefused) {
  auto events = std::make_shared<Events>();
  RedisStoreOptions options = Options();
  options.tls.server_name = "wrong.test";
  auto store = Open(options, events);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(testing::WaitFor([&] { return events->Count("name mismatch") >= 1; }));
  const std::string master = "master 127.0.0.1:" + std::to_string(topology_->master_port());
  EXPECT_EQ(events->Count(master), events->Count("name mismatch"));
  ExpectFailClosed(*store);
  ExpectNoRepeats(events->All());

  // A name the certificate carries: the same master, trusted.
  options.tls.server_name = "sluice.test";
  auto trusted = Open(options, std::make_shared<Events>());
  ASSERT_NE(trusted, nullptr);
  ASSERT_TRUE(testing::WaitFor([&] { return trusted->Ping(); }, kSetupDeadline));
  auto limiter = trusted->MakeLimiter(kSpec, "named", /*fail_open=*/false);
  ASSERT_TRUE(limiter.has_value());
  for (int i = 1; i <= 10; ++i) {
    const Decision d = (*limiter)->Decide("k", {}, 1);
    ASSERT_FALSE(d.degraded);
    EXPECT_EQ(d.remaining, 1'000'000 - i);
  }
}

// --global-store rediss+sentinel://: the region layer's grants come from the master the
// sentinels name (its scripts counted there), and after a SENTINEL FAILOVER from the promoted
// replica. The refreshes are the test's (RefreshDue), on real time.
TEST_F(SentinelTlsTest, AGlobalStoreThroughTheSentinelsFollowsAFailover) {
  auto memory = OpenMemoryStore();
  ASSERT_TRUE(memory.has_value());
  MonotonicClock clock;
  ManualClock never;
  auto events = std::make_shared<Events>();
  RegionStoreOptions o;
  o.region = "us";
  o.global_store = topology_->Address();
  o.tls = {.ca_file = (*certs_)["ca.pem"],
           .cert_file = (*certs_)["client.pem"],
           .key_file = (*certs_)["client.key"]};
  o.global_timeout = milliseconds(2000);  // generous: five servers on a loaded 2-core machine
  o.clock = &clock;
  o.scheduler = std::make_shared<ManualScheduler>(never);  // never advanced: no refresh of its own
  o.on_event = events->Hook(events);
  auto region = OpenRegionStore(*memory, o);
  ASSERT_TRUE(region.has_value()) << region.error().message;

  LimiterOptions limit;
  limit.id = "world";
  limit.region.global = true;
  limit.region.mode = RegionMode::kLeased;
  limit.region.shares = {{"eu", 500'000}, {"us", 500'000}};
  limit.region.region = "us";
  limit.region.global_spec = {
      .algorithm = Algorithm::kFixedWindow, .limit = 1000, .period = seconds(1)};
  auto part = RegionPart(limit.region.global_spec, SharedUnits(1000, limit.region.OwnShare()));
  ASSERT_TRUE(part.has_value());
  auto limiter = (*region)->MakeLimiter(*part, limit);
  ASSERT_TRUE(limiter.has_value()) << limiter.error().message;

  // Granted by the master: its script ran there. (A first exchange may come before the sentinels
  // have named the master: the link is then "reachable again" rather than "reached".)
  const int64_t on_master = ScriptCalls(topology_->master());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        (*region)->RefreshDue(clock.Now(), /*force=*/true);
        return events->Count("global store redis sentinel:mymaster: reach") >= 1;
      },
      kSetupDeadline))
      << ::testing::PrintToString(events->All());
  EXPECT_GT(ScriptCalls(topology_->master()), on_master);
  EXPECT_EQ(ScriptCalls(topology_->replica()), 0);

  ASSERT_NO_FATAL_FAILURE(AskForAFailover());
  ASSERT_TRUE(testing::WaitFor([&] { return IsMaster(topology_->replica()); }, kSetupDeadline));
  // Granted by the promoted replica (as a replica it ran no script: it applied the master's
  // writes).
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        (*region)->RefreshDue(clock.Now(), /*force=*/true);
        return ScriptCalls(topology_->replica()) > 0;
      },
      kSetupDeadline));
  auto grant = Ask(topology_->replica(), {"EXISTS", "sluice-region:{world}"});
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->integer, 1);
}

}  // namespace
}  // namespace sluice
