// A parser for RFC 9651 Structured Field Lists, enough for the RateLimit fields: every bare item
// type is recognised (so a valid field never fails on a member the client does not use), and a
// field that breaks the grammar fails whole, as §4.2 requires of recipients.
#ifndef SLUICE_CLIENT_STRUCTURED_FIELDS_H_
#define SLUICE_CLIENT_STRUCTURED_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::client::sf {

struct BareItem {
  enum class Kind { kInteger, kDecimal, kString, kToken, kBytes, kBoolean, kDate, kDisplay };
  Kind kind = Kind::kInteger;
  int64_t integer = 0;  // kInteger, kDate; kBoolean as 0/1
  double decimal = 0;   // kDecimal
  std::string text;     // kString, kToken, kDisplay; kBytes as its base64 text
};

using Parameters = std::vector<std::pair<std::string, BareItem>>;

struct Member {
  bool inner_list = false;
  BareItem item;                // when !inner_list
  std::vector<BareItem> inner;  // when inner_list (their parameters are dropped)
  Parameters params;

  // The parameter `key`'s value if it is present (the last one wins, §4.2.3.2).
  const BareItem* Param(std::string_view key) const;
};

// nullopt when `field` is not a valid List (an empty field is an empty list).
std::optional<std::vector<Member>> ParseList(std::string_view field);

}  // namespace sluice::client::sf

#endif  // SLUICE_CLIENT_STRUCTURED_FIELDS_H_
