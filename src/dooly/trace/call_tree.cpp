#include "dooly/trace/call_tree.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "dooly/common/error.hpp"

namespace dooly::trace {

CallTree build_call_tree(const Trace& trace, const Step& step) {
  CallTree t;
  t.phase = step.kind;
  Node root;
  root.name = "step";
  t.nodes.push_back(root);

  // Events in execution order: module calls and ops share one sequence counter.
  struct Event {
    int64_t seq;
    bool is_call;
    size_t index;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < step.calls.size(); ++i) events.push_back({step.calls[i].seq, true, i});
  for (size_t i = 0; i < step.ops.size(); ++i) events.push_back({step.ops[i].seq, false, i});
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });

  std::unordered_map<int64_t, size_t> node_of_call;
  auto parent_node = [&](int64_t call_id, const char* what, int64_t seq) -> size_t {
    if (call_id < 0) return 0;
    auto it = node_of_call.find(call_id);
    if (it == node_of_call.end())
      DOOLY_THROW(InputError, "re-create the trace with `dooly trace`",
                  "step {}: {} at seq {} refers to module call {} that has not started", step.step, what, seq, call_id);
    return it->second;
  };
  for (const Event& e : events) {
    Node n;
    size_t parent;
    if (e.is_call) {
      const ModuleCall& c = step.calls[e.index];
      auto m = trace.modules.find(c.path);
      if (m == trace.modules.end())
        DOOLY_THROW(InputError, "re-create the trace with `dooly trace`",
                    "step {}: module '{}' is called but not listed", step.step, c.path);
      n.type = Node::Type::module;
      n.name = m->second.cls;
      n.path = c.path;
      n.module = &m->second;
      n.call = c.id;
      parent = parent_node(c.parent, "module call", c.seq);
      node_of_call[c.id] = t.nodes.size();
    } else {
      const OpRecord& o = step.ops[e.index];
      n.type = Node::Type::op;
      n.name = o.op;
      n.path = o.module;
      n.op = &o;
      auto m = trace.modules.find(o.module);
      n.module = m == trace.modules.end() ? nullptr : &m->second;
      parent = parent_node(o.call, "op", o.seq);
    }
    n.parent = parent;
    t.nodes[parent].children.push_back(t.nodes.size());
    t.nodes.push_back(std::move(n));
  }
  return t;
}

std::vector<size_t> post_order(const CallTree& tree) {
  // Children always have larger indices than their parents, so reverse index order is a valid
  // bottom-up order.
  std::vector<size_t> out(tree.nodes.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = out.size() - 1 - i;
  return out;
}

std::vector<Representative> collapse(const CallTree& tree, const std::vector<std::string>& keys) {
  std::vector<Representative> reps;
  std::map<std::string, size_t> index;
  // Index order is pre-order here (nodes are appended in execution order, parents first).
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    auto it = index.find(keys.at(i));
    if (it == index.end()) {
      index.emplace(keys[i], reps.size());
      reps.push_back({keys[i], i, 1});
    } else {
      ++reps[it->second].count;
    }
  }
  return reps;
}

std::string render(const CallTree& tree, const std::vector<std::string>& keys,
                   const std::function<std::string(size_t)>& label, int max_depth) {
  std::string out;
  auto visit = [&](size_t i, int depth, int64_t times, auto&& self) -> void {
    out += std::string(static_cast<size_t>(depth) * 2, ' ') + label(i);
    if (times > 1) out += " x" + std::to_string(times);
    out += "\n";
    if (depth >= max_depth) return;
    const auto& ch = tree.nodes[i].children;
    for (size_t k = 0; k < ch.size();) {
      size_t run = 1;
      while (k + run < ch.size() && keys[ch[k + run]] == keys[ch[k]]) ++run;
      self(ch[k], depth + 1, static_cast<int64_t>(run), self);
      k += run;
    }
  };
  visit(0, 0, 1, visit);
  return out;
}

}  // namespace dooly::trace
