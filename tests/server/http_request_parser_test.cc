// The request parser and response writer on their own: complete, partial and pipelined input,
// chunked bodies, every refusal, and the bytes of a response.
#include "server/http_request_parser.h"

#include <gtest/gtest.h>

#include <string>

#include "server/http_response.h"

namespace sluice::server {
namespace {

constexpr HttpParseLimits kLimits{.max_header_bytes = 256, .max_body_bytes = 16};

ParseStatus StatusOf(std::string_view data) {
  HttpRequestParser p(kLimits);
  return p.Parse(data).status;
}

TEST(HttpRequestParser, ParsesARequestWithABody) {
  HttpRequestParser p(kLimits);
  const std::string data =
      "POST /v1/check?x=1 HTTP/1.1\r\nHost: a\r\nauthorization:  Bearer t \r\n"
      "Content-Length: 5\r\n\r\nhelloGET";
  const ParseOutcome r = p.Parse(data);
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.request.method, "POST");
  EXPECT_EQ(r.request.target, "/v1/check?x=1");
  EXPECT_EQ(r.request.authorization, "Bearer t");
  EXPECT_EQ(r.request.body, "hello");
  EXPECT_EQ(r.request.version, 11u);
  EXPECT_TRUE(r.request.keep_alive);
  EXPECT_EQ(r.consumed, data.size() - 3);
}

TEST(HttpRequestParser, WaitsForEveryByteFedOneAtATime) {
  const std::string data = "\r\nGET /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nok";
  HttpRequestParser p(kLimits);
  for (size_t n = 0; n < data.size(); ++n) {
    ASSERT_EQ(p.Parse(std::string_view(data).substr(0, n)).status, ParseStatus::kIncomplete) << n;
  }
  const ParseOutcome r = p.Parse(data);
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.request.body, "ok");
  EXPECT_EQ(r.consumed, data.size());
}

TEST(HttpRequestParser, KeepAliveByVersionAndConnection) {
  HttpRequestParser p(kLimits);
  EXPECT_FALSE(p.Parse("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").request.keep_alive);
  EXPECT_TRUE(p.Parse("GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(p.Parse("GET / HTTP/1.0\r\n\r\n").request.keep_alive);
  const ParseOutcome r = p.Parse("GET / HTTP/1.0\r\nConnection: x, Keep-Alive\r\n\r\n");
  EXPECT_TRUE(r.request.keep_alive);
  EXPECT_EQ(r.request.version, 10u);
}

TEST(HttpRequestParser, DecodesAChunkedBody) {
  HttpRequestParser p(kLimits);
  const std::string data =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\nA\r\n0123456789\r\n"
      "0\r\nTrailer: x\r\n\r\n";
  for (size_t n = 0; n < data.size(); ++n) {
    ASSERT_EQ(p.Parse(std::string_view(data).substr(0, n)).status, ParseStatus::kIncomplete) << n;
  }
  const ParseOutcome r = p.Parse(data);
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.request.body, "abc0123456789");
  EXPECT_EQ(r.consumed, data.size());
}

TEST(HttpRequestParser, RefusesMalformedRequests) {
  EXPECT_EQ(StatusOf("HELLO\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("HELLO\r\n"), ParseStatus::kBadRequest) << "known before the headers end";
  EXPECT_EQ(StatusOf("GET / HTTP/2.0\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("GET  HTTP/1.1\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("G(T / HTTP/1.1\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nNo colon\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nBad name: v\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nA: b\nc\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n"),
            ParseStatus::kBadRequest);
}

TEST(HttpRequestParser, RefusesWhatIsOverTheLimitsAsSoonAsItIsKnown) {
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n"), ParseStatus::kBodyTooLarge);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 16\r\n\r\n"), ParseStatus::kIncomplete);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n"),
            ParseStatus::kBodyTooLarge);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nX: " + std::string(300, 'x')),
            ParseStatus::kHeadersTooLarge);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nX: " + std::string(300, 'x') + "\r\n\r\n"),
            ParseStatus::kHeadersTooLarge);
}

TEST(HttpResponse, WritesStatusHeadersConnectionAndLength) {
  HttpReply reply;
  reply.status = 429;
  reply.headers = {{"RateLimit", "\"a\";r=0;t=1"}, {"Retry-After", "1"}};
  reply.body = "{}\n";
  std::string out;
  AppendHttpResponse(out, reply, 11, /*keep_alive=*/true);
  EXPECT_EQ(out,
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
            "RateLimit: \"a\";r=0;t=1\r\nRetry-After: 1\r\nContent-Length: 3\r\n\r\n{}\n");
  out.clear();
  AppendHttpResponse(out, HttpReply{}, 11, false);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            "Content-Length: 0\r\n\r\n");
  out.clear();
  AppendHttpResponse(out, HttpReply{}, 10, true);
  EXPECT_EQ(out,
            "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
            "Content-Length: 0\r\n\r\n");
}

}  // namespace
}  // namespace sluice::server
