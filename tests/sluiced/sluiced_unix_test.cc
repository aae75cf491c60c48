// sluiced's listeners and its Redis store over Unix sockets, with the real binary: each listener
// answers on its socket (a raw HTTP/1.1 client over AF_UNIX, a grpc++ client with a "unix:"
// target); the socket files get the mode and group asked for and go at exit; a second server
// on the same path fails clearly while the first keeps answering; a stale socket is replaced;
// forward-auth reads X-Forwarded-For from a Unix peer only with `unix` in trusted_proxies; the
// store over redis+unix:// decides exactly and its password never reaches the log.
#include <grp.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "store/redis/redis_client.h"
#include "support/redis_server.h"
#include "support/sluiced_process.h"
#include "support/wait_for.h"

namespace sluice::testing {
namespace {

namespace fs = std::filesystem;

// A directory for one test, removed at the end. Short (mkdtemp under /tmp) rather than named
// after the test: a Unix socket's path must fit in 107 bytes.
class ShortDir {
 public:
  ShortDir() {
    char name[] = "/tmp/sluice-unix-XXXXXX";
    EXPECT_NE(mkdtemp(name), nullptr);
    path_ = name;
  }
  ~ShortDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return path_ / name;
  }

 private:
  fs::path path_;
};

constexpr char kConfig[] = R"yaml(domain: test
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: hour, requests_per_unit: 5}
)yaml";

// One forward-auth identity per client address, one request an hour each.
std::string ForwardAuthConfig(const std::string& trusted) {
  return "domain: fa\nforward_auth:\n  trusted_proxies: [" + trusted +
         "]\n  actions:\n    - [remote_address]\ndescriptors:\n  - key: remote_address\n"
         "    rate_limit: {name: per_client, unit: hour, requests_per_unit: 1}\n";
}

