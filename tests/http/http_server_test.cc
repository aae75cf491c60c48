// HttpServer with a trivial handler, over real sockets: keep-alive and pipelining, the body and
// connection bounds, slow clients, and a graceful Stop that finishes the request in flight.
#include "http/http_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "support/http_test_client.h"
#include "support/wait_for.h"

namespace sluice::server {
namespace {

using namespace std::chrono_literals;
using sluice::testing::HttpClient;

std::unique_ptr<HttpServer> StartEcho(HttpServerOptions options, std::atomic<int>* calls = nullptr,
                                      std::chrono::milliseconds delay = 0ms) {
  options.address = "127.0.0.1:0";
  auto server = HttpServer::Start(options, [calls, delay](const HttpRequestView& r) {
    if (calls) ++*calls;
    if (delay > 0ms) std::this_thread::sleep_for(delay);
    HttpReply reply;
    reply.content_type = "text/plain";
    reply.body = std::string(r.method) + " " + std::string(r.target) + " " + std::string(r.body);
    return reply;
  });
  EXPECT_TRUE(server.has_value()) << (server ? "" : server.error().message);
  return server ? std::move(*server) : nullptr;
}

TEST(HttpServer, RejectsBadAddresses) {
  EXPECT_FALSE(HttpServer::Start({.address = "nohost"}, nullptr).has_value());
  EXPECT_FALSE(HttpServer::Start({.address = "example.com:80"}, nullptr).has_value());
  EXPECT_FALSE(HttpServer::Start({.address = "127.0.0.1:70000"}, nullptr).has_value());
}

TEST(HttpServer, KeepAliveAndPipelining) {
  auto server = StartEcho({});
  ASSERT_TRUE(server);
  HttpClient c(server->port());
  ASSERT_TRUE(c.Send(HttpClient::Format("POST", "/a", "1") + HttpClient::Format("GET", "/b") +
                     HttpClient::Format("POST", "/c", "3")));
  EXPECT_EQ(c.Read()->body, "POST /a 1");
  EXPECT_EQ(c.Read()->body, "GET /b ");
  EXPECT_EQ(c.Read()->body, "POST /c 3");
  EXPECT_EQ(c.Request("GET", "/d")->body, "GET /d ");
}

TEST(HttpServer, OversizedBodyIs413AndTheReplyArrives) {
  HttpServerOptions o;
  o.max_body_bytes = 1000;
  auto server = StartEcho(o);
  ASSERT_TRUE(server);
  HttpClient c(server->port());
  const auto r = c.Request("POST", "/x", std::string(1 << 20, 'x'));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->Header("Connection"), "close");
  EXPECT_TRUE(c.ClosedByPeer(3s));
}

TEST(HttpServer, SlowAndIdleClientsTimeOut) {
  HttpServerOptions o;
  o.request_timeout = 300ms;
  auto server = StartEcho(o);
  ASSERT_TRUE(server);
  HttpClient slow(server->port());
  ASSERT_TRUE(slow.Send("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345"));
  HttpClient idle(server->port());
  HttpClient busy(server->port());
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(busy.Request("GET", "/ok")->status, 200);  // each request restarts its clock
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(slow.ClosedByPeer(2s));
  EXPECT_TRUE(idle.ClosedByPeer(2s));
}

// At the bound, a new client takes the slot of the connection that has waited longest for a
// complete request, idle or sending one slowly: a client holding every slot open and silent (or
// slow) cannot lock others out, and a busy client's keep-alive connection outlasts them.
TEST(HttpServer, AtTheBoundTheLongestWaitingConnectionMakesRoom) {
  HttpServerOptions o;
  o.max_connections = 2;
  o.threads = 1;  // one worker: "longest" is exact (with more, it is per worker)
  auto server = StartEcho(o);
  ASSERT_TRUE(server);
  HttpClient oldest(server->port());
  ASSERT_EQ(oldest.Request("GET", "/")->status, 200);
  HttpClient newer(server->port());
  ASSERT_EQ(newer.Request("GET", "/")->status, 200);
  HttpClient c(server->port());
  EXPECT_EQ(c.Request("GET", "/c")->body, "GET /c ");
  EXPECT_TRUE(oldest.ClosedByPeer(3s));
  EXPECT_EQ(newer.Request("GET", "/")->status, 200) << "the newer idle one kept its slot";

  // A slowloris connection, waiting since it came, goes before a keep-alive connection that
  // has just been answered.
  auto second = StartEcho(o);
  ASSERT_TRUE(second);
  HttpClient slow(second->port());
  ASSERT_TRUE(slow.Send("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345"));
  HttpClient busy(second->port());
  ASSERT_EQ(busy.Request("GET", "/1")->status, 200);
  HttpClient d(second->port());
  EXPECT_EQ(d.Request("GET", "/d")->body, "GET /d ");
  EXPECT_TRUE(slow.ClosedByPeer(3s));
  EXPECT_EQ(busy.Request("GET", "/2")->body, "GET /2 ") << "the busy client kept its connection";
}

// A flood that reconnects as it is shed is always younger than a keep-alive client's last
// answer: were it ranked by its wait alone, each new attacker would shed the client. A
// connection that has not sent a whole request goes first, however young.
TEST(HttpServer, AtTheBoundAYoungSlowlorisGoesBeforeAnAnsweredClient) {
  HttpServerOptions o;
  o.max_connections = 2;
  o.threads = 1;
  auto server = StartEcho(o);
  ASSERT_TRUE(server);
  HttpClient answered(server->port());
  ASSERT_EQ(answered.Request("GET", "/1")->status, 200);  // waits from here on
  HttpClient slow(server->port());                        // younger, never finishes
  ASSERT_TRUE(slow.Send("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345"));
  HttpClient newcomer(server->port());
  EXPECT_EQ(newcomer.Request("GET", "/n")->body, "GET /n ");
  EXPECT_TRUE(slow.ClosedByPeer(3s));
  EXPECT_EQ(answered.Request("GET", "/2")->body, "GET /2 ") << "the answered client kept its slot";
}

// Only when every connection has a request in the handler is a new one refused, with 503; a
// client that sent its request at once still reads the 503 (not a reset).
TEST(HttpServer, AtTheBoundWithEveryConnectionBusyNewOnesGet503) {
  std::mutex mu;
  std::vector<HttpReplyCallback> held;
  HttpServerOptions o;
  o.address = "127.0.0.1:0";
  o.max_connections = 1;
  auto started = HttpServer::Start(o, [&](const HttpRequestView& r) {
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(r.deferral->Defer());
    return DeferredReply();
  });
  ASSERT_TRUE(started.has_value());
  auto server = std::move(*started);
  HttpClient busy(server->port());
  ASSERT_TRUE(busy.Send(HttpClient::Format("GET", "/held")));
  for (;;) {  // until the handler holds it
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!held.empty()) break;
    }
    std::this_thread::yield();
  }
  for (int i = 0; i < 20; ++i) {
    HttpClient b(server->port());
    ASSERT_TRUE(b.Send(HttpClient::Format("POST", "/check", std::string(1 << 20, 'x'))));
    const auto r = b.Read(3s);
    ASSERT_TRUE(r.has_value()) << "attempt " << i << ": no 503 (reset?)";
    EXPECT_EQ(r->status, 503);
    EXPECT_EQ(r->body, "{\"error\":\"too many connections\"}\n");
  }
  HttpReply reply;
  reply.body = "done";
  std::vector<HttpReplyCallback> answer;
  {
    std::lock_guard<std::mutex> lock(mu);
    answer.swap(held);
  }
  for (auto& send : answer) send(reply);
  EXPECT_EQ(busy.Read()->body, "done");
}

