// The Client against a scripted server on loopback, for what a real sluiced does not do on
// demand: a 5xx, an answer that is not sluiced's, a kept-alive connection closed between calls.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "sluice/client/client.h"

namespace sluice::client {
namespace {

using namespace std::chrono_literals;

constexpr char kOkBody[] = R"({"overall":"OK","statuses":[{"code":"OK","limit":null,"remaining":0,)"
                           R"("reset_after_ms":0,"retry_after_ms":0}]})";

std::string Answer(int status, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Answers each request with the next scripted answer (the last one again once they run out);
// with close_after_each, closes the connection after every answer (without saying so), as a
// server does to an idle keep-alive. Serves each connection on a thread of its own.
class ScriptedServer {
 public:
  ScriptedServer(std::vector<std::string> answers, bool close_after_each)
      : answers_(std::move(answers)), close_after_each_(close_after_each) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listen_fd_, 8);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  int connections() const { return connections_; }

 private:
  // Waits for fd to be readable, checking stop_ every 20 ms.
  bool Readable(int fd) {
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) > 0) return true;
    }
    return false;
  }
  void Serve() {
    std::vector<std::thread> connections;
    while (Readable(listen_fd_)) {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      ++connections_;
      connections.emplace_back([this, fd] { ServeConnection(fd); });
    }
    for (std::thread& t : connections) t.join();
  }

  void ServeConnection(int fd) {
    while (Readable(fd)) {
      // Read one request: headers, then Content-Length bytes.
      std::string in;
      char buf[4096];
      size_t need = std::string::npos;
      while (need == std::string::npos || in.size() < need) {
        const ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
        const size_t end = in.find("\r\n\r\n");
        if (end != std::string::npos && need == std::string::npos) {
          const size_t at = in.find("Content-Length: ");
          need = end + 4 + std::stoul(in.substr(at + 16));
        }
      }
      if (need == std::string::npos || in.size() < need) break;
      const size_t next = std::min(next_++, answers_.size() - 1);
      send(fd, answers_[next].data(), answers_[next].size(), MSG_NOSIGNAL);
      if (close_after_each_) break;
    }
    close(fd);
  }

  std::vector<std::string> answers_;
  bool close_after_each_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<size_t> next_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

CheckRequest Check() {
  return {.domain = "d", .descriptors = {Descriptor{.entries = {{"k", "v"}}}}};
}

TEST(ClientFakeServerTest, A5xxOrAnAnswerThatIsNotSluicedsGoesToTheFailureMode) {
  ScriptedServer server({Answer(503, R"({"error":"draining"})"), Answer(200, "<html>"),
                         Answer(200, R"({"overall":"OK","statuses":[{"code":7}]})")},
                        false);
  MonotonicClock clock;
  auto client = Client::Create(
      {.port = server.port(), .deadline = 2s, .failure_mode = FailureMode::kClosed}, clock);
  ASSERT_TRUE(client);
  for (const char* why : {"503", "not a check answer", "not a check answer"}) {
    auto r = (*client)->Check(Check());
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->allowed);
    EXPECT_EQ(r->source, Source::kFailureMode);
    EXPECT_NE(r->error.find(why), std::string::npos) << r->error;
  }
}

TEST(ClientFakeServerTest, AKeptAliveConnectionTheServerClosedIsReplacedUnseen) {
  ScriptedServer server({Answer(200, kOkBody), Answer(200, kOkBody), Answer(200, kOkBody)}, true);
  MonotonicClock clock;
  auto client = Client::Create({.port = server.port(), .deadline = 2s}, clock);
  ASSERT_TRUE(client);
  for (int i = 0; i < 3; ++i) {
    auto r = (*client)->Check(Check());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->source, Source::kSluiced) << i << " " << r->error;
    EXPECT_TRUE(r->allowed);
  }
  EXPECT_EQ((*client)->Stats().connections_opened, 3u);
}

// One caller at a time: a blocking call's connection is kept idle and the next call, async or
// blocking, takes it, so the three calls use one connection.
TEST(ClientConcurrencyTest, AsyncAndBlockingChecksShareTheIdleConnections) {
  ScriptedServer server({Answer(200, kOkBody)}, false);
  MonotonicClock clock;
  auto client =
      Client::Create({.port = server.port(), .deadline = 5s, .max_connections = 3}, clock);
  ASSERT_TRUE(client);
  auto blocking = (*client)->Check(Check());
  ASSERT_TRUE(blocking && blocking->source == Source::kSluiced);
  auto async = (*client)->CheckAsync(Check()).get();
  ASSERT_TRUE(async && async->source == Source::kSluiced);
  auto again = (*client)->Check(Check());
  ASSERT_TRUE(again && again->source == Source::kSluiced);
  EXPECT_EQ((*client)->Stats().connections_opened, 1u);
  EXPECT_EQ(server.connections(), 1);
}

// Three workers and three blocking threads at once: every call is answered. The pool keeps at
// most max_connections (3) idle connections, fewer than the six callers, so how many connections
// the burst opens depends on how the threads interleave (a seventh is opened when the pool
// dropped one while full and all six callers are busy again): the count is not an oracle. What
// is: each call opened at most one, and after the burst the pool still holds the connections it
// kept, so the next calls open none.
TEST(ClientConcurrencyTest, AsyncAndBlockingChecksFromManyThreadsShareThePool) {
  ScriptedServer server({Answer(200, kOkBody)}, false);
  MonotonicClock clock;
  auto client =
      Client::Create({.port = server.port(), .deadline = 5s, .max_connections = 3}, clock);
  ASSERT_TRUE(client);
  std::vector<std::future<Result<CheckResponse>>> futures;
  for (int i = 0; i < 60; ++i) futures.push_back((*client)->CheckAsync(Check()));
  std::vector<std::thread> threads;
  std::atomic<int> blocking_ok{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto r = (*client)->Check(Check());
        if (r && r->source == Source::kSluiced && r->allowed) ++blocking_ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int async_ok = 0;
  for (auto& f : futures) {
    auto r = f.get();
    if (r && r->source == Source::kSluiced && r->allowed) ++async_ok;
  }
  EXPECT_EQ(async_ok, 60);
  EXPECT_EQ(blocking_ok, 60);
  const ClientStats burst = (*client)->Stats();
  EXPECT_EQ(burst.calls, 120u);
  EXPECT_GE(burst.connections_opened, 1u);
  EXPECT_LE(burst.connections_opened, 120u);
  EXPECT_EQ(server.connections(), static_cast<int>(burst.connections_opened));
  for (int i = 0; i < 3; ++i) {
    auto r = (*client)->Check(Check());
    ASSERT_TRUE(r && r->source == Source::kSluiced);
  }
  EXPECT_EQ((*client)->Stats().connections_opened, burst.connections_opened);
}

}  // namespace
}  // namespace sluice::client
