// The nested `descriptors` of a domain (or of one plan), indexed for the per-request walk:
// children by key, then by exact value (hash lookup without allocation), then '*' patterns
// (most literal bytes first, ties in file order), then the key-only entry that matches any value.
//
// Built once while loading, then only read: Find is safe to call from many threads.
#ifndef SLUICE_CONFIG_DESCRIPTOR_TREE_H_
#define SLUICE_CONFIG_DESCRIPTOR_TREE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/descriptor_entry.h"
#include "config/value_pattern.h"

namespace sluice::server {

class DescriptorTree {
 public:
  using NodeId = uint32_t;
  static constexpr NodeId kRoot = 0;
  static constexpr int32_t kNoLimit = -1;

  DescriptorTree();

  // Adds the child (key, value) of `parent`; `value` nullopt matches any value, a value with '*'
  // is a pattern. If `parent` already has a child with the same key and value text, nothing is
  // added and `inserted` is false; `node` is the existing child.
  struct AddResult {
    NodeId node;
    bool inserted;
  };
  AddResult AddChild(NodeId parent, std::string_view key, std::optional<std::string_view> value);

  void SetLimit(NodeId node, int32_t limit) { nodes_[node].limit = limit; }
  // The values `node`'s pattern matches share one counter (share_threshold). `node` must have
  // been added with the value `pattern`.
  void ShareCounter(NodeId node, std::string_view pattern);

  // An entry that reached a rule with a shared counter: its counter key uses `pattern`, not
  // the entry's value.
  struct SharedValue {
    size_t entry;
    std::string_view pattern;  // into this tree
  };

  // envoyproxy/ratelimit's walk: for each entry in order, pick among the current node's children
  // with the entry's key the exact value, else the most specific matching pattern, else the
  // key-only child. No backtracking: a more specific child that leads nowhere is not retried as
  // a less specific one. The limit is the one on the node reached by the *last* entry; a
  // request longer or shorter than the configured path gets none (ratelimit's Example 4).
  // Returns the index the caller gave SetLimit, or kNoLimit.
  // Each entry that reached a rule with a shared counter is appended to `shared` (if given).
  int32_t Find(std::span<const DescriptorEntry> entries,
               std::vector<SharedValue>* shared = nullptr) const;

  size_t node_count() const { return nodes_.size(); }

  // Adds every top-level rule of `other` (with its nested rules) to this tree, its limits
  // renumbered by `limit_offset`: envoyproxy/ratelimit's merge of a domain defined in several
  // files. A top-level key and value both trees have is refused: its text is returned (as
  // "key 'k' value 'v'"), and this tree is left with the rules added before it.
  std::optional<std::string> Graft(const DescriptorTree& other, int32_t limit_offset);

 private:
  // Transparent hashing, so a lookup by string_view builds no std::string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using StringMap = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  struct Pattern {
    ValuePattern pattern;
    NodeId node;
  };
  struct KeyBranch {
    StringMap<NodeId> exact;
    std::vector<Pattern> patterns;  // most literal bytes first, ties in insertion order
    std::optional<NodeId> any;
  };
  struct Node {
    int32_t limit = kNoLimit;
    std::string shared_pattern;  // share_threshold: the pattern its values' counters use
    StringMap<KeyBranch> children;
  };

  std::optional<NodeId> Step(const Node& node, const DescriptorEntry& entry) const;
  // Copies the children of `from` (a node of `other`) under `to`, which has none of them yet.
  void CopyChildren(const DescriptorTree& other, NodeId from, NodeId to, int32_t limit_offset);
  // Each child of `node` as (key, value, child id); value nullopt for a key-only rule.
  template <typename F>
  static void ForEachChild(const Node& node, F&& f);

  std::vector<Node> nodes_;
};

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_DESCRIPTOR_TREE_H_
