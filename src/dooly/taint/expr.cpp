#include "dooly/taint/expr.hpp"

#include <algorithm>
#include <map>

#include "dooly/common/error.hpp"

namespace dooly::taint {
namespace {

int64_t py_floordiv(int64_t a, int64_t b) {
  if (b == 0)
    DOOLY_THROW(InputError, "check the traced code path; a dimension divided by zero", "integer division by zero");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) { return a - py_floordiv(a, b) * b; }

bool atomic(const ExprPtr& e) {
  return e->op() == ExprOp::sym || e->op() == ExprOp::func || (e->op() == ExprOp::constant && e->value() >= 0);
}
std::string paren(const ExprPtr& e) { return atomic(e) ? e->text() : "(" + e->text() + ")"; }

std::string render(ExprOp op, int64_t value, const std::string& name, const std::vector<ExprPtr>& args) {
  switch (op) {
    case ExprOp::sym:
      return name;
    case ExprOp::constant:
      return std::to_string(value);
    case ExprOp::add: {
      std::string s;
      for (size_t i = 0; i < args.size(); ++i) {
        if (i) s += "+";
        s += args[i]->op() == ExprOp::add ? "(" + args[i]->text() + ")" : args[i]->text();
      }
      return s;
    }
    case ExprOp::mul: {
      std::string s;
      for (size_t i = 0; i < args.size(); ++i) {
        if (i) s += "*";
        s += (args[i]->op() == ExprOp::mul || args[i]->op() == ExprOp::constant || atomic(args[i]))
                 ? args[i]->text()
                 : "(" + args[i]->text() + ")";
      }
      return s;
    }
    case ExprOp::floordiv:
      return paren(args[0]) + "//" + paren(args[1]);
    case ExprOp::mod:
      return paren(args[0]) + "%" + paren(args[1]);
    case ExprOp::func: {
      std::string s = name + "(";
      for (size_t i = 0; i < args.size(); ++i) s += (i ? "," : "") + args[i]->text();
      return s + ")";
    }
  }
  return "?";
}

Kind kind_of_args(const std::vector<ExprPtr>& args) {
  Kind k = Kind::none;
  for (const auto& a : args) k = combine(k, a->kind());
  return k;
}

ExprPtr node(ExprOp op, int64_t value, std::vector<ExprPtr> args, std::string name = {},
             std::optional<Kind> kind = {}) {
  const Kind k = kind ? *kind : kind_of_args(args);
  return std::make_shared<const Expr>(op, value, k, std::move(name), std::move(args));
}

bool by_text(const ExprPtr& a, const ExprPtr& b) {
  if (a->text() != b->text()) return a->text() < b->text();
  return a->kind() < b->kind();
}

// A term of a sum as coefficient * rest (rest == nullptr for a constant term).
std::pair<int64_t, ExprPtr> split_coefficient(const ExprPtr& e) {
  if (e->op() == ExprOp::constant) return {e->value(), nullptr};
  if (e->op() == ExprOp::mul && e->args().front()->op() == ExprOp::constant) {
    std::vector<ExprPtr> rest(e->args().begin() + 1, e->args().end());
    return {e->args().front()->value(), product(rest)};
  }
  return {1, e};
}

}  // namespace

Expr::Expr(ExprOp op, int64_t value, Kind kind, std::string name, std::vector<ExprPtr> args)
    : op_(op), value_(value), kind_(kind), name_(std::move(name)), args_(std::move(args)) {
  text_ = render(op_, value_, name_, args_);
}

bool Expr::has_request_symbol() const noexcept {
  if (op_ == ExprOp::sym) return kind_ != Kind::none && kind_ != Kind::model_config;
  if (op_ == ExprOp::func && kind_ != kind_of_args(args_)) return !hashed_by_value(kind_);
  for (const auto& a : args_)
    if (a->has_request_symbol()) return true;
  return false;
}

ExprPtr sym(std::string name, Kind kind, int64_t value) { return node(ExprOp::sym, value, {}, std::move(name), kind); }
ExprPtr constant(int64_t value) { return node(ExprOp::constant, value, {}, {}, Kind::none); }
ExprPtr unknown(int64_t value, std::string why) { return node(ExprOp::sym, value, {}, std::move(why), Kind::unknown); }

ExprPtr add(const ExprPtr& a, const ExprPtr& b) {
  std::vector<ExprPtr> terms;
  for (const auto& x : {a, b}) {
    if (x->op() == ExprOp::add)
      terms.insert(terms.end(), x->args().begin(), x->args().end());
    else
      terms.push_back(x);
  }
  // Merge like terms: sum the coefficients of terms with the same rest.
  int64_t c = 0;
  std::map<std::string, std::pair<int64_t, ExprPtr>> like;
  for (const auto& t : terms) {
    auto [coef, rest] = split_coefficient(t);
    if (!rest) {
      c += coef;
      continue;
    }
    const std::string key = rest->text() + "#" + std::to_string(int(rest->kind()));
    auto it = like.find(key);
    if (it == like.end())
      like.emplace(key, std::make_pair(coef, rest));
    else
      it->second.first += coef;
  }
  std::vector<ExprPtr> out;
  for (auto& [key, cr] : like)
    if (cr.first != 0) out.push_back(cr.first == 1 ? cr.second : mul(constant(cr.first), cr.second));
  std::sort(out.begin(), out.end(), by_text);
  if (c != 0 || out.empty()) out.insert(out.begin(), constant(c));
  if (out.size() == 1) return out.front();
  return node(ExprOp::add, a->value() + b->value(), std::move(out));
}

ExprPtr mul(const ExprPtr& a, const ExprPtr& b) {
  // A constant times a sum distributes, so like terms can cancel: -1*(x-1)+x -> 1.
  for (const auto& [k, sum] : {std::pair{a, b}, std::pair{b, a}}) {
    if (k->op() != ExprOp::constant || sum->op() != ExprOp::add) continue;
    ExprPtr total = constant(0);
    for (const auto& term : sum->args()) total = add(total, mul(k, term));
    return total;
  }
  std::vector<ExprPtr> fs;
  int64_t c = 1;
  for (const auto& x : {a, b}) {
    for (const auto& f : factors_of(x)) {
      if (f->op() == ExprOp::constant)
        c *= f->value();
      else
        fs.push_back(f);
    }
  }
  if (c == 0) return constant(0);
  std::sort(fs.begin(), fs.end(), by_text);
  if (c != 1 || fs.empty()) fs.insert(fs.begin(), constant(c));
  if (fs.size() == 1) return fs.front();
  return node(ExprOp::mul, a->value() * b->value(), std::move(fs));
}

std::vector<ExprPtr> factors_of(const ExprPtr& e) {
  if (e->op() == ExprOp::mul) return e->args();
  return {e};
}

ExprPtr product(const std::vector<ExprPtr>& factors) {
  ExprPtr p = constant(1);
  for (const auto& f : factors) p = mul(p, f);
  return p;
}

ExprPtr neg(const ExprPtr& a) { return mul(constant(-1), a); }
ExprPtr sub(const ExprPtr& a, const ExprPtr& b) { return add(a, neg(b)); }

namespace {

// Multiplies the constant factors into c and appends the others to rest.
void split_constant(const std::vector<ExprPtr>& factors, int64_t& c, std::vector<ExprPtr>& rest) {
  for (const auto& f : factors) {
    if (f->op() == ExprOp::constant)
      c *= f->value();
    else
      rest.push_back(f);
  }
}

// Removes the first factor equal to f (same text and kind); false when there is none.
bool remove_factor(std::vector<ExprPtr>& factors, const ExprPtr& f) {
  auto it = std::find_if(factors.begin(), factors.end(),
                         [&](const ExprPtr& x) { return x->text() == f->text() && x->kind() == f->kind(); });
  if (it == factors.end()) return false;
  factors.erase(it);
  return true;
}

// a/b as numerator and denominator with the common symbolic factors cancelled and the constants reduced
// when they divide.
std::pair<ExprPtr, ExprPtr> cancel_common_factors(const ExprPtr& a, const ExprPtr& b) {
  int64_t cn = 1, cd = 1;
  std::vector<ExprPtr> rn, den, rd;
  split_constant(factors_of(a), cn, rn);
  split_constant(factors_of(b), cd, den);
  for (const auto& f : den)
    if (!remove_factor(rn, f)) rd.push_back(f);
  if (cd != 0 && cn % cd == 0) {
    cn /= cd;
    cd = 1;
  }
  return {mul(constant(cn), product(rn)), mul(constant(cd), product(rd))};
}

}  // namespace

ExprPtr floordiv(const ExprPtr& a, const ExprPtr& b) {
  const int64_t v = py_floordiv(a->value(), b->value());
  if (b->op() == ExprOp::constant && b->value() == 1) return a;
  if (a->op() == ExprOp::constant && b->op() == ExprOp::constant) return constant(v);
  // Cancel common factors when the division is exact, so (NUM_TOKS*h)//NUM_TOKS -> h.
  if (b->value() != 0 && a->value() % b->value() == 0) {
    auto [n, d] = cancel_common_factors(a, b);
    if (d->op() == ExprOp::constant && d->value() == 1) return n;
    return node(ExprOp::floordiv, v, {n, d});  // exact: n/d == a/b
  }
  return node(ExprOp::floordiv, v, {a, b});
}

ExprPtr mod(const ExprPtr& a, const ExprPtr& b) {
  const int64_t v = py_mod(a->value(), b->value());
  if (a->op() == ExprOp::constant && b->op() == ExprOp::constant) return constant(v);
  return node(ExprOp::mod, v, {a, b});
}

ExprPtr ceildiv(const ExprPtr& a, const ExprPtr& b) {
  // -((-a)//b), kept as one readable function node.
  const int64_t v = -py_floordiv(-a->value(), b->value());
  if (b->op() == ExprOp::constant && b->value() == 1) return a;
  if (a->op() == ExprOp::constant && b->op() == ExprOp::constant) return constant(v);
  if (b->value() != 0 && a->value() % b->value() == 0) {
    ExprPtr exact = floordiv(a, b);  // exact and cancelled entirely: ceil == floor
    if (exact->op() != ExprOp::floordiv) return exact;
  }
  return func("ceildiv", {a, b}, v);
}

ExprPtr func(std::string name, std::vector<ExprPtr> args, int64_t value, std::optional<Kind> kind_override) {
  if (!kind_override) {
    bool all_const = !args.empty();
    for (const auto& a : args) all_const = all_const && a->op() == ExprOp::constant;
    if (all_const) return constant(value);
  }
  return node(ExprOp::func, value, std::move(args), std::move(name), kind_override);
}

ExprPtr value_form(const ExprPtr& e) {
  if (e->op() == ExprOp::sym) return (e->kind() == Kind::model_config) ? constant(e->value()) : e;
  if (e->op() == ExprOp::constant) return e;
  if (!e->has_request_symbol()) {
    // Keep NONE-kind symbols (index names) by name only when they stand alone; a compound folds.
    return constant(e->value());
  }
  std::vector<ExprPtr> args;
  for (const auto& a : e->args()) args.push_back(value_form(a));
  switch (e->op()) {
    case ExprOp::add: {
      ExprPtr s = constant(0);
      for (auto& a : args) s = add(s, a);
      return s;
    }
    case ExprOp::mul:
      return product(args);
    case ExprOp::floordiv:
      return floordiv(args[0], args[1]);
    case ExprOp::mod:
      return mod(args[0], args[1]);
    case ExprOp::func: {
      const bool overridden = e->kind() != kind_of_args(e->args());
      return func(e->name(), std::move(args), e->value(), overridden ? std::optional<Kind>(e->kind()) : std::nullopt);
    }
    default:
      return e;
  }
}

ExprPtr apply_binary(std::string_view op, const ExprPtr& a, const ExprPtr& b) {
  if (op.size() > 1 && op[0] == 'r' && op != "rshift") {  // reflected operators: b op a
    return apply_binary(op.substr(1), b, a);
  }
  if (op == "add") return add(a, b);
  if (op == "sub") return sub(a, b);
  if (op == "mul") return mul(a, b);
  if (op == "floordiv") return floordiv(a, b);
  if (op == "mod") return mod(a, b);
  if (op == "ceildiv") return ceildiv(a, b);
  if (op == "min") return func("min", {a, b}, std::min(a->value(), b->value()));
  if (op == "max") return func("max", {a, b}, std::max(a->value(), b->value()));
  if (op == "pow") {
    int64_t v = 1;
    for (int64_t i = 0; i < b->value(); ++i) v *= a->value();
    return func("pow", {a, b}, v);
  }
  if (op == "lshift") return func("lshift", {a, b}, a->value() << b->value());
  if (op == "and") return func("and", {a, b}, a->value() & b->value());
  if (op == "or") return func("or", {a, b}, a->value() | b->value());
  if (op == "xor") return func("xor", {a, b}, a->value() ^ b->value());
  DOOLY_THROW(InputError, "add the operator to apply_binary in src/dooly/taint/expr.cpp",
              "no taint rule for integer operator '{}'", op);
}

ExprPtr apply_unary(std::string_view op, const ExprPtr& a) {
  if (op == "neg") return neg(a);
  if (op == "pos" || op == "int" || op == "index" || op == "trunc" || op == "floor" || op == "ceil" || op == "round")
    return a;
  if (op == "abs") return func("abs", {a}, a->value() < 0 ? -a->value() : a->value());
  if (op == "invert") return func("invert", {a}, ~a->value());
  DOOLY_THROW(InputError, "add the operator to apply_unary in src/dooly/taint/expr.cpp",
              "no taint rule for integer operator '{}'", op);
}

}  // namespace dooly::taint
