#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/trace/call_tree.hpp"
#include "support/small_trace.hpp"

namespace dooly::trace {
namespace {

TEST(CallTree, BuildsTheModuleHierarchyInExecutionOrder) {
  const Trace t = parse_trace(testing::small_trace());
  const CallTree tree = build_call_tree(t, t.steps[0]);
  ASSERT_EQ(tree.nodes.size(), 12u);  // root + 4 calls + 7 ops
  EXPECT_EQ(tree.phase, "prefill");
  const Node& model = tree.nodes[tree.nodes[0].children.at(0)];
  EXPECT_EQ(model.name, "Model");
  ASSERT_EQ(model.children.size(), 4u);  // three layers, then the top-level op
  EXPECT_EQ(tree.nodes[model.children[0]].path, "layers.0");
  EXPECT_EQ(tree.nodes[model.children[3]].name, "neg");
  const Node& l0 = tree.nodes[model.children[0]];
  ASSERT_EQ(l0.children.size(), 2u);
  EXPECT_EQ(tree.nodes[l0.children[0]].name, "mul");
  EXPECT_EQ(tree.nodes[l0.children[1]].name, "add");
  for (size_t i = 1; i < tree.nodes.size(); ++i) EXPECT_LT(tree.nodes[i].parent, i);
}

TEST(CallTree, CollapseCountsEqualKeys) {
  const Trace t = parse_trace(testing::small_trace());
  const CallTree tree = build_call_tree(t, t.steps[0]);
  // Keys by hand: layers 0 and 1 equal, layer 2 different; ops keyed by name.
  std::vector<std::string> keys(tree.nodes.size());
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const Node& n = tree.nodes[i];
    keys[i] = n.type == Node::Type::op ? "op:" + n.name : n.path == "layers.2" ? "L-global" : n.path.rfind("layers", 0) == 0 ? "L-sliding" : n.name;
  }
  auto reps = collapse(tree, keys);
  std::map<std::string, int64_t> count;
  for (const auto& r : reps) count[r.key] = r.count;
  EXPECT_EQ(count["L-sliding"], 2);
  EXPECT_EQ(count["L-global"], 1);
  EXPECT_EQ(count["op:mul"], 3);
  EXPECT_EQ(count["op:neg"], 1);
  EXPECT_EQ(reps.size(), 7u);  // step, Model, L-sliding, op:mul, op:add, L-global, op:neg (first-seen order)
  EXPECT_EQ(reps[2].key, "L-sliding");
  const std::string text = render(tree, keys, [&](size_t i) { return keys[i]; });
  EXPECT_EQ(text, "step\n  Model\n    L-sliding x2\n      op:mul\n      op:add\n    L-global\n      op:mul\n      op:add\n    op:neg\n");
}

TEST(CallTree, DanglingCallIsAnError) {
  nlohmann::json j = testing::small_trace();
  j["steps"][0]["ops"][0]["call"] = 42;
  const Trace t = parse_trace(j);
  try {
    build_call_tree(t, t.steps[0]);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("refers to module call 42 that has not started"), std::string::npos);
  }
  j = testing::small_trace();
  j["steps"][0]["calls"][1]["module"] = "nowhere";
  const Trace t2 = parse_trace(j);
  EXPECT_THROW(build_call_tree(t2, t2.steps[0]), InputError);
}

}  // namespace
}  // namespace dooly::trace
