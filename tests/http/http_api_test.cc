// HttpApi without a network: routes, methods, admin auth, status codes and headers, against a
// fake RateLimitService that answers what each test sets up.
#include "http/http_api.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sluice::server {
namespace {

class FakeService : public RateLimitService {
 public:
  Result<CheckResponse> Check(const CheckRequest& request) override {
    last_request = request;
    if (request.domain != "api") return MakeError("unknown domain '" + request.domain + "'");
    return response;
  }
  Result<void> Reload(std::shared_ptr<const Config>) override { return {}; }
  std::shared_ptr<const Config> config() const override { return config_; }
  bool Ready() override { return ready; }
  void StartDraining() override { ready = false; }
  StoreStats StoreTotals() const override { return {}; }
  Result<CounterState> State(std::string_view domain,
                             const std::vector<std::pair<std::string, std::string>>& e) override {
    last_entries = e;
    if (domain != "api") return MakeError("unknown domain");
    CounterState s;
    s.counter_key = "api|api_key#api_key=" + e[0].second;
    s.remaining = 7;
    s.reset_after = std::chrono::seconds(2);
    return s;
  }
  Result<void> Reset(std::string_view,
                     const std::vector<std::pair<std::string, std::string>>& e) override {
    last_entries = e;
    ++resets;
    return {};
  }

  CheckResponse response;
  CheckRequest last_request;
  std::vector<std::pair<std::string, std::string>> last_entries;
  bool ready = true;
  int resets = 0;
  std::shared_ptr<const Config> config_ =
      std::make_shared<Config>(std::map<std::string, Domain, std::less<>>{});
};

std::string Header(const HttpReply& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<absent>";
}

constexpr char kBody[] =
    R"({"domain":"api","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})";

class HttpApiTest : public ::testing::Test {
 protected:
  HttpApiTest() {
    limit_.name = "per_key";
    limit_.requests_per_unit = 2;
    limit_.spec.limit = 2;
    limit_.spec.period = std::chrono::seconds(1);
    DescriptorStatus s;
    s.limit = &limit_;
    s.remaining = 1;
    service_.response.statuses = {s};
  }
  HttpApi Api(std::string token = "") {
    HttpApiOptions o;
    o.admin_token = std::move(token);
    o.max_body_bytes = 1000;
    return HttpApi(&service_, &metrics_, o);
  }
  Limit limit_;
  FakeService service_;
  Metrics metrics_;
};

TEST_F(HttpApiTest, CheckAllowedIs200WithJson) {
  const HttpReply r = Api().Handle({"POST", "/v1/check", "", kBody});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_NE(r.body.find(R"("overall":"OK")"), std::string::npos) << r.body;
  EXPECT_EQ(service_.last_request.descriptors[0].entries[0].second, "v");
  EXPECT_EQ(Header(r, "Retry-After"), "<absent>");
  EXPECT_EQ(Header(r, kSoftOverLimitHeader), "<absent>");
}

TEST_F(HttpApiTest, OverLimitIs429WithRetryAfter) {
  service_.response.overall = Code::kOverLimit;
  service_.response.statuses[0].code = Code::kOverLimit;
  service_.response.statuses[0].retry_after = std::chrono::milliseconds(1200);
  const HttpReply r = Api().Handle({"POST", "/v1/check", "", kBody});
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(Header(r, "Retry-After"), "2");  // 1.2 s rounded up
}

TEST_F(HttpApiTest, SoftOverLimitIsFlaggedInAHeader) {
  service_.response.statuses[0].soft_over_limit = true;
  service_.response.statuses[0].mode = Mode::kSoft;
  const HttpReply r = Api().Handle({"POST", "/v1/check", "", kBody});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Header(r, kSoftOverLimitHeader), "?1");
  EXPECT_NE(r.body.find(R"("soft_over_limit":true)"), std::string::npos);
}

TEST_F(HttpApiTest, BadRequestsAre400And413) {
  HttpApi api = Api();
  EXPECT_EQ(api.Handle({"POST", "/v1/check", "", "{"}).status, 400);
  const HttpReply unknown =
      api.Handle({"POST", "/v1/check", "",
                  R"({"domain":"nope","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})"});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.body, "{\"error\":\"unknown domain 'nope'\"}\n");
  EXPECT_EQ(api.Handle({"POST", "/v1/check", "", std::string(1001, ' ')}).status, 413);
}

