#include "cli/trace_reader.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

#include "util/utf8.h"

namespace sluice::cli {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A non-negative decimal integer <= max, or nullopt.
std::optional<int64_t> ParseCount(std::string_view s, int64_t max) {
  if (s.empty()) return std::nullopt;
  while (s.size() > 1 && s.front() == '0') s.remove_prefix(1);  // leading zeros are harmless
  if (s.size() > 19) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

std::string Shown(std::string_view s) {
  constexpr size_t kMax = 40;
  return s.size() <= kMax ? std::string(s) : std::string(s.substr(0, kMax)) + "...";
}

}  // namespace

Result<std::optional<TraceLine>> ParseTraceLine(std::string_view line) {
  const std::string_view trimmed = Trim(line);
  if (trimmed.empty() || trimmed.front() == '#') return std::optional<TraceLine>();

  std::string_view fields[3];
  size_t n = 0;
  std::string_view rest = trimmed;
  while (true) {
    const size_t comma = rest.find(',');
    if (n == 3) {
      return MakeError("expected t_ms,key[,cost] but found more than 3 fields");
    }
    fields[n++] = Trim(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (n < 2) return MakeError("expected t_ms,key[,cost] but found no ',' after the time");

  TraceLine out;
  const auto t = ParseCount(fields[0], kMaxTraceTimeMs);
  if (!t) {
    return MakeError("time '" + Shown(fields[0]) +
                     "' is not a whole number of milliseconds between 0 and " +
                     std::to_string(kMaxTraceTimeMs));
  }
  out.t_ms = *t;
  out.key = fields[1];
  if (out.key.empty()) return MakeError("empty key");
  if (out.key.size() > kMaxTraceKeyBytes) {
    return MakeError("key is " + std::to_string(out.key.size()) + " bytes; the maximum is " +
                     std::to_string(kMaxTraceKeyBytes));
  }
  if (!util::IsValidUtf8(out.key)) return MakeError("key is not valid UTF-8");
  if (n == 3) {
    const auto cost = ParseCount(fields[2], kMaxTraceCost);
    if (!cost || *cost == 0) {
      return MakeError("cost '" + Shown(fields[2]) + "' is not a whole number between 1 and " +
                       std::to_string(kMaxTraceCost));
    }
    out.cost = *cost;
  }
  return std::optional<TraceLine>(out);
}

TraceReader::TraceReader(std::FILE* in) : in_(in), buf_(1 << 20) {}

Result<std::optional<std::string_view>> TraceReader::NextRawLine() {
  while (true) {
    const char* start = buf_.data() + begin_;
    if (const void* nl = std::memchr(start, '\n', end_ - begin_); nl != nullptr) {
      const size_t len = static_cast<const char*>(nl) - start;
      begin_ += len + 1;
      ++line_number_;
      if (len > kMaxTraceLineBytes) {
        return MakeError("line " + std::to_string(line_number_) + ": longer than " +
                         std::to_string(kMaxTraceLineBytes) + " bytes");
      }
      return std::optional<std::string_view>(std::string_view(start, len));
    }
    if (eof_) {
      if (begin_ == end_) return std::optional<std::string_view>();
      const size_t len = end_ - begin_;  // a last line without a newline
      begin_ = end_;
      ++line_number_;
      return std::optional<std::string_view>(std::string_view(start, len));
    }
    // Keep the partial line, refill behind it.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ > kMaxTraceLineBytes) {
      return MakeError("line " + std::to_string(line_number_ + 1) + ": longer than " +
                       std::to_string(kMaxTraceLineBytes) + " bytes");
    }
    const size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, in_);
    if (got == 0) {
      if (std::ferror(in_)) {
        return MakeError("line " + std::to_string(line_number_ + 1) +
                         ": read error: " + std::strerror(errno));
      }
      eof_ = true;
    }
    end_ += got;
  }
}

Result<std::optional<TraceLine>> TraceReader::Next() {
  while (true) {
    auto raw = NextRawLine();
    if (!raw) return std::unexpected(raw.error());
    if (!raw->has_value()) return std::optional<TraceLine>();
    auto parsed = ParseTraceLine(**raw);
    if (!parsed) {
      return MakeError("line " + std::to_string(line_number_) + ": " + parsed.error().message);
    }
    if (!parsed->has_value()) continue;
    const TraceLine& line = **parsed;
    if (line.t_ms < last_t_ms_) {
      return MakeError("line " + std::to_string(line_number_) + ": time " +
                       std::to_string(line.t_ms) + " is before the previous line's " +
                       std::to_string(last_t_ms_) + " (times must not decrease)");
    }
    last_t_ms_ = line.t_ms;
    return parsed;
  }
}

}  // namespace sluice::cli
