#include "config/value_pattern.h"

namespace sluice::server {

ValuePattern::ValuePattern(std::string_view text) : text_(text) {
  size_t start = 0;
  for (;;) {
    const size_t star = text.find('*', start);
    parts_.emplace_back(text.substr(start, star - start));
    literal_bytes_ += parts_.back().size();
    if (star == std::string_view::npos) break;
    start = star + 1;
  }
}

// The first part anchors at the start and the last at the end; the middle parts are taken
// leftmost-first in between. With only '*' as a metacharacter, leftmost-first never misses a
// match that exists, so this is linear in the value's length times the parts.
bool ValuePattern::Matches(std::string_view value) const {
  const std::string& first = parts_.front();
  const std::string& last = parts_.back();
  if (parts_.size() < 2) return value == first;
  if (value.size() < first.size() + last.size()) return false;
  if (!value.starts_with(first) || !value.ends_with(last)) return false;
  size_t pos = first.size();
  const size_t end = value.size() - last.size();
  for (size_t i = 1; i + 1 < parts_.size(); ++i) {
    const size_t found = value.substr(0, end).find(parts_[i], pos);
    if (found == std::string_view::npos) return false;
    pos = found + parts_[i].size();
  }
  return true;
}

}  // namespace sluice::server
