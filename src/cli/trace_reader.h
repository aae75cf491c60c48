// Reads replay traces: CSV lines "t_ms,key[,cost]", milliseconds non-decreasing, '#' comments
// and blank lines ignored, spaces around fields and a trailing CR tolerated. Any other deviation
// is an error "line N: <what is wrong>".
#ifndef SLUICE_CLI_TRACE_READER_H_
#define SLUICE_CLI_TRACE_READER_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>
#include <vector>

#include "sluice/status.h"

namespace sluice::cli {

inline constexpr size_t kMaxTraceKeyBytes = 4096;
inline constexpr size_t kMaxTraceLineBytes = 65536;
// t_ms * 1e6 plus two of the longest periods (10 years, see ValidateLimitSpec) must fit a
// signed 64-bit nanosecond count: the algorithms compute window ends up to 2 periods ahead.
inline constexpr int64_t kMaxTraceTimeMs = 8'000'000'000'000;
inline constexpr int64_t kMaxTraceCost = 1'000'000'000;

struct TraceLine {
  int64_t t_ms = 0;
  std::string_view key;  // valid until the next call to Next()
  int64_t cost = 1;
};

// Parses one line (without its newline). nullopt for blank and comment lines. The error text
// has no "line N:" prefix; TraceReader adds it.
Result<std::optional<TraceLine>> ParseTraceLine(std::string_view line);

class TraceReader {
 public:
  explicit TraceReader(std::FILE* in);  // not owned

  // The next trace line; nullopt at end of input; an error "line N: ..." otherwise.
  Result<std::optional<TraceLine>> Next();
  size_t line_number() const { return line_number_; }

 private:
  // The next raw line, or nullopt at EOF; an over-long line is an error.
  Result<std::optional<std::string_view>> NextRawLine();

  std::FILE* in_;
  std::vector<char> buf_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  size_t line_number_ = 0;
  int64_t last_t_ms_ = -1;
};

}  // namespace sluice::cli

#endif  // SLUICE_CLI_TRACE_READER_H_
