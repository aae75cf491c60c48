// The HTTP/1.1 request parser of sluiced's server: finds one request at the start of the bytes a
// connection has received, without copying them (except a chunked body, which is decoded into
// the parser's own buffer). Written for the hot path: a POST /v1/check is one scan for the end
// of the headers and one pass over the header lines, no allocation.
//
//   HttpRequestParser parser({.max_header_bytes = 16 << 10, .max_body_bytes = 1 << 20});
//   ParseOutcome r = parser.Parse(received);
//   if (r.status == ParseStatus::kComplete) { handle(r.request); received.erase(0, r.consumed); }
//
// What it accepts: a request line "METHOD SP target SP HTTP/1.0|HTTP/1.1" (up to
// kMaxLeadingEmptyLines empty lines before it skipped), header lines "name: value" ending in
// CRLF, and a body by Content-Length or by Transfer-Encoding: chunked (with extensions
// "; name[=token|quoted-string]" and trailers). It refuses, as kBadRequest: another version, a
// malformed line, obsolete line folding, a bad or conflicting Content-Length, Content-Length
// together with Transfer-Encoding, any transfer coding but chunked, and in a chunked body any
// deviation from RFC 9112 7.1 (whitespace before a chunk size, bare CR or LF, controls, folded
// trailers: what one parser reads differently from the next is how requests are smuggled), or
// more than max_chunk_framing_bytes of chunk-size lines. Headers over max_header_bytes are
// kHeadersTooLarge, and a body over max_body_bytes kBodyTooLarge, both as soon as that is known
// (a Content-Length over the limit before its body arrives).
//
// Work is linear in the bytes received: after kIncomplete the parser keeps the parsed head and
// how far a chunked body is decoded, and resumes there.
#ifndef SLUICE_HTTP_HTTP_REQUEST_PARSER_H_
#define SLUICE_HTTP_HTTP_REQUEST_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::server {

struct HttpParseLimits {
  size_t max_header_bytes = size_t{16} << 10;  // the request line and the header lines
  size_t max_body_bytes = size_t{1} << 20;
  // A chunked body's chunk-size lines (with extensions) and CRLFs: without a bound, a body of
  // 1-byte chunks costs six times its size, and extensions are free.
  size_t max_chunk_framing_bytes = size_t{16} << 10;
};

// Empty lines a client may send before a request line (RFC 9112 2.2 asks to ignore at least one).
inline constexpr size_t kMaxLeadingEmptyLines = 4;

struct ParsedRequest {
  std::string_view method;
  std::string_view target;
  std::string_view authorization;  // the first Authorization header; empty when absent
  // Every header line after the request line, each ending in CRLF, as received and checked
  // (http_headers.h finds a field in them); empty when there are none.
  std::string_view header_lines;
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
  explicit HttpRequestParser(const HttpParseLimits& limits) : limits_(limits) {}

  // Parses the request at the start of `data`: every byte received and not yet consumed. Call
  // again with the same bytes and more after kIncomplete; the views of a kComplete outcome stay
  // valid until the next call or until `data` changes.
  ParseOutcome Parse(std::string_view data);

  // Whether any byte of a request has arrived (a connection waiting for none is idle).
  static bool Idle(std::string_view data) { return data.find_first_not_of("\r\n") == data.npos; }

  // Bytes looked at over the parser's life (a test hook: proves the work is linear).
  size_t examined() const { return examined_; }

 private:
  // The request line and headers, once parsed; offsets into `data`, whose start stays put
  // between calls for one request.
  struct Head {
    size_t method_at = 0, method_size = 0;
    size_t target_at = 0, target_size = 0;
    size_t authorization_at = 0, authorization_size = 0;
    size_t header_lines_at = 0, header_lines_size = 0;
    size_t body_start = 0;
    uint64_t length = 0;
    unsigned version = 11;
    bool keep_alive = true;
    bool chunked = false;
  };
  enum class ChunkState { kSizeLine, kData, kDataEnd, kTrailers };

  ParseOutcome ParseBody(std::string_view data);
  // Fills head_, or returns why not (kIncomplete included).
  std::optional<ParseOutcome> ParseHead(std::string_view data);
  ParseOutcome ParseChunked(std::string_view data);
  ParseOutcome Complete(std::string_view data, std::string_view body, size_t consumed) const;

  HttpParseLimits limits_;
  size_t scanned_ = 0;  // the end of the headers is not before this offset
  std::optional<Head> head_;
  // A chunked body in progress: what comes next at chunk_at_ (an offset into `data`).
  ChunkState chunk_state_ = ChunkState::kSizeLine;
  size_t chunk_at_ = 0;
  uint64_t chunk_left_ = 0;    // kData: bytes of the current chunk still to come
  size_t chunk_framing_ = 0;   // bytes of chunk-size lines and CRLFs so far
  size_t trailers_start_ = 0;  // kTrailers: where the trailer section began
  std::string chunked_body_;   // decoded so far
  size_t examined_ = 0;
};

}  // namespace sluice::server

#endif  // SLUICE_HTTP_HTTP_REQUEST_PARSER_H_