TEST_F(HttpApiTest, RoutesAndMethods) {
  HttpApi api = Api();
  EXPECT_EQ(api.Handle({"GET", "/healthz", "", ""}).status, 200);
  EXPECT_EQ(api.Handle({"GET", "/readyz", "", ""}).status, 200);
  service_.ready = false;
  EXPECT_EQ(api.Handle({"GET", "/readyz", "", ""}).status, 503);
  const HttpReply metrics = api.Handle({"GET", "/metrics", "", ""});
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(api.Handle({"GET", "/nope", "", ""}).status, 404);
  const HttpReply wrong = api.Handle({"GET", "/v1/check", "", ""});
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(Header(wrong, "Allow"), "POST");
  EXPECT_EQ(api.Handle({"POST", "/healthz", "", ""}).status, 405);
}

// HEAD is GET without the body, which the server leaves out (http_server.h): every GET route
// answers it with GET's status and headers, and says so in Allow.
TEST_F(HttpApiTest, GetRoutesAnswerHeadToo) {
  HttpApi api = Api("s3cret");
  EXPECT_EQ(api.Handle({"HEAD", "/healthz", "", ""}).status, 200);
  EXPECT_EQ(api.Handle({"HEAD", "/readyz", "", ""}).status, 200);
  service_.ready = false;
  EXPECT_EQ(api.Handle({"HEAD", "/readyz", "", ""}).status, 503);
  EXPECT_EQ(api.Handle({"HEAD", "/metrics", "", ""}).content_type,
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(api.Handle({"HEAD", "/v1/limits", "Bearer s3cret", ""}).status, 200);
  EXPECT_EQ(api.Handle({"HEAD", "/v1/limits", "", ""}).status, 401);
  const HttpReply post = api.Handle({"POST", "/healthz", "", ""});
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(Header(post, "Allow"), "GET, HEAD");
  EXPECT_EQ(
      Header(api.Handle({"PUT", "/v1/state?domain=api&api_key=k", "Bearer s3cret", ""}), "Allow"),
      "GET, HEAD, POST, DELETE");
  EXPECT_EQ(api.Handle({"HEAD", "/v1/check", "", ""}).status, 405) << "a check is POST only";
}

TEST_F(HttpApiTest, AdminIsOffWithoutAToken) {
  EXPECT_EQ(Api().Handle({"GET", "/v1/limits", "Bearer x", ""}).status, 404);
}

TEST_F(HttpApiTest, AdminNeedsTheBearerToken) {
  HttpApi api = Api("s3cret");
  EXPECT_EQ(api.Handle({"GET", "/v1/limits", "", ""}).status, 401);
  EXPECT_EQ(api.Handle({"GET", "/v1/limits", "Bearer wrong", ""}).status, 401);
  EXPECT_EQ(api.Handle({"GET", "/v1/limits", "Bearer s3cre", ""}).status, 401);
  EXPECT_EQ(api.Handle({"GET", "/v1/limits", "Basic s3cret", ""}).status, 401);
  const HttpReply ok = api.Handle({"GET", "/v1/limits", "bearer s3cret", ""});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "{\"domains\":[]}\n");
  EXPECT_EQ(api.Handle({"POST", "/v1/limits", "Bearer s3cret", ""}).status, 405);
}

TEST_F(HttpApiTest, StateAndReset) {
  HttpApi api = Api("t");
  const HttpReply state =
      api.Handle({"GET", "/v1/state?domain=api&api_key=k%201&path=/x", "Bearer t", ""});
  EXPECT_EQ(state.status, 200) << state.body;
  EXPECT_EQ(state.body, R"({"domain":"api","counter_key":"api|api_key#api_key=k 1","limit":null,)"
                        R"("remaining":7,"reset_after_ms":2000})"
                        "\n");
  ASSERT_EQ(service_.last_entries.size(), 2u);
  EXPECT_EQ(service_.last_entries[1].first, "path");
  EXPECT_EQ(api.Handle({"GET", "/v1/state?api_key=k", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"GET", "/v1/state?domain=api", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"DELETE", "/v1/state?domain=api&api_key=k", "Bearer t", ""}).status, 200);
  EXPECT_EQ(service_.resets, 1);
  EXPECT_EQ(api.Handle({"PUT", "/v1/state?domain=api&api_key=k", "Bearer t", ""}).status, 405);
}

