#include "dooly/signature/sign.hpp"

#include <map>

#include "dooly/signature/canonical.hpp"
#include "dooly/signature/sha256.hpp"

namespace dooly::signature {

using nlohmann::json;

std::vector<Signed> sign_tree(const trace::CallTree& tree) {
  std::vector<Signed> out(tree.nodes.size());
  for (size_t i : trace::post_order(tree)) {
    const trace::Node& n = tree.nodes[i];
    const std::string digest = n.module ? attrs_digest(n.module->attrs) : "";
    Signed s;
    s.name = n.name;
    json canon;
    if (n.type == trace::Node::Type::op) {
      // An op's work is what it receives: shapes, dtypes and scalars. A module attribute it uses is among
      // those (RMSNorm's eps is the `add`'s scalar); one it does not use (the norm's eps for its pow/mean/
      // rsqrt, a rotary module's max_seq_len_cached) must not split it. Module signatures keep the digest.
      canon = canonical_op(*n.op, "");
      s.is_op = true;
      s.metadata = json{{"example_module", n.path}, {"rule", n.op->rule}, {"kernels", n.op->kernels}};
    } else {
      std::vector<std::string> children;
      for (size_t c : n.children) children.push_back(out[c].hash);
      canon = canonical_module(n.name, digest, children);
      s.is_op = false;
      s.metadata = json{{"example_module", n.path}};
    }
    s.canonical = serialize(canon);
    s.hash = sha256_hex(s.canonical);
    out[i] = std::move(s);
  }
  return out;
}

std::vector<UnitCount> count_units(const trace::Trace& trace) {
  std::vector<UnitCount> out;
  std::map<std::pair<std::string, std::string>, size_t> index;  // (hash, phase) -> out index
  for (const auto& step : trace.steps) {
    const trace::CallTree tree = trace::build_call_tree(trace, step);
    const std::vector<Signed> sigs = sign_tree(tree);
    std::vector<std::string> keys;
    for (const auto& s : sigs) keys.push_back(s.hash);
    for (const auto& rep : trace::collapse(tree, keys)) {
      if (rep.node == 0) continue;  // the step root
      auto [it, fresh] = index.emplace(std::make_pair(rep.key, step.kind), out.size());
      if (fresh) {
        Signed s = sigs[rep.node];
        // Kernel symbols of every occurrence are metadata: gather them from all nodes with this key.
        if (s.is_op) {
          std::vector<std::string> kernels;
          for (size_t i = 0; i < tree.nodes.size(); ++i)
            if (keys[i] == rep.key)
              for (const auto& k : tree.nodes[i].op->kernels)
                if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
          s.metadata["kernels"] = kernels;
        }
        out.push_back({std::move(s), step.kind, rep.count});
      } else {
        out[it->second].count = std::max(out[it->second].count, rep.count);
      }
    }
  }
  return out;
}

}  // namespace dooly::signature
