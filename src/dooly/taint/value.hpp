#pragma once
// The facts an engine adapter collects about one op call: its arguments and its observed outputs, as
// engine-neutral values. Tensors carry one label per dimension; integers carry a label.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dooly/taint/expr.hpp"

namespace dooly::taint {

struct Value {
  enum class Type : uint8_t { none, integer, real, boolean, string, tensor, list, slice, ellipsis, other };
  Type type = Type::none;
  ExprPtr label;              // integer: its label (the value lives in the label)
  double real = 0;            // real
  bool boolean = false;       // boolean
  std::string text;           // string; tensor: dtype; other: a type name or repr
  std::vector<ExprPtr> dims;  // tensor: one label per dimension (the value is the size)
  std::vector<Value> items;   // list; slice: exactly three (start, stop, step; none when absent)

  static Value make_none() { return {}; }
  static Value make_int(ExprPtr l) {
    Value v;
    v.type = Type::integer;
    v.label = std::move(l);
    return v;
  }
  static Value make_tensor(std::vector<ExprPtr> d, std::string dtype = {}) {
    Value v;
    v.type = Type::tensor;
    v.dims = std::move(d);
    v.text = std::move(dtype);
    return v;
  }
  static Value make_list(std::vector<Value> items) {
    Value v;
    v.type = Type::list;
    v.items = std::move(items);
    return v;
  }

  bool is_none() const noexcept { return type == Type::none; }
  bool is_int() const noexcept { return type == Type::integer; }
  bool is_tensor() const noexcept { return type == Type::tensor; }
  bool is_list() const noexcept { return type == Type::list; }
  int64_t int_value() const noexcept { return label ? label->value() : 0; }
  size_t rank() const noexcept { return dims.size(); }
};

struct OpCall {
  std::string op;           // normalised name, e.g. "view", "getitem", "linear"
  std::vector<Value> args;  // positional arguments
  std::vector<std::pair<std::string, Value>> kwargs;
  std::vector<Value> outputs;  // observed outputs, flattened (tensors and integers)

  // The argument at position pos or with keyword name; nullptr when absent.
  const Value* arg(size_t pos, std::string_view name) const noexcept;
  // Every tensor among the arguments (lists are searched one level deep), in order.
  std::vector<const Value*> tensor_args() const;
};

// A note attached to an op record: why a dimension is UNKNOWN, or which sizes matched ambiguously.
enum class Coverage : uint8_t { rule, fallback };

struct OpResult {
  std::vector<Value> outputs;  // the observed outputs with labels filled in
  std::string rule_class;      // e.g. "view", "matmul", "fallback"
  Coverage coverage = Coverage::rule;
  std::vector<std::string> notes;  // ambiguities, conflicts, unknowns (never dropped)
  int unknown_dims = 0;            // output dimensions/integers labelled UNKNOWN
  int ambiguous = 0;               // size matches that hit both a config-side and a request-side label
  int conflicts = 0;               // broadcast partners whose labels disagree in kind
};

}  // namespace dooly::taint
