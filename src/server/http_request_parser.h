// The HTTP/1.1 request parser of sluiced's server: finds one request at the start of the bytes a
// connection has received, without copying them (except a chunked body, which is decoded into
// the parser's own buffer). Written for the hot path: a POST /v1/check is one scan for the end
// of the headers and one pass over the header lines, no allocation.
//
//   HttpRequestParser parser({.max_header_bytes = 16 << 10, .max_body_bytes = 1 << 20});
//   ParseOutcome r = parser.Parse(received);
//   if (r.status == ParseStatus::kComplete) { handle(r.request); received.erase(0, r.consumed); }
//
// What it accepts: a request line "METHOD SP target SP HTTP/1.0|HTTP/1.1" (leading empty lines
// skipped), header lines "name: value" ending in CRLF, and a body by Content-Length or by
// Transfer-Encoding: chunked (with trailers). It refuses, as kBadRequest: another version, a
// malformed line, obsolete line folding, a bad or conflicting Content-Length, Content-Length
// together with Transfer-Encoding, and any transfer coding but chunked. Headers over
// max_header_bytes are kHeadersTooLarge, and a body over max_body_bytes kBodyTooLarge, both
// as soon as that is known (a Content-Length over the limit before its body arrives).
#ifndef SLUICE_SERVER_HTTP_REQUEST_PARSER_H_
#define SLUICE_SERVER_HTTP_REQUEST_PARSER_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::server {

struct HttpParseLimits {
  size_t max_header_bytes = size_t{16} << 10;  // the request line and the header lines
  size_t max_body_bytes = size_t{1} << 20;
};

struct ParsedRequest {
  std::string_view method;
  std::string_view target;
  std::string_view authorization;  // the first Authorization header; empty when absent
  std::string_view body;
  unsigned version = 11;  // 10 or 11
  bool keep_alive = true;
};

enum class ParseStatus { kComplete, kIncomplete, kBadRequest, kHeadersTooLarge, kBodyTooLarge };

struct ParseOutcome {
  ParseStatus status = ParseStatus::kIncomplete;
  ParsedRequest request;   // kComplete: views into the data passed to Parse (or the parser)
  size_t consumed = 0;     // kComplete: bytes of that data the request took
  std::string_view error;  // kBadRequest: what is wrong (static text)
};

class HttpRequestParser {
 public:
  explicit HttpRequestParser(HttpParseLimits limits) : limits_(limits) {}

  // Parses the request at the start of `data`: every byte received and not yet consumed. Call
  // again with the same bytes and more after kIncomplete; the views of a kComplete outcome stay
  // valid until the next call or until `data` changes.
  ParseOutcome Parse(std::string_view data);

  // Whether any byte of a request has arrived (a connection waiting for none is idle).
  static bool Idle(std::string_view data) { return data.find_first_not_of("\r\n") == data.npos; }

 private:
  ParseOutcome ParseChunked(std::string_view data, size_t body_start, ParsedRequest request);

  HttpParseLimits limits_;
  size_t scanned_ = 0;        // the end of the headers is not before this offset
  std::string chunked_body_;  // a chunked request's body, decoded
};

}  // namespace sluice::server

#endif  // SLUICE_SERVER_HTTP_REQUEST_PARSER_H_
