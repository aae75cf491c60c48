#include "http/http_headers.h"

#include "util/ascii.h"

namespace sluice::server {
namespace {

std::string_view TrimOws(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// Calls on_value(value) for each field named `name`, in order, until it returns false.
template <typename F>
void ForEachValue(std::string_view lines, std::string_view name, F on_value) {
  while (!lines.empty()) {
    const size_t eol = lines.find("\r\n");
    const std::string_view line = lines.substr(0, eol);
    lines.remove_prefix(eol == std::string_view::npos ? lines.size() : eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon != name.size()) continue;
    if (!util::EqualsIgnoreAsciiCase(line.substr(0, colon), name)) continue;
    if (!on_value(TrimOws(line.substr(colon + 1)))) return;
  }
}

}  // namespace

std::optional<std::string_view> FindHeader(std::string_view header_lines, std::string_view name) {
  std::optional<std::string_view> found;
  ForEachValue(header_lines, name, [&found](std::string_view value) {
    found = value;
    return false;
  });
  return found;
}

std::optional<std::string> CombinedHeader(std::string_view header_lines, std::string_view name) {
  std::optional<std::string> combined;
  ForEachValue(header_lines, name, [&combined](std::string_view value) {
    if (!combined) {
      combined.emplace(value);
    } else {
      *combined += ", ";
      *combined += value;
    }
    return true;
  });
  return combined;
}

}  // namespace sluice::server
