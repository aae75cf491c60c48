#include "config/descriptor_tree.h"

#include <algorithm>

namespace sluice::server {

DescriptorTree::DescriptorTree() { nodes_.emplace_back(); }

DescriptorTree::AddResult DescriptorTree::AddChild(NodeId parent, std::string_view key,
                                                   std::optional<std::string_view> value) {
  const auto new_id = static_cast<NodeId>(nodes_.size());
  // Done with `branch` before nodes_ grows: growing may move the Node that owns it.
  KeyBranch* branch = nullptr;
  {
    auto& children = nodes_[parent].children;
    auto it = children.find(key);
    if (it == children.end()) it = children.emplace(std::string(key), KeyBranch{}).first;
    branch = &it->second;
  }
  if (!value) {
    if (branch->any) return {*branch->any, false};
    branch->any = new_id;
  } else if (ValuePattern::IsPattern(*value)) {
    for (const Pattern& p : branch->patterns) {
      if (p.pattern.text() == *value) return {p.node, false};
    }
    Pattern added{ValuePattern(*value), new_id};
    const size_t bytes = added.pattern.literal_bytes();
    auto pos =
        std::find_if(branch->patterns.begin(), branch->patterns.end(),
                     [bytes](const Pattern& p) { return p.pattern.literal_bytes() < bytes; });
    branch->patterns.insert(pos, std::move(added));
  } else {
    auto [it, inserted] = branch->exact.emplace(std::string(*value), new_id);
    if (!inserted) return {it->second, false};
  }
  nodes_.emplace_back();
  return {new_id, true};
}

std::optional<DescriptorTree::NodeId> DescriptorTree::Step(const Node& node,
                                                           const DescriptorEntry& entry) const {
  const auto branch_it = node.children.find(entry.key);
  if (branch_it == node.children.end()) return std::nullopt;
  const KeyBranch& branch = branch_it->second;
  if (const auto exact = branch.exact.find(entry.value); exact != branch.exact.end()) {
    return exact->second;
  }
  for (const Pattern& p : branch.patterns) {
    if (p.pattern.Matches(entry.value)) return p.node;
  }
  return branch.any;
}

void DescriptorTree::ShareCounter(NodeId node, std::string_view pattern) {
  nodes_[node].shared_pattern = std::string(pattern);
}

int32_t DescriptorTree::Find(std::span<const DescriptorEntry> entries,
                             std::vector<SharedValue>* shared) const {
  if (entries.empty()) return kNoLimit;
  const Node* node = &nodes_[kRoot];
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::optional<NodeId> next = Step(*node, entries[i]);
    if (!next) return kNoLimit;
    node = &nodes_[*next];
    // Only a pattern reaches a node with a shared pattern: exact values are looked up first and
    // a pattern's node is in no exact map.
    if (shared != nullptr && !node->shared_pattern.empty()) {
      shared->push_back({i, node->shared_pattern});
    }
    if (i + 1 == entries.size()) return node->limit;
    if (node->children.empty()) return kNoLimit;
  }
  return kNoLimit;
}

template <typename F>
void DescriptorTree::ForEachChild(const Node& node, F&& f) {
  for (const auto& [key, branch] : node.children) {
    for (const auto& [value, id] : branch.exact) f(key, std::optional<std::string_view>(value), id);
    for (const Pattern& p : branch.patterns) {
      f(key, std::optional<std::string_view>(p.pattern.text()), p.node);
    }
    if (branch.any) f(key, std::optional<std::string_view>(), *branch.any);
  }
}

void DescriptorTree::CopyChildren(const DescriptorTree& other, NodeId from, NodeId to,
                                  int32_t limit_offset) {
  ForEachChild(other.nodes_[from],
               [&](const std::string& key, std::optional<std::string_view> value, NodeId child) {
                 const AddResult added = AddChild(to, key, value);
                 const int32_t limit = other.nodes_[child].limit;
                 nodes_[added.node].limit = limit == kNoLimit ? kNoLimit : limit + limit_offset;
                 CopyChildren(other, child, added.node, limit_offset);
               });
}

std::optional<std::string> DescriptorTree::Graft(const DescriptorTree& other,
                                                 int32_t limit_offset) {
  std::optional<std::string> conflict;
  ForEachChild(other.nodes_[kRoot], [&](const std::string& key,
                                        std::optional<std::string_view> value, NodeId child) {
    if (conflict) return;
    const AddResult added = AddChild(kRoot, key, value);
    if (!added.inserted) {
      conflict = "key '" + key + "'" + (value ? " value '" + std::string(*value) + "'" : "");
      return;
    }
    const int32_t limit = other.nodes_[child].limit;
    nodes_[added.node].limit = limit == kNoLimit ? kNoLimit : limit + limit_offset;
    nodes_[added.node].shared_pattern = other.nodes_[child].shared_pattern;
    CopyChildren(other, child, added.node, limit_offset);
  });
  return conflict;
}

}  // namespace sluice::server
