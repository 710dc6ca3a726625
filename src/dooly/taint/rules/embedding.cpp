// Embedding lookups: the index tensor's dims followed by the table's embedding dim.
#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<Value> embedding(RuleContext& c) {
  const Value& idx = tensor_at(c, 0, "input");
  const Value& w = tensor_at(c, 1, "weight");
  if (w.rank() != 2) mismatch("embedding table must be 2-D");
  std::vector<ExprPtr> out = idx.dims;
  out.push_back(w.dims[1]);
  return {tensor(out)};
}

}  // namespace

void register_embedding(RuleRegistry& r) {
  r.add("embedding", "embedding", embedding);
  r.add("embedding_bag", "embedding",
        [](RuleContext& c) -> std::vector<Value> { mismatch("embedding_bag output rows depend on offsets"); });
}

}  // namespace dooly::taint::rules
