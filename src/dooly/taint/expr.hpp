#pragma once
// A label: the symbolic expression a dimension or integer was computed from, with its concrete value
// and its taint kind. Expressions are immutable, shared, and kept in a canonical form (sums and products
// flattened and sorted, constants folded, like terms merged, common factors cancelled in floor
// divisions), so the same quantity computed two ways prints the same and a product divided by one of its
// factors loses that factor's taint (docs/dooly-tracing.md, "Expressions").
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dooly/taint/kind.hpp"

namespace dooly::taint {

class Expr;
using ExprPtr = std::shared_ptr<const Expr>;

enum class ExprOp : uint8_t { sym, constant, add, mul, floordiv, mod, func };

class Expr {
 public:
  ExprOp op() const noexcept { return op_; }
  int64_t value() const noexcept { return value_; }
  Kind kind() const noexcept { return kind_; }
  // Symbol or function name (empty for other nodes).
  const std::string& name() const noexcept { return name_; }
  const std::vector<ExprPtr>& args() const noexcept { return args_; }
  // Canonical text, e.g. "NUM_TOKS*head_dim", "hidden_size//num_attention_heads", "1+NUM_REQS".
  const std::string& text() const noexcept { return text_; }
  // True when some symbol below has a request-side kind (NUM_*, MAX_*, UNKNOWN).
  bool has_request_symbol() const noexcept;

  // Construction goes through the free functions below (they canonicalise).
  Expr(ExprOp op, int64_t value, Kind kind, std::string name, std::vector<ExprPtr> args);

 private:
  ExprOp op_;
  int64_t value_;
  Kind kind_;
  std::string name_;
  std::vector<ExprPtr> args_;
  std::string text_;
};

ExprPtr sym(std::string name, Kind kind, int64_t value);
ExprPtr constant(int64_t value);
// A label for something no rule could classify; always Kind::unknown.
ExprPtr unknown(int64_t value, std::string why = "UNKNOWN");

ExprPtr add(const ExprPtr& a, const ExprPtr& b);
ExprPtr sub(const ExprPtr& a, const ExprPtr& b);
ExprPtr mul(const ExprPtr& a, const ExprPtr& b);
ExprPtr neg(const ExprPtr& a);
// Python semantics: floor division and a modulo with the sign of the divisor. Division by zero throws.
ExprPtr floordiv(const ExprPtr& a, const ExprPtr& b);
ExprPtr mod(const ExprPtr& a, const ExprPtr& b);
ExprPtr ceildiv(const ExprPtr& a, const ExprPtr& b);
// Any other function (min, max, abs, pow, ...) whose value the caller computed. The kind is the
// combination of the arguments' kinds unless kind_override is given.
ExprPtr func(std::string name, std::vector<ExprPtr> args, int64_t value, std::optional<Kind> kind_override = {});
// Product of a list (1 when empty).
ExprPtr product(const std::vector<ExprPtr>& factors);
// The factors of a product (the expression itself when it is not a product).
std::vector<ExprPtr> factors_of(const ExprPtr& e);

// The form a signature hashes: every subtree whose kind is NONE or MODEL_CONFIG becomes its value,
// except symbols of kind NONE (index-like names such as layer_idx, kept by name so they never split
// layers). Request-side symbols stay, e.g. "NUM_TOKS*head_dim" -> "128*NUM_TOKS".
ExprPtr value_form(const ExprPtr& e);

// Applies a binary integer operator by name: add sub mul floordiv mod truediv_floor min max pow
// (and the reflected forms radd rsub ...). Throws InputError for an unknown name.
ExprPtr apply_binary(std::string_view op, const ExprPtr& a, const ExprPtr& b);
ExprPtr apply_unary(std::string_view op, const ExprPtr& a);

}  // namespace dooly::taint
