// A descriptor value with '*' wildcards, as envoyproxy/ratelimit documents them: each '*'
// matches any run of bytes (possibly empty), anywhere in the value ("v1/*", "/api/*/action").
// There is no escape: a configured '*' is always a wildcard.
#ifndef SLUICE_CONFIG_VALUE_PATTERN_H_
#define SLUICE_CONFIG_VALUE_PATTERN_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::server {

class ValuePattern {
 public:
  explicit ValuePattern(std::string_view text);

  bool Matches(std::string_view value) const;

  const std::string& text() const { return text_; }
  // Bytes that must appear literally; the more, the more specific the pattern.
  size_t literal_bytes() const { return literal_bytes_; }

  static bool IsPattern(std::string_view text) { return text.find('*') != std::string_view::npos; }

 private:
  std::string text_;
  std::vector<std::string> parts_;  // text_ split at each '*'; at least two
  size_t literal_bytes_ = 0;
};

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_VALUE_PATTERN_H_
