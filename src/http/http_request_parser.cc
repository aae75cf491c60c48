#include "http/http_request_parser.h"

#include <algorithm>
#include <cstdint>

#include "util/ascii.h"
#include "util/hex.h"

namespace sluice::server {
namespace {

constexpr std::string_view kCrlf = "\r\n";
// A chunk-size line ("1a2b;name=value") longer than this is refused rather than buffered.
constexpr size_t kMaxChunkLine = 1024;

// RFC 9110 tchar: the characters of a method or a header name.
bool IsTokenChar(unsigned char c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= '0' && c <= '9') return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether the comma-separated list `value` holds `lower` (case-insensitive), as Connection does.
bool HasToken(std::string_view value, std::string_view lower) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (util::EqualsIgnoreAsciiCase(TrimOws(value.substr(0, comma)), lower)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// Visible ASCII and obs-text; no spaces or controls.
bool IsTargetChar(unsigned char c) { return c > 0x20 && c != 0x7f; }

// A field value may hold HTAB, SP, visible ASCII and obs-text, not other controls.
bool IsFieldValue(std::string_view v) {
  for (char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

ParseOutcome Bad(std::string_view error) {
  ParseOutcome r;
  r.status = ParseStatus::kBadRequest;
  r.error = error;
  return r;
}

ParseOutcome Status(ParseStatus status) {
  ParseOutcome r;
  r.status = status;
  return r;
}

// "POST /v1/check HTTP/1.1" into the request; an error text, or empty when it is well formed.
std::string_view ParseRequestLine(std::string_view line, ParsedRequest& request) {
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return "bad request line";
  request.method = line.substr(0, sp1);
  if (!IsToken(request.method)) return "bad method";
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return "bad request line";
  request.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (request.target.empty()) return "bad target";
  for (char c : request.target) {
    if (!IsTargetChar(static_cast<unsigned char>(c))) return "bad target";
  }
  const std::string_view version = line.substr(sp2 + 1);
  if (version == "HTTP/1.1") {
    request.version = 11;
  } else if (version == "HTTP/1.0") {
    request.version = 10;
  } else {
    return "bad version";
  }
  return {};
}

// What is already wrong in a head that has not ended (or is over max_header_bytes): the first
// of a bad request line (once its CRLF is within the first max_header_bytes) and a line ended by
// a bare LF (looked for in [from, end): the bytes before `from` were looked at by earlier
// calls). The first in byte order is named, and only within the first max_header_bytes, so the
// verdict and its words do not depend on how the bytes were split. Empty when nothing is wrong
// yet. A bare LF would never end the head: the client would wait out its timeout for an answer
// (RFC 9112 2.2 lets a server refuse it; accepting it invites smuggling through proxies that
// read lines differently).
std::string_view HeadErrorSoFar(std::string_view data, size_t start, size_t from, size_t end,
                                size_t max_header_bytes) {
  end = std::min({end, data.size(), start + max_header_bytes});
  size_t bare_lf = std::string_view::npos;
  if (from == 0 && end > 0 && data[0] == '\n') bare_lf = 0;
  for (size_t i = data.find('\n', std::max(from, size_t{1}));
       bare_lf == std::string_view::npos && i < end; i = data.find('\n', i + 1)) {
    if (data[i - 1] != '\r') bare_lf = i;
  }
  const std::string_view window = data.substr(start, max_header_bytes);
  if (const size_t eol = window.find(kCrlf);
      eol != std::string_view::npos &&
      (bare_lf == std::string_view::npos || start + eol < bare_lf)) {
    ParsedRequest ignored;
    if (auto error = ParseRequestLine(window.substr(0, eol), ignored); !error.empty()) return error;
  }
  return bare_lf == std::string_view::npos ? std::string_view()
                                           : "a line ends with a bare LF, not CRLF";
}

// Content-Length's value: digits only, at most 18 of them (no overflow).
bool ParseLength(std::string_view v, uint64_t& out) {
  if (v.empty() || v.size() > 18) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  out = n;
  return true;
}

// RFC 9110 5.6.4 quoted-string at the start of `s`: its length, or 0 when malformed.
size_t QuotedStringSize(std::string_view s) {
  if (s.empty() || s.front() != '"') return 0;
  for (size_t i = 1; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') return i + 1;
    if (c == '\\') {
      if (++i == s.size()) return 0;
      const auto escaped = static_cast<unsigned char>(s[i]);
      if ((escaped < 0x20 && escaped != '\t') || escaped == 0x7f) return 0;
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return 0;
    }
  }
  return 0;
}

size_t TokenSize(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsTokenChar(static_cast<unsigned char>(s[n]))) ++n;
  return n;
}

std::string_view SkipBws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ) (RFC 9112 7.1.1).
bool IsChunkExtensions(std::string_view s) {
  for (;;) {
    s = SkipBws(s);
    if (s.empty()) return true;
    if (s.front() != ';') return false;
    s = SkipBws(s.substr(1));
    const size_t name = TokenSize(s);
    if (name == 0) return false;
    s = SkipBws(s.substr(name));
    if (s.empty() || s.front() != '=') continue;
    s = SkipBws(s.substr(1));
    const size_t value = !s.empty() && s.front() == '"' ? QuotedStringSize(s) : TokenSize(s);
    if (value == 0) return false;
    s.remove_prefix(value);
  }
}

// "1a;name=value" into `size`: hex digits right at the start (no whitespace before them, which
// other parsers read differently), then extensions; an error text, or empty.
std::string_view ParseChunkSizeLine(std::string_view line, uint64_t& size) {
  size_t digits = 0;
  uint64_t n = 0;
  for (; digits < line.size(); ++digits) {
    const int digit = util::HexValue(line[digits]);
    if (digit < 0) break;
    if (digits == 15) return "bad chunk size";  // no overflow
    n = n * 16 + static_cast<uint64_t>(digit);
  }
  if (digits == 0) return "bad chunk size";
  line.remove_prefix(digits);
  // Spaces only before a ';' (BWS); "1 " alone is not a chunk-size line.
  if (!line.empty() && SkipBws(line).empty()) return "bad chunk size";
  if (!IsChunkExtensions(line)) return "bad chunk extension";
  size = n;
  return {};
}

// A trailer field line: "name: value", no folding, no controls.
std::string_view CheckTrailerLine(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') return "obsolete line folding in trailers";
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
    return "bad trailer line";
  }
  if (!IsFieldValue(line.substr(colon + 1))) return "bad trailer value";
  return {};
}

// What the head's header fields say about the message: its framing, whether the connection
// stays open, and its first Authorization.
struct HeaderFields {
  bool has_length = false;
  uint64_t length = 0;
  bool chunked = false;
  bool close = false;
  bool keep_alive = false;
  bool has_authorization = false;
  std::string_view authorization;
};

// Reads the header lines (each ending in CRLF) into `f`; the error, or empty.
std::string_view ParseHeaderFields(std::string_view head, HeaderFields& f) {
  bool has_transfer_encoding = false;
  while (!head.empty()) {
    const size_t eol = head.find(kCrlf);
    const std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    if (line.front() == ' ' || line.front() == '\t') return "obsolete line folding";
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return "bad header line";
    const std::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return "bad header name";
    const std::string_view value = TrimOws(line.substr(colon + 1));
    if (!IsFieldValue(value)) return "bad header value";
    switch (util::ToLowerAscii(name.front())) {
      case 'c':
        if (util::EqualsIgnoreAsciiCase(name, "content-length")) {
          uint64_t n = 0;
          if (!ParseLength(value, n) || (f.has_length && n != f.length)) {
            return "bad Content-Length";
          }
          f.has_length = true;
          f.length = n;
        } else if (util::EqualsIgnoreAsciiCase(name, "connection")) {
          f.close = f.close || HasToken(value, "close");
          f.keep_alive = f.keep_alive || HasToken(value, "keep-alive");
        }
        break;
      case 't':
        if (util::EqualsIgnoreAsciiCase(name, "transfer-encoding")) {
          // Only chunked is decoded; any other coding could not be read.
          if (has_transfer_encoding || !util::EqualsIgnoreAsciiCase(value, "chunked")) {
            return "unsupported Transfer-Encoding";
          }
          has_transfer_encoding = f.chunked = true;
        }
        break;
      case 'a':
        if (!f.has_authorization && util::EqualsIgnoreAsciiCase(name, "authorization")) {
          f.authorization = value;
          f.has_authorization = true;
        }
        break;
      default:
        break;
    }
  }
  return {};
}

}  // namespace

ParseOutcome HttpRequestParser::Parse(std::string_view data) {
  ParseOutcome r = ParseBody(data);
  if (r.status != ParseStatus::kIncomplete) {
    // The next request starts afresh (a kComplete body may still be viewing chunked_body_).
    head_.reset();
    scanned_ = 0;
  }
  return r;
}

ParseOutcome HttpRequestParser::ParseBody(std::string_view data) {
  if (!head_) {
    if (auto outcome = ParseHead(data)) return *outcome;
    if (head_->chunked) {
      chunk_state_ = ChunkState::kSizeLine;
      chunk_at_ = head_->body_start;
      chunk_left_ = 0;
      chunk_framing_ = 0;
      chunked_body_.clear();
    } else if (head_->length > limits_.max_body_bytes) {
      return Status(ParseStatus::kBodyTooLarge);
    }
  }
  if (head_->chunked) return ParseChunked(data);
  const size_t body_start = head_->body_start;
  if (data.size() - body_start < head_->length) return Status(ParseStatus::kIncomplete);
  const size_t length = static_cast<size_t>(head_->length);
  return Complete(data, data.substr(body_start, length), body_start + length);
}

ParseOutcome HttpRequestParser::Complete(std::string_view data, std::string_view body,
                                         size_t consumed) const {
  ParseOutcome r;
  r.status = ParseStatus::kComplete;
  r.request.method = data.substr(head_->method_at, head_->method_size);
  r.request.target = data.substr(head_->target_at, head_->target_size);
  r.request.authorization = data.substr(head_->authorization_at, head_->authorization_size);
  r.request.header_lines = data.substr(head_->header_lines_at, head_->header_lines_size);
  r.request.body = body;
  r.request.version = head_->version;
  r.request.keep_alive = head_->keep_alive;
  r.consumed = consumed;
  return r;
}

std::optional<ParseOutcome> HttpRequestParser::ParseHead(std::string_view data) {
  // A few empty lines before a request are ignored (RFC 9112 2.2); more are not a client.
  size_t start = 0;
  while (data.substr(start).starts_with(kCrlf)) {
    start += 2;
    if (start / 2 > kMaxLeadingEmptyLines) return Bad("too many empty lines before the request");
  }
  if (start == data.size() || (start + 1 == data.size() && data[start] == '\r')) {
    scanned_ = 0;
    return Status(ParseStatus::kIncomplete);
  }

  const size_t from = scanned_ > start + 3 ? scanned_ - 3 : start;
  const size_t end = data.find("\r\n\r\n", from);
  examined_ += (end == std::string_view::npos ? data.size() : end + 4) - from;
  if (end == std::string_view::npos) {
    scanned_ = data.size();
    // What is already wrong need not wait for the rest, and stays wrong however long the rest
    // grows: it is looked for before the size (a client must not get 400 or 431 depending on
    // how its bytes were split).
    if (auto error = HeadErrorSoFar(data, start, from, data.size(), limits_.max_header_bytes);
        !error.empty()) {
      return Bad(error);
    }
    if (data.size() - start > limits_.max_header_bytes) {
      return Status(ParseStatus::kHeadersTooLarge);
    }
    return Status(ParseStatus::kIncomplete);
  }
  scanned_ = 0;
  const size_t head_end = end + 2;  // after the last header line's CRLF
  const size_t body_start = end + 4;
  // As when the head had not ended: what a prefix of these bytes would have been refused for.
  if (auto error = HeadErrorSoFar(data, start, from, end, limits_.max_header_bytes);
      !error.empty()) {
    return Bad(error);
  }
  if (body_start - start > limits_.max_header_bytes) return Status(ParseStatus::kHeadersTooLarge);

  ParsedRequest request;
  std::string_view head = data.substr(start, head_end - start);
  examined_ += head.size();
  size_t eol = head.find(kCrlf);
  if (auto error = ParseRequestLine(head.substr(0, eol), request); !error.empty()) {
    return Bad(error);
  }
  head.remove_prefix(eol + 2);
  const std::string_view header_lines = head;
  HeaderFields f;
  if (auto error = ParseHeaderFields(head, f); !error.empty()) return Bad(error);
  if (f.has_authorization) request.authorization = f.authorization;
  if (f.has_length && f.chunked) return Bad("both Content-Length and Transfer-Encoding");
  if (f.chunked && request.version == 10) return Bad("chunked body in HTTP/1.0");
  // "close" wins over "keep-alive" in either version: the client will not read a second response.
  request.keep_alive = !f.close && (request.version == 11 || f.keep_alive);

  const auto offset = [&](std::string_view v) {
    return static_cast<size_t>(v.data() - data.data());
  };
  Head& h = head_.emplace();
  h.method_at = offset(request.method);
  h.method_size = request.method.size();
  h.target_at = offset(request.target);
  h.target_size = request.target.size();
  if (f.has_authorization) {
    h.authorization_at = offset(request.authorization);
    h.authorization_size = request.authorization.size();
  }
  h.header_lines_at = offset(header_lines);
  h.header_lines_size = header_lines.size();
  h.body_start = body_start;
  h.length = f.length;
  h.version = request.version;
  h.keep_alive = request.keep_alive;
  h.chunked = f.chunked;
  return std::nullopt;
}

ParseOutcome HttpRequestParser::ParseChunked(std::string_view data) {
  for (;;) {
    switch (chunk_state_) {
      case ChunkState::kSizeLine: {
        // Rescanned while incomplete, but a line is short: at most kMaxChunkLine bytes a call.
        const std::string_view rest = data.substr(chunk_at_, kMaxChunkLine + 2);
        const size_t eol = rest.find(kCrlf);
        examined_ += eol == std::string_view::npos ? rest.size() : eol + 2;
        if (eol == std::string_view::npos) {
          if (rest.size() == kMaxChunkLine + 2) return Bad("chunk-size line too long");
          return Status(ParseStatus::kIncomplete);
        }
        uint64_t size = 0;
        if (auto error = ParseChunkSizeLine(rest.substr(0, eol), size); !error.empty()) {
          return Bad(error);
        }
        chunk_at_ += eol + 2;
        chunk_framing_ += eol + 2;
        if (chunk_framing_ > limits_.max_chunk_framing_bytes) {
          return Bad("too many chunks: chunk-size lines over the limit");
        }
        if (size == 0) {
          chunk_state_ = ChunkState::kTrailers;
          trailers_start_ = chunk_at_;
          break;
        }
        if (chunked_body_.size() + size > limits_.max_body_bytes) {
          return Status(ParseStatus::kBodyTooLarge);
        }
        chunk_left_ = size;
        chunk_state_ = ChunkState::kData;
        break;
      }
      case ChunkState::kData: {
        const size_t n =
            static_cast<size_t>(std::min<uint64_t>(chunk_left_, data.size() - chunk_at_));
        chunked_body_.append(data.substr(chunk_at_, n));
        examined_ += n;
        chunk_at_ += n;
        chunk_left_ -= n;
        if (chunk_left_ > 0) return Status(ParseStatus::kIncomplete);
        chunk_state_ = ChunkState::kDataEnd;
        break;
      }
      case ChunkState::kDataEnd:
        if (data.size() - chunk_at_ < 2) return Status(ParseStatus::kIncomplete);
        examined_ += 2;
        if (data.substr(chunk_at_, 2) != kCrlf) return Bad("bad chunk: no CRLF after its data");
        chunk_at_ += 2;
        chunk_framing_ += 2;
        chunk_state_ = ChunkState::kSizeLine;
        break;
      case ChunkState::kTrailers: {
        // Trailer fields, up to an empty line; checked, then dropped.
        const size_t limit = trailers_start_ + limits_.max_header_bytes;
        const std::string_view rest =
            data.substr(chunk_at_, limit + 2 > chunk_at_ ? limit + 2 - chunk_at_ : 0);
        const size_t eol = rest.find(kCrlf);
        examined_ += eol == std::string_view::npos ? rest.size() : eol + 2;
        if (eol == std::string_view::npos || chunk_at_ + eol > limit) {
          if (chunk_at_ + rest.size() > limit) return Status(ParseStatus::kHeadersTooLarge);
          return Status(ParseStatus::kIncomplete);
        }
        const std::string_view line = rest.substr(0, eol);
        chunk_at_ += eol + 2;
        if (line.empty()) return Complete(data, chunked_body_, chunk_at_);
        if (auto error = CheckTrailerLine(line); !error.empty()) return Bad(error);
        break;
      }
    }
  }
}

}  // namespace sluice::server
