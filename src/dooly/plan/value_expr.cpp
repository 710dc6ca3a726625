#include "dooly/plan/value_expr.hpp"

#include <cctype>
#include <cstdint>
#include <vector>

#include "dooly/common/error.hpp"

namespace dooly::plan {
namespace {

int64_t floordiv(int64_t a, int64_t b) {  // b != 0, and not (INT64_MIN, -1): the caller checks
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// The text as an error line shows it: printable ASCII only (others as '?'), at most 120 characters.
std::string shown(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 120) out += "...";
  return out;
}

// Recursive descent over: sum := term (('+'|'-') term)*; term := unary (('*'|'//'|'%') unary)*;
// unary := '-' unary | atom; atom := INT | NAME | NAME '(' sum (',' sum)* ')' | '(' sum ')'.
// With `resolve` empty it only collects variables (and every value is 1).
class Parser {
 public:
  Parser(std::string_view text, const Resolver* resolve, std::set<std::string>* vars)
      : text_(text), resolve_(resolve), vars_(vars) {}

  int64_t parse() {
    const int64_t v = sum();
    skip();
    if (pos_ != text_.size()) fail("unexpected character");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    DOOLY_THROW(InputError, "the trace's dimension labels are written by dooly trace; re-create the trace",
                "cannot evaluate dimension '{}': {} at position {}", shown(text_), what, pos_);
  }
  void skip() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool eat(std::string_view token) {
    skip();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  int64_t sum() {
    int64_t v = term();
    for (;;) {
      if (eat("+")) {
        v = combine(v, term(), '+');
      } else if (eat("-")) {
        v = combine(v, term(), '-');
      } else {
        return v;
      }
    }
  }
  int64_t term() {
    int64_t v = unary();
    for (;;) {
      if (eat("//")) {
        const int64_t d = divisor(v);
        if (d != 0) v = floordiv(v, d);
      } else if (eat("*")) {
        v = combine(v, unary(), '*');
      } else if (eat("%")) {
        const int64_t d = divisor(v);
        if (d != 0) v -= floordiv(v, d) * d;  // |v - q*d| < |d|: no overflow
      } else {
        return v;
      }
    }
  }
  // The right operand of // or %: 0 (skip the operation) when it is zero and only variables are collected.
  int64_t divisor(int64_t v) {
    const int64_t d = unary();
    if (d == 0) zero();
    if (v == INT64_MIN && d == -1) return checked(true, 1);  // the quotient overflows
    return d;
  }
  void zero() const {
    if (resolve_) fail("division by zero");
  }
  int64_t unary() {
    if (eat("-")) {
      const int64_t v = unary();
      return checked(v == INT64_MIN, -v);
    }
    return atom();
  }
  int64_t combine(int64_t a, int64_t b, char op) const {
    int64_t r = 0;
    const bool overflowed = op == '+'   ? __builtin_add_overflow(a, b, &r)
                            : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                        : __builtin_mul_overflow(a, b, &r);
    return checked(overflowed, r);
  }
  int64_t checked(bool overflowed, int64_t v) const {
    if (overflowed && resolve_) fail("integer overflow");
    return v;
  }
  int64_t atom() {
    skip();
    if (pos_ >= text_.size()) fail("unexpected end");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      Depth guard(*this);
      const int64_t v = sum();
      if (!eat(")")) fail("missing ')'");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, text_[pos_++] - '0', &v))
          fail("integer overflow");
      }
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' || text_[pos_] == '.'))
        ++pos_;
      const std::string name(text_.substr(start, pos_ - start));
      skip();
      if (pos_ < text_.size() && text_[pos_] == '(') return call(name);
      return variable(name);
    }
    fail("unexpected character");
  }
  int64_t call(const std::string& name) {
    ++pos_;  // '('
    Depth guard(*this);
    std::vector<int64_t> args;
    std::string text = name + "(";
    const bool builtin = name == "ceildiv" || name == "min" || name == "max";
    for (;;) {
      // A derived quantity's arguments are config values (already folded to integers), so its text is its name.
      const size_t arg_start = pos_;
      args.push_back(sum());
      if (!builtin) text += std::string(text_.substr(arg_start, pos_ - arg_start));
      if (eat(",")) {
        if (!builtin) text += ",";
        continue;
      }
      if (!eat(")")) fail("missing ')'");
      break;
    }
    if (name == "ceildiv" && args.size() == 2) {
      if (args[1] == 0) {
        zero();
        return 1;
      }
      if (args[0] == INT64_MIN) return checked(true, 1);
      return -floordiv(-args[0], args[1]);
    }
    if (name == "min" && args.size() == 2) return std::min(args[0], args[1]);
    if (name == "max" && args.size() == 2) return std::max(args[0], args[1]);
    if (builtin) fail("wrong number of arguments");
    text += ")";
    std::string compact;
    for (char ch : text)
      if (ch != ' ') compact += ch;
    return variable(compact);
  }
  int64_t variable(const std::string& name) {
    if (vars_) vars_->insert(name);
    if (!resolve_) return 1;
    const std::optional<int64_t> v = (*resolve_)(name);
    if (!v)
      DOOLY_THROW(InputError, "this quantity is not part of the sweep point: check the grid and the trace's labels",
                  "cannot evaluate dimension '{}': '{}' is not bound at this point", shown(text_), shown(name));
    return *v;
  }

  // Nesting is bounded, so a hostile label cannot exhaust the stack (the tracer's deepest are a few levels).
  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > 256) p_.fail("nested too deeply");
    }
    ~Depth() { --p_.depth_; }
    Depth(const Depth&) = delete;
    Depth& operator=(const Depth&) = delete;
    Parser& p_;
  };

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  const Resolver* resolve_;
  std::set<std::string>* vars_;
};

}  // namespace

int64_t evaluate(std::string_view value_form, const Resolver& resolve) {
  return Parser(value_form, &resolve, nullptr).parse();
}

std::set<std::string> variables_of(std::string_view value_form) {
  std::set<std::string> vars;
  Parser(value_form, nullptr, &vars).parse();
  return vars;
}

}  // namespace dooly::plan
