#pragma once
// The call tree of one traced step: module calls as inner nodes, op records as leaves, children in
// execution order. Subtrees are compared through keys computed bottom-up (dooly::signature provides
// them); collapse() turns every set of identical subtrees into one representative with a count.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dooly/trace/trace.hpp"

namespace dooly::trace {

struct Node {
  enum class Type { module, op };
  Type type = Type::module;
  std::string name;  // module class or op name
  std::string path;  // module path (for an op: the module it ran in)
  const OpRecord* op = nullptr;
  const ModuleInfo* module = nullptr;
  int64_t call = -1;  // a module node's call id in the step (ModuleCall::id)
  size_t parent = SIZE_MAX;
  std::vector<size_t> children;
};

struct CallTree {
  std::vector<Node> nodes;  // nodes[0] is the root; every child has a larger index than its parent
  std::string phase;        // the step's kind
};

// Throws InputError when a call names an unknown parent or the module table lacks a called module.
CallTree build_call_tree(const Trace& trace, const Step& step);

// Post-order (children before parents), for bottom-up key computation.
std::vector<size_t> post_order(const CallTree& tree);

struct Representative {
  std::string key;
  size_t node = 0;    // the first node (in execution order) with this key
  int64_t count = 0;  // how many nodes of the tree have this key
};
// One representative per distinct key, in order of first appearance (pre-order).
std::vector<Representative> collapse(const CallTree& tree, const std::vector<std::string>& keys);

// Indented text of the tree in which runs of consecutive identical siblings print once with "xN"
// (for docs and golden tests); label(i) gives each node's text.
std::string render(const CallTree& tree, const std::vector<std::string>& keys,
                   const std::function<std::string(size_t)>& label, int max_depth = 64);

}  // namespace dooly::trace
