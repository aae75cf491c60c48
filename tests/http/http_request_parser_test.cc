// The request parser and response writer on their own: complete, partial and pipelined input,
// chunked bodies, every refusal, and the bytes of a response.
#include "http/http_request_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "http/http_response.h"

namespace sluice::server {
namespace {

using namespace std::string_view_literals;

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

// The header lines, as sent, for handlers that read more fields than Authorization (the
// forward-auth endpoint); also when the request arrived a byte at a time.
TEST(HttpRequestParser, KeepsTheHeaderLinesAsSent) {
  const std::string data =
      "GET /auth HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.2.3.4\r\n\r\nGET / HTTP/1.1\r\n";
  HttpRequestParser p(kLimits);
  ParseOutcome r;
  for (size_t n = 1; n <= data.size(); ++n) {
    r = p.Parse(std::string_view(data).substr(0, n));
    if (r.status == ParseStatus::kComplete) break;
  }
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.request.header_lines, "Host: a\r\nX-Forwarded-For: 1.2.3.4\r\n");
  HttpRequestParser q(kLimits);
  EXPECT_EQ(q.Parse("GET / HTTP/1.0\r\n\r\n").request.header_lines, "");
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
  EXPECT_FALSE(
      p.Parse("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(p.Parse("GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n")
                   .request.keep_alive);
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

// Found by tests/fuzz/fuzz_http_request.cc: a bad request line followed by more than
// max_header_bytes was 400 when the line arrived first and 431 when it all came at once. The
// verdict is the same however the bytes are split: the request line is judged first.
TEST(HttpRequestParser, ABadRequestLineIsBadHoweverTheBytesArrive) {
  const std::string line = "POS] / HTTP/1.1\r\n";
  for (const std::string& rest : {"X: " + std::string(300, 'x'),                  // no end yet
                                  "X: " + std::string(300, 'x') + "\r\n\r\n"}) {  // ended
    EXPECT_EQ(StatusOf(line + rest), ParseStatus::kBadRequest) << rest.size();
    HttpRequestParser p(kLimits);
    EXPECT_EQ(p.Parse(line.substr(0, 10)).status, ParseStatus::kIncomplete);
    EXPECT_EQ(p.Parse(line + rest).status, ParseStatus::kBadRequest);
  }
  // A request line longer than the limit is still too large, not bad.
  EXPECT_EQ(StatusOf("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n"),
            ParseStatus::kHeadersTooLarge);
}

// 1-byte chunks arriving a few at a time: each call resumes where the last stopped, so the
// bytes examined stay proportional to the request (decoding again from the body's start made
// this quadratic: seconds of CPU for one request of 1 MiB).
TEST(HttpRequestParser, DecodesAChunkedBodyIncrementally) {
  std::string data = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3000; ++i) data += "1\r\nx\r\n";
  data += "0\r\n\r\n";
  HttpRequestParser p(
      {.max_header_bytes = 256, .max_body_bytes = 4096, .max_chunk_framing_bytes = 16 << 10});
  ParseOutcome r;
  for (size_t n = 50;; n += 50) {
    r = p.Parse(std::string_view(data).substr(0, std::min(n, data.size())));
    if (r.status != ParseStatus::kIncomplete || n >= data.size()) break;
  }
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.request.body, std::string(3000, 'x'));
  EXPECT_EQ(r.consumed, data.size());
  EXPECT_LE(p.examined(), 2 * data.size());
}

// Chunk-size lines are framing the body limit does not see: they have their own.
TEST(HttpRequestParser, BoundsChunkFraming) {
  const HttpParseLimits limits{
      .max_header_bytes = 256, .max_body_bytes = 4096, .max_chunk_framing_bytes = 100};
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string tiny = head;
  for (int i = 0; i < 30; ++i) tiny += "1\r\nx\r\n";  // 150 bytes of framing for 30 of body
  HttpRequestParser p(limits);
  EXPECT_EQ(p.Parse(tiny).status, ParseStatus::kBadRequest);
  const ParseOutcome r =
      HttpRequestParser(limits).Parse(head + "1;" + std::string(200, 'e') + "\r\n");
  EXPECT_EQ(r.status, ParseStatus::kBadRequest);
  EXPECT_NE(r.error.find("chunk"), std::string_view::npos);
  HttpRequestParser ok(limits);
  EXPECT_EQ(ok.Parse(head + "3;a=b\r\nabc\r\n0\r\n\r\n").status, ParseStatus::kComplete);
}

// RFC 9112 2.2: a few empty lines before a request are ignored; a stream of them is refused
// at once rather than buffered until the header limit.
TEST(HttpRequestParser, IgnoresOnlyAFewLeadingEmptyLines) {
  std::string lines;
  for (size_t i = 0; i < kMaxLeadingEmptyLines; ++i) lines += "\r\n";
  const std::string request = "GET / HTTP/1.1\r\n\r\n";
  HttpRequestParser p(kLimits);
  const ParseOutcome r = p.Parse(lines + request);
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.consumed, lines.size() + request.size()) << "consumed with the request";
  EXPECT_EQ(StatusOf(lines + "\r\n" + request), ParseStatus::kBadRequest);
  EXPECT_EQ(StatusOf(lines + "\r\n"), ParseStatus::kBadRequest) << "before a request begins";
}

