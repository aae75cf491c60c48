// A JSON document as one flat vector of nodes, for parsing small request bodies on the hot path
// without a tree of allocations (nlohmann::json makes a map node per member and a string per
// long value) and without a general-purpose lexer. It accepts exactly the documents
// nlohmann::json::parse accepts (strict RFC 8259, UTF-8 validated, a leading byte order mark
// skipped, a number beyond a double's range refused), classifies numbers the same way (unsigned,
// integer, float), and, like nlohmann::json, lets a later member of an object replace an earlier
// one of the same name: the API's errors stay what they were (tests/http/flat_json_test.cc
// compares the two). One difference: nlohmann::json takes a NUL byte outside a string for the
// end of the input (it accepts "{}\0junk"); FlatJson, like RFC 8259, refuses any byte after the
// document but whitespace (found by tests/fuzz/fuzz_check_json.cc).
//
// Bounds on depth and on the number of values make a hostile document cost at most what the
// largest legitimate one does: a 1 MiB "[[[[..." stops at its bound, not after a million nodes.
//
//   FlatJson doc;
//   if (!doc.Parse(body, {.max_depth = 5, .max_values = 4000})) return MakeError(...doc.error());
//   const FlatJson::Node* domain = doc.Find(doc.root(), "domain");
//   for (const auto* d = doc.First(descriptors); d != nullptr; d = doc.Next(*d)) ...
#ifndef SLUICE_HTTP_FLAT_JSON_H_
#define SLUICE_HTTP_FLAT_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::server {

class FlatJson {
 public:
  enum class Kind : uint8_t { kNull, kBool, kInteger, kUnsigned, kFloat, kString, kArray, kObject };
  static constexpr uint32_t kNone = UINT32_MAX;

  struct Node {
    Kind kind = Kind::kNull;
    bool live = true;     // false: an object member replaced by a later one of the same name
    int64_t integer = 0;  // kInteger; kBool: 1 for true, 0 for false
    uint64_t unsigned_integer = 0;  // kUnsigned
    std::string text;               // kString: the value, unescaped
    std::string name;               // an object member's name
    uint32_t size = 0;              // kArray, kObject: live children
    uint32_t first = kNone;
    uint32_t next = kNone;  // the next sibling, live or not

    bool is_number_integer() const { return kind == Kind::kInteger || kind == Kind::kUnsigned; }
  };

  // Unbounded by default; a document over a bound is refused as soon as the bound is passed.
  struct Bounds {
    uint32_t max_depth = UINT32_MAX;   // arrays and objects open at once
    uint32_t max_values = UINT32_MAX;  // values of every kind, containers and members included
  };
  enum class Error : uint8_t { kNone, kSyntax, kTooDeep, kTooManyValues };

  // False if `text` is not one valid JSON document within `bounds`; error() says why. The
  // previous document is dropped (the vector keeps its capacity).
  bool Parse(std::string_view text, Bounds bounds);
  bool Parse(std::string_view text);  // unbounded
  Error error() const { return error_; }

  const Node& root() const { return nodes_.front(); }
  // The live member `name` of `object`, or nullptr.
  const Node* Find(const Node& object, std::string_view name) const;
  // The first live child of an array or object, and the live sibling after `child`; nullptr
  // at the end.
  const Node* First(const Node& parent) const { return Live(parent.first); }
  const Node* Next(const Node& child) const { return Live(child.next); }
  // Moves a string node's text out (the document is read once, then dropped).
  std::string Take(const Node& node) { return std::move(nodes_[Index(node)].text); }

 private:
  const Node* Live(uint32_t index) const;
  size_t Index(const Node& node) const { return static_cast<size_t>(&node - nodes_.data()); }

  std::vector<Node> nodes_;
  Error error_ = Error::kNone;
};

}  // namespace sluice::server

#endif  // SLUICE_HTTP_FLAT_JSON_H_
