#include "dooly/signature/sign.hpp"

#include <algorithm>
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
      children.reserve(n.children.size());
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

namespace {

using UnitIndex = std::map<std::pair<std::string, std::string>, size_t>;  // (hash, phase) -> out index

std::vector<std::string> hashes_of(const std::vector<Signed>& sigs) {
  std::vector<std::string> keys;
  keys.reserve(sigs.size());
  for (const auto& s : sigs) keys.push_back(s.hash);
  return keys;
}

// Kernel symbols of every occurrence are metadata: gather them, first seen first, from all nodes with
// this key.
std::vector<std::string> kernels_of_key(const trace::CallTree& tree, const std::vector<std::string>& keys,
                                        const std::string& key) {
  std::vector<std::string> kernels;
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    if (keys[i] != key) continue;
    for (const auto& k : tree.nodes[i].op->kernels)
      if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
  }
  return kernels;
}

// A unit seen again in the same phase keeps its largest per-step count.
void count_step(const trace::Trace& trace, const trace::Step& step, UnitIndex& index, std::vector<UnitCount>& out) {
  const trace::CallTree tree = trace::build_call_tree(trace, step);
  const std::vector<Signed> sigs = sign_tree(tree);
  const std::vector<std::string> keys = hashes_of(sigs);
  for (const auto& rep : trace::collapse(tree, keys)) {
    if (rep.node == 0) continue;  // the step root
    auto [it, fresh] = index.emplace(std::make_pair(rep.key, step.kind), out.size());
    if (!fresh) {
      out[it->second].count = std::max(out[it->second].count, rep.count);
      continue;
    }
    Signed s = sigs[rep.node];
    if (s.is_op) s.metadata["kernels"] = kernels_of_key(tree, keys, rep.key);
    out.push_back({std::move(s), step.kind, rep.count});
  }
}

}  // namespace

std::vector<UnitCount> count_units(const trace::Trace& trace) {
  std::vector<UnitCount> out;
  UnitIndex index;
  for (const auto& step : trace.steps) count_step(trace, step, index, out);
  return out;
}

}  // namespace dooly::signature