TEST(HttpServer, StopFinishesTheRequestInFlightAndClosesIdleOnes) {
  std::atomic<int> calls{0};
  auto server = StartEcho({}, &calls, 400ms);
  ASSERT_TRUE(server);
  HttpClient idle(server->port());
  ASSERT_EQ(idle.Request("GET", "/warm")->status, 200);
  HttpClient busy(server->port());
  ASSERT_TRUE(busy.Send(HttpClient::Format("GET", "/slow")));
  while (calls.load() < 2) std::this_thread::sleep_for(5ms);
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] { server->Stop(); });
  const auto r = busy.Read(3s);
  ASSERT_TRUE(r.has_value()) << "the request in flight is answered";
  EXPECT_EQ(r->body, "GET /slow ");
  EXPECT_EQ(r->Header("Connection"), "close");
  EXPECT_TRUE(idle.ClosedByPeer(2s));
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(server->connections(), 0u);
  HttpClient after(server->port());
  EXPECT_FALSE(after.connected() && after.Request("GET", "/").has_value());
}

TEST(HttpServer, ChunkedBodiesHttp10AndOversizedHeaders) {
  HttpServerOptions o;
  o.max_header_bytes = 1024;
  auto server = StartEcho(o);
  ASSERT_TRUE(server);
  HttpClient c(server->port());
  ASSERT_TRUE(
      c.Send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n"
             "0\r\n\r\n"));
  const auto chunked = c.Read();
  ASSERT_TRUE(chunked.has_value());
  EXPECT_EQ(chunked->body, "POST /c abc");

  HttpClient old(server->port());
  ASSERT_TRUE(old.Send("GET /old HTTP/1.0\r\n\r\n"));
  const auto r10 = old.Read();
  ASSERT_TRUE(r10.has_value());
  EXPECT_EQ(r10->body, "GET /old ");
  EXPECT_TRUE(old.ClosedByPeer(2s)) << "HTTP/1.0 closes unless asked to keep alive";
  HttpClient kept(server->port());
  ASSERT_TRUE(kept.Send("GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  const auto k = kept.Read();
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->Header("Connection"), "keep-alive");
  ASSERT_TRUE(kept.Send("GET /k2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  EXPECT_EQ(kept.Read()->body, "GET /k2 ");

  HttpClient big(server->port());
  const auto r431 = big.Request("GET", "/h", "", {"X-Big: " + std::string(2000, 'x')});
  ASSERT_TRUE(r431.has_value());
  EXPECT_EQ(r431->status, 431);
  EXPECT_EQ(r431->Header("Connection"), "close");
  EXPECT_TRUE(big.ClosedByPeer(3s));
}

// HEAD gets the headers GET would, Content-Length included, and no body: the next response on
// the connection must start right after them.
TEST(HttpServer, HeadHasNoBodySoTheConnectionStaysInStep) {
  auto server = StartEcho({});
  ASSERT_TRUE(server);
  HttpClient c(server->port());
  ASSERT_TRUE(c.Send(HttpClient::Format("HEAD", "/h") + HttpClient::Format("GET", "/g")));
  const auto head = c.Read(5s, /*head_request=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Header("Content-Length"), std::to_string(std::string("HEAD /h ").size()));
  const auto get = c.Read(5s);
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "GET /g ");
}

// HttpReply::send_at: the reply goes out at that time, from the event loop -- a one-thread
// server answers another connection meanwhile, and a deferred reply can be held too.
TEST(HttpServer, AReplyIsHeldUntilItsSendAtWithoutHoldingTheThread) {
  auto result =
      HttpServer::Start({.address = "127.0.0.1:0", .threads = 1}, [](const HttpRequestView& r) {
        HttpReply reply;
        reply.content_type = "text/plain";
        reply.body = std::string(r.target);
        if (r.target == "/held") {
          reply.send_at = std::chrono::steady_clock::now() + 400ms;
        }
        return reply;
      });
  ASSERT_TRUE(result.has_value()) << result.error().message;
  auto& server = *result;
  const auto asked = std::chrono::steady_clock::now();
  HttpClient held(server->port());
  ASSERT_TRUE(held.Send(HttpClient::Format("GET", "/held")));
  HttpClient other(server->port());
  EXPECT_EQ(other.Request("GET", "/now")->body, "/now");
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 300ms) << "the one thread was free";
  auto reply = held.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "/held");
  EXPECT_GE(std::chrono::steady_clock::now() - asked, 400ms);
  // The connection carries on after a held reply.
  EXPECT_EQ(held.Request("GET", "/again")->body, "/again");
}

using sluice::testing::WaitFor;

// A server whose replies are held `hold` from when the handler ran (and say when that was, in
// microseconds since `epoch`); "/now" is not held. `calls` counts the requests handled.
struct HoldingServer {
  explicit HoldingServer(std::chrono::milliseconds hold, HttpServerOptions o = {}) {
    o.address = "127.0.0.1:0";
    auto started = HttpServer::Start(o, [this, hold](const HttpRequestView& r) {
      const auto now = std::chrono::steady_clock::now();
      HttpReply reply;
      reply.content_type = "text/plain";
      reply.body = std::string(r.target);
      if (r.target != "/now") reply.send_at = now + hold;
      reply.headers.emplace_back(
          "Handled-At",
          std::to_string(
              std::chrono::duration_cast<std::chrono::microseconds>(now - epoch).count()));
      ++calls;
      return reply;
    });
    EXPECT_TRUE(started.has_value());
    if (started) server = std::move(*started);
  }
  // When the reply `r` was handled.
  std::chrono::steady_clock::time_point HandledAt(const sluice::testing::HttpResponse& r) const {
    return epoch + std::chrono::microseconds(std::stoll(r.Header("Handled-At").value_or("0")));
  }
  const std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
  std::atomic<int> calls{0};
  std::unique_ptr<HttpServer> server;
};

// One held reply per connection: pipelined requests are read only after the reply before them
// is sent, so each is handled (and held) a whole hold after the one before.
TEST(HttpServer, PipelinedRequestsBehindAHeldReplyWaitTheirTurn) {
  HoldingServer s(100ms);
  ASSERT_TRUE(s.server);
  HttpClient c(s.server->port());
  ASSERT_TRUE(c.Send(HttpClient::Format("GET", "/a") + HttpClient::Format("GET", "/b") +
                     HttpClient::Format("GET", "/c")));
  std::vector<std::chrono::steady_clock::time_point> handled, arrived;
  for (const char* target : {"/a", "/b", "/c"}) {
    const auto r = c.Read(3s);
    ASSERT_TRUE(r.has_value()) << target;
    arrived.push_back(std::chrono::steady_clock::now());
    EXPECT_EQ(r->body, target);
    handled.push_back(s.HandledAt(*r));
  }
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_GE(arrived[k] - handled[k], 100ms) << k << ": sent before its time";
    if (k > 0) {
      EXPECT_GE(handled[k] - handled[k - 1], 100ms) << k << ": read while one was held";
    }
  }
}

// Many held replies on one thread: each goes out at its own time (not early, and late by no
// more than scheduling), and an unheld request is answered meanwhile.
TEST(HttpServer, ManyHeldRepliesShareOneThread) {
  constexpr int kClients = 200;
  HoldingServer s(400ms, {.threads = 1});
  ASSERT_TRUE(s.server);
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<HttpClient>(s.server->port()));
    ASSERT_TRUE(clients.back()->Send(HttpClient::Format("GET", "/held" + std::to_string(i))));
  }
  ASSERT_TRUE(WaitFor([&] { return s.calls.load() == kClients; }));
  const auto asked = std::chrono::steady_clock::now();
  HttpClient other(s.server->port());
  const auto now = other.Request("GET", "/now");
  ASSERT_TRUE(now.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 200ms) << "the one thread was free";
  std::chrono::microseconds latest{0};
  for (int i = 0; i < kClients; ++i) {
    const auto r = clients[i]->Read(3s);
    ASSERT_TRUE(r.has_value()) << i;
    const auto late = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - (s.HandledAt(*r) + 400ms));
    EXPECT_EQ(r->body, "/held" + std::to_string(i));
    EXPECT_GE(late.count(), 0) << i << ": sent before its time";
    latest = std::max(latest, late);
  }
  // Read in order after the last is due: the latest is how late the last ones went out.
  EXPECT_LT(latest, 300ms);
  ::testing::Test::RecordProperty("latest_us", std::to_string(latest.count()));
}

// A client that goes away while its reply is held costs nothing until the reply's time: the
// connection is closed at once (its count drops to 0 long before the 10 s hold), and the
// server carries on.
TEST(HttpServer, AClientThatClosesWhileHeldIsDroppedAtOnce) {
  HoldingServer s(10s);
  ASSERT_TRUE(s.server);
  {
    std::vector<std::unique_ptr<HttpClient>> leaving;
    for (int i = 0; i < 5; ++i) {
      leaving.push_back(std::make_unique<HttpClient>(s.server->port()));
      ASSERT_TRUE(leaving.back()->Send(HttpClient::Format("GET", "/held")));
    }
    ASSERT_TRUE(WaitFor([&] { return s.calls.load() == 5; }));
    EXPECT_EQ(s.server->connections(), 5u);
  }  // closed
  EXPECT_TRUE(WaitFor([&] { return s.server->connections() == 0; }, 2s))
      << s.server->connections() << " still open";
  HttpClient after(s.server->port());
  EXPECT_EQ(after.Request("GET", "/now")->body, "/now");
}

// Stop sends held replies at once (their requests were admitted), with Connection: close,
// rather than waiting for their time or dropping them.
TEST(HttpServer, StopSendsHeldRepliesAtOnce) {
  HoldingServer s(10s);
  ASSERT_TRUE(s.server);
  std::vector<std::unique_ptr<HttpClient>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<HttpClient>(s.server->port()));
    ASSERT_TRUE(held.back()->Send(HttpClient::Format("GET", "/held" + std::to_string(i))));
  }
  ASSERT_TRUE(WaitFor([&] { return s.calls.load() == 3; }));
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] { s.server->Stop(); });
  for (int i = 0; i < 3; ++i) {
    const auto r = held[i]->Read(3s);
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->body, "/held" + std::to_string(i));
    EXPECT_EQ(r->Header("Connection"), "close");
    held[i].reset();  // the server lingers until the client closes
  }
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(s.server->connections(), 0u);
}

// A connection holding a reply is busy: at the connection bound it keeps its slot (a new client
// gets 503), and a deferred reply can be held too.
TEST(HttpServer, AHeldConnectionIsNotShedAndADeferredReplyCanBeHeld) {
  std::mutex mu;
  std::vector<std::thread> answering;
  HttpServerOptions o;
  o.address = "127.0.0.1:0";
  o.max_connections = 1;
  std::atomic<int> deferred{0};
  auto started = HttpServer::Start(o, [&](const HttpRequestView& r) {
    HttpReplyCallback send = r.deferral->Defer();
    std::lock_guard<std::mutex> lock(mu);
    answering.emplace_back([send = std::move(send), &deferred]() mutable {
      HttpReply reply;
      reply.body = "held";
      reply.send_at = std::chrono::steady_clock::now() + 300ms;
      send(std::move(reply));
      ++deferred;
    });
    return DeferredReply();
  });
  ASSERT_TRUE(started.has_value());
  auto server = std::move(*started);
  HttpClient held(server->port());
  ASSERT_TRUE(held.Send(HttpClient::Format("GET", "/held")));
  ASSERT_TRUE(WaitFor([&] { return deferred.load() == 1; }));
  const auto answered = std::chrono::steady_clock::now();
  HttpClient late(server->port());
  const auto refused = late.Read(2s);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 503);
  const auto r = held.Read(3s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, "held");
  EXPECT_GE(std::chrono::steady_clock::now() - answered, 250ms);
  std::lock_guard<std::mutex> lock(mu);
  for (auto& t : answering) t.join();
}

// A handler that throws fails its request (500, connection closed), not the process.
TEST(HttpServer, AHandlerThatThrowsIs500) {
  HttpServerOptions o;
  o.address = "127.0.0.1:0";
  auto started = HttpServer::Start(o, [](const HttpRequestView& r) -> HttpReply {
    if (r.target == "/throw") throw std::bad_alloc();
    return HttpReply{};
  });
  ASSERT_TRUE(started.has_value());
  auto server = std::move(*started);
  HttpClient c(server->port());
  const auto r = c.Request("GET", "/throw");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body, "{\"error\":\"internal error\"}\n");
  EXPECT_EQ(r->Header("Connection"), "close");
  EXPECT_TRUE(c.ClosedByPeer(5s));
  HttpClient after(server->port());
  const auto ok = after.Request("GET", "/");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status, 200);
}

// A handler that defers: answered from another thread, in order behind pipelined requests, and
// a stop waits for the deferred reply.
TEST(HttpServer, DeferredRepliesComeFromAnyThreadInOrder) {
  std::vector<std::thread> answering;
  std::mutex mu;
  HttpServerOptions o;
  o.address = "127.0.0.1:0";
  auto started = HttpServer::Start(o, [&](const HttpRequestView& r) {
    if (r.target != "/later") {
      HttpReply reply;
      reply.body = "now";
      return reply;
    }
    HttpReplyCallback send = r.deferral->Defer();
    std::lock_guard<std::mutex> lock(mu);
    answering.emplace_back([send = std::move(send)]() mutable {
      std::this_thread::sleep_for(100ms);
      HttpReply reply;
      reply.status = 429;
      reply.body = "later";
      send(std::move(reply));
    });
    return DeferredReply();
  });
  ASSERT_TRUE(started.has_value());
  auto server = std::move(*started);
  HttpClient c(server->port());
  ASSERT_TRUE(c.Send(HttpClient::Format("GET", "/later") + HttpClient::Format("GET", "/now") +
                     HttpClient::Format("GET", "/later")));
  const auto a = c.Read();
  const auto b = c.Read();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->status, 429);
  EXPECT_EQ(a->body, "later");
  EXPECT_EQ(b->body, "now");
  // The third is deferred when Stop comes: it is still answered, then the connection closes.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (answering.size() == 2) break;
    }
    std::this_thread::sleep_for(1ms);
  }
  server->Stop();
  const auto d = c.Read(3s);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->body, "later");
  EXPECT_EQ(d->Header("Connection"), "close");
  EXPECT_EQ(server->connections(), 0u);
  for (auto& t : answering) t.join();
}

}  // namespace
}  // namespace sluice::server