// Lines ended by a bare LF never end a head: such a request used to wait out the client's
// timeout with no answer. It is refused as soon as the LF arrives, however the bytes come.
TEST(HttpRequestParser, RefusesABareLfAsSoonAsItArrives) {
  for (const std::string request :
       {"GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/1.1\r\nHost: x\n\r\n",
        "\nGET / HTTP/1.1\r\n\r\n"}) {
    HttpRequestParser whole(kLimits);
    const ParseOutcome r = whole.Parse(request);
    EXPECT_EQ(r.status, ParseStatus::kBadRequest) << request;
    HttpRequestParser bytewise(kLimits);
    const size_t lf = request.find('\n');
    for (size_t n = 1; n <= lf; ++n) {
      ASSERT_EQ(bytewise.Parse(std::string_view(request).substr(0, n)).status,
                ParseStatus::kIncomplete);
    }
    const ParseOutcome b = bytewise.Parse(std::string_view(request).substr(0, lf + 1));
    if (request.find('\r') < lf) continue;  // the LF follows a CR: refused once the line is read
    EXPECT_EQ(b.status, ParseStatus::kBadRequest) << request;
    EXPECT_NE(std::string(b.error).find("bare LF"), std::string::npos) << b.error;
  }
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ParseStatus::kComplete);
}

// Chunk lines and trailers read the same by every parser or refused ("funky chunks").
TEST(HttpRequestParser, RefusesAmbiguousChunkFraming) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string_view bad[] = {
      " 1\r\nx\r\n0\r\n\r\n",               // whitespace before the size
      "\t1\r\nx\r\n0\r\n\r\n",              //
      "1 \r\nx\r\n0\r\n\r\n",               // whitespace and no extension
      "1;a\rb\r\nx\r\n0\r\n\r\n",           // bare CR in an extension
      "1;a\nb\r\nx\r\n0\r\n\r\n",           // bare LF in an extension
      "1\nx\r\n0\r\n\r\n",                  // a chunk line ended by a bare LF
      "1;\r\nx\r\n0\r\n\r\n",               // no extension name
      "1;a=\r\nx\r\n0\r\n\r\n",             // no value
      "1;a=b c\r\nx\r\n0\r\n\r\n",          // junk after the value
      "1;a=\"b\r\nx\r\n0\r\n\r\n",          // an open quoted string
      "1;a=\"\x01\"\r\nx\r\n0\r\n\r\n",     // a control in a quoted string
      "1;a\x00\r\nx\r\n0\r\n\r\n"sv,        // NUL
      "1x\r\nx\r\n0\r\n\r\n",               // junk after the size
      "1\r\nx\n0\r\n\r\n",                  // a bare LF after the data
      "1\r\nx\r\n0\r\nA: b\r\n c\r\n\r\n",  // a folded trailer
      "1\r\nx\r\n0\r\n A: b\r\n\r\n",       // a trailer starting with a space
      "1\r\nx\r\n0\r\nA: b\rc\r\n\r\n",     // bare CR in a trailer
      "1\r\nx\r\n0\r\nA: b\x00\r\n\r\n"sv,  // NUL in a trailer
      "1\r\nx\r\n0\r\nA b: c\r\n\r\n",      // a bad trailer name
      "1\r\nx\r\n0\r\nA\r\n\r\n",           // no colon
  };
  for (std::string_view body : bad) {
    EXPECT_EQ(StatusOf(head + std::string(body)), ParseStatus::kBadRequest) << body;
  }
  const char* good[] = {
      "1;a\r\nx\r\n0\r\n\r\n",
      "1 ; a = b ;c=\"q \\\" \"\r\nx\r\n0\r\n\r\n",
      "1;a=b\r\nx\r\n0;z\r\nT: v\r\nU:\r\n\r\n",
  };
  for (const char* body : good) EXPECT_EQ(StatusOf(head + body), ParseStatus::kComplete) << body;
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
  AppendHttpResponse(out, reply, 11, /*keep_alive=*/true, /*head_request=*/true);
  EXPECT_EQ(out,
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
            "RateLimit: \"a\";r=0;t=1\r\nRetry-After: 1\r\nContent-Length: 3\r\n\r\n")
      << "HEAD: GET's Content-Length, no body";
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
