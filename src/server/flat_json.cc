#include "server/flat_json.h"

#include <nlohmann/json.hpp>
#include <utility>

namespace sluice::server {

// nlohmann's SAX events into the flat vector.
struct FlatJson::Builder {
  using number_integer_t = nlohmann::json::number_integer_t;
  using number_unsigned_t = nlohmann::json::number_unsigned_t;
  using number_float_t = nlohmann::json::number_float_t;
  using string_t = nlohmann::json::string_t;
  using binary_t = nlohmann::json::binary_t;

  struct Open {
    uint32_t index;
    uint32_t last = kNone;  // its last child so far
  };

  std::vector<Node>& nodes;
  std::vector<Open> open;
  std::string name;  // the member name the next value takes

  bool null() { return Add(Kind::kNull) != kNone; }
  bool boolean(bool) { return Add(Kind::kBool) != kNone; }
  bool number_integer(number_integer_t v) {
    const uint32_t i = Add(Kind::kInteger);
    nodes[i].integer = v;
    return true;
  }
  bool number_unsigned(number_unsigned_t v) {
    const uint32_t i = Add(Kind::kUnsigned);
    nodes[i].unsigned_integer = v;
    return true;
  }
  bool number_float(number_float_t, const string_t&) { return Add(Kind::kFloat) != kNone; }
  bool string(string_t& v) {
    const uint32_t i = Add(Kind::kString);
    nodes[i].text = std::move(v);
    return true;
  }
  bool binary(binary_t&) { return false; }  // not in JSON text
  bool start_object(std::size_t) {
    open.push_back({Add(Kind::kObject)});
    return true;
  }
  bool key(string_t& k) {
    // A repeated name replaces the earlier member, as nlohmann::json's object does.
    Node& object = nodes[open.back().index];
    for (uint32_t c = object.first; c != kNone; c = nodes[c].next) {
      if (nodes[c].live && nodes[c].name == k) {
        nodes[c].live = false;
        --object.size;
        break;
      }
    }
    name = std::move(k);
    return true;
  }
  bool end_object() {
    open.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    open.push_back({Add(Kind::kArray)});
    return true;
  }
  bool end_array() {
    open.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) {
    return false;
  }

  // A node for the next value, linked into the open container.
  uint32_t Add(Kind kind) {
    const auto index = static_cast<uint32_t>(nodes.size());
    Node& node = nodes.emplace_back();
    node.kind = kind;
    if (!open.empty()) {
      Open& parent = open.back();
      Node& p = nodes[parent.index];
      if (p.kind == Kind::kObject) node.name = std::move(name);
      if (parent.last == kNone) {
        p.first = index;
      } else {
        nodes[parent.last].next = index;
      }
      parent.last = index;
      ++p.size;
    }
    return index;
  }
};

bool FlatJson::Parse(std::string_view text) {
  nodes_.clear();
  Builder builder{nodes_, {}, {}};
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &builder);
  return ok && !nodes_.empty();
}

const FlatJson::Node* FlatJson::Find(const Node& object, std::string_view name) const {
  for (const Node* c = First(object); c != nullptr; c = Next(*c)) {
    if (c->name == name) return c;
  }
  return nullptr;
}

const FlatJson::Node* FlatJson::Live(uint32_t index) const {
  while (index != kNone && !nodes_[index].live) index = nodes_[index].next;
  return index == kNone ? nullptr : &nodes_[index];
}

}  // namespace sluice::server