TEST_F(HttpApiTest, TopValidatesItsQuery) {
  HttpApi api = Api("t");
  EXPECT_EQ(api.Handle({"GET", "/v1/top?domain=api&n=0", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"GET", "/v1/top?domain=api&n=x", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"GET", "/v1/top?n=3", "Bearer t", ""}).status, 400);
  EXPECT_EQ(api.Handle({"GET", "/v1/top?domain=api&n=3", "Bearer t", ""}).status, 400)
      << "unknown domain in the (empty) config";
}

// Answers CheckAsync from a thread of its own, as the Redis store does: before CheckAsync
// returns (it waits for that thread), or after it has returned and the test lets it answer.
class ThreadedService : public FakeService {
 public:
  enum class When { kBeforeReturn, kAfterReturn };
  explicit ThreadedService(When when) : when_(when) {}
  ~ThreadedService() override {
    Let();
    if (thread_.joinable()) thread_.join();
  }

  void CheckAsync(const CheckRequest& request, CheckCallback done) override {
    if (thread_.joinable()) thread_.join();
    {
      const std::lock_guard<std::mutex> lock(mu_);
      returned_ = false;
    }
    thread_ = std::thread([this, answer = Check(request), done = std::move(done)]() mutable {
      if (when_ == When::kAfterReturn) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return returned_ && let_; });
      }
      answered_on = std::this_thread::get_id();
      done(std::move(answer));
    });
    if (when_ == When::kBeforeReturn) thread_.join();
    const std::lock_guard<std::mutex> lock(mu_);
    returned_ = true;
    cv_.notify_all();
  }

  // Lets an answer after CheckAsync returned go (at once, if CheckAsync already returned).
  void Let() {
    const std::lock_guard<std::mutex> lock(mu_);
    let_ = true;
    cv_.notify_all();
  }
  void Hold() {
    const std::lock_guard<std::mutex> lock(mu_);
    let_ = false;
  }

  std::thread::id answered_on;  // read after the answer

 private:
  const When when_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool returned_ = false;
  bool let_ = false;
};

// The server's side of a deferred reply: counts Defer() calls and keeps what is sent.
class FakeDeferral final : public HttpDeferral {
 public:
  FakeDeferral() = default;
  virtual ~FakeDeferral() = default;
  FakeDeferral(const FakeDeferral&) = delete;
  FakeDeferral& operator=(const FakeDeferral&) = delete;
  HttpReplyCallback Defer() override {
    ++defers;
    return [this](HttpReply reply) {
      const std::lock_guard<std::mutex> lock(mu_);
      sent_.push_back(std::move(reply));
      cv_.notify_all();
    };
  }
  std::optional<HttpReply> WaitSent() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !sent_.empty(); })) {
      return std::nullopt;
    }
    return sent_.front();
  }
  size_t sent() {
    const std::lock_guard<std::mutex> lock(mu_);
    return sent_.size();
  }

  int defers = 0;  // Defer() runs on the handler's thread

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<HttpReply> sent_;
};

class HttpApiAsyncTest : public HttpApiTest {
 protected:
  // An over-limit answer, so that the reply's status, body and headers are all checked.
  void OverLimit(FakeService& service) {
    service.response = service_.response;
    service.response.overall = Code::kOverLimit;
    service.response.statuses[0].code = Code::kOverLimit;
    service.response.statuses[0].retry_after = std::chrono::milliseconds(1200);
  }
  static void ExpectOverLimitReply(const HttpReply& r) {
    EXPECT_FALSE(r.deferred);
    EXPECT_EQ(r.status, 429);
    EXPECT_NE(r.body.find(R"("overall":"OVER_LIMIT")"), std::string::npos) << r.body;
    EXPECT_EQ(Header(r, "Retry-After"), "2");
    EXPECT_EQ(Header(r, "RateLimit"), R"("per_key";r=1;t=0)");
  }
  HttpApi ApiOver(RateLimitService* service) { return HttpApi(service, &metrics_, {}); }
};