// Connects to the Unix socket at `path`; -1 on failure. Reads time out after 10 s.
int UnixConnect(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` (which asks for Connection: close) to the Unix socket at `path` and returns
// everything the server sends until it closes; "" if the connection fails.
std::string UnixExchange(const std::string& path, const std::string& request) {
  const int fd = UnixConnect(path);
  if (fd < 0) return {};
  std::string out;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;)
      out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// The status code of an HTTP/1.1 exchange over the socket, 0 if none came back.
int Status(const std::string& path, const std::string& method, const std::string& target,
           const std::string& body = {}, const std::string& headers = {}) {
  const std::string response = UnixExchange(
      path, method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers +
                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  if (!response.starts_with("HTTP/1.1 ")) return 0;
  return std::atoi(response.c_str() + 9);
}

std::string CheckBody(const std::string& user) {
  return R"({"domain":"test","descriptors":[{"entries":[{"key":"user","value":")" + user +
         R"("}]}]})";
}

bool IsSocket(const fs::path& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// A group other than the process's own when one exists (so that the chown is seen), else the
// process's own: root may give the file any group, another user only one of its own.
std::string SomeGroup() {
  if (geteuid() == 0) {
    if (const group* g = getgrnam("nogroup"); g != nullptr) return g->gr_name;
  }
  const group* own = getgrgid(getegid());
  return own != nullptr ? own->gr_name : "";
}

class SluicedUnix : public ::testing::Test {
 protected:
  SluicedUnix() { config_ = dir_.Write("test.yaml", kConfig).string(); }

  // Starts sluiced with `args` after the config, waiting until `socket` exists.
  std::unique_ptr<SluicedProcess> Start(const std::vector<std::string>& args,
                                        const fs::path& socket) {
    std::vector<std::string> all = {"--config", config_};
    all.insert(all.end(), args.begin(), args.end());
    auto p = std::make_unique<SluicedProcess>(all, /*wait_for_http=*/false);
    EXPECT_TRUE(WaitFor(
        [&] {
          return IsSocket(socket) &&
                 p->WaitForLog("listening on unix:", 1, std::chrono::milliseconds(0));
        },
        std::chrono::seconds(20)))
        << p->Log();
    return p;
  }

  fs::path Sock(const std::string& name) const { return dir_.path() / name; }

  ShortDir dir_;
  std::string config_;
};

TEST_F(SluicedUnix, EveryListenerAnswersOnItsSocketWithTheModeAndGroupAskedForAndGoesAtExit) {
  const std::string group_name = SomeGroup();
  ASSERT_FALSE(group_name.empty());
  const fs::path http = Sock("http.sock"), fa = Sock("fa.sock"), rls = Sock("rls.sock");
  // Both domains: a config directory.
  fs::create_directory(dir_.path() / "conf");
  dir_.Write("conf/test.yaml", kConfig);
  dir_.Write("conf/fa.yaml", ForwardAuthConfig("unix"));
  config_ = (dir_.path() / "conf").string();
  auto sluiced = Start(
      {"--http", "unix:" + http.string(), "--forward-auth", "unix:" + fa.string(), "--grpc",
       "unix:" + rls.string(), "--unix-socket-mode", "0640", "--unix-socket-group", group_name},
      http);
  ASSERT_TRUE(WaitFor([&] { return IsSocket(fa) && IsSocket(rls); }, std::chrono::seconds(20)));

  EXPECT_EQ(Status(http, "GET", "/healthz"), 200);
  EXPECT_EQ(Status(http, "POST", "/v1/check", CheckBody("alice")), 200);
  EXPECT_EQ(Status(fa, "GET", "/anything"), 200);

  {  // the channel closes before the stop below: an open one holds gRPC's shutdown (5 s)
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel("unix:" + rls.string(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = stub->Check(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  const ::group* g = getgrnam(group_name.c_str());
  ASSERT_NE(g, nullptr);
  for (const fs::path& p : {http, fa, rls}) {
    struct stat st {};
    ASSERT_EQ(lstat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_mode & 07777, 0640u) << p;
    EXPECT_EQ(st.st_gid, g->gr_gid) << p;
  }
  // Nothing else was left next to them (the private directory they were made in is gone).
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_.path())) ++entries;
  EXPECT_EQ(entries, 5u);  // test.yaml, conf/, three sockets

  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0) << sluiced->Log();
  EXPECT_FALSE(fs::exists(http));
  EXPECT_FALSE(fs::exists(fa));
  EXPECT_FALSE(fs::exists(rls));
}

TEST_F(SluicedUnix, ASecondServerOnALiveSocketFailsAndTheFirstKeepsAnswering) {
  const fs::path http = Sock("http.sock"), rls = Sock("rls.sock");
  auto first = Start({"--http", "unix:" + http.string(), "--grpc", "off"}, http);

  SluicedProcess second({"--config", config_, "--http", "unix:" + http.string(), "--grpc", "off"},
                        /*wait_for_http=*/false);
  EXPECT_NE(second.WaitExit(), 0);
  EXPECT_NE(second.Log().find("another server is listening on " + http.string()), std::string::npos)
      << second.Log();
  EXPECT_EQ(Status(http, "GET", "/healthz"), 200);

  // The same for gRPC, next to a live one.
  auto grpc_first = Start({"--http", "off", "--grpc", "unix:" + rls.string()}, rls);
  SluicedProcess grpc_second(
      {"--config", config_, "--http", "off", "--grpc", "unix:" + rls.string()},
      /*wait_for_http=*/false);
  EXPECT_NE(grpc_second.WaitExit(), 0);
  EXPECT_NE(grpc_second.Log().find("another server is listening on " + rls.string()),
            std::string::npos)
      << grpc_second.Log();
  EXPECT_TRUE(IsSocket(rls));

  // The failed servers removed nothing: the first one still answers after they are gone.
  EXPECT_EQ(Status(http, "GET", "/healthz"), 200);
}

TEST_F(SluicedUnix, AStaleSocketIsReplacedAndAFileThatIsNotASocketIsKept) {
  const fs::path http = Sock("http.sock");
  {
    // A socket file nobody listens on: what a killed server leaves.
    auto killed = Start({"--http", "unix:" + http.string(), "--grpc", "off"}, http);
    killed->Signal(SIGKILL);
    killed->WaitExit();
  }
  ASSERT_TRUE(IsSocket(http));
  auto sluiced = Start({"--http", "unix:" + http.string(), "--grpc", "off"}, http);
  EXPECT_EQ(Status(http, "GET", "/healthz"), 200);
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0);

  const fs::path plain = dir_.Write("plain", "not a socket");
  SluicedProcess refused({"--config", config_, "--http", "unix:" + plain.string(), "--grpc", "off"},
                         /*wait_for_http=*/false);
  EXPECT_NE(refused.WaitExit(), 0);
  EXPECT_NE(refused.Log().find("exists and is not a socket"), std::string::npos) << refused.Log();
  EXPECT_TRUE(fs::is_regular_file(plain));
}

// The listeners' bounds hold on a socket as on a port: a silent client is closed at the request
// timeout; at --http-max-connections a new client takes the slot of one that sent nothing; at
// --grpc-max-connections one more gRPC connection is refused.
TEST_F(SluicedUnix, TheConnectionBoundsAndTimeoutsHold) {
  const fs::path http = Sock("http.sock"), rls = Sock("rls.sock");
  char byte = 0;
  {
    auto quick = Start(
        {"--http", "unix:" + http.string(), "--grpc", "off", "--http-timeout-ms", "300"}, http);
    // Silent: closed by the server (end of stream), well before the client's own 10 s.
    const int silent = UnixConnect(http);
    ASSERT_GE(silent, 0);
    const auto began = std::chrono::steady_clock::now();
    EXPECT_EQ(recv(silent, &byte, 1, 0), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(5));
    close(silent);
    quick->Signal(SIGTERM);
    EXPECT_EQ(quick->WaitExit(), 0);
  }

  // The request timeout is the default 10 s here: a slow client closed sooner was shed.
  auto sluiced = Start({"--http", "unix:" + http.string(), "--grpc", "unix:" + rls.string(),
                        "--http-max-connections", "1", "--grpc-max-connections", "1"},
                       http);
  ASSERT_TRUE(WaitFor([&] { return IsSocket(rls); }, std::chrono::seconds(20)));

  // At the cap of one: a connection with half a request gives its slot to a new client.
  const int slow = UnixConnect(http);
  ASSERT_GE(slow, 0);
  const std::string half = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  ASSERT_EQ(send(slow, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
  EXPECT_EQ(Status(http, "GET", "/healthz"), 200);
  EXPECT_EQ(recv(slow, &byte, 1, 0), 0) << "the slow client was closed for the new one";
  close(slow);

  // gRPC: the first channel holds the one connection; a second one is refused.
  const auto health = [&](const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    return stub->Check(&ctx, request, &response);
  };
  {
    auto first = grpc::CreateChannel("unix:" + rls.string(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(health(first).ok());
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // its own connection, not first's
    auto second =
        grpc::CreateCustomChannel("unix:" + rls.string(), grpc::InsecureChannelCredentials(), args);
    EXPECT_EQ(health(second).error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(health(first).ok()) << "the first connection is kept";
  }
  sluiced->Signal(SIGTERM);
  EXPECT_EQ(sluiced->WaitExit(), 0);
}

// Two clients behind one proxy on the forward-auth socket, each allowed one request an hour.
// Trusted, their X-Forwarded-For addresses are two identities; not trusted, both are the
// socket's peer, "unix", and the second is over the limit.
TEST_F(SluicedUnix, ForwardAuthTrustsAUnixPeerOnlyWhenUnixIsListed) {
  const fs::path fa = Sock("fa.sock");
  for (const std::string trusted : {"unix", "127.0.0.1/32"}) {
    SCOPED_TRACE(trusted);
    dir_.Write("test.yaml", ForwardAuthConfig(trusted));
    auto sluiced =
        Start({"--http", "off", "--grpc", "off", "--forward-auth", "unix:" + fa.string()}, fa);
    const auto ask = [&](const std::string& client) {
      return Status(fa, "GET", "/", {}, "X-Forwarded-For: " + client + "\r\n");
    };
    EXPECT_EQ(ask("10.0.0.1"), 200);
    if (trusted == "unix") {
      EXPECT_EQ(ask("10.0.0.2"), 200);  // another client
      EXPECT_EQ(ask("10.0.0.1"), 429);  // the first again: its own identity is spent
    } else {
      EXPECT_EQ(ask("10.0.0.2"), 429);  // the header is ignored: both are "unix"
    }
    sluiced->Signal(SIGTERM);
    EXPECT_EQ(sluiced->WaitExit(), 0);
  }
}

// The store through redis-server's Unix socket (TCP stays on for the test's own reader): as many
// admissions as the limit, the counters in the database the address names, the connections
// Redis lists as Unix clients, and the password nowhere in the log.
TEST_F(SluicedUnix, TheStoreOverRedisUnixIsExactAndItsPasswordIsHidden) {
  const fs::path redis_sock = Sock("redis.sock"), http = Sock("http.sock");
  RedisServer redis({"--unixsocket", redis_sock.string(), "--unixsocketperm", "700",
                     "--requirepass", "s3cret-pw"});
  ASSERT_TRUE(WaitFor([&] { return IsSocket(redis_sock); }, std::chrono::seconds(10)));
  const std::string store = "redis+unix://:s3cret-pw@" + redis_sock.string() + "?db=3";
  auto sluiced =
      Start({"--http", "unix:" + http.string(), "--grpc", "off", "--store", store}, http);

  int admitted = 0;
  for (int i = 0; i < 9; ++i) {
    const int status = Status(http, "POST", "/v1/check", CheckBody("bob"));
    ASSERT_TRUE(status == 200 || status == 429) << status;
    admitted += status == 200 ? 1 : 0;
  }
  EXPECT_EQ(admitted, 5);

  auto reader = internal::RedisClient::Connect(
      "127.0.0.1", redis.port(), std::chrono::milliseconds(1000), std::chrono::milliseconds(1000));
  ASSERT_TRUE(reader);
  ASSERT_TRUE((*reader)->Command({"AUTH", "s3cret-pw"}));
  ASSERT_TRUE((*reader)->Command({"SELECT", "3"}));
  auto keys = (*reader)->Command({"KEYS", "*bob*"});
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->elements.size(), 1u);
  auto clients = (*reader)->Command({"CLIENT", "LIST"});
  ASSERT_TRUE(clients);
  EXPECT_NE(clients->str.find("addr=" + redis_sock.string()), std::string::npos) << clients->str;

  const std::string log = sluiced->Log();
  EXPECT_EQ(log.find("s3cret-pw"), std::string::npos) << log;
  EXPECT_NE(log.find("redis+unix://***@" + redis_sock.string() + "?db=3"), std::string::npos)
      << log;
}

// The region layer's --global-store over redis+unix:// too: its own connection (not the store's
// pipelined ones) reaches the global Redis through the socket, with the password and database.
TEST_F(SluicedUnix, AGlobalStoreOverRedisUnixIsReached) {
  const fs::path redis_sock = Sock("redis.sock"), http = Sock("http.sock");
  RedisServer redis({"--unixsocket", redis_sock.string(), "--unixsocketperm", "700",
                     "--requirepass", "g1obal-pw"});
  ASSERT_TRUE(WaitFor([&] { return IsSocket(redis_sock); }, std::chrono::seconds(10)));
  dir_.Write("test.yaml", R"yaml(domain: world
descriptors:
  - key: leased
    rate_limit:
      name: world-leased
      unit: second
      requests_per_unit: 100
      algorithm: fixed_window
      scope: global
      regions: {mode: leased, refresh: 200ms, shares: {us: 0.5, eu: 0.5}}
)yaml");
  const std::string socket = redis_sock.string();
  auto sluiced = Start({"--http", "unix:" + http.string(), "--grpc", "off", "--store",
                        "redis+unix://:g1obal-pw@" + socket, "--region", "us", "--global-store",
                        "redis+unix://:g1obal-pw@" + socket + "?db=4"},
                       http);
  EXPECT_TRUE(sluiced->WaitForLog("reached: leased limits follow demand")) << sluiced->Log();
  EXPECT_NE(sluiced->Log().find("global store redis unix:" + socket), std::string::npos)
      << sluiced->Log();
  auto reader = internal::RedisClient::Connect(
      "127.0.0.1", redis.port(), std::chrono::milliseconds(1000), std::chrono::milliseconds(1000));
  ASSERT_TRUE(reader);
  ASSERT_TRUE((*reader)->Command({"AUTH", "g1obal-pw"}));
  ASSERT_TRUE((*reader)->Command({"SELECT", "4"}));
  EXPECT_TRUE(WaitFor([&] {
    auto size = (*reader)->Command({"DBSIZE"});
    return size && size->integer > 0;
  })) << "the leases are kept in the database the address names";
  EXPECT_EQ(sluiced->Log().find("g1obal-pw"), std::string::npos);
}

}  // namespace
}  // namespace sluice::testing
