#pragma once
// Evaluating a dimension's value form (docs/dooly-tracing.md) at a sweep point: "128*NUM_TOKS",
// "NUM_TOKS:KV_TOKS_SLIDING(48)" without its kind, "1+NUM_REQS", "ceildiv(NUM_TOKS,64)". The grammar is what
// the taint expressions print: integers, symbols (dotted names too), + - * // %, parentheses, ceildiv/min/max,
// and derived quantities NAME(int,...) such as KV_TOKS_SLIDING(48), which are variables named by their text.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace dooly::plan {

// The value of a variable ("NUM_TOKS", "KV_TOKS_SLIDING(48)"), or nullopt when the point does not bind it.
using Resolver = std::function<std::optional<int64_t>(const std::string& name)>;

// Throws InputError naming the text and the position when it does not parse, and when a variable is unbound
// or a division by zero happens. Floor division and modulo follow Python (towards minus infinity).
int64_t evaluate(std::string_view value_form, const Resolver& resolve);

// The variables the form depends on (function names ceildiv/min/max excluded; derived quantities by their text).
std::set<std::string> variables_of(std::string_view value_form);

}  // namespace dooly::plan
