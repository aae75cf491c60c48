// Fuzz target: the replay trace reader of the sluice CLI (cli/trace_reader.h) on a whole trace
// read through a FILE*, as `sluice replay` reads it. Checks, besides "no crash, no UB":
// - every line it returns is the input's line with that number, split here independently:
//   the time and cost are the fields' decimal values, the key is the field without the spaces
//   around it, and all are within the documented bounds;
// - times never decrease; an error names the line ("line N: ...") the reader stopped at;
// - ParseTraceLine on that raw line gives the same line.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/trace_reader.h"
#include "fuzz_check.h"

namespace {

using sluice::cli::TraceLine;

std::string_view Trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    const size_t next = s.find(sep, at);
    out.push_back(
        s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return out;
    at = next + 1;
  }
}

// `field` is the decimal `value`, perhaps with leading zeros.
bool IsDecimal(std::string_view field, int64_t value) {
  const size_t digits = field.find_first_not_of('0');
  const std::string_view significant =
      digits == std::string_view::npos ? std::string_view("0") : field.substr(digits);
  return significant == std::to_string(value);
}

void CheckLine(const TraceLine& line, std::string_view raw) {
  const auto fields = Split(raw, ',');
  FUZZ_CHECK(fields.size() == 2 || fields.size() == 3);
  FUZZ_CHECK(line.t_ms >= 0 && line.t_ms <= sluice::cli::kMaxTraceTimeMs);
  FUZZ_CHECK(IsDecimal(Trim(fields[0]), line.t_ms));
  FUZZ_CHECK(line.key == Trim(fields[1]));
  FUZZ_CHECK(!line.key.empty() && line.key.size() <= sluice::cli::kMaxTraceKeyBytes);
  FUZZ_CHECK(line.cost >= 1 && line.cost <= sluice::cli::kMaxTraceCost);
  FUZZ_CHECK(fields.size() == 3 ? IsDecimal(Trim(fields[2]), line.cost) : line.cost == 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  std::vector<std::string_view> raw_lines = Split(text, '\n');
  if (!text.empty() && text.back() == '\n') raw_lines.pop_back();

  // A FILE* over the input: in memory (fmemopen cannot open an empty buffer: /dev/null then).
  std::string copy(text);
  std::FILE* file =
      copy.empty() ? std::fopen("/dev/null", "r") : fmemopen(copy.data(), copy.size(), "r");
  FUZZ_CHECK(file != nullptr);

  sluice::cli::TraceReader reader(file);
  int64_t last_t_ms = -1;
  while (true) {
    auto next = reader.Next();
    const size_t number = reader.line_number();
    if (!next) {
      const std::string prefix = "line " + std::to_string(number) + ": ";
      FUZZ_CHECK(next.error().message.starts_with(prefix));
      break;
    }
    if (!next->has_value()) break;
    const TraceLine line = **next;
    FUZZ_CHECK(number >= 1 && number <= raw_lines.size());
    const std::string_view raw = raw_lines[number - 1];
    CheckLine(line, raw);
    FUZZ_CHECK(line.t_ms >= last_t_ms);
    last_t_ms = line.t_ms;
    const auto alone = sluice::cli::ParseTraceLine(raw);
    FUZZ_CHECK(alone.has_value() && alone->has_value());
    FUZZ_CHECK((*alone)->t_ms == line.t_ms && (*alone)->key == line.key &&
               (*alone)->cost == line.cost);
  }
  std::fclose(file);
  return 0;
}
