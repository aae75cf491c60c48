// recommend --from against a fake sluiced on 127.0.0.1: one canned answer per connection, and
// the request it received, so the test sees what the client asked for.
#include "cli/usage_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace sluice::cli {
namespace {

class FakeSluiced {
 public:
  explicit FakeSluiced(std::string answer) : answer_(std::move(answer)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;  // ephemeral
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeSluiced() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // What the one connection sent (complete once the client has its answer).
  std::string request() {
    thread_.join();
    thread_ = std::thread([] {});
    return request_;
  }

 private:
  void Serve() {
    const int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    while (request_.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      request_.append(buf, static_cast<size_t>(n));
    }
    size_t sent = 0;
    while (sent < answer_.size()) {
      const ssize_t n = send(c, answer_.data() + sent, answer_.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    close(c);
  }

  std::string answer_;
  std::string request_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

std::string Http(const std::string& status, const std::string& body) {
  return "HTTP/1.1 " + status +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

constexpr char kUsage[] = R"({"domain":"api","limit":"per key","period_s":60,"identities":1234,)"
                          R"("percentiles":{"p50":12,"p90":40,"p95":55.5,"p99":80,"max":300}})";

TEST(UsageClient, AsksForTheLimitWithTheTokenAndReadsThePercentiles) {
  FakeSluiced server(Http("200 OK", kUsage));
  auto usage = FetchUsage({server.url(), "s3cret", "api", "per key"});
  ASSERT_TRUE(usage) << usage.error().message;
  const std::string request = server.request();
  EXPECT_EQ(request.rfind("GET /v1/usage?domain=api&limit=per%20key HTTP/1.1\r\n", 0), 0u)
      << request;
  EXPECT_NE(request.find("\r\nAuthorization: Bearer s3cret\r\n"), std::string::npos) << request;
  EXPECT_EQ(usage->domain, "api");
  EXPECT_EQ(usage->limit, "per key");
  EXPECT_EQ(usage->period_s, 60);
  EXPECT_EQ(usage->identities, 1234u);
  EXPECT_EQ(usage->percentiles.p50, 12);
  EXPECT_EQ(usage->percentiles.p95, 56);  // a fraction of a request, rounded up
  EXPECT_EQ(usage->percentiles.max, 300);

  RecommendOptions o;  // p99, headroom 1.2
  auto r = RecommendFromUsage(*usage, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->limit, 96);  // 80 x 1.2
  EXPECT_EQ(r->burst, 96);
  EXPECT_EQ(r->options.per, std::chrono::seconds(60));
  EXPECT_TRUE(r->what_if.empty());
  o.percentile = 97;
  EXPECT_FALSE(RecommendFromUsage(*usage, o));
}

TEST(UsageClient, AnErrorStatusIsReportedWithTheServersWords) {
  FakeSluiced server(Http("401 Unauthorized", R"({"error":"a valid admin token is required"})"));
  auto usage = FetchUsage({server.url(), "wrong", "api", "per_key"});
  ASSERT_FALSE(usage);
  EXPECT_NE(usage.error().message.find("401"), std::string::npos) << usage.error().message;
  EXPECT_NE(usage.error().message.find("admin token"), std::string::npos) << usage.error().message;
}

TEST(UsageClient, MalformedAnswersNameTheField) {
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "not JSON"},
           {R"({"limit":"x","period_s":60,"identities":1,"percentiles":{}})", "domain"},
           {R"({"domain":"a","limit":"x","period_s":0,"identities":1,"percentiles":{}})",
            "period_s"},
           {R"({"domain":"a","limit":"x","period_s":60,"identities":1,"percentiles":{"p50":1}})",
            "percentiles.p90"},
           {R"({"domain":"a","limit":"x","period_s":60,"identities":-1,"percentiles":{}})",
            "identities"},
       }) {
    auto usage = ParseUsageJson(body);
    ASSERT_FALSE(usage) << body;
    EXPECT_NE(usage.error().message.find(field), std::string::npos) << usage.error().message;
  }
}

TEST(UsageClient, NoServerIsAnErrorNotAHang) {
  int port = 0;
  {  // a port that was free a moment ago, now closed
    FakeSluiced gone(Http("200 OK", kUsage));
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  auto usage = FetchUsage({"http://127.0.0.1:" + std::to_string(port), "", "api", "x",
                           std::chrono::milliseconds(2000)});
  ASSERT_FALSE(usage);
  EXPECT_FALSE(FetchUsage({"https://127.0.0.1:1", "", "api", "x"}));
  EXPECT_FALSE(FetchUsage({"http://127.0.0.1:notaport", "", "api", "x"}));
}

}  // namespace
}  // namespace sluice::cli