// The memory store's way: answered on the handler's thread before CheckAsync returns. The reply
// is the handler's own; nothing is deferred.
TEST_F(HttpApiAsyncTest, AnAnswerInlineIsTheRepliesOwn) {
  OverLimit(service_);
  FakeDeferral deferral;
  const HttpReply r = Api().Handle({"POST", "/v1/check", "", kBody, &deferral});
  ExpectOverLimitReply(r);
  EXPECT_EQ(deferral.defers, 0);
}

TEST_F(HttpApiAsyncTest, AnAnswerFromAnotherThreadBeforeCheckAsyncReturnsIsNotDeferred) {
  ThreadedService service(ThreadedService::When::kBeforeReturn);
  OverLimit(service);
  FakeDeferral deferral;
  const HttpApi api = ApiOver(&service);
  const HttpReply r = api.Handle({"POST", "/v1/check", "", kBody, &deferral});
  ExpectOverLimitReply(r);
  EXPECT_NE(service.answered_on, std::this_thread::get_id());
  EXPECT_EQ(deferral.defers, 0);
  EXPECT_EQ(deferral.sent(), 0u);
}

TEST_F(HttpApiAsyncTest, AnAnswerAfterTheHandlerReturnedIsSentThroughTheDeferral) {
  ThreadedService service(ThreadedService::When::kAfterReturn);
  OverLimit(service);
  FakeDeferral deferral;
  const HttpApi api = ApiOver(&service);
  const HttpReply r = api.Handle({"POST", "/v1/check", "", kBody, &deferral});
  EXPECT_TRUE(r.deferred);
  EXPECT_EQ(deferral.defers, 1);
  EXPECT_EQ(deferral.sent(), 0u);
  service.Let();
  const std::optional<HttpReply> sent = deferral.WaitSent();
  ASSERT_TRUE(sent.has_value()) << "no reply was sent";
  ExpectOverLimitReply(*sent);
  EXPECT_NE(service.answered_on, std::this_thread::get_id());
  // A bad request is answered the same way.
  service.Hold();
  FakeDeferral bad;
  const HttpReply deferred = api.Handle(
      {"POST", "/v1/check", "",
       R"({"domain":"nope","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})", &bad});
  EXPECT_TRUE(deferred.deferred);
  service.Let();
  const std::optional<HttpReply> error = bad.WaitSent();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, 400);
  EXPECT_EQ(error->body, "{\"error\":\"unknown domain 'nope'\"}\n");
}

// Without a deferral (this test's HttpApi::Handle calls), the handler waits for a late answer.
TEST_F(HttpApiAsyncTest, WithoutADeferralALateAnswerIsWaitedFor) {
  ThreadedService service(ThreadedService::When::kAfterReturn);
  OverLimit(service);
  service.Let();  // as soon as CheckAsync has returned
  const HttpApi api = ApiOver(&service);
  ExpectOverLimitReply(api.Handle({"POST", "/v1/check", "", kBody}));
  EXPECT_NE(service.answered_on, std::this_thread::get_id());
}

// The answer races the handler from the moment CheckAsync returns: whichever wins, the reply
// is delivered exactly once, as the handler's own or through the deferral.
TEST_F(HttpApiAsyncTest, AnAnswerRacingTheHandlerIsDeliveredOnce) {
  ThreadedService service(ThreadedService::When::kAfterReturn);
  OverLimit(service);
  service.Let();
  const HttpApi api = ApiOver(&service);
  for (int i = 0; i < 300; ++i) {
    FakeDeferral deferral;
    const HttpReply r = api.Handle({"POST", "/v1/check", "", kBody, &deferral});
    if (r.deferred) {
      EXPECT_EQ(deferral.defers, 1);
      const std::optional<HttpReply> sent = deferral.WaitSent();
      ASSERT_TRUE(sent.has_value()) << i;
      ExpectOverLimitReply(*sent);
    } else {
      EXPECT_EQ(deferral.defers, 0);
      ExpectOverLimitReply(r);
    }
  }
}

}  // namespace
}  // namespace sluice::server
