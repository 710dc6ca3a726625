#pragma once
// Signatures of a traced step's call tree (ops and modules, bottom-up) and their occurrence counts.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/trace/call_tree.hpp"

namespace dooly::signature {

struct Signed {
  std::string hash;       // lowercase hex SHA-256 of canonical
  std::string canonical;  // the exact hashed bytes
  std::string name;       // op name or module class
  bool is_op = true;
  nlohmann::json metadata = nlohmann::json::object();  // not hashed: kernels, example module, rule
};

// One Signed per node of the tree (index = node index). The root ("step") is a module-kind node named
// "step" over the top-level calls.
std::vector<Signed> sign_tree(const trace::CallTree& tree);

// A distinct signature of one step with its count in that step.
struct UnitCount {
  Signed sig;
  std::string phase;
  int64_t count = 0;
};
// Every distinct op and module representative of every traced step (the root excluded), ordered by first
// appearance; counts are per step, so a signature in two steps of the same phase keeps the larger count.
std::vector<UnitCount> count_units(const trace::Trace& trace);

}  // namespace dooly::signature
