#include "server/http_request_parser.h"

#include <cstdint>

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

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// `s` equals the lower-case `lower`, ignoring case.
bool IEquals(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (Lower(s[i]) != lower[i]) return false;
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
    if (IEquals(TrimOws(value.substr(0, comma)), lower)) return true;
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

}  // namespace

ParseOutcome HttpRequestParser::Parse(std::string_view data) {
  // Empty lines before a request are ignored (RFC 9112 2.2).
  size_t start = 0;
  while (data.substr(start).starts_with(kCrlf)) start += 2;
  if (start == data.size() || (start + 1 == data.size() && data[start] == '\r')) {
    scanned_ = 0;
    return Status(ParseStatus::kIncomplete);
  }

  const size_t from = scanned_ > start + 3 ? scanned_ - 3 : start;
  const size_t end = data.find("\r\n\r\n", from);
  if (end == std::string_view::npos) {
    scanned_ = data.size();
    if (data.size() - start > limits_.max_header_bytes) {
      return Status(ParseStatus::kHeadersTooLarge);
    }
    // A request line that is already wrong need not wait for the rest.
    if (const size_t eol = data.find(kCrlf, start); eol != std::string_view::npos) {
      ParsedRequest ignored;
      if (auto error = ParseRequestLine(data.substr(start, eol - start), ignored); !error.empty()) {
        return Bad(error);
      }
    }
    return Status(ParseStatus::kIncomplete);
  }
  scanned_ = 0;
  const size_t head_end = end + 2;  // after the last header line's CRLF
  const size_t body_start = end + 4;
  if (body_start - start > limits_.max_header_bytes) return Status(ParseStatus::kHeadersTooLarge);

  ParsedRequest request;
  std::string_view head = data.substr(start, head_end - start);
  size_t eol = head.find(kCrlf);
  if (auto error = ParseRequestLine(head.substr(0, eol), request); !error.empty()) {
    return Bad(error);
  }
  head.remove_prefix(eol + 2);

  bool has_length = false;
  uint64_t length = 0;
  bool chunked = false;
  bool has_transfer_encoding = false;
  bool close = false;
  bool keep_alive = false;
  bool has_authorization = false;
  while (!head.empty()) {
    eol = head.find(kCrlf);
    const std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    if (line.front() == ' ' || line.front() == '\t') return Bad("obsolete line folding");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Bad("bad header line");
    const std::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return Bad("bad header name");
    const std::string_view value = TrimOws(line.substr(colon + 1));
    if (!IsFieldValue(value)) return Bad("bad header value");
    switch (Lower(name.front())) {
      case 'c':
        if (IEquals(name, "content-length")) {
          uint64_t n = 0;
          if (!ParseLength(value, n) || (has_length && n != length)) {
            return Bad("bad Content-Length");
          }
          has_length = true;
          length = n;
        } else if (IEquals(name, "connection")) {
          close = close || HasToken(value, "close");
          keep_alive = keep_alive || HasToken(value, "keep-alive");
        }
        break;
      case 't':
        if (IEquals(name, "transfer-encoding")) {
          // Only chunked is decoded; any other coding could not be read.
          if (has_transfer_encoding || !IEquals(value, "chunked")) {
            return Bad("unsupported Transfer-Encoding");
          }
          has_transfer_encoding = chunked = true;
        }
        break;
      case 'a':
        if (!has_authorization && IEquals(name, "authorization")) {
          request.authorization = value;
          has_authorization = true;
        }
        break;
      default:
        break;
    }
  }
  if (has_length && chunked) return Bad("both Content-Length and Transfer-Encoding");
  if (chunked && request.version == 10) return Bad("chunked body in HTTP/1.0");
  request.keep_alive = request.version == 11 ? !close : keep_alive;

  if (chunked) return ParseChunked(data, body_start, request);
  if (length > limits_.max_body_bytes) return Status(ParseStatus::kBodyTooLarge);
  if (data.size() - body_start < length) return Status(ParseStatus::kIncomplete);
  // The headers are parsed again when the body arrives: a few hundred bytes, and no state.
  request.body = data.substr(body_start, length);
  ParseOutcome r;
  r.status = ParseStatus::kComplete;
  r.request = request;
  r.consumed = body_start + length;
  return r;
}

ParseOutcome HttpRequestParser::ParseChunked(std::string_view data, size_t body_start,
                                             ParsedRequest request) {
  chunked_body_.clear();
  size_t at = body_start;
  for (;;) {
    const size_t eol = data.find(kCrlf, at);
    if (eol == std::string_view::npos) {
      if (data.size() - at > kMaxChunkLine) return Bad("bad chunk size");
      return Status(ParseStatus::kIncomplete);
    }
    std::string_view line = data.substr(at, eol - at);
    if (line.size() > kMaxChunkLine) return Bad("bad chunk size");
    line = line.substr(0, line.find(';'));
    line = TrimOws(line);
    if (line.empty() || line.size() > 15) return Bad("bad chunk size");
    uint64_t size = 0;
    for (char c : line) {
      const char l = Lower(c);
      const int digit = l >= '0' && l <= '9' ? l - '0' : l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
      if (digit < 0) return Bad("bad chunk size");
      size = size * 16 + static_cast<uint64_t>(digit);
    }
    at = eol + 2;
    if (size == 0) break;
    if (chunked_body_.size() + size > limits_.max_body_bytes) {
      return Status(ParseStatus::kBodyTooLarge);
    }
    if (data.size() - at < size + 2) return Status(ParseStatus::kIncomplete);
    if (data.substr(at + size, 2) != kCrlf) return Bad("bad chunk");
    chunked_body_.append(data.substr(at, size));
    at += size + 2;
  }
  // Trailer fields, up to an empty line; read and dropped.
  const size_t trailers = at;
  for (;;) {
    const size_t eol = data.find(kCrlf, at);
    if (eol == std::string_view::npos) {
      if (data.size() - trailers > limits_.max_header_bytes) {
        return Status(ParseStatus::kHeadersTooLarge);
      }
      return Status(ParseStatus::kIncomplete);
    }
    if (eol - trailers > limits_.max_header_bytes) return Status(ParseStatus::kHeadersTooLarge);
    const std::string_view line = data.substr(at, eol - at);
    at = eol + 2;
    if (line.empty()) break;
    if (line.find(':') == std::string_view::npos) return Bad("bad trailer line");
  }
  request.body = chunked_body_;
  ParseOutcome r;
  r.status = ParseStatus::kComplete;
  r.request = request;
  r.consumed = at;
  return r;
}

}  // namespace sluice::server
